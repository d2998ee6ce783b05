"""The store/lite layer: the lite index over CommitLog offsets, its order, rebuild, retention, views."""
from __future__ import annotations

import threading
from types import SimpleNamespace

from rmqd.store.lite import LiteStore, lmq_name
from rmqd.store.lite.names import check_name, parse_lmq
from rmqd.store.message import MessageToStore, decode_message, encode_properties
from rmqd.store.message_store import GetMessageStatus as G
from rmqd.store.message_store import MessageStore
from rmqd.store.metadata import TopicConfig

from tests.store.conftest import make_store, small_config  # noqa: F401 (the make_store fixture)


class Topics:
    def __init__(self, *configs):
        self.table = {tc.topic_name: tc for tc in configs}

    def get(self, name):
        return self.table.get(name)


def lite_topic(name="P", queues=4):
    return TopicConfig(name, queues, queues, attributes={"message.type": "LITE"})


def put(store, lite, body, topic="P", qid=0):
    props = encode_properties({"__LITE_TOPIC": lite} if lite else {"k": "v"})
    r = store.put_message(MessageToStore(topic=topic, queue_id=qid, body=body, properties=props))
    assert r.ok
    return r


def bodies(view, lite, offset=0, n=32, parent="P"):
    res = view.get_messages(lmq_name(parent, lite), 0, offset, n)
    return [decode_message(b).body for b in res.buffers], res


def test_names():
    assert lmq_name("P", "a-1") == "%LMQ%$P$a-1"
    assert parse_lmq("%LMQ%$P$a-1") == ("P", "a-1")
    assert parse_lmq("%LMQ%plain") is None and parse_lmq("%LMQ%$P$a$b") is None and parse_lmq("P") is None
    assert check_name("ok_Name-1") is None
    assert "whitespace" in check_name("  ")
    assert "max size 64" in check_name("x" * 65)
    assert "alphanumeric" in check_name("a/b")


def test_index_views_and_rebuild(make_store, tmp_path):
    store = make_store(tmp_path / "s")
    topics = Topics(lite_topic())
    lite = LiteStore(store, topics)
    lite.start()
    lite.feed("P")
    for i in range(10):
        put(store, "a" if i % 2 == 0 else "b", b"m%d" % i, qid=i % 4)
    put(store, None, b"plain", qid=1)                  # a parent message without a lite topic: not indexed
    view = lite.store_view
    got, res = bodies(view, "a")
    assert got == [b"m0", b"m2", b"m4", b"m6", b"m8"] and res.queue_offsets == [0, 1, 2, 3, 4]
    assert view.get_max_offset(lmq_name("P", "b"), 0) == 5 and view.get_min_offset(lmq_name("P", "b"), 0) == 0
    got, res = bodies(view, "b", offset=3, n=1)
    assert got == [b"m7"] and res.next_begin_offset == 4
    assert view.get_messages(lmq_name("P", "b"), 0, 5, 4).status == G.OFFSET_OVERFLOW_ONE
    assert view.get_messages(lmq_name("P", "zz"), 0, 0, 4).status == G.NO_MATCHED_LOGIC_QUEUE
    assert view.get_message_store_timestamp(lmq_name("P", "a"), 0, 4) > 0
    # plain topics go to the store unchanged
    assert view.get_max_offset("P", 1) == store.get_max_offset("P", 1)
    tv = lite.topics_view
    assert tv.get(lmq_name("P", "a")).read_queue_nums == 1 and tv.get(lmq_name("Q", "a")) is None
    assert lite.index.lite_count == 2
    # a restart rebuilds the same offsets from the parent's consume queues
    store.shutdown()
    store2 = MessageStore(small_config(tmp_path / "s"))
    store2.start()
    try:
        again = LiteStore(store2, topics)
        again.start()
        got2, res2 = bodies(again.store_view, "a")
        assert got2 == [b"m0", b"m2", b"m4", b"m6", b"m8"]
        assert res2.queue_offsets == [0, 1, 2, 3, 4]
        put(store2, "a", b"m10", qid=3)
        assert bodies(again.store_view, "a", offset=5)[0] == [b"m10"]
    finally:
        store2.shutdown()


def test_out_of_order_reports_are_applied_in_commitlog_order():
    """Two putting threads may report in reverse order: the later one waits for the earlier one."""
    maxes = {0: 0, 1: 0}
    store = SimpleNamespace(get_max_offset=lambda t, q: maxes.get(q, 0), get_min_offset=lambda t, q: 0)
    lite = LiteStore(store, Topics(lite_topic(queues=2)))
    idx = lite.index
    idx.parent("P", create=True)
    arrived = []
    idx.on_arrival = lambda p, l: arrived.append(l)

    def req(q, qoff, phys, lite_name):
        return SimpleNamespace(topic="P", queue_id=q, queue_offset=qoff, commitlog_offset=phys, sys_flag=0,
                               store_timestamp=1, properties=encode_properties({"__LITE_TOPIC": lite_name}))
    maxes[0], maxes[1] = 1, 1           # both written under the put lock: (q0, phys 100), (q1, phys 200)
    idx.on_dispatch(req(1, 0, 200, "x"))              # the later one is reported first: it waits
    assert idx.queue("P", "x") is None and arrived == []
    idx.on_dispatch(req(0, 0, 100, "x"))
    assert list(idx.queue("P", "x").phys) == [100, 200] and arrived == ["x"]
    # q0 offset 1 is written, not reported: only what is below q0's last reported entry may go
    maxes[0], maxes[1] = 3, 2
    idx.on_dispatch(req(0, 2, 400, "y"))
    idx.on_dispatch(req(1, 1, 250, "y"))              # 250 > 100, q0's unreported entry may be below it
    assert idx.queue("P", "y") is None
    idx.on_dispatch(req(0, 1, 300, "y"))
    assert list(idx.queue("P", "y").phys) == [250, 300, 400]


def test_concurrent_puts_keep_commitlog_order(make_store, tmp_path):
    store = make_store(tmp_path / "s", mapped_file_size_commitlog=4 << 20)
    lite = LiteStore(store, Topics(lite_topic()))
    lite.feed("P")

    def producer(t):
        for i in range(200):
            put(store, "shared", b"%d-%d" % (t, i), qid=t)
    threads = [threading.Thread(target=producer, args=(t,)) for t in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    q = lite.index.queue("P", "shared")
    assert len(q.phys) == 800 and list(q.phys) == sorted(q.phys)
    got, _ = bodies(lite.store_view, "shared", n=800)
    for t in range(4):            # each producer's messages in its own order
        mine = [b for b in got if b.startswith(b"%d-" % t)]
        assert mine == [b"%d-%d" % (t, i) for i in range(200)]


def test_trim_and_delete(make_store, tmp_path):
    store = make_store(tmp_path / "s")
    lite = LiteStore(store, Topics(lite_topic()))
    lite.feed("P")
    for i in range(6):
        put(store, "a", b"m%d" % i)
    q = lite.index.queue("P", "a")
    third = q.phys[3]
    assert lite.index.trim(third) == 3
    assert lite.store_view.get_min_offset(lmq_name("P", "a"), 0) == 3
    assert lite.store_view.get_messages(lmq_name("P", "a"), 0, 0, 2).status == G.OFFSET_TOO_SMALL
    assert bodies(lite.store_view, "a", offset=3)[0] == [b"m3", b"m4", b"m5"]
    assert lite.index.delete("P", "a") and lite.index.lite_count == 0
    put(store, "a", b"again")
    assert bodies(lite.store_view, "a")[0] == [b"again"]
