"""Regression tests (in-process, fast) for the bugs the fault suite found."""
from __future__ import annotations

import os
import struct

from rmqd.store.message import MessageToStore
from rmqd.store.message_store import MessageStore, StoreConfig
from rmqd.store.metadata import TopicConfigManager, load_json_file
from rmqd.store.topic_restore import restore_topics_from_store


def _store(path: str) -> MessageStore:
    s = MessageStore(StoreConfig(store_root_dir=path, mapped_file_size_commitlog=64 * 1024,
                                 mapped_file_size_consume_queue=10 * 20))
    s.start()
    return s


def _fill(store: MessageStore, n: int = 40) -> list[bytes]:
    bodies = []
    for i in range(n):
        body = f"body-{i}".encode() * (i % 7 + 1)
        r = store.put_message(MessageToStore.create("RT", i % 2, body, {"KEYS": f"k{i}"}))
        assert r.ok
        bodies.append(body)
    return bodies


def _read_all(store: MessageStore, queue_id: int) -> list[bytes]:
    from rmqd.store.message import decode_message
    out, off = [], 0
    while True:
        r = store.get_messages("RT", queue_id, off, 32)
        if not r.buffers:
            return out
        out += [decode_message(bytes(b)).body for b in r.buffers]
        off = r.next_begin_offset


def test_invalid_utf8_json_falls_back_to_backup(tmp_path):
    """Bug: a flipped byte making topics.json invalid UTF-8 raised UnicodeDecodeError at start-up."""
    p = tmp_path / "topics.json"
    p.write_bytes(b'{"a": "\xff\xfe"}')
    (tmp_path / "topics.json.bak").write_text('{"a": 1}')
    assert load_json_file(str(p)) == {"a": 1}


def test_ill_shaped_json_falls_back_to_backup(tmp_path):
    """Bug: valid JSON of the wrong shape (a damaged key/value) made decode() raise at start-up."""
    mgr = TopicConfigManager(str(tmp_path), "C", "b", True, 8)
    (tmp_path / "topics.json").write_text('{"topicConfigTable": {"T": {"topicNam": "T"}}}')
    (tmp_path / "topics.json.bak").write_text('{"topicConfigTable": {"T": {"topicName": "T"}}}')
    assert mgr.load()
    assert mgr.get("T") is not None


def _filled_and_closed(tmp_path) -> tuple[str, list]:
    """A store under ``tmp_path/s`` filled by :func:`_fill` and shut down: its root and the bodies written."""
    root = str(tmp_path / "s")
    s = _store(root)
    bodies = _fill(s)
    s.shutdown()
    return root, bodies


def test_damaged_consume_queue_entry_is_rebuilt(tmp_path):
    """Bug: a flipped consume-queue entry served another record (or garbage) for that offset."""
    root, bodies = _filled_and_closed(tmp_path)
    path = os.path.join(root, "consumequeue", "RT", "0", "%020d" % 0)
    with open(path, "r+b") as f:
        f.seek(3 * 20 + 12)   # size field of entry 3
        f.write(struct.pack(">i", 99999))
    s = _store(root)
    try:
        assert _read_all(s, 0) == bodies[0::2]
    finally:
        s.shutdown()


def test_truncated_consume_queue_and_last_commitlog_segment_load(tmp_path):
    """Bug: a short file (truncated) made the store refuse to start (size != configured)."""
    root, bodies = _filled_and_closed(tmp_path)
    cq = os.path.join(root, "consumequeue", "RT", "1", "%020d" % 0)
    os.truncate(cq, 50)
    s = _store(root)
    try:
        assert _read_all(s, 1) == bodies[1::2]
    finally:
        s.shutdown()
    cq_dir = os.path.join(root, "consumequeue", "RT", "0")
    os.truncate(os.path.join(cq_dir, sorted(os.listdir(cq_dir))[-1]), 30)   # last CQ file: entries lost
    s = _store(root)
    try:
        assert _read_all(s, 0) == bodies[0::2]   # rebuilt from the commit log
    finally:
        s.shutdown()
    cl_dir = os.path.join(root, "commitlog")
    last = os.path.join(cl_dir, sorted(os.listdir(cl_dir))[-1])
    os.truncate(last, 100)   # keeps no whole record of this segment
    s = _store(root)
    try:
        assert s.put_message(MessageToStore.create("RT", 0, b"after")).ok
    finally:
        s.shutdown()


def test_topic_configs_restored_from_consume_queues(tmp_path):
    """Bug: with topics.json and its backup lost, stored topics answered TOPIC_NOT_EXIST."""
    mgr = TopicConfigManager(str(tmp_path), "C", "b", True, 8)
    mgr.load()
    assert restore_topics_from_store(mgr, [("Lost", 0), ("Lost", 5), ("%RETRY%g", 0)]) == ["%RETRY%g", "Lost"]
    assert mgr.get("Lost").read_queue_nums == 6
    assert restore_topics_from_store(mgr, [("Lost", 2)]) == []
