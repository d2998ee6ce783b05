"""Broker/cluster and message sub-commands end to end."""
from __future__ import annotations

import re

from rmqd.remoting import fastjson
from rmqd.remoting.client import BlockingClient
from rmqd.remoting.command import new_request

from tests.admin.conftest import commit_offset, heartbeat_consumer


def test_cluster_list_and_broker_status(server, admin):
    admin("updateTopic", "-b", server.broker_addr, "-t", "AdmBT1", "-r", "1", "-w", "1")
    admin("sendMessage", "-t", "AdmBT1", "-p", "x")
    out = admin("clusterList")
    row = out.splitlines()[1].split()
    assert row[:5] == ["DefaultCluster", "broker-a", "0", server.broker_addr, "V4_9_8"]
    more = admin("clusterList", "-m").splitlines()[1].split()
    assert more[0] == "DefaultCluster" and int(more[4]) >= 1          # InTotalToday counts the put
    status = dict(re.split(r"\s*:\s", ln, maxsplit=1) for ln in admin("brokerStatus", "-b", server.broker_addr).splitlines())
    assert int(status["msgPutTotalTodayNow"]) >= 1 and int(status["commitLogMaxOffset"]) > 0
    assert re.fullmatch(r"\d+\.\d\d \d+\.\d\d \d+\.\d\d", status["putTps"])


def test_broker_config_get_update_effective(server, admin, broker_client):
    assert re.search(r"autoCreateTopicEnable\s+=  true", admin("getBrokerConfig", "-b", server.broker_addr))
    admin("updateBrokerConfig", "-b", server.broker_addr, "-k", "autoCreateTopicEnable", "-v", "false")
    try:
        assert re.search(r"autoCreateTopicEnable\s+=  false", admin("getBrokerConfig", "-c", "DefaultCluster"))
        r = broker_client.invoke(new_request(10, {
            "producerGroup": "PG", "topic": "AdmBrandNew", "defaultTopic": "TBW102", "defaultTopicQueueNums": "4",
            "queueId": "0", "sysFlag": "0", "bornTimestamp": "0", "flag": "0", "properties": "",
            "reconsumeTimes": "0", "unitMode": "false", "batch": "false"}, b"x"))
        assert r.code == 17
    finally:
        admin("updateBrokerConfig", "-b", server.broker_addr, "-k", "autoCreateTopicEnable", "-v", "true")
    assert "black list" in admin("updateBrokerConfig", "-b", server.broker_addr, "-k", "brokerConfigPath",
                                 "-v", "/x", rc=1)
    r = broker_client.invoke(new_request(26, {}))
    assert fastjson.loads_lenient(r.ext_fields["version"])["counter"] >= 2


def test_broker_permission_reregisters(server, admin):
    admin("updateTopic", "-b", server.broker_addr, "-t", "AdmBT2", "-r", "1", "-w", "1")
    ns = BlockingClient(server.namesrv_addr)
    try:
        admin("updateBrokerConfig", "-b", server.broker_addr, "-k", "brokerPermission", "-v", "4")
        route = fastjson.loads_lenient(ns.invoke(new_request(105, {"topic": "AdmBT2"})).body_bytes())
        assert route["queueDatas"][0]["perm"] == 4
    finally:
        admin("updateBrokerConfig", "-b", server.broker_addr, "-k", "brokerPermission", "-v", "6")
        ns.close()


def test_wipe_and_add_write_perm(server, admin):
    admin("updateTopic", "-b", server.broker_addr, "-t", "AdmBT3", "-r", "1", "-w", "1")
    ns = BlockingClient(server.namesrv_addr)
    try:
        assert "wipe write perm of broker[broker-a]" in admin("wipeWritePerm", "-b", "broker-a")
        route = fastjson.loads_lenient(ns.invoke(new_request(105, {"topic": "AdmBT3"})).body_bytes())
        assert route["queueDatas"][0]["perm"] & 2 == 0
        assert "add write perm of broker[broker-a]" in admin("addWritePerm", "-b", "broker-a")
        route = fastjson.loads_lenient(ns.invoke(new_request(105, {"topic": "AdmBT3"})).body_bytes())
        assert route["queueDatas"][0]["perm"] == 6
    finally:
        ns.close()


def test_namesrv_config(server, admin):
    admin("updateNamesrvConfig", "-k", "orderMessageEnable", "-v", "true")
    assert re.search(r"orderMessageEnable\s+=  true", admin("getNamesrvConfig"))
    admin("updateNamesrvConfig", "-k", "orderMessageEnable", "-v", "false")


def test_stats_all_and_broker_consume_stats(server, admin):
    admin("updateTopic", "-b", server.broker_addr, "-t", "AdmBT4", "-r", "1", "-w", "1")
    for i in range(3):
        admin("sendMessage", "-t", "AdmBT4", "-p", f"m{i}")
    c = BlockingClient(server.broker_addr)
    try:
        heartbeat_consumer(c, "AdmBG4", "AdmBT4")
        commit_offset(c, "AdmBG4", "AdmBT4", 0, 1)
        admin("consumeMessage", "-t", "AdmBT4", "-g", "AdmBG4", "-c", "2")   # counted as GROUP_GET_NUMS
        row = [ln.split() for ln in admin("statsAll", "-t", "AdmBT4").splitlines() if ln.startswith("AdmBT4")][0]
        assert row[1] == "AdmBG4" and row[2] == "2" and row[5] == "3" and row[6] == "3"  # one pull of 32 got all 3
        out = admin("brokerConsumeStats", "-b", server.broker_addr)
        row = [ln.split() for ln in out.splitlines() if ln.startswith("AdmBT4")][0]
        assert row[1:7] == ["AdmBG4", "broker-a", "0", "3", "1", "2"]
        r = c.invoke(new_request(315, {"statsName": "TOPIC_PUT_NUMS", "statsKey": "AdmBT4"}))
        assert fastjson.loads_lenient(r.body_bytes())["statsDay"]["sum"] == 3
    finally:
        c.close()


def test_message_commands(server, admin):
    admin("updateTopic", "-b", server.broker_addr, "-t", "AdmMT", "-r", "2", "-w", "2")
    out = admin("sendMessage", "-t", "AdmMT", "-p", "hello-body", "-k", "KEY1", "-c", "TagA", "-i", "1")
    offset_id = out.splitlines()[1].split()[-1]
    assert "hello-body" in admin("queryMsgById", "-i", offset_id)
    uniq = admin("queryMsgByKey", "-t", "AdmMT", "-k", "KEY1").splitlines()[1].split()[0]
    assert "hello-body" in admin("queryMsgByUniqueKey", "-i", uniq, "-t", "AdmMT")
    assert "TagA" in admin("queryMsgByOffset", "-t", "AdmMT", "-b", "broker-a", "-i", "1", "-o", "0")
    assert "hello-body" in admin("printMsg", "-t", "AdmMT")
    out = admin("printMsgByQueue", "-t", "AdmMT", "-a", "broker-a", "-i", "1", "-p", "true", "-d", "true", "-f", "true")
    assert "hello-body" in out and re.search(r"TagA\s+1", out)
    assert "hello-body" in admin("consumeMessage", "-t", "AdmMT", "-b", "broker-a", "-i", "1", "-o", "0")
    out = admin("checkMsgSendRT", "-t", "AdmMT", "-a", "3", "-s", "16")
    assert out.count("True") == 3 and "Avg RT" in out
