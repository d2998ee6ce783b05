import os
import struct
import threading


from rmqd.store.message import (MessageToStore, decode_message, decode_messages, java_string_hash)
from rmqd.store.message_store import GetMessageStatus as G
from rmqd.store.message_store import PutMessageStatus as P

from tests.store.conftest import FakeClock


def msg(topic="T", qid=0, body=b"hello", tags=None, keys=None, uniq=None, **kw):
    props = {}
    if tags:
        props["TAGS"] = tags
    if keys:
        props["KEYS"] = keys
    if uniq:
        props["UNIQ_KEY"] = uniq
    return MessageToStore.create(topic, qid, body, props, **kw)


def test_segment_rollover_with_blank(make_store):
    s = make_store()
    seg = 64 * 1024
    offsets = []
    for i in range(200):
        r = s.put_message(msg(body=bytes([i % 251]) * 1000, keys=f"k{i}"))
        assert r.status == P.PUT_OK
        offsets.append(r.wrote_offsets[0])
    files = sorted(os.listdir(s.config.commitlog_dir))
    assert files[0] == "0" * 20 and files[1] == f"{seg:020d}"
    assert len(files) >= 4
    # no record spans a segment; the gap before each boundary holds a BLANK marker
    seg0 = open(os.path.join(s.config.commitlog_dir, files[0]), "rb").read()
    last_in_0 = max(o for o in offsets if o < seg)
    end = last_in_0 + struct.unpack_from(">i", seg0, last_in_0)[0]
    remaining, magic = struct.unpack_from(">iI", seg0, end)
    assert magic == 0xCBD43194 and remaining == seg - end
    assert min(o for o in offsets if o >= seg) == seg
    for o in offsets:
        d = decode_message(s.read_message(o))
        assert d.commit_log_offset == o
    # all readable in queue order across segments
    got, off = [], 0
    while True:
        g = s.get_messages("T", 0, off, 32)
        if g.status != G.FOUND:
            break
        got += [decode_message(b).queue_offset for b in g.buffers]
        off = g.next_begin_offset
    assert got == list(range(200))


def test_batch_put(make_store):
    s = make_store()
    s.put_message(msg(qid=1))
    batch = [msg(qid=1, body=f"b{i}".encode(), uniq=f"U{i}") for i in range(10)]
    r = s.put_messages(batch)
    assert r.status == P.PUT_OK and r.msg_count == 10 and r.queue_offset == 1
    assert len(r.wrote_offsets) == 10 and r.wrote_offsets == sorted(r.wrote_offsets)
    g = s.get_messages("T", 1, 1, 32)
    ms = decode_messages(g.body())
    assert [m.queue_offset for m in ms] == list(range(1, 11))
    assert [m.body for m in ms] == [f"b{i}".encode() for i in range(10)]
    assert len({m.store_timestamp for m in ms}) == 1
    assert s.get_max_offset("T", 1) == 11


def test_restart_keeps_messages_and_offsets(make_store, tmp_path):
    root = tmp_path / "s1"
    s = make_store(root)
    for i in range(150):
        s.put_message(msg(qid=i % 3, body=b"x" * (i * 13 % 700), keys=f"key{i}", uniq=f"U{i}"))
    before = [s.get_max_offset("T", q) for q in range(3)]
    cl_max = s.commitlog_max_offset()
    s.shutdown()
    assert not os.path.exists(root / "abort")
    s2 = make_store(root)
    assert [s2.get_max_offset("T", q) for q in range(3)] == before
    assert s2.commitlog_max_offset() == cl_max
    r = s2.put_message(msg(qid=0))
    assert r.queue_offset == before[0]
    assert len(s2.query_message("T", "key42", 10).messages) == 1
    g = s2.get_messages("T", 2, 0, 32)
    assert g.status == G.FOUND and len(g.buffers) == 32


def test_get_status_table(make_store):
    s = make_store()
    r = s.get_messages("NOPE", 0, 5, 32)
    assert (r.status, r.next_begin_offset) == (G.NO_MATCHED_LOGIC_QUEUE, 0)
    for i in range(5):
        s.put_message(msg(tags="A" if i % 2 else "B"))
    r = s.get_messages("T", 0, 5, 32)
    assert (r.status, r.next_begin_offset, r.min_offset, r.max_offset) == (G.OFFSET_OVERFLOW_ONE, 5, 0, 5)
    r = s.get_messages("T", 0, 9, 32)
    assert (r.status, r.next_begin_offset) == (G.OFFSET_OVERFLOW_BADLY, 5)
    r = s.get_messages("T", 0, 1, 2)
    assert (r.status, r.next_begin_offset, len(r.buffers)) == (G.FOUND, 3, 2)

    class TagFilter:
        def __init__(self, tag):
            self.code = java_string_hash(tag)

        def is_matched_by_consume_queue(self, tags_code):
            return tags_code == self.code

        def is_matched_by_commit_log(self, buf, props):
            return True

    r = s.get_messages("T", 0, 0, 32, message_filter=TagFilter("A"))
    assert r.status == G.FOUND and r.next_begin_offset == 5
    assert [decode_message(b).queue_offset for b in r.buffers] == [1, 3]
    r = s.get_messages("T", 0, 0, 32, message_filter=TagFilter("Z"))
    assert (r.status, r.next_begin_offset) == (G.NO_MATCHED_MESSAGE, 5)

    class PropFilter:
        calls = 0

        def is_matched_by_consume_queue(self, tags_code):
            return True

        def is_matched_by_commit_log(self, buf, props):
            PropFilter.calls += 1
            return props().get("TAGS") == "B"

    r = s.get_messages("T", 0, 0, 32, message_filter=PropFilter())
    assert [decode_message(b).queue_offset for b in r.buffers] == [0, 2, 4]
    # byte limit: at least one message, then stop
    r = s.get_messages("T", 0, 0, 32, max_total_bytes=1)
    assert len(r.buffers) == 1 and r.next_begin_offset == 1


def test_get_status_removed_and_too_small(make_store):
    clock = FakeClock()
    s = make_store(clock=clock, mapped_file_size_consume_queue=20 * 10, delete_when="99")
    for i in range(200):
        s.put_message(msg(body=b"y" * 1000))
    old = s.commitlog.mfq.files[0].path
    os.utime(old, (1, 1))
    clock.advance(73 * 3600 * 1000)
    s.config.disk_usage = lambda p: 80.0   # > 75: delete expired now
    assert s.run_retention_once() == 1
    mn = s.get_min_offset("T", 0)
    assert mn > 0
    r = s.get_messages("T", 0, 0, 32)
    assert (r.status, r.next_begin_offset) == (G.OFFSET_TOO_SMALL, mn)
    g = s.get_messages("T", 0, mn, 32)
    assert g.status == G.FOUND
    assert decode_message(g.buffers[0]).commit_log_offset >= s.commitlog_min_offset()


def test_message_was_removing_and_found_null(make_store):
    s = make_store(mapped_file_size_consume_queue=20 * 10)
    for i in range(30):
        s.put_message(msg(body=b"z" * 3000))
    cq = s.consume_queues.get("T", 0)
    # commit log segment gone but CQ not yet corrected → MESSAGE_WAS_REMOVING
    s.commitlog.mfq.remove_first(1)
    r = s.get_messages("T", 0, 0, 32)
    assert r.status == G.MESSAGE_WAS_REMOVING and r.next_begin_offset > 0
    # CQ file for the slot missing → OFFSET_FOUND_NULL, next = next CQ file start
    files = cq.mfq.files
    assert len(files) == 3
    cq.mfq.files = [files[0], files[2]]       # a hole where entries 10..19 live
    r = s.get_messages("T", 0, 13, 32)
    assert (r.status, r.next_begin_offset) == (G.OFFSET_FOUND_NULL, 20)
    cq.mfq.files = files


def test_limits_and_transaction_types(make_store):
    s = make_store()
    assert s.put_message(msg(body=b"x" * (16 * 1024 + 1))).status == P.MESSAGE_ILLEGAL
    assert s.put_message(msg(topic="t" * 128)).status == P.MESSAGE_ILLEGAL
    big = MessageToStore(topic="T", queue_id=0, body=b"x", properties="a\x01" + "v" * 33000)
    r = s.put_message(big)
    assert r.status == P.PROPERTIES_SIZE_EXCEEDED and r.remark
    r1 = s.put_message(msg(sys_flag=0x4))   # PREPARED
    r2 = s.put_message(msg(sys_flag=0xC))   # ROLLBACK
    r3 = s.put_message(msg(sys_flag=0x8))   # COMMIT
    assert r1.queue_offset == 0 and r2.queue_offset == 0 and r3.queue_offset == 0
    assert s.get_max_offset("T", 0) == 1
    assert decode_message(s.read_message(r1.wrote_offsets[0])).queue_offset == 0
    assert s.read_message(r1.wrote_offsets[0] + 1) is None
    assert s.read_message(10 ** 12) is None


def test_dispatch_listener_and_visibility(make_store):
    s = make_store()
    seen = []
    s.add_dispatch_listener(seen.append)
    r = s.put_message(msg(tags="A", keys="k1", uniq="U1"))
    assert s.get_messages("T", 0, 0, 1).status == G.FOUND   # visible right after put returns
    req = seen[0]
    assert (req.topic, req.queue_id, req.queue_offset, req.commitlog_offset) == ("T", 0, 0, r.wrote_offsets[0])
    assert req.tags_code == java_string_hash("A") and req.keys == "k1" and req.uniq_key == "U1"
    assert req.store_timestamp == r.store_timestamp and req.size == r.wrote_bytes


def test_concurrent_puts_unique_offsets(make_store):
    s = make_store()
    results = []

    def worker(n):
        for i in range(100):
            results.append(s.put_message(msg(qid=0, body=f"{n}-{i}".encode())))

    ts = [threading.Thread(target=worker, args=(n,)) for n in range(4)]
    [t.start() for t in ts]
    [t.join() for t in ts]
    assert sorted(r.queue_offset for r in results) == list(range(400))
    assert len({r.wrote_offsets[0] for r in results}) == 400


def test_query_by_key_uniq_and_time(make_store):
    clock = FakeClock()
    s = make_store(clock=clock, max_hash_slot_num=8, max_index_num=30)   # forces several index files
    stamps = []
    for i in range(100):
        clock.advance(1000)
        r = s.put_message(msg(keys=f"k{i % 10} all", uniq=f"UNIQ{i}"))
        stamps.append(r.store_timestamp)
    assert len(os.listdir(s.config.index_dir)) > 2
    q = s.query_message("T", "k3", 100)
    got = [decode_message(b) for b in q.messages]
    assert sorted(m.properties["UNIQ_KEY"] for m in got) == sorted(f"UNIQ{i}" for i in range(3, 100, 10))
    assert got[0].store_timestamp > got[-1].store_timestamp   # newest first
    assert q.index_last_update_timestamp == stamps[-1]
    q = s.query_message("T", "UNIQ57", 5)
    assert [decode_message(b).properties["UNIQ_KEY"] for b in q.messages] == ["UNIQ57"]
    assert len(s.query_message("T", "all", 7).messages) == 7
    q = s.query_message("T", "all", 1000, stamps[20], stamps[29])
    assert sorted(decode_message(b).store_timestamp for b in q.messages) == stamps[20:30]
    assert s.query_message("OTHER", "k3", 10).messages == []


def test_offset_by_time_and_store_times(make_store):
    clock = FakeClock()
    s = make_store(clock=clock)
    stamps = []
    for i in range(20):
        clock.advance(100)
        stamps.append(s.put_message(msg()).store_timestamp)
    assert s.get_offset_by_time("T", 0, stamps[7]) == 7
    assert s.get_offset_by_time("T", 0, stamps[7] + 40) == 7     # closer to left
    assert s.get_offset_by_time("T", 0, stamps[7] + 60) == 8     # closer to right
    assert s.get_offset_by_time("T", 0, stamps[7] + 50) == 7     # tie → earlier
    assert s.get_offset_by_time("T", 0, 0) == 0
    assert s.get_offset_by_time("T", 0, stamps[-1] + 10_000) == 19
    assert s.get_offset_by_time("NOPE", 0, 5) == 0
    assert s.get_earliest_message_time("T", 0) == stamps[0]
    assert s.get_earliest_message_time("NOPE", 0) == -1
    assert s.get_message_store_timestamp("T", 0, 5) == stamps[5]


def test_schedule_topic_tags_code_is_delivery_time(make_store):
    s = make_store()
    r = s.put_message(MessageToStore.create("SCHEDULE_TOPIC_XXXX", 2, b"d", {"DELAY": "3"}))
    e = s.consume_queues.get("SCHEDULE_TOPIC_XXXX", 2).get_entry(0)
    assert e[2] == r.store_timestamp + 10_000


def test_delete_topic_and_stats(make_store):
    s = make_store()
    for q in range(3):
        s.put_message(msg(topic="D", qid=q))
    assert s.delete_topic("D") == 3
    assert s.get_messages("D", 0, 0, 1).status == G.NO_MATCHED_LOGIC_QUEUE
    st = s.stats
    assert st.put_message_times_total == 3 and st.put_message_size_total > 0
    assert st.commitlog_max_offset == s.commitlog_max_offset()


def test_sync_flush_group_commit(make_store):
    s = make_store(flush_disk_type="SYNC_FLUSH")
    rs = []

    def worker():
        for _ in range(30):
            rs.append(s.put_message(msg(body=b"s" * 200)))

    ts = [threading.Thread(target=worker) for _ in range(4)]
    [t.start() for t in ts]
    [t.join() for t in ts]
    assert all(r.status == P.PUT_OK for r in rs)
    assert s.commitlog.flushed_where >= max(r.wrote_offsets[0] + r.wrote_bytes for r in rs)


def test_shutdown_refuses_puts(make_store):
    s = make_store()
    s.shutdown()
    r = s.put_message(msg())
    assert r.status == P.SERVICE_NOT_AVAILABLE and "not running" in r.remark
