"""Offsets (14, 15, 29-32), persistence across restarts, name-server registration."""
from __future__ import annotations

import time


from rmqd.config import NamesrvConfig
from rmqd.namesrv.server import NameServer
from rmqd.remoting.client import BlockingClient
from rmqd.remoting.command import new_request
from tests.broker.conftest import CALL_TIMEOUT_S
from tests.broker.helpers import invoke_raw, messages, pull, send_v2


def q(client, code, **ext):
    return client.invoke(new_request(code, {k: str(v) for k, v in ext.items()}))


def test_offset_codes(broker, client):
    # nothing stored, queue empty -> 0 (the "hot" rule), retry topic too
    r = invoke_raw(client, "011_")
    assert r.code == 0 and r.ext_fields["offset"] == "0"
    assert invoke_raw(client, "009_").ext_fields["offset"] == "0"
    assert invoke_raw(client, "012_").ext_fields["offset"] == "0"      # GET_MAX_OFFSET TopicTest q0
    t0 = int(time.time() * 1000)
    for i in range(3):
        send_v2(client, "TopicTest", f"m{i}".encode())
        time.sleep(0.01)
    assert invoke_raw(client, "030_").ext_fields["offset"] == "3"
    assert q(client, 31, topic="TopicTest", queueId=0).ext_fields["offset"] == "0"
    r = q(client, 32, topic="TopicTest", queueId=0)
    assert r.code == 0 and int(r.ext_fields["timestamp"]) >= t0 - 5
    r = q(client, 29, topic="TopicTest", queueId=0, timestamp=int(time.time() * 1000) + 60000)
    assert r.code == 0 and int(r.ext_fields["offset"]) in (2, 3)
    assert q(client, 30, topic="Nope", queueId=0).ext_fields["offset"] == "0"
    assert q(client, 32, topic="Nope", queueId=0).ext_fields["timestamp"] == "-1"
    # commit then query
    assert invoke_raw(client, "017_").code == 0                       # commit 1 for CG/TopicTest/0
    assert invoke_raw(client, "029_").ext_fields["offset"] == "1"
    assert q(client, 15, consumerGroup="CG", topic="TopicTest", queueId=0, commitOffset=3).code == 0
    assert q(client, 14, consumerGroup="CG", topic="TopicTest", queueId=0).ext_fields["offset"] == "3"
    r = q(client, 14, consumerGroup="CG", topic="TopicTest")
    assert r.code == 1 and "queueId" in r.remark


def test_query_offset_not_found_when_cold(broker, client, monkeypatch):
    send_v2(client, "Cold")
    monkeypatch.setattr(broker.store.message_store, "hot_data_limit", 0)
    r = q(client, 14, consumerGroup="G", topic="Cold", queueId=0)
    assert r.code == 22 and "maybe this group consumer boot first" in r.remark


def test_query_offset_hot_is_judged_by_the_queues_first_message(broker, client, monkeypatch):
    """Java's checkInDiskByConsumeOffset(topic, q, 0): the distance from the queue's message 0 to the
    CommitLog head counts, not the span of the whole CommitLog (older topics must not make a new
    group of a new topic skip its backlog)."""
    for _ in range(5):
        send_v2(client, "OldTopic", b"x" * 1000)
    send_v2(client, "NewTopic", b"y" * 1000)
    store = broker.store
    head = store.commitlog_max_offset()
    new_first = store.local_queue("NewTopic", 0).get_entry(0)[0]
    monkeypatch.setattr(store.message_store, "hot_data_limit", head - new_first)   # NewTopic's message 0 is just hot
    assert q(client, 14, consumerGroup="G", topic="NewTopic", queueId=0).ext_fields["offset"] == "0"
    r = q(client, 14, consumerGroup="G", topic="OldTopic", queueId=0)
    assert r.code == 22 and "maybe this group consumer boot first" in r.remark


def test_messages_and_offsets_survive_restart(harness):
    harness.start()
    c = harness.client()
    ids = [send_v2(c, "Keep", f"m{i}".encode()).ext_fields["msgId"] for i in range(3)]
    q(c, 15, consumerGroup="G", topic="Keep", queueId=0, commitOffset=2)
    harness.stop()
    broker = harness.start()
    c = harness.client()
    assert broker.topic_config_manager.get("Keep") is not None
    r = pull(c, "Keep", sys_flag=4, subscription="*")
    assert [m.msg_id for m in messages(r)] == ids
    assert q(c, 14, consumerGroup="G", topic="Keep", queueId=0).ext_fields["offset"] == "2"
    assert send_v2(c, "Keep").ext_fields["queueOffset"] == "3"


def test_offsets_persisted_periodically(harness):
    broker = harness.start(setup=lambda b: setattr(b, "offset_persist_interval_s", 0.1))
    c = harness.client()
    q(c, 15, consumerGroup="G", topic="T", queueId=1, commitOffset=7)
    path = broker.consumer_offset_manager.path
    deadline = time.monotonic() + 3
    data = None
    while time.monotonic() < deadline:
        try:
            data = open(path).read()
            if '"T@G"' in data:
                break
        except OSError:
            pass
        time.sleep(0.05)
    assert data and '"T@G"' in data


def test_registers_with_name_server(loop_thread, harness, tmp_path):
    ns = NameServer(NamesrvConfig(listenPort=0, kvConfigPath=str(tmp_path / "kv.json")))
    loop_thread.call(ns.start(), CALL_TIMEOUT_S)
    try:
        broker = harness.start(namesrvAddr=ns.address)
        nc = BlockingClient(ns.address)
        try:
            r = nc.invoke(new_request(105, {"topic": "TBW102"}))
            assert r.code == 0, r.remark
            c = harness.client()
            assert nc.invoke(new_request(105, {"topic": "Fresh"})).code == 17
            assert send_v2(c, "Fresh").code == 0
            r = nc.invoke(new_request(105, {"topic": "Fresh"}))       # routable at once
            assert r.code == 0, r.remark
            route = r.body_bytes().decode()
            assert broker.address in route and '"writeQueueNums":4' in route
            # a consumer heartbeat creates %RETRY%<group>, also routable at once
            from tests.broker.helpers import heartbeat, sub
            heartbeat(c, "id", "NG", [sub("Fresh")])
            assert nc.invoke(new_request(105, {"topic": "%RETRY%NG"})).code == 0
            r = nc.invoke(new_request(106))
            assert r.code == 0 and broker.config.brokerName in r.body_bytes().decode()
            # close() unregisters
            harness.stop()
            assert nc.invoke(new_request(105, {"topic": "Fresh"})).code == 17
        finally:
            nc.close()
    finally:
        loop_thread.call(ns.close(), CALL_TIMEOUT_S)
