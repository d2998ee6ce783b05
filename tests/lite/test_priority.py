"""Priority (5.4): the queue selector (priority mode, priority.factor, retry probability, order direction),
the send hook (queue = min(priority, writeQueueNums - 1), stripped on other types), and POP order."""
from __future__ import annotations

from types import SimpleNamespace

from rmqd.pop.lite_priority_config import PriorityConfig
from rmqd.pop.queue_selector import PriorityQueueSelector, RotatingQueueSelector
from rmqd.processors import priority_send
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
