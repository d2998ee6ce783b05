"""rmqd.proxy.backend's send path over a fake broker directory (queue choice, a failed broker passed over, a message
group kept on its queue) and rmqd.proxy.app's settings."""
from __future__ import annotations

import asyncio
import json

import pytest

from rmqd.config import BrokerConfig
from rmqd.grpc.routes import BrokerGroup, QueueData, TopicRoute
from rmqd.proxy.app import proxy_config
from rmqd.proxy.backend import RemoteBackend
from rmqd.proxy.brokers import BrokerUnavailable
from rmqd.remoting.codes import ResponseCode
from rmqd.remoting.command import new_request
from rmqd.store.metadata import TopicConfig

ROUTE = TopicRoute((QueueData("broker-a", 2, 2, 6), QueueData("broker-b", 2, 2, 6)),
                   (BrokerGroup("broker-a", {0: "a:1"}), BrokerGroup("broker-b", {0: "b:1"})))


class Directory:
    def __init__(self, down: set[str]) -> None:
        self.down, self.sent, self.failed = down, [], set()

    async def topic_route(self, topic, fresh=False):
        return ROUTE

    def master_of(self, name):
        return {"broker-a": "a:1", "broker-b": "b:1"}.get(name)

    def failed_recently(self, name):
        return name in self.failed

    def succeeded(self, name):
        self.failed.discard(name)

    async def invoke(self, name, request, timeout):
        if name in self.down:
            self.failed.add(name)
            raise BrokerUnavailable(name)
        self.sent.append((name, int(request.ext_fields["queueId"])))
        return new_request(0, {})


def _backend(down=()) -> RemoteBackend:
    backend = RemoteBackend(BrokerConfig(), lambda: ["ns:9876"], lambda: ("127.0.0.1", 8081))
    backend.directory = Directory(set(down))
    return backend


def _send(backend, key="", n=1):
    tc = TopicConfig("T", 2, 2, 6)
    return asyncio.run(_sends(backend, tc, key, n))


async def _sends(backend, tc, key, n):
    return [await backend.send(tc, new_request(310, {"topic": "T"}, b"x"), key, ("c", 1)) for _ in range(n)]


def test_sends_round_robin_over_every_brokers_write_queues():
    backend = _backend()
    out = _send(backend, n=8)
    assert sorted(set(backend.directory.sent)) == [("broker-a", 0), ("broker-a", 1), ("broker-b", 0), ("broker-b", 1)]
    assert all(resp.code == 0 for resp, _ in out)


def test_a_failed_broker_is_passed_over_and_picked_last():
    backend = _backend(down={"broker-a"})
    out = _send(backend, n=6)
    assert all(resp.code == 0 and name == "broker-b" for resp, name in out), out
    assert {b for b, _ in backend.directory.sent} == {"broker-b"}


def test_a_message_group_stays_on_its_queue():
    backend = _backend()
    _send(backend, key="order-1", n=5)
    assert len(set(backend.directory.sent)) == 1
    down = backend.directory.sent[0][0]
    backend = _backend(down={down})
    [(resp, name)] = _send(backend, key="order-1")
    assert resp.code == ResponseCode.SYSTEM_ERROR and name is None and backend.directory.sent == []


def test_endpoints_are_the_proxys_own_address():
    backend = _backend()
    eps = asyncio.run(backend.endpoints(ROUTE, []))
    assert eps == {("broker-a", 0): [("127.0.0.1", 8081)], ("broker-b", 0): [("127.0.0.1", 8081)]}


def test_config_from_rmq_proxy_json_and_properties(tmp_path):
    js = tmp_path / "rmq-proxy.json"
    js.write_text(json.dumps({"namesrvAddr": "ns1:9876", "minInvisibleTimeMillsForRecv": 1000}))
    config = proxy_config(str(js), None)
    assert config.namesrv_addrs == ["ns1:9876"] and int(config.minInvisibleTimeMillsForRecv) == 1000
    assert proxy_config(str(js), "ns2:9876;ns3:9876").namesrv_addrs == ["ns2:9876", "ns3:9876"]
    props = tmp_path / "proxy.properties"
    props.write_text("namesrvAddr=ns4:9876\n")
    assert proxy_config(str(props), None).namesrv_addrs == ["ns4:9876"]
    (tmp_path / "bad.json").write_text("[1]")
    with pytest.raises(ValueError):
        proxy_config(str(tmp_path / "bad.json"), "ns:1")
    with pytest.raises(ValueError):
        proxy_config(None, None)


def test_a_message_past_its_max_attempts_goes_to_the_dlq_and_is_acked(monkeypatch):
    """The 5.x proxy's receive filter: a Java broker hands out a message again past the group's max attempts;
    the proxy forwards it to the DLQ (CONSUMER_SEND_MSG_BACK, delay level -1) and acks it instead."""
    from rmqd.grpc.backend import ReceiveRequest
    from rmqd.grpc.pb import definition_pb2 as d
    from rmqd.pop.extra_info import ExtraInfo, ReceiptHandle
    from rmqd.processors.pop_ack import ACK_MESSAGE
    from rmqd.remoting.codes import RequestCode
    from rmqd.store.metadata import SubscriptionGroupConfig

    calls = []

    class Recording(Directory):
        async def invoke(self, name, request, timeout):
            calls.append((name, request.code, dict(request.ext_fields or {})))
            return new_request(0, {})

    def message(mid: str, attempt: int) -> tuple:
        m = d.Message(topic=d.Resource(name="T"), body=b"x")
        m.system_properties.message_id, m.system_properties.delivery_attempt = mid, attempt
        return m, ReceiptHandle(ExtraInfo(0, 1, 60000, 0, "0", "broker-a", 0, 5), 4242)

    monkeypatch.setattr("rmqd.proxy.remote_pop._to_messages",
                        lambda *args: [message("POISON", 3), message("FRESH", 2)])
    backend = _backend()
    backend.directory = Recording(set())
    rr = ReceiveRequest("c1", SubscriptionGroupConfig("G", retry_max_times=1), TopicConfig("T", 2, 2, 6), "", 16,
                        60000, 1000, "TAG", "*", None, "127.0.0.1:1", "")
    try:
        got = asyncio.run(backend.received(new_request(0, {}, b"-"), "broker-a", rr))
    finally:
        backend.executor.shutdown()
    assert [m.system_properties.message_id for m in got.messages] == ["FRESH"]
    assert [(name, code) for name, code, _ in calls] == [("broker-a", RequestCode.CONSUMER_SEND_MSG_BACK),
                                                          ("broker-a", ACK_MESSAGE)]
    back = calls[0][2]
    assert back["delayLevel"] == "-1" and back["offset"] == "4242" and back["originMsgId"] == "POISON"
    assert back["group"] == "G" and back["maxReconsumeTimes"] == "1"
