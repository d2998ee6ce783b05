"""Priority (5.4): the queue selector (priority mode, priority.factor, retry probability, order direction),
the send hook (queue = min(priority, writeQueueNums - 1), stripped on other types), and POP order."""
from __future__ import annotations

from types import SimpleNamespace

from rmqd.lite.config import PriorityConfig
from rmqd.lite.priority_selector import PriorityQueueSelector
from rmqd.pop.queue_selector import RotatingQueueSelector
from rmqd.lite import priority_send
from rmqd.store.message import encode_properties, find_property
from rmqd.store.metadata import SubscriptionGroupConfig, TopicConfig

PRIO = TopicConfig("P", 8, 8, attributes={"message.type": "PRIORITY"})
NORMAL = TopicConfig("N", 8, 8)


def group(**attrs):
    return SubscriptionGroupConfig("G", attributes=attrs)


def test_priority_mode_walks_from_the_top_and_skips_busy_queues():
    sel = PriorityQueueSelector()
    qids, retry_first, skip = sel.select(PRIO, group(), list(range(8)))
    assert qids == [7, 6, 5, 4, 3, 2, 1, 0] and not retry_first and skip
    desc = PriorityQueueSelector(PriorityConfig(priorityOrderAsc=False))
    assert desc.select(PRIO, group(), list(range(8)))[0] == list(range(8))
    # a NORMAL topic keeps the rotating order, and never skips
    qids, _, skip = sel.select(NORMAL, group(), list(range(8)))
    assert sorted(qids) == list(range(8)) and not skip


def test_priority_factor_is_the_share_of_requests_in_priority_mode():
    sel = PriorityQueueSelector()
    g = group(**{"priority.factor": "30"})
    modes = [sel.select(PRIO, g, list(range(8)))[2] for _ in range(200)]
    assert modes.count(True) == 60                       # exactly 30 of every 100 requests
    g0 = group(**{"priority.factor": "0"})
    assert not any(sel.select(PRIO, g0, list(range(8)))[2] for _ in range(50))


def test_retry_probability_in_priority_mode():
    sel = PriorityQueueSelector(PriorityConfig(popFromRetryProbabilityForPriority=25))
    firsts = [sel.select(PRIO, group(), list(range(8)))[1] for _ in range(100)]
    assert firsts.count(True) == 25
    assert not any(PriorityQueueSelector().select(PRIO, group(), [0, 1])[1] for _ in range(50))   # default 0
    rot = RotatingQueueSelector(PriorityConfig(popFromRetryProbability=100))
    assert all(rot.select(NORMAL, group(), [0, 1])[1] for _ in range(10))


def msg(props, sys_flag=0):
    return SimpleNamespace(properties=encode_properties(props), sys_flag=sys_flag, queue_id=1)


def test_send_hook_pins_the_queue_and_strips_on_other_types():
    ctx = SimpleNamespace(topic_config=TopicConfig("P", 8, 4))
    ms = [msg({"_SYS_MSG_PRIORITY_": "2"}), msg({"_SYS_MSG_PRIORITY_": "99"}), msg({"a": "b"}),
          msg({"_SYS_MSG_PRIORITY_": "5", "__SHARDINGKEY": "g"}), msg({"_SYS_MSG_PRIORITY_": "5"}, sys_flag=0x4),
          msg({"_SYS_MSG_PRIORITY_": "5", "TIMER_DELIVER_MS": "1"})]
    assert priority_send.before_store(ctx, ms) is None
    assert [m.queue_id for m in ms] == [2, 3, 1, 1, 1, 1]            # clamped to writeQueueNums - 1
    for m in ms[3:]:
        assert find_property(m.properties, "_SYS_MSG_PRIORITY_") is None      # FIFO, transaction, delay: stripped
    bad = priority_send.before_store(ctx, [msg({"_SYS_MSG_PRIORITY_": "-1"})])
    assert bad is not None and bad.code == 13
    assert priority_send.before_store(ctx, [msg({"_SYS_MSG_PRIORITY_": "x"})]).code == 13


def test_priority_pop_reads_levels_top_down_passes_busy_and_empty_queues(tmp_path):
    """The selection over a real store: the highest non-empty level first; an empty level costs no read; a level
    another pop holds is passed over, then waited for if the batch is still short (no empty-handed answer)."""
    import threading
    from rmqd.pop.service import PopService
    from rmqd.store.message import MessageToStore
    from rmqd.store.metadata import ConsumerOffsetManager
    from tests.store.conftest import small_config
    from rmqd.store.message_store import MessageStore

    store = MessageStore(small_config(str(tmp_path / "s")))
    store.start()
    try:
        table = {"P": PRIO}
        topics = SimpleNamespace(get=table.get, add_system_topic=lambda tc: table.setdefault(tc.topic_name, tc))
        groups = SimpleNamespace(find=lambda n: SubscriptionGroupConfig(n))
        pop = PopService("b", "c", store, topics, groups, ConsumerOffsetManager(str(tmp_path / "cfg")),
                         lambda: ("127.0.0.1", 1), queue_selector=PriorityQueueSelector())
        for q in (0, 2, 5):
            for i in range(3):
                assert store.put_message(MessageToStore(topic="P", queue_id=q, body=b"%d-%d" % (q, i))).ok
        reads = []
        get = store.get_messages
        store_view = SimpleNamespace(**{k: getattr(store, k) for k in ("get_max_offset", "get_min_offset",
                                                                         "put_message")})
        store_view.get_messages = lambda t, q, *a, **k: (reads.append((t, q)), get(t, q, *a, **k))[1]
        pop.store = store_view
        first = pop.pop("G", "P", -1, 2, 60_000, init_mode=1)
        assert [m.queue_id for m in first.messages] == [5, 5] and reads == [("P", 5)]   # 7, 6: no read
        held = pop._queue_lock(("P", "G", 5))
        held.acquire()
        try:
            second = pop.pop("G", "P", -1, 4, 60_000, init_mode=1)        # 5 is busy: passed over, batch full
            assert [m.queue_id for m in second.messages] == [2, 2, 2, 0] and second.rest_num >= 1
            out = {}
            t = threading.Thread(target=lambda: out.setdefault("r", pop.pop("G", "P", -1, 32, 60_000, init_mode=1)))
            t.start()
            t.join(0.3)
            assert t.is_alive()                 # took level 0, now waits for busy level 5 instead of answering
        finally:
            held.release()
        t.join(5)
        assert [m.queue_id for m in out["r"].messages] == [0, 0, 5]
    finally:
        store.shutdown()


class _Topics:
    def __init__(self, *tcs):
        self.table = {tc.topic_name: tc for tc in tcs}

    def get(self, name):
        return self.table.get(name)

    def add_system_topic(self, tc):
        self.table[tc.topic_name] = tc

    def update(self, tc):
        self.table[tc.topic_name] = tc

    def create_topic_in_send_message_back_method(self, name, n, perm=6, flag=0):
        return self.table.setdefault(name, TopicConfig(name, n, n, perm))


def test_use_separate_retry_queue_keeps_the_priority_of_retries(tmp_path):
    """useSeparateRetryQueue (5.x PopReviveService): on, the POP retry topic has the topic's queue count and a
    retry keeps its queue (its priority), so retries are read by level; off (default), one retry queue."""
    import time
    from rmqd.pop.service import PopService
    from rmqd.store.message import MessageToStore, decode_message
    from rmqd.store.message_store import MessageStore
    from rmqd.store.metadata import ConsumerOffsetManager
    from tests.store.conftest import small_config

    for separate in (True, False):
        store = MessageStore(small_config(str(tmp_path / f"s{separate}")))
        store.start()
        topics = _Topics(PRIO)
        pop = PopService("b", "c", store, topics, SimpleNamespace(find=lambda n: SubscriptionGroupConfig(n)),
                         ConsumerOffsetManager(str(tmp_path / f"cfg{separate}")), lambda: ("127.0.0.1", 1),
                         queue_selector=PriorityQueueSelector(PriorityConfig(useSeparateRetryQueue=separate)))
        pop.start()
        try:
            for q in (1, 6):
                assert store.put_message(MessageToStore(topic="P", queue_id=q, body=b"q%d" % q)).ok
            assert [m.queue_id for m in pop.pop("G", "P", -1, 32, 200, init_mode=1).messages] == [6, 1]
            retry = "%RETRY%G_P"
            deadline = time.monotonic() + 10
            while pop.revived < 2 and time.monotonic() < deadline:
                time.sleep(0.05)
            assert pop.revived == 2
            assert topics.get(retry).read_queue_nums == (8 if separate else 1)
            again = pop.pop("G", "P", -1, 32, 60_000, init_mode=1).messages
            got = [(m.topic, m.queue_id, decode_message(m.record).body) for m in again]
            if separate:                      # by level: the retry of priority 6 first
                assert got == [(retry, 6, b"q6"), (retry, 1, b"q1")]
            else:                             # one retry queue, in revive order
                assert sorted(got) == [(retry, 0, b"q1"), (retry, 0, b"q6")]
        finally:
            pop.shutdown()
            store.shutdown()
