"""rmqd.proxy.brokers and rmqd.proxy.registry without brokers: the cluster table, calls followed to a new master,
heartbeat bodies, and check-backs relayed to a producer's Telemetry stream."""
from __future__ import annotations

import asyncio
from types import SimpleNamespace

import orjson
import pytest

from rmqd.proxy.brokers import BrokerDirectory, BrokerUnavailable, parse_cluster_info
from rmqd.proxy.registry import ProxyRegistry
from rmqd.remoting.command import new_request

CLUSTER = (b'{"brokerAddrTable":{"broker-a":{"brokerName":"broker-a","brokerAddrs":{0:"10.0.0.1:10911",'
           b'1:"10.0.0.2:10911"}},"broker-b":{"brokerName":"broker-b","brokerAddrs":{1:"10.0.0.3:10911"}}},'
           b'"clusterAddrTable":{"C":["broker-a","broker-b"]}}')


def test_cluster_info_with_bare_number_ids():
    assert parse_cluster_info(CLUSTER) == {"broker-a": {0: "10.0.0.1:10911", 1: "10.0.0.2:10911"},
                                           "broker-b": {1: "10.0.0.3:10911"}}


class FakeClient:
    """A RemotingClient whose name server answers ``tables`` in turn and whose brokers in ``down`` are refused."""

    def __init__(self, tables: list[bytes], down: set[str]) -> None:
        self.tables, self.down, self.calls = tables, down, []

    async def invoke(self, addr, request, timeout):
        self.calls.append((addr, request.code))
        if addr == "ns:9876":
            body = self.tables.pop(0) if len(self.tables) > 1 else self.tables[0]
            return SimpleNamespace(code=0, body=body, remark="")
        if addr in self.down:
            raise ConnectionRefusedError(addr)
        return SimpleNamespace(code=0, body=b"", remark="", ext_fields={"at": addr})


def _table(master: str) -> bytes:
    return orjson.dumps({"brokerAddrTable": {"broker-a": {"brokerName": "broker-a",
                                                          "brokerAddrs": {"0": master}}}})


def test_a_call_follows_the_group_to_its_new_master():
    async def go():
        client = FakeClient([_table("old:1"), _table("new:1")], {"old:1"})
        d = BrokerDirectory(client, lambda: ["ns:9876"])
        await d.cluster()
        d._cluster_at = 0                      # the refresh after the failure is not throttled here
        resp = await d.invoke("broker-a", new_request(10, {}))
        assert resp.ext_fields == {"at": "new:1"}
        assert d.master_of("broker-a") == "new:1" and d.failed_recently("broker-a")
        d.succeeded("broker-a")
        assert not d.failed_recently("broker-a")
    asyncio.run(go())


def test_a_group_without_master_is_unavailable():
    async def go():
        client = FakeClient([_table("old:1")], {"old:1"})
        d = BrokerDirectory(client, lambda: ["ns:9876"])
        await d.cluster()
        with pytest.raises(BrokerUnavailable):
            await d.invoke("broker-a", new_request(10, {}))
        with pytest.raises(BrokerUnavailable):
            await d.invoke("broker-z", new_request(10, {}))
    asyncio.run(go())


def test_heartbeat_body_names_producer_and_consumer_groups():
    reg = ProxyRegistry(SimpleNamespace(), client_id="px@1")
    reg.register_producer("PG", object())
    ch = object()
    reg.register_consumer("CG", ch, [{"topic": "T", "subString": "*"}])
    body = orjson.loads(reg.heartbeat_body(True, True))
    assert body["clientID"] == "px@1" and body["producerDataSet"] == [{"groupName": "PG"}]
    [cg] = body["consumerDataSet"]
    assert cg["groupName"] == "CG" and cg["consumeType"] == "CONSUME_POP"
    assert cg["subscriptionDataSet"] == [{"topic": "T", "subString": "*"}]
    assert orjson.loads(reg.heartbeat_body(False, True))["producerDataSet"] == []


class Channel:
    def __init__(self, open_stream: bool) -> None:
        self.outbox = object() if open_stream else None
        self.closed = False
        self.recovered = []

    def recover_orphaned(self, request, broker):
        self.recovered.append(broker)


def _check_request() -> object:
    return new_request(39, {"msgId": "X"}, b"")     # its body (the half message) is decoded by the patched reader


def test_check_back_goes_to_a_producer_with_a_telemetry_stream(monkeypatch):
    directory = SimpleNamespace(name_of=lambda addr: {"10.0.0.1:10911": "broker-a"}.get(addr))
    reg = ProxyRegistry(directory, client_id="px@1")
    live, idle = Channel(True), Channel(False)
    reg.producers["PG"] = {live, idle}
    monkeypatch.setattr("rmqd.proxy.registry.decode_message",
                        lambda body: SimpleNamespace(properties={"PGROUP": "PG"}))
    reg.check_transaction(SimpleNamespace(remote_address="10.0.0.1:10911"), _check_request())
    assert live.recovered == ["broker-a"] and idle.recovered == []
    reg.check_transaction(SimpleNamespace(remote_address="10.9.9.9:1"), _check_request())   # unknown broker
    assert live.recovered == ["broker-a"]


def test_release_unregisters_the_last_client_of_a_group():
    reg = ProxyRegistry(SimpleNamespace(), client_id="px@1")
    ch = object()
    reg.register_consumer("CG", ch, [])
    gone = []

    async def unregister(items):
        gone.extend(items)
    reg._unregister = unregister

    async def go():
        assert reg.release(ch) == ["CG"]
        await asyncio.sleep(0)
    asyncio.run(go())
    assert gone == [("consumerGroup", "CG")] and "CG" not in reg.consumers
