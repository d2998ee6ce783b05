"""Group sub-commands: subscription groups, progress, connections, offsets (reset/clone/skip)."""
from __future__ import annotations

import json
import os
import time

import pytest

from rmqd.remoting import fastjson
from rmqd.remoting.client import BlockingClient
from rmqd.remoting.command import new_request

from tests.admin.conftest import commit_offset, heartbeat_consumer


def _send(admin, topic: str, n: int, qid: int = 0) -> None:
    for i in range(n):
        admin("sendMessage", "-t", topic, "-p", f"m{i}", "-i", str(qid))


def test_update_and_delete_sub_group(server, admin, broker_client):
    out = admin("updateSubGroup", "-c", "DefaultCluster", "-g", "AdmG1", "-r", "3", "-s", "false")
    assert "create subscription group to" in out
    with open(os.path.join(server.store_dir, "config", "subscriptionGroup.json")) as f:
        sg = json.load(f)["subscriptionGroupTable"]["AdmG1"]
    assert sg["retryMaxTimes"] == 3 and sg["consumeEnable"] is False
    admin("updateTopic", "-b", server.broker_addr, "-t", "AdmGT1", "-r", "1", "-w", "1")
    commit_offset(broker_client, "AdmG1", "AdmGT1", 0, 0)
    admin("deleteSubGroup", "-b", server.broker_addr, "-g", "AdmG1", "-r", "true")
    assert "AdmG1" not in server.broker.subscription_group_manager.table
    assert server.broker.consumer_offset_manager.query_offset("AdmG1", "AdmGT1", 0) == -1


def test_consumer_progress_connection_status(server, admin):
    admin("updateTopic", "-b", server.broker_addr, "-t", "AdmGT2", "-r", "2", "-w", "2")
    _send(admin, "AdmGT2", 3, 0)
    consumer = BlockingClient(server.broker_addr)
    try:
        heartbeat_consumer(consumer, "AdmG2", "AdmGT2", "10.1.1.1@c1")   # creates %RETRY%AdmG2 (route)
        commit_offset(consumer, "AdmG2", "AdmGT2", 0, 1)
        commit_offset(consumer, "AdmG2", "AdmGT2", 1, 0)
        out = admin("consumerProgress", "-g", "AdmG2")
        rows = [ln.split() for ln in out.splitlines() if ln.startswith("AdmGT2")]
        assert [(r[2], r[3], r[4], r[5]) for r in rows] == [("0", "3", "1", "2"), ("1", "0", "0", "0")]
        assert "Diff Total: 2" in out
        assert "AdmG2" in admin("consumerProgress")
        out = admin("consumerConnection", "-g", "AdmG2")
        assert "10.1.1.1@c1" in out and "CONSUME_PASSIVELY" in out and "AdmGT2" in out
        assert "10.1.1.1@c1" in admin("consumerStatus", "-g", "AdmG2", "-i", "NOBODY")
        assert "CODE: 17" in admin("consumerConnection", "-g", "NoSuchGroup", rc=1)   # no %RETRY% route
        r = consumer.invoke(new_request(203, {"consumerGroup": "NoSuchGroup"}))
        assert (r.code, r.remark) == (206, "the consumer group[NoSuchGroup] not online")
    finally:
        consumer.close()


def test_producer_connection(server, admin):
    admin("updateTopic", "-b", server.broker_addr, "-t", "AdmGT3", "-r", "1", "-w", "1")
    prod = BlockingClient(server.broker_addr)
    try:
        body = json.dumps({"clientID": "10.2.2.2@p1", "consumerDataSet": [],
                           "producerDataSet": [{"groupName": "AdmPG"}]}).encode()
        assert prod.invoke(new_request(34, {}, body)).code == 0
        out = admin("producerConnection", "-g", "AdmPG", "-t", "AdmGT3")
        assert "10.2.2.2@p1" in out and "JAVA" in out
    finally:
        prod.close()


@pytest.fixture
def client_side_reset(server):
    """4.9.8's reset (a RESET_CONSUMER_CLIENT_OFFSET push to the live clients) instead of 5.x's server-side one."""
    server.broker.config.apply_runtime({"useServerSideResetOffset": "false"})
    yield
    server.broker.config.apply_runtime({"useServerSideResetOffset": "true"})


def test_reset_offset_live_consumer_gets_220(server, admin, client_side_reset):
    admin("updateTopic", "-b", server.broker_addr, "-t", "AdmGT4", "-r", "1", "-w", "1")
    _send(admin, "AdmGT4", 2)
    time.sleep(0.3)   # the search answers the nearest store time: make message 2 the nearest
    mid = int(time.time() * 1000)
    time.sleep(0.01)
    _send(admin, "AdmGT4", 2)
    consumer = BlockingClient(server.broker_addr)
    try:
        heartbeat_consumer(consumer, "AdmG4", "AdmGT4", "10.1.1.4@c4")
        commit_offset(consumer, "AdmG4", "AdmGT4", 0, 4)
        out = admin("resetOffsetByTime", "-g", "AdmG4", "-t", "AdmGT4", "-s", str(mid))
        assert [ln.split() for ln in out.splitlines()][-1] == ["broker-a", "0", "2"]
        deadline = time.time() + 5
        while not any(r.code == 220 for r in consumer.server_requests) and time.time() < deadline:
            consumer.read_some(0.2)
        push = next(r for r in consumer.server_requests if r.code == 220)   # (40 = ids changed)
        assert push.code == 220 and push.ext_fields["group"] == "AdmG4" and push.ext_fields["timestamp"] == str(mid)
        table = fastjson.loads_lenient(push.body_bytes())["offsetTable"]
        assert table == {fastjson.MessageQueue("AdmGT4", "broker-a", 0): 2}
        # the broker does not write offsets itself on the live path
        assert server.broker.consumer_offset_manager.query_offset("AdmG4", "AdmGT4", 0) == 4
    finally:
        consumer.close()


def test_reset_offset_offline_fallback_and_skip(server, admin, broker_client):
    admin("updateTopic", "-b", server.broker_addr, "-t", "AdmGT5", "-r", "1", "-w", "1")
    _send(admin, "AdmGT5", 3)
    heartbeat_consumer(broker_client, "AdmG5", "AdmGT5")
    broker_client.invoke(new_request(35, {"clientID": "127.0.0.1@fake", "consumerGroup": "AdmG5"}))
    commit_offset(broker_client, "AdmG5", "AdmGT5", 0, 3)
    out = admin("resetOffsetByTime", "-g", "AdmG5", "-t", "AdmGT5", "-s", "0")
    assert out.splitlines()[-1].split() == ["broker-a", "0", "0"]
    assert server.broker.consumer_offset_manager.query_offset("AdmG5", "AdmGT5", 0) == 0
    out = admin("skipAccumulatedMessage", "-g", "AdmG5", "-t", "AdmGT5")
    assert out.splitlines()[-1].split() == ["broker-a", "0", "3"]
    assert server.broker.consumer_offset_manager.query_offset("AdmG5", "AdmGT5", 0) == 3


def test_clone_group_offset(server, admin, broker_client):
    admin("updateTopic", "-b", server.broker_addr, "-t", "AdmGT6", "-r", "2", "-w", "2")
    commit_offset(broker_client, "AdmG6src", "AdmGT6", 0, 5)
    commit_offset(broker_client, "AdmG6src", "AdmGT6", 1, 7)
    assert "clone group offset success" in admin("cloneGroupOffset", "-s", "AdmG6src", "-d", "AdmG6dst",
                                                 "-t", "AdmGT6", "-o", "true")
    assert server.broker.consumer_offset_manager.query_offsets("AdmG6dst", "AdmGT6") == {0: 5, 1: 7}


def test_fifo_sub_group_and_set_consume_mode(server, admin):
    """5.x mqadmin's `updateSubGroup -o true` (a FIFO group) and `setConsumeMode` (QUERY_ASSIGNMENT mode)."""
    admin("updateSubGroup", "-c", "DefaultCluster", "-g", "AdmFifo", "-o", "true")
    assert server.broker.subscription_group_manager.table["AdmFifo"].consume_message_orderly is True
    admin("updateTopic", "-b", server.broker_addr, "-t", "AdmModeT", "-r", "2", "-w", "2")
    out = admin("setConsumeMode", "-b", server.broker_addr, "-t", "AdmModeT", "-g", "AdmFifo", "-m", "POP")
    assert f"set consume mode to {server.broker_addr} success." in out
    assert server.broker.message_request_mode_manager.get("AdmModeT", "AdmFifo")["mode"] == "POP"
    with open(os.path.join(server.store_dir, "config", "messageRequestMode.json")) as f:
        assert json.load(f)["messageRequestModeMap"]["AdmModeT"]["AdmFifo"]["mode"] == "POP"
