"""PutEngine.dispatch_range and CommitLog.append_raw: a slave that appends its master's CommitLog bytes
ends up with the same CommitLog, consume queues and index as the master, and recovery rebuilds them
through the same C path."""
import os
import shutil

import pytest

from rmqd.store.message import (TRANSACTION_PREPARED_TYPE, TRANSACTION_ROLLBACK_TYPE, MessageToStore,
                                decode_message)
from rmqd.store.message_store import SCHEDULE_TOPIC, MessageStore

from tests.store.conftest import FakeClock, small_config

SEG = 64 * 1024


def _messages():
    """Every kind of record dispatch has to tell apart: tags, keys, a UNIQ_KEY, non-ASCII text,
    transaction halves, a delayed message, an IPv6 born host, bodies of many sizes (segment rolls)."""
    out = []
    for i in range(400):
        props = {"TAGS": "Tag%d" % (i % 3), "UNIQ_KEY": "U%06d" % i}
        if i % 4 == 0:
            props["KEYS"] = "k%d shared  k%d-b" % (i, i)
        if i % 50 == 7:
            props["TAGS"] = "étiquette"
            props["KEYS"] = "clé%d" % i
        kw = {}
        if i % 37 == 5:
            kw["sys_flag"] = TRANSACTION_PREPARED_TYPE
        if i % 41 == 6:
            kw["sys_flag"] = TRANSACTION_ROLLBACK_TYPE
        if i % 29 == 3:
            kw["born_host"] = ("::1", 4321)
        topic, qid = "T%d" % (i % 2), i % 3
        if i % 31 == 9:
            topic, qid = SCHEDULE_TOPIC, 2
            props["DELAY"] = "3"
        out.append(MessageToStore.create(topic, qid, b"b%d-" % i * (1 + i % 90), props, **kw))
    return out


def _requests(store):
    seen = []
    store.add_dispatch_listener(lambda r: seen.append(
        (r.topic, r.queue_id, r.commitlog_offset, r.size, r.tags_code, r.store_timestamp, r.queue_offset,
         r.keys, r.uniq_key, r.sys_flag, r.properties)))
    return seen


def _files(root, sub):
    out = {}
    base = os.path.join(root, sub)
    for dp, _dn, fn in os.walk(base):
        for f in fn:
            with open(os.path.join(dp, f), "rb") as fh:
                out[os.path.relpath(os.path.join(dp, f), base)] = fh.read()
    return out


def _ship(master, slave, start, chunk):
    """Send the master's CommitLog from ``start`` in pieces of at most ``chunk`` bytes (a piece may span
    a segment end, which the slave must split as the bytes' offsets say)."""
    end = master.commitlog.max_offset()
    pos = start
    while pos < end:
        n = min(chunk, end - pos)
        data = bytearray()
        while len(data) < n:
            mf = master.commitlog.mfq.find(pos + len(data))
            at = pos + len(data) - mf.file_from_offset
            take = min(n - len(data), mf.wrote_pos - at)
            data += mf.buf[at:at + take]
        assert slave.append_to_commitlog(pos, bytes(data)) == pos + n
        pos += n


@pytest.mark.parametrize("chunk", [4096, 100_000])
def test_slave_append_matches_master_byte_for_byte(tmp_path, chunk):
    clock = FakeClock()             # the promoted slave's put below writes the master's bytes
    master = MessageStore(small_config(tmp_path / "m", clock=clock))
    slave = MessageStore(small_config(tmp_path / "s", clock=clock))
    master.start()
    slave.start()
    try:
        want = _requests(master)
        got = _requests(slave)
        for m in _messages():
            assert master.put_message(m).ok
            clock.advance(1)
        assert len(master.commitlog.mfq.files) >= 3                  # the range spans segment rolls
        _ship(master, slave, 0, chunk)
        assert slave.commitlog.max_offset() == master.commitlog.max_offset()
        assert got == want
        for topic in ("T0", "T1", SCHEDULE_TOPIC):
            for qid in range(3):
                assert slave.get_max_offset(topic, qid) == master.get_max_offset(topic, qid)
                g = slave.get_messages(topic, qid, 0, 32)
                h = master.get_messages(topic, qid, 0, 32)
                assert (g.status, g.body(), g.queue_offsets) == (h.status, h.body(), h.queue_offsets)
        for key in ("k8", "shared", "U000123", "clé7"):
            assert slave.query_message("T0", key, 64).messages == master.query_message("T0", key, 64).messages
        assert master.query_message("T0", "shared", 64).messages
        # promoted, the slave appends where the master would
        a = master.put_message(MessageToStore.create("T1", 1, b"next"))
        b = slave.put_message(MessageToStore.create("T1", 1, b"next"))
        assert (b.wrote_offsets, b.queue_offset) == (a.wrote_offsets, a.queue_offset)
    finally:
        master.shutdown()
        slave.shutdown()
    m_cl, s_cl = _files(tmp_path / "m", "commitlog"), _files(tmp_path / "s", "commitlog")
    assert m_cl == s_cl and len(m_cl) >= 3                 # BLANK end-of-segment markers included
    assert _files(tmp_path / "m", "consumequeue") == _files(tmp_path / "s", "consumequeue")


def test_slave_joins_at_a_later_segment(tmp_path):
    master = MessageStore(small_config(tmp_path / "m"))
    slave = MessageStore(small_config(tmp_path / "s"))
    master.start()
    slave.start()
    try:
        for i in range(300):
            master.put_message(MessageToStore.create("T", 0, b"x" * 500, {"KEYS": "k%d" % i}))
        second = master.commitlog.mfq.files[1].file_from_offset
        with pytest.raises(ValueError):
            slave.append_to_commitlog(second + 1, b"x")          # not a segment start
        _ship(master, slave, second, 8192)
        first_qoff = decode_message(master.commitlog.read_record(second)).queue_offset
        assert slave.get_min_offset("T", 0) == first_qoff > 0
        assert slave.get_max_offset("T", 0) == master.get_max_offset("T", 0) == 300
        g = slave.get_messages("T", 0, first_qoff, 4)
        assert g.queue_offsets == [first_qoff + i for i in range(4)]
        assert slave.query_message("T", "k299", 4).messages == master.query_message("T", "k299", 4).messages
    finally:
        master.shutdown()
        slave.shutdown()


def test_append_raw_refuses_a_gap_or_overlap(tmp_path):
    s = MessageStore(small_config(tmp_path / "s"))
    s.start()
    try:
        r = s.put_message(MessageToStore.create("T", 0, b"x" * 100))
        end = s.commitlog.max_offset()
        for bad in (end - 1, end + 1, 0):
            with pytest.raises(ValueError):
                s.append_to_commitlog(bad, b"\0" * 16)
        assert s.commitlog.max_offset() == end and s.get_max_offset("T", 0) == 1
        assert s.read_message(r.wrote_offsets[0]) is not None
    finally:
        s.shutdown()
    with pytest.raises(RuntimeError):
        s.append_to_commitlog(end, b"\0")


def test_recovery_rebuilds_queues_and_index_exactly(tmp_path):
    root = str(tmp_path / "s")
    s = MessageStore(small_config(root))
    s.start()
    for m in _messages():
        s.put_message(m)
    hits = s.query_message("T0", "shared", 64).messages
    s.shutdown()
    before = _files(root, "consumequeue")
    shutil.rmtree(os.path.join(root, "consumequeue"))
    shutil.rmtree(os.path.join(root, "index"))
    with open(os.path.join(root, "abort"), "w"):
        pass
    with open(os.path.join(root, "checkpoint"), "r+b") as f:
        f.write(b"\0" * 48)
    s = MessageStore(small_config(root))
    s.start()
    try:
        assert s.query_message("T0", "shared", 64).messages == hits and hits
    finally:
        s.shutdown()
    assert _files(root, "consumequeue") == before
