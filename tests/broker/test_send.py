"""SEND_MESSAGE 10 / 310 / 320 and batches: response fields, checks, auto-create (README §3.2)."""
from __future__ import annotations


from rmqd.remoting.command import new_request
from rmqd.store.message import decode_offset_msg_id
from tests.broker.helpers import batch_body, invoke_raw, messages, pull, send_v2


def test_send_v2_response_fields(broker, client):
    r = send_v2(client, "TopicA", properties="TAGS\x01TagA\x02UNIQ_KEY\x01ABC\x02WAIT\x01true")
    assert r.code == 0, r.remark
    ext = r.ext_fields
    assert ext["queueId"] == "0" and ext["queueOffset"] == "0"
    assert ext["MSG_REGION"] == "DefaultRegion" and ext["TRACE_ON"] == "true"
    ip, port, phys = decode_offset_msg_id(ext["msgId"])
    assert (ip, port, phys) == ("127.0.0.1", broker.server.port, 0)
    r2 = send_v2(client, "TopicA")
    assert r2.ext_fields["queueOffset"] == "1"
    assert decode_offset_msg_id(r2.ext_fields["msgId"])[2] > 0
    # the stored record: CLUSTER added, WAIT dropped, born host = the client socket
    (m, _) = messages(pull(client, "TopicA", subscription="*", sys_flag=4))
    assert m.properties["CLUSTER"] == "DefaultCluster"
    assert "WAIT" not in m.properties and m.properties["TAGS"] == "TagA"
    assert m.born_host == client.sock.getsockname()
    assert m.store_host == ("127.0.0.1", broker.server.port)
    assert m.msg_id == ext["msgId"]


def test_send_v1_full_names(broker, client):
    ext = {"producerGroup": "PG", "topic": "TopicB", "defaultTopic": "TBW102", "defaultTopicQueueNums": "4",
           "queueId": "2", "sysFlag": "0", "bornTimestamp": "1700000000000", "flag": "7",
           "properties": "KEYS\x01k1", "reconsumeTimes": "0", "unitMode": "false", "batch": "false"}
    r = client.invoke(new_request(10, ext, b"body"))
    assert r.code == 0, r.remark
    assert r.ext_fields["queueId"] == "2"
    (m,) = messages(pull(client, "TopicB", queue_id=2, subscription="*", sys_flag=4))
    assert m.flag == 7 and m.body == b"body" and m.born_timestamp == 1700000000000


def test_batch_320_and_310_with_m(broker, client):
    body = batch_body([(b"b1", "TAGS\x01T1\x02UNIQ_KEY\x01U1"), (b"b2", "TAGS\x01T2\x02UNIQ_KEY\x01U2")])
    r = send_v2(client, "TopicC", body, queue_id=1, code=320, properties="WAIT\x01true", m="true")
    assert r.code == 0, r.remark
    ids = r.ext_fields["msgId"].split(",")
    assert len(ids) == 2 and r.ext_fields["queueOffset"] == "0"
    r = send_v2(client, "TopicC", body, queue_id=1, code=310, m="true")
    assert r.code == 0 and r.ext_fields["queueOffset"] == "2"
    msgs = messages(pull(client, "TopicC", queue_id=1, subscription="*", sys_flag=4))
    assert [m.body for m in msgs] == [b"b1", b"b2", b"b1", b"b2"]
    assert [m.msg_id for m in msgs[:2]] == ids
    assert msgs[0].properties["CLUSTER"] == "DefaultCluster" and msgs[1].properties["TAGS"] == "T2"


def test_bad_batch_body(broker, client):
    r = send_v2(client, "TopicC", b"\x00\x00\x00\x05xx", code=320, m="true")
    assert r.code == 13


def test_cpp_frames_send(broker, client):
    for name in ("002_", "020_"):
        r = invoke_raw(client, name)
        assert r.code == 0, (name, r.remark)
        assert r.ext_fields["queueId"] == "0"
    for name in ("003_", "021_"):   # C++ batches: code 10 batch="1", code 310 m="1"
        r = invoke_raw(client, name)
        assert r.code == 0, (name, r.remark)
        assert len(r.ext_fields["msgId"].split(",")) == 2
        assert r.ext_fields["queueId"] == "1"
    msgs = messages(pull(client, "TopicTest", queue_id=1, subscription="*", sys_flag=4))
    assert [m.body for m in msgs] == [b"b1", b"b2", b"b1", b"b2"]


def test_auto_create_from_tbw102(broker, client):
    assert broker.topic_config_manager.get("NewTopic") is None
    r = send_v2(client, "NewTopic", queue_id=3)
    assert r.code == 0
    tc = broker.topic_config_manager.get("NewTopic")
    assert (tc.read_queue_nums, tc.write_queue_nums, tc.perm) == (4, 4, 6)


def test_auto_create_disabled(harness):
    harness.start(autoCreateTopicEnable=False)
    r = send_v2(harness.client(), "NewTopic")
    assert r.code == 17 and "not exist" in r.remark


def test_checks(broker, client):
    assert send_v2(client, "SCHEDULE_TOPIC_XXXX").code == 16
    assert send_v2(client, "RMQ_SYS_TRANS_HALF_TOPIC").code == 16
    r = send_v2(client, "Topic!")
    assert r.code == 1 and "illegal" in r.remark
    r = send_v2(client, "TopicD", queue_id=4)
    assert r.code == 1 and "queueId[4] is illegal" in r.remark
    r = send_v2(client, "TopicD", queue_id=-1)
    assert r.code == 0 and 0 <= int(r.ext_fields["queueId"]) < 4
    r = client.invoke(new_request(310, {"a": "PG", "b": "TopicD"}, b"x"))
    assert r.code == 1 and "<defaultTopic>" in r.remark


def test_retry_topic_to_dlq(broker, client):
    r = send_v2(client, "%RETRY%G1", j="3", l="16")
    assert r.code == 0
    assert broker.topic_config_manager.get("%RETRY%G1") is not None
    assert broker.store.get_max_offset("%RETRY%G1", 0) == 1
    r = send_v2(client, "%RETRY%G1", properties="DELAY\x013", j="16", l="16")
    assert r.code == 0
    assert broker.store.get_max_offset("%DLQ%G1", 0) == 1
    (m,) = messages(pull(client, "%DLQ%G1", group="G1", subscription="*", sys_flag=4))
    assert "DELAY" not in m.properties


def test_transaction_message_rejected_when_configured(harness):
    harness.start(rejectTransactionMessage=True)
    r = send_v2(harness.client(), "TopicT", properties="TRAN_MSG\x01true\x02PGROUP\x01PG", f="4")
    assert r.code == 16 and "transaction" in r.remark
