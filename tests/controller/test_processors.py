"""Controller request codes over the wire on one node: what Java answers, and bad input that changes nothing."""
from __future__ import annotations

import pytest

from rmqd.remoting.client import BlockingClient
from tests.controller.ctlkit import FakeBroker, Heartbeater, call, sync_state_set_body

CLUSTER = "C1"


@pytest.fixture(scope="module")
def group(single_controller):
    """broker-p: two fake brokers, 1 master, SyncStateSet {1, 2} at epoch 2."""
    addr = single_controller.addr
    brokers = [FakeBroker(CLUSTER, "broker-p", epoch=1, max_offset=10) for _ in range(2)]
    for b in brokers:
        b.join(addr)
    hb = Heartbeater([addr], brokers).start()
    hb.beat_once()
    assert brokers[0].elect(addr).code == 0
    r = call(addr, 1001, {"brokerName": "broker-p", "masterBrokerId": 1, "masterEpoch": 1}, sync_state_set_body([1, 2], 1))
    assert r.code == 0, r.remark
    yield brokers
    hb.stop()
    for b in brokers:
        b.close()


def state(node) -> bytes:
    return node.server.controller.snapshot()


BAD = [
    # (code, ext, body, expected code, remark fragment)
    (904, {"clusterName": CLUSTER, "brokerName": "broker-p", "brokerAddr": "127.0.0.1:1"}, None, 2005,
     "Heart beat with empty brokerId"),
    (904, {"brokerName": "broker-p", "brokerAddr": "127.0.0.1:1", "brokerId": "1"}, None, 1,
     "the custom field <clusterName> is null"),
    (1001, {"brokerName": "broker-p", "masterBrokerId": "1", "masterEpoch": "0"}, sync_state_set_body([1], 2), 2000,
     "current master epoch is:{1}, not {0}"),
    (1001, {"brokerName": "broker-p", "masterBrokerId": "1", "masterEpoch": "1"}, sync_state_set_body([1], 1), 2001,
     "current syncStateSet epoch is:{2}, not {1}"),
    (1001, {"brokerName": "broker-p", "masterBrokerId": "2", "masterEpoch": "1"}, sync_state_set_body([2], 2), 2002,
     "current leader is:{1}, not {2}"),
    (1001, {"brokerName": "broker-p", "masterBrokerId": "1", "masterEpoch": "1"}, sync_state_set_body([1, 7], 2),
     2003, "replicas {7} don't exist"),
    (1001, {"brokerName": "broker-p", "masterBrokerId": "1", "masterEpoch": "1"}, b"{not json", 2005, "not JSON"),
    (1001, {"brokerName": "broker-p", "masterBrokerId": "1", "masterEpoch": "1"}, b'{"syncStateSet":"1"}', 2005,
     "array of broker ids"),
    (1001, {"brokerName": "broker-p", "masterBrokerId": "1"}, sync_state_set_body([1], 2), 2005, "<masterEpoch>"),
    (1001, {"brokerName": "broker-p", "masterBrokerId": "1", "masterEpoch": "1"}, None, 2005, "SyncStateSet body"),
    (1002, {"clusterName": CLUSTER, "brokerName": "broker-p", "brokerId": "x"}, None, 1, 'For input string: "x"'),
    (1002, {"clusterName": CLUSTER, "brokerName": "nobody", "brokerId": "1"}, None, 2010, "hasn't been registered"),
    (1003, {"clusterName": CLUSTER, "brokerName": "broker-p", "brokerId": "9", "brokerAddress": "127.0.0.1:1"}, None,
     2010, "BrokerId: 9 hasn't been registered"),
    (1003, {"clusterName": CLUSTER, "brokerName": "broker-p", "brokerAddress": "127.0.0.1:1"}, None, 2005,
     "<brokerId>"),
    (1004, {"brokerName": "unknown"}, None, 2008, "Broker metadata is not existed"),
    (1004, {}, None, 2005, "<brokerName>"),
    (1006, {}, None, 1, "not set any response code"),
    (1006, {}, b"[1, 2", 2005, "not JSON"),
    (1006, {}, b'{"a": 1}', 2005, "JSON array of broker names"),
    (1009, {}, b"configStorePath=/tmp/x\n", 16, "Can not update config in black list."),
    (1009, {}, b"rocketmqHome=/tmp/x\n", 16, "Can not update config in black list."),
    (1009, {}, b"notifyBrokerRoleChanged=false\nelectMasterMaxRetryCount=many\n", 1, "bad value"),
    (1011, {"clusterName": CLUSTER}, None, 1, "the custom field <brokerName> is null"),
    (1011, {"clusterName": CLUSTER, "brokerName": "broker-p"}, None, 2009, "is still alive"),
    (1011, {"clusterName": CLUSTER, "brokerName": "broker-p", "brokerControllerIdsToClean": "1;a"}, None, 2009,
     "brokerControllerIdsToClean"),
    (1012, {"clusterName": CLUSTER}, None, 2005, "<brokerName>"),
    (1013, {"clusterName": CLUSTER, "brokerName": "broker-p", "appliedBrokerId": "abc",
            "registerCheckCode": "127.0.0.1:1;1"}, None, 2005, "not a number"),
    (1013, {"clusterName": CLUSTER, "brokerName": "broker-p", "appliedBrokerId": "1",
            "registerCheckCode": "127.0.0.1:1;1"}, None, 2014, "Fail to apply brokerId: 1"),
    (1013, {"clusterName": CLUSTER, "brokerName": "broker-p", "appliedBrokerId": "0",
            "registerCheckCode": "127.0.0.1:1;1"}, None, 2014, "start at 1"),
    (1013, {"clusterName": CLUSTER, "brokerName": "broker-p", "appliedBrokerId": "3"}, None, 2005,
     "<registerCheckCode>"),
    (1007, {}, None, 3, "request type 1007 not supported"),
]


@pytest.mark.parametrize("code,ext,body,expect,remark", BAD, ids=[f"{b[0]}-{b[3]}-{i}" for i, b in enumerate(BAD)])
def test_bad_input_gets_a_clear_code_and_changes_nothing(single_controller, group, code, ext, body, expect, remark):
    before = state(single_controller)
    r = call(single_controller.addr, code, ext, body)
    assert r.code == expect, (r.code, r.remark)
    assert remark in (r.remark or ""), r.remark
    assert state(single_controller) == before
    assert single_controller.config.notifyBrokerRoleChanged is True


def test_metadata_and_config(single_controller):
    r = call(single_controller.addr, 1005)
    assert r.code == 0
    assert r.ext_fields == {"group": "solo", "controllerLeaderId": "n0",
                            "controllerLeaderAddress": single_controller.addr, "isLeader": "true",
                            "peers": f"n0:{single_controller.addr};"}
    text = call(single_controller.addr, 1010).body_bytes().decode()
    assert "electMasterMaxRetryCount=3\n" in text and "enableElectUncleanMaster=false\n" in text
    assert "scanNotActiveBrokerInterval=500\n" in text


def test_sync_state_data_and_heartbeat_answer(single_controller, group):
    from rmqd.remoting import fastjson
    r = call(single_controller.addr, 1006, {}, b'["broker-p", "unknown"]')
    assert r.code == 0
    table = fastjson.loads_lenient(r.body_bytes())["replicasInfoTable"]
    assert list(table) == ["broker-p"]
    assert table["broker-p"]["masterBrokerId"] == 1 and table["broker-p"]["syncStateSetEpoch"] == 2
    assert [x["brokerId"] for x in table["broker-p"]["inSyncReplicas"]] == [1, 2]
    assert all(x["alive"] for x in table["broker-p"]["inSyncReplicas"])
    # a heartbeat sent as a request (not oneway) gets Java's answer; its connection then closes, which makes
    # broker 2 inactive until its next heartbeat on the heartbeater's connection
    with BlockingClient(single_controller.addr) as c:
        r = c.invoke(group[1].heartbeat_request())
    assert r.code == 0 and r.remark == "Heart beat success"
