"""LOCK_BATCH_MQ (41) / UNLOCK_BATCH_MQ (42): RebalanceLockManager semantics (README §3.4, §6.10)."""
from __future__ import annotations

import time

import orjson
import pytest

from rmqd.processors.queue_lock import RebalanceLockManager
from rmqd.remoting.command import new_request
from tests.features.msgfeat_helpers import Broker

pytestmark = pytest.mark.timeout(30)

GROUP = "CG_ORDER"


@pytest.fixture(scope="module")
def rb(tmp_path_factory):
    b = Broker(str(tmp_path_factory.mktemp("lockstore"))).start()
    yield b
    b.stop()


def mq(q: int, topic: str = "OrderTopic") -> dict:
    return {"brokerName": "broker-a", "queueId": q, "topic": topic}


def body(client_id: str, queues, group: str = GROUP) -> bytes:
    return orjson.dumps({"clientId": client_id, "consumerGroup": group, "mqSet": [mq(q) for q in queues]})


def lock(client, client_id: str, queues, group: str = GROUP, raw: bytes | None = None) -> list[int]:
    r = client.invoke(new_request(41, None, raw if raw is not None else body(client_id, queues, group)))
    assert r.code == 0, r.remark
    data = orjson.loads(r.body_bytes())
    assert set(data) == {"lockOKMQSet"}
    for item in data["lockOKMQSet"]:
        assert list(item) == ["brokerName", "queueId", "topic"] and item["topic"] == "OrderTopic"
    return sorted(item["queueId"] for item in data["lockOKMQSet"])


def unlock(client, client_id: str, queues, group: str = GROUP, oneway: bool = False) -> None:
    req = new_request(42, None, body(client_id, queues, group))
    if oneway:
        client.invoke_oneway(req)
        return
    r = client.invoke(req)
    assert r.code == 0 and r.body is None


def test_two_clients_compete_for_queues(rb):
    a, b = rb.client, rb.new_client()
    g = "G_compete"
    assert lock(a, "A", [0, 1], g) == [0, 1]
    assert lock(b, "B", [0, 1, 2, 3], g) == [2, 3]         # only the free ones
    assert lock(a, "A", [0, 1, 2], g) == [0, 1]           # re-grant own, refuse B's
    unlock(b, "A", [2], g)                                # A cannot release B's queue
    assert lock(a, "A", [2], g) == []
    unlock(a, "A", [0], g)
    assert lock(b, "B", [0, 1], g) == [0]
    assert rb.broker.rebalance_lock_manager.owner(g, ("OrderTopic", "broker-a", 1)) == "A"


def test_groups_are_independent(rb):
    a = rb.client
    assert lock(a, "A", [0], "G_one") == [0]
    assert lock(a, "B", [0], "G_two") == [0]


def test_lock_expiry_with_short_live_time(rb):
    mgr = rb.broker.rebalance_lock_manager
    old = mgr.max_live_time_ms
    mgr.max_live_time_ms = 150
    try:
        g = "G_expiry"
        assert lock(rb.client, "A", [0, 1], g) == [0, 1]
        assert lock(rb.client, "B", [0, 1], g) == []
        time.sleep(0.1)
        assert lock(rb.client, "A", [1], g) == [1]        # renewal refreshes only queue 1
        time.sleep(0.1)
        assert lock(rb.client, "B", [0, 1], g) == [0]     # queue 0 expired, queue 1 renewed
        time.sleep(0.2)
        assert lock(rb.client, "B", [1], g) == [1]
    finally:
        mgr.max_live_time_ms = old


def test_cpp_style_body_with_trailing_newline_and_string_ids(rb):
    raw = (b'{"clientId":"10.0.0.5@123#456","consumerGroup":"G_cpp","mqSet":'
           b'[{"brokerName":"broker-a","queueId":"3","topic":"OrderTopic"}]}\n')
    assert lock(rb.client, "x", [], raw=raw) == [3]
    unlock(rb.client, "10.0.0.5@123#456", [3], "G_cpp", oneway=True)
    deadline = time.monotonic() + 3
    while rb.broker.rebalance_lock_manager.owner("G_cpp", ("OrderTopic", "broker-a", 3)) is not None:
        assert time.monotonic() < deadline
        time.sleep(0.02)


def test_bad_body(rb):
    r = rb.client.invoke(new_request(41, None, b"not json"))
    assert r.code == 1 and "LockBatchRequestBody" in r.remark
    r = rb.client.invoke(new_request(42, None, None))
    assert r.code == 1


def test_manager_unit():
    t = [1000]
    m = RebalanceLockManager(max_live_time_ms=100, clock=lambda: t[0])
    k = ("T", "b", 0)
    assert m.try_lock_batch("g", [k], "A") == [k] and m.is_locked("g", k, "A")
    t[0] += 100
    assert m.try_lock_batch("g", [k], "B") == []          # exactly at the limit: still held
    t[0] += 1
    assert not m.is_locked("g", k, "A")
    assert m.try_lock_batch("g", [k], "B") == [k] and m.owner("g", k) == "B"
    assert m.unlock_batch("g", [k], "A") == 0 and m.unlock_batch("g", [k], "B") == 1
    assert m.owner("g", k) is None
