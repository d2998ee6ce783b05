"""HEART_BEAT, NOTIFY_CONSUMER_IDS_CHANGED, consumer list, unregister, channel expiry/close,
CHECK_CLIENT_CONFIG, GET_CONSUMER_RUNNING_INFO relay (README §3.4)."""
from __future__ import annotations

import threading
import time

import orjson

from rmqd.remoting.command import new_request, new_response
from tests.broker.helpers import heartbeat, invoke_raw, sub
from tests.kit.waits import poll


def consumer_list(client, group):
    return client.invoke(new_request(38, {"consumerGroup": group}))


def _drain(client, seconds=0.2):
    client.read_some(seconds)
    return [r for r in client.server_requests if r.code == 40]


def test_heartbeat_registers_and_notifies(broker, harness):
    c1, c2 = harness.client(), harness.client()
    r = consumer_list(c1, "G")
    assert r.code == 1 and r.remark == "no consumer for this group, G"
    r = heartbeat(c1, "id-1", "G", [sub("T")])
    assert r.code == 0 and r.version == 409
    assert broker.topic_config_manager.get("%RETRY%G") is not None
    r = heartbeat(c2, "id-2", "G", [sub("T")])
    assert poll(lambda: any(x.code == 40 for x in (_drain(c1, 0.05))), 3.0, interval=0.02)
    n1 = [x for x in c1.server_requests if x.code == 40]
    assert n1[-1].ext_fields == {"consumerGroup": "G"} and n1[-1].flag & 2
    r = consumer_list(c1, "G")
    assert r.code == 0 and sorted(orjson.loads(r.body_bytes())["consumerIdList"]) == ["id-1", "id-2"]
    # a repeated heartbeat with the same subscriptions changes nothing: no new notification
    before = len([x for x in c1.server_requests if x.code == 40])
    heartbeat(c2, "id-2", "G", [sub("T")])
    time.sleep(0.2)
    assert len(_drain(c1, 0.05)) == before
    # a connection close removes the consumer and notifies the rest
    c2.close()
    assert poll(lambda: consumer_list(c1, "G").code == 0 and
                 orjson.loads(consumer_list(c1, "G").body_bytes())["consumerIdList"] == ["id-1"], 3.0, interval=0.02)
    assert poll(lambda: len(_drain(c1, 0.05)) > before, 3.0, interval=0.02)


def test_unregister_client(broker, client):
    heartbeat(client, "id-1", "G", [sub("T")], producer_group="PG")
    assert broker.producer_manager.get("PG")
    r = client.invoke(new_request(35, {"clientID": "id-1", "producerGroup": "PG", "consumerGroup": "G"}))
    assert r.code == 0
    assert consumer_list(client, "G").code == 1 and not broker.producer_manager.get("PG")
    r = client.invoke(new_request(35, {"producerGroup": "PG"}))
    assert r.code == 1 and "clientID" in r.remark


def test_cpp_heartbeats_and_unregister(broker, client):
    assert invoke_raw(client, "004_").code == 0          # producer heartbeat
    assert broker.producer_manager.get("PG")[0].client_id == "5778-127.0.0.1@DEFAULT"
    assert invoke_raw(client, "025_").code == 0          # C++ 2.x consumer heartbeat, integer enums
    info = broker.consumer_manager.get("CG")
    assert (info.consume_type, info.message_model, info.consume_from_where) == (
        "CONSUME_PASSIVELY", "CLUSTERING", "CONSUME_FROM_LAST_OFFSET")
    assert info.subscriptions["TopicTest"].sub_version == 1795288820757
    r = invoke_raw(client, "026_")
    assert r.code == 0 and orjson.loads(r.body_bytes())["consumerIdList"] == ["127.0.0.1@5931#DEFAULT"]
    assert invoke_raw(client, "018_").code == 0          # unregister consumer CG (producerGroup "")
    assert broker.consumer_manager.get("CG") is None
    assert invoke_raw(client, "005_").code == 0
    assert not broker.producer_manager.get("PG")


def test_subscription_version_rule(broker, client):
    heartbeat(client, "id-1", "G", [sub("T", "A", version=10)])
    heartbeat(client, "id-1", "G", [sub("T", "B", version=5)])        # older: ignored
    assert broker.consumer_manager.find_subscription("G", "T").data["subString"] == "A"
    heartbeat(client, "id-1", "G", [sub("T", "B", version=11)])
    assert broker.consumer_manager.find_subscription("G", "T").data["subString"] == "B"
    heartbeat(client, "id-1", "G", [sub("U", version=12)])            # T dropped
    assert broker.consumer_manager.find_subscription("G", "T") is None


def test_channel_expiry(harness):
    def fast(b):
        b.channel_expired_timeout_ms = 200
        b.channel_scan_interval_s = 0.1
    broker = harness.start(setup=fast)
    c = harness.client()
    heartbeat(c, "id-1", "G", [sub("T")], producer_group="PG")
    assert poll(lambda: broker.consumer_manager.get("G") is None and not broker.producer_manager.get("PG"), 3.0, interval=0.02)


def test_check_client_config(broker, client):
    def check(etype, expr):
        body = {"clientId": "id", "group": "G", "subscriptionData": {
            "expressionType": etype, "subString": expr, "topic": "T", "subVersion": 1}}
        return client.invoke(new_request(46, None, orjson.dumps(body)))
    assert check("TAG", "a || b").code == 0
    assert check("SQL92", "a > 1").code == 0
    assert check("SQL92", "a > ").code == 23


def test_check_client_config_filter_disabled(harness):
    harness.start(enablePropertyFilter=False)
    body = {"clientId": "id", "group": "G", "subscriptionData": {"expressionType": "SQL92", "subString": "a > 1"}}
    r = harness.client().invoke(new_request(46, None, orjson.dumps(body)))
    assert r.code == 1 and "SQL92" in r.remark


def test_consumer_running_info_relay(broker, harness):
    consumer, admin = harness.client(), harness.client()
    heartbeat(consumer, "cid-1", "G", [sub("T")])
    r = admin.invoke(new_request(307, {"consumerGroup": "G", "clientId": "nobody", "jstackEnable": "false"}))
    assert r.code == 1 and r.remark == "The Consumer <G> <nobody> not online"
    result = {}
    th = threading.Thread(target=lambda: result.setdefault("r", admin.invoke(new_request(
        307, {"consumerGroup": "G", "clientId": "cid-1", "jstackEnable": "false"}), 5)))
    th.start()
    deadline = time.monotonic() + 3
    req = None
    while req is None and time.monotonic() < deadline:
        consumer.read_some(0.05)
        req = next((x for x in consumer.server_requests if x.code == 307), None)
    assert req is not None and req.ext_fields["clientId"] == "cid-1"
    answer = new_response(0, None, None, b'{"properties":{"x":"1"}}')
    answer.opaque = req.opaque
    answer.flag = 1
    from rmqd.remoting.command import encode_frame_bytes
    consumer.send_raw(encode_frame_bytes(answer))
    th.join(5)
    assert result["r"].code == 0 and result["r"].body_bytes() == b'{"properties":{"x":"1"}}'


def test_consumer_running_info_timeout(harness):
    harness.start(setup=lambda b: setattr(b, "call_client_timeout", 0.2))
    consumer, admin = harness.client(), harness.client()
    heartbeat(consumer, "cid-1", "G", [sub("T")])
    r = admin.invoke(new_request(307, {"consumerGroup": "G", "clientId": "cid-1"}))
    assert r.code == 207
