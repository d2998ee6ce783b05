"""Topic sub-commands end to end: real effects in the route, topics.json and the name server KV."""
from __future__ import annotations

import json
import os

from rmqd.remoting import fastjson
from rmqd.remoting.client import BlockingClient
from rmqd.remoting.command import new_request


def _topics_json(server) -> dict:
    with open(os.path.join(server.store_dir, "config", "topics.json")) as f:
        return json.load(f)["topicConfigTable"]


def _route(server, topic: str):
    c = BlockingClient(server.namesrv_addr)
    try:
        r = c.invoke(new_request(105, {"topic": topic}))
        return r.code, fastjson.loads_lenient(r.body_bytes()) if r.code == 0 else None
    finally:
        c.close()


def test_update_topic_with_attributes_and_order(server, admin):
    out = admin("updateTopic", "-c", "DefaultCluster", "-t", "AdmT1", "-r", "3", "-w", "3",
                "-a", "+cleanup.policy=COMPACTION", "-o", "true")
    assert "create topic to" in out and "orderConf=[broker-a:3]" in out
    code, route = _route(server, "AdmT1")
    assert code == 0 and route["queueDatas"][0]["readQueueNums"] == 3 and route["queueDatas"][0]["perm"] == 6
    tc = _topics_json(server)["AdmT1"]
    assert tc["attributes"] == {"cleanup.policy": "COMPACTION"} and tc["order"] is True
    assert "broker-a:3" in admin("updateOrderConf", "-t", "AdmT1", "-m", "get")
    # update: -k deletes a changeable attribute; cleanup.policy is not changeable; deleting a missing one
    # fails like Java
    err = admin("updateTopic", "-b", server.broker_addr, "-t", "AdmT1", "-r", "3", "-w", "3",
                "--attributes=-cleanup.policy", rc=1)
    assert "attempt to update an unchangeable attribute. key: cleanup.policy" in err
    admin("updateTopic", "-b", server.broker_addr, "-t", "AdmT1", "-r", "3", "-w", "3", "-a", "+message.type=FIFO")
    assert _topics_json(server)["AdmT1"]["attributes"] == {"cleanup.policy": "COMPACTION", "message.type": "FIFO"}
    admin("updateTopic", "-b", server.broker_addr, "-t", "AdmT1", "-r", "3", "-w", "3", "--attributes=-message.type")
    assert _topics_json(server)["AdmT1"]["attributes"] == {"cleanup.policy": "COMPACTION"}
    err = admin("updateTopic", "-b", server.broker_addr, "-t", "AdmT1", "--attributes=-nope", rc=1)
    assert "nonexistent" in err
    # system topics are refused
    assert "conflict with system topic" in admin("updateTopic", "-b", server.broker_addr, "-t", "TBW102", rc=1)


def test_topic_list_route_status_cluster_list(server, admin):
    admin("updateTopic", "-b", server.broker_addr, "-t", "AdmT2", "-r", "2", "-w", "2")
    assert "AdmT2" in admin("topicList").split()
    assert "DefaultCluster" in admin("topicList", "-c")
    assert '"readQueueNums": 2' in admin("topicRoute", "-t", "AdmT2")
    admin("sendMessage", "-t", "AdmT2", "-p", "x", "-i", "1")
    lines = [ln.split() for ln in admin("topicStatus", "-t", "AdmT2").splitlines()[1:]]
    assert [(ln[1], ln[2], ln[3]) for ln in lines] == [("0", "0", "0"), ("1", "0", "1")]
    assert admin("topicClusterList", "-t", "AdmT2").split() == ["DefaultCluster"]


def test_update_topic_perm_and_delete(server, admin):
    admin("updateTopic", "-b", server.broker_addr, "-t", "AdmT3", "-r", "2", "-w", "2")
    assert "from 6 to 4" in admin("updateTopicPerm", "-t", "AdmT3", "-p", "4", "-b", server.broker_addr)
    assert _route(server, "AdmT3")[1]["queueDatas"][0]["perm"] == 4
    assert _topics_json(server)["AdmT3"]["perm"] == 4
    out = admin("deleteTopic", "-t", "AdmT3", "-c", "DefaultCluster")
    assert "from NameServer success" in out
    assert "AdmT3" not in _topics_json(server)
    assert _route(server, "AdmT3")[0] == 17


def test_update_order_conf_put_delete_and_kv(server, admin):
    admin("updateOrderConf", "-t", "AdmT4", "-m", "put", "-v", "broker-a:2")
    assert "broker-a:2" in admin("updateOrderConf", "-t", "AdmT4", "-m", "get")
    admin("updateOrderConf", "-t", "AdmT4", "-m", "delete")
    admin("updateOrderConf", "-t", "AdmT4", "-m", "get", rc=1)
    admin("updateKvConfig", "-s", "NS1", "-k", "k", "-v", "v")
    c = BlockingClient(server.namesrv_addr)
    assert c.invoke(new_request(101, {"namespace": "NS1", "key": "k"})).ext_fields["value"] == "v"
    admin("deleteKvConfig", "-s", "NS1", "-k", "k")
    assert c.invoke(new_request(101, {"namespace": "NS1", "key": "k"})).code == 22
    c.close()


def test_allocate_mq(server, admin):
    admin("updateTopic", "-b", server.broker_addr, "-t", "AdmT5", "-r", "4", "-w", "4")
    res = json.loads(admin("allocateMQ", "-t", "AdmT5", "-i", "10.0.0.1,10.0.0.2"))["result"]
    assert [q["queueId"] for q in res["10.0.0.1"]] == [0, 1] and [q["queueId"] for q in res["10.0.0.2"]] == [2, 3]


def test_clean_expired_cq_and_unused_topic(server, admin):
    admin("updateTopic", "-b", server.broker_addr, "-t", "AdmT6", "-r", "1", "-w", "1")
    admin("sendMessage", "-t", "AdmT6", "-p", "x")
    broker = server.broker
    broker.topic_config_manager.delete("AdmT6")      # config gone, consume queue left behind
    assert "AdmT6" in broker.store.topics()
    assert "success" in admin("cleanUnusedTopic", "-b", server.broker_addr)
    assert "AdmT6" not in broker.store.topics()
    assert "success" in admin("cleanExpiredCQ", "-c", "DefaultCluster")
