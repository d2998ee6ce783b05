"""LiteSubscriptionManager over a real store and PopService (no server): the subscription state machine,
event dispatch (one client per group), blocked and quiet clients, ack/expiry re-dispatch, TTL expiry."""
from __future__ import annotations

import time

import pytest

from rmqd.lite.subscriptions import COMPLETE_ADD, PARTIAL_ADD, PARTIAL_REMOVE, LiteError, LiteSubscriptionManager
from rmqd.lite.config import LiteConfig
from rmqd.pop.service import PopService
from rmqd.store.lite import LiteStore, lmq_name
from rmqd.store.message import MessageToStore, encode_properties
from rmqd.store.metadata import ConsumerOffsetManager, SubscriptionGroupConfig, TopicConfig

from tests.store.conftest import make_store  # noqa: F401 (fixture)


class Topics:
    def __init__(self):
        self.table = {"P": TopicConfig("P", 2, 2, attributes={"message.type": "LITE",
                                                                "lite.topic.expiration": "1"})}

    def get(self, name):
        return self.table.get(name)

    def add_system_topic(self, tc):
        self.table[tc.topic_name] = tc

    def create_topic_in_send_message_back_method(self, name, *a):
        return self.table.setdefault(name, TopicConfig(name, 1, 1))


class Groups:
    def __init__(self, **attrs):
        self.table = {"G": SubscriptionGroupConfig("G", attributes={"lite.bind.topic": "P", **attrs})}

    def find(self, name):
        return self.table.get(name)


class Clock:
    def __init__(self):
        self.t = 1000.0

    def __call__(self):
        return self.t


@pytest.fixture
def lite(make_store, tmp_path):  # noqa: F811
    def make(**group_attrs):
        store = make_store(tmp_path / "s")
        topics, groups = Topics(), Groups(**group_attrs)
        ls = LiteStore(store, topics)
        ls.feed("P")
        offsets = ConsumerOffsetManager(str(tmp_path / "cfg"))
        pop = PopService("b", "c", ls.store_view, ls.topics_view, groups, offsets, lambda: ("127.0.0.1", 1))
        clock = Clock()
        m = LiteSubscriptionManager(LiteConfig(maxLiteSubscriptionCount=10), ls.index, pop, topics, groups,
                                    offsets, clock=clock)

        def put(name, body=b"x"):
            r = store.put_message(MessageToStore(topic="P", queue_id=0, body=body,
                                                 properties=encode_properties({"__LITE_TOPIC": name})))
            assert r.ok
        return m, put, clock, offsets
    return make


def test_sync_state_machine_and_quota(lite):
    m, put, _, _ = lite()
    m.sync("c1", "G", "P", PARTIAL_ADD, ["a", "b"])
    m.sync("c1", "G", "P", PARTIAL_ADD, ["b", "c"])
    assert m.client_info("c1")["liteTopicSet"] == ["a", "b", "c"] and m.active == 3
    m.sync("c1", "G", "P", PARTIAL_REMOVE, ["a", "zz"])
    assert m.client_info("c1")["liteTopicSet"] == ["b", "c"] and m.active == 2
    m.sync("c1", "G", "P", COMPLETE_ADD, ["c", "d"])
    assert m.client_info("c1")["liteTopicSet"] == ["c", "d"] and m.active == 2
    with pytest.raises(LiteError) as e:
        m.sync("c2", "G", "P", PARTIAL_ADD, [f"n{i}" for i in range(9)])     # 2 + 9 > 10
    assert e.value.kind == LiteError.SUBSCRIPTION_QUOTA and m.active == 2
    with pytest.raises(LiteError) as e:
        m.sync("c2", "G", "Q", PARTIAL_ADD, ["a"])
    assert e.value.kind == LiteError.TOPIC_NOT_FOUND
    assert m.drop_client("c1") and m.active == 0 and m.subscribers == {}


def test_one_client_per_group_gets_each_event_and_delivery_is_ordered(lite):
    m, put, _, offsets = lite()
    m.sync("c1", "G", "P", PARTIAL_ADD, ["s"])
    m.sync("c2", "G", "P", PARTIAL_ADD, ["s"])
    put("s", b"1")
    with_event = [cid for cid in ("c1", "c2") if m.clients[cid].events]
    assert len(with_event) == 1                        # Shared: each event goes to one of the group's clients
    put("s", b"2")
    first = m.pop(with_event[0], 32, 5000)
    assert [pm.queue_offset for pm in first.messages] == [0, 1]
    other = "c2" if with_event[0] == "c1" else "c1"
    put("s", b"3")                                     # the batch is in flight: the lite topic is locked
    assert not m.pop(other, 32, 5000).messages and not m.pop(with_event[0], 32, 5000).messages
    for pm in first.messages:
        m.pop_service.ack("G", pm.topic, pm.extra, pm.queue_offset)
    m.on_ack("G", lmq_name("P", "s"))                  # unlocked: offered again
    holder = next(cid for cid in ("c1", "c2") if m.clients[cid].events)
    nxt = m.pop(holder, 32, 5000)
    assert [pm.queue_offset for pm in nxt.messages] == [2]
    assert offsets.query_offset("G", lmq_name("P", "s"), 0) == 2     # 5.5: the offset moves on ack, not on pop
    m.pop_service.ack("G", nxt.messages[0].topic, nxt.messages[0].extra, 2)
    assert offsets.query_offset("G", lmq_name("P", "s"), 0) == 3


def test_unacked_batch_is_offered_again_after_its_invisible_time(lite):
    m, put, _, _ = lite()
    m.sync("c1", "G", "P", PARTIAL_ADD, ["s"])
    put("s")
    got = m.pop("c1", 32, 1000)
    assert len(got.messages) == 1 and not m.clients["c1"].events
    assert m.run_due(now=got.pop_time + 500) == 0
    time.sleep(1.05)
    assert m.run_due() == 1 and m.clients["c1"].events
    again = m.pop("c1", 32, 1000)
    assert [pm.attempt for pm in again.messages] == [2]          # delivery attempt 2


def test_blocked_client_events_move_and_quiet_clients_expire(lite):
    m, put, clock, _ = lite()
    m.sync("c1", "G", "P", PARTIAL_ADD, ["s"])
    m.sync("c2", "G", "P", PARTIAL_ADD, ["s"])
    put("s")
    holder = next(cid for cid in ("c1", "c2") if m.clients[cid].events)
    other = "c2" if holder == "c1" else "c1"
    m.clients[other].last_poll = clock.t + 20
    clock.t += 20                                       # the holder polled never, the other just now
    m.check_events()
    assert not m.clients[holder].events and m.clients[other].events
    assert m.clients[holder].blacklisted_until > clock.t
    clock.t += 200                                      # no sync for more than 180 s
    assert sorted(m.expire_clients()) == ["c1", "c2"] and m.active == 0


def test_ttl_expiry_deletes_offsets_and_subscriptions(lite):
    m, put, _, offsets = lite()
    m.sync("c1", "G", "P", PARTIAL_ADD, ["old", "new"])
    put("old")
    put("new")
    for pm in m.pop("c1", 32, 5000).messages:
        m.pop_service.ack("G", pm.topic, pm.extra, pm.queue_offset)
    m.config.minLiteTTl = 0
    now = int(time.time() * 1000)
    m.index.queue("P", "new").last_store_ts = now + 120_000
    assert m.sweep_expired(now + 61_000) == 1
    assert m.index.queue("P", "old") is None and m.index.queue("P", "new") is not None
    assert offsets.query_offset("G", lmq_name("P", "old"), 0) == -1
    assert m.client_info("c1")["liteTopicSet"] == ["new"]
    m.topics.table["P"].attributes["lite.topic.expiration"] = "-1"          # never
    m.index.queue("P", "new").last_store_ts = 1
    assert m.sweep_expired(now + 10 ** 9) == 0


def test_lite_offsets_move_on_ack_and_no_revive_record_is_written(lite):
    """5.5 (PopLiteMessageProcessor): a lite batch's state is in memory; the consume offset moves to the lowest
    message still out on each ack; a message whose invisible time changed holds the offset; nothing reaches the
    revive log."""
    m, put, _, offsets = lite()
    lmq = lmq_name("P", "s")
    m.sync("c1", "G", "P", PARTIAL_ADD, ["s"])
    for i in range(4):
        put("s", b"%d" % i)
    batch = m.pop("c1", 32, 1000).messages
    assert [pm.queue_offset for pm in batch] == [0, 1, 2, 3]
    assert offsets.query_offset("G", lmq, 0) == 0                  # where the first pop started, nothing past it
    pop = m.pop_service
    for k in (0, 2):
        pop.ack("G", lmq, batch[k].extra, batch[k].queue_offset)
    assert offsets.query_offset("G", lmq, 0) == 1                  # 1 is still out
    moved = pop.change_invisible_time("G", lmq, batch[1].extra, 1, 60_000)
    pop.ack("G", lmq, batch[3].extra, 3)
    assert offsets.query_offset("G", lmq, 0) == 1                  # 1 was handed a longer invisible time
    time.sleep(1.05)                                               # the batch's invisible time is over
    assert not m.pop("c1", 32, 1000).messages                      # 1 is still invisible: the queue stays locked
    pop.ack("G", lmq, moved, 1)
    assert offsets.query_offset("G", lmq, 0) == 4 and pop.inflight() == {}
    put("s", b"4")
    nxt = m.pop("c1", 32, 300).messages
    assert [pm.queue_offset for pm in nxt] == [4]
    time.sleep(0.35)                                               # not acked in time: offered, handed out again
    assert m.run_due() >= 1
    again = m.pop("c1", 32, 1000).messages
    assert [(pm.queue_offset, pm.attempt) for pm in again] == [(4, 2)]
    pop.ack("G", lmq, again[0].extra, 4)
    assert offsets.query_offset("G", lmq, 0) == 5
    assert pop.store.get_max_offset(pop.revive_topic, 0) <= 0 and pop.topics.get(pop.revive_topic) is None


def test_offset_reset_forgets_the_batch_in_flight(lite):
    """A PARTIAL_ADD with an offset option while a lite batch is out (Java's clearBlock): its late ack does not
    move the new offset, and the lite topic is readable from the new offset at once."""
    from rmqd.lite.subscriptions import OffsetOption
    m, put, _, offsets = lite()
    lmq = lmq_name("P", "s")
    m.sync("c1", "G", "P", PARTIAL_ADD, ["s"])
    for i in range(3):
        put("s", b"%d" % i)
    batch = m.pop("c1", 32, 60_000).messages
    assert [pm.queue_offset for pm in batch] == [0, 1, 2]
    m.sync("c2", "G", "P", PARTIAL_ADD, ["s"], option=OffsetOption(offset=1))
    assert offsets.query_offset("G", lmq, 0) == 1
    for pm in batch:                                     # late acks of the forgotten batch change nothing
        assert not m.pop_service.ack("G", lmq, pm.extra, pm.queue_offset)
    assert offsets.query_offset("G", lmq, 0) == 1
    holder = next(cid for cid in ("c1", "c2") if m.clients[cid].events) if any(
        m.clients[cid].events for cid in ("c1", "c2")) else "c2"
    m.clients[holder].events["s"] = None
    assert [pm.queue_offset for pm in m.pop(holder, 32, 60_000).messages] == [1, 2]
