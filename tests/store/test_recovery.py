import os
import signal
import subprocess
import sys
import time

import pytest

from rmqd.store.message import MessageToStore, decode_message
from rmqd.store.message_store import GetMessageStatus as G
from rmqd.store.message_store import MessageStore
from tests.kit.processes import child_env
from tests.store.conftest import small_config

pytestmark = pytest.mark.slow

CHILD = r"""
import os, sys, threading
from tests.store.conftest import small_config
from rmqd.store.message import MessageToStore
from rmqd.store.message_store import MessageStore
s = MessageStore(small_config({root!r}, flush_disk_type="SYNC_FLUSH"))
s.start()
out = os.fdopen(int(sys.argv[1]), "w", buffering=1)
lock = threading.Lock()
def worker(n):
    i = 0
    while True:
        r = s.put_message(MessageToStore.create("T", n, b"p%d-%d" % (n, i) * 20, {{"KEYS": "k%d_%d" % (n, i)}}))
        if r.status.name == "PUT_OK":
            with lock:
                out.write("%d %d %d\n" % (n, r.queue_offset, r.wrote_offsets[0]))
        i += 1
ts = [threading.Thread(target=worker, args=(n,), daemon=True) for n in range(3)]
[t.start() for t in ts]
[t.join() for t in ts]
"""


def all_messages(s, topic, qid):
    out, off = [], 0
    while True:
        g = s.get_messages(topic, qid, off, 32)
        if g.status != G.FOUND:
            return out, g
        out += [decode_message(b) for b in g.buffers]
        off = g.next_begin_offset


def test_sigkill_sync_flush_loses_no_acked_put(tmp_path):
    root = str(tmp_path / "store")
    r, w = os.pipe()
    code = CHILD.format(root=root)
    p = subprocess.Popen([sys.executable, "-c", code, str(w)], pass_fds=(w,), env=child_env())
    os.close(w)
    acked = []
    buf = b""
    deadline = time.time() + 20
    with os.fdopen(r, "rb") as rf:
        while len(acked) < 600 and time.time() < deadline:
            chunk = os.read(rf.fileno(), 65536)
            if not chunk:
                break
            buf += chunk
            *lines, buf = buf.split(b"\n")
            acked += [tuple(map(int, ln.split())) for ln in lines if ln]
        p.send_signal(signal.SIGKILL)
        p.wait(10)
    assert len(acked) >= 100, "child did not make progress"
    assert os.path.exists(os.path.join(root, "abort"))
    s = MessageStore(small_config(root))
    s.start()
    try:
        for n in range(3):
            msgs, _ = all_messages(s, "T", n)
            by_qoff = {m.queue_offset: m for m in msgs}
            for qid, qoff, phys in (a for a in acked if a[0] == n):
                m = by_qoff[qoff]
                assert m.commit_log_offset == phys
                assert m.body.startswith(b"p%d-" % n)
            assert [m.queue_offset for m in msgs] == list(range(len(msgs)))
        assert s.query_message("T", "k1_%d" % 0, 5).messages
        # store keeps working after recovery
        nr = s.put_message(MessageToStore.create("T", 0, b"after"))
        assert nr.queue_offset == s.get_max_offset("T", 0) - 1
    finally:
        s.shutdown()


def _fill(root, n=60, **kw):
    s = MessageStore(small_config(root, **kw))
    s.start()
    rs = [s.put_message(MessageToStore.create("T", i % 2, b"m%03d" % i * 50, {"KEYS": "key%d" % i}))
          for i in range(n)]
    s.flush()
    return s, rs


def _crash(s):
    """Simulate a crash: flush what is mapped (page cache survives SIGKILL) and leave the abort
    marker in place, without the clean-shutdown checkpoint."""
    s.put_engine.running = False
    for svc in s._services:
        svc.shutdown()
    s.commitlog.allocator.shutdown()
    s.commitlog.mfq.close()
    s.consume_queues.close()
    s.index.close()
    s._checkpoint.close()
    s._dir_lock.release()


def _seg_path(root, phys, seg=64 * 1024):
    return os.path.join(root, "commitlog", f"{phys - phys % seg:020d}")


def test_truncated_tail_recovery(tmp_path):
    root = str(tmp_path / "s")
    s, rs = _fill(root)
    # write a half record after the last one: header claims more bytes than present
    last = rs[-1]
    end = last.wrote_offsets[0] + last.wrote_bytes
    extra = s.put_message(MessageToStore.create("T", 0, b"torn" * 100))
    _crash(s)
    path = _seg_path(root, extra.wrote_offsets[0])
    with open(path, "r+b") as f:
        pos = extra.wrote_offsets[0] % (64 * 1024)
        f.seek(pos + 120)
        f.write(b"\0" * (extra.wrote_bytes - 120))   # torn: only the first 120 bytes landed
    s2 = MessageStore(small_config(root))
    s2.start()
    try:
        assert s2.commitlog_max_offset() == end
        assert s2.read_message(extra.wrote_offsets[0]) is None
        m0, g = all_messages(s2, "T", 0)
        m1, _ = all_messages(s2, "T", 1)
        assert len(m0) == 30 and len(m1) == 30
        assert s2.get_max_offset("T", 0) == 30      # CQ entry of the torn record dropped
        with open(path, "rb") as f:
            f.seek(end % (64 * 1024))
            assert f.read(extra.wrote_bytes) == b"\0" * extra.wrote_bytes   # tail zeroed
        r = s2.put_message(MessageToStore.create("T", 0, b"new"))
        assert r.queue_offset == 30 and r.wrote_offsets[0] == end
    finally:
        s2.shutdown()


def test_flipped_bytes_in_last_record(tmp_path):
    root = str(tmp_path / "s")
    s, rs = _fill(root)
    _crash(s)
    last = rs[-1]
    path = _seg_path(root, last.wrote_offsets[0])
    with open(path, "r+b") as f:
        f.seek(last.wrote_offsets[0] % (64 * 1024) + last.wrote_bytes - 40)   # inside the body
        b = f.read(1)
        f.seek(-1, 1)
        f.write(bytes([b[0] ^ 0xFF]))
    s2 = MessageStore(small_config(root))
    s2.start()
    try:
        assert s2.commitlog_max_offset() == last.wrote_offsets[0]
        m1, _ = all_messages(s2, "T", 1)
        assert [m.queue_offset for m in m1] == list(range(29))
        m0, _ = all_messages(s2, "T", 0)
        assert len(m0) == 30
        assert s2.query_message("T", "key58", 5).messages
        assert s2.query_message("T", "key59", 5).messages == []
    finally:
        s2.shutdown()


def test_crash_rebuilds_consume_queue_and_index(tmp_path):
    root = str(tmp_path / "s")
    s, rs = _fill(root, n=40)
    # more messages after the last checkpoint; then lose the consume queue + index tail
    more = [s.put_message(MessageToStore.create("T", 0, b"late%d" % i, {"KEYS": "late%d" % i}))
            for i in range(10)]
    assert all(r.ok for r in more)
    _crash(s)
    cq_dir = os.path.join(root, "consumequeue", "T", "0")
    for name in os.listdir(cq_dir):
        p = os.path.join(cq_dir, name)
        data = bytearray(open(p, "rb").read())
        data[20 * 20:] = bytes(len(data) - 20 * 20)    # keep only the first 20 entries
        open(p, "wb").write(bytes(data))
    for name in os.listdir(os.path.join(root, "index")):
        os.unlink(os.path.join(root, "index", name))
    s2 = MessageStore(small_config(root))
    s2.start()
    try:
        assert s2.get_max_offset("T", 0) == 30
        m0, _ = all_messages(s2, "T", 0)
        assert [m.queue_offset for m in m0] == list(range(30))
        assert s2.query_message("T", "late7", 5).messages
    finally:
        s2.shutdown()
