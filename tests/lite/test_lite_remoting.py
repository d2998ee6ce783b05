"""Lite Mode over remoting (5.5 codes): LITE_SUBSCRIPTION_CTL, POP_LITE_MESSAGE with its pre-checks and its
records' INNER_MULTI_* properties, ACK_MESSAGE with liteTopic (a handle built as the 5.5 proxy builds it),
the admin info codes."""
from __future__ import annotations

import time

import orjson
import pytest

from rmqd.lite.remoting import with_properties
from rmqd.remoting.client import BlockingClient
from rmqd.remoting.command import new_request
from rmqd.store.message import decode_message, decode_messages, encode_properties
from rmqd.testing import EmbeddedServer

CTL, POP_LITE = 200071, 200070


@pytest.fixture(scope="module")
def srv():
    s = EmbeddedServer(broker_properties={"brokerIP1": "127.0.0.1", "autoCreateSubscriptionGroup": "false"}).start()
    c = BlockingClient(s.broker_addr)
    for name, kind in (("RL", "LITE"), ("RN", "NORMAL")):
        r = c.invoke(new_request(17, {"topic": name, "readQueueNums": "2", "writeQueueNums": "2", "perm": "6",
                                      "attributes": f"+message.type={kind}"}), 5)
        assert r.code == 0, r.remark
    for name, attrs in (("RG", {"+lite.bind.topic": "RL"}), ("RX", {"+lite.bind.topic": "RN"}), ("RP", {})):
        r = c.invoke(new_request(200, None, orjson.dumps({"groupName": name, "attributes": attrs})), 5)
        assert r.code == 0, r.remark
    yield s, c
    c.close()
    s.stop()
    s.cleanup()


def send(c, lite, body, topic="RL"):
    props = encode_properties({"__LITE_TOPIC": lite, "UNIQ_KEY": body})
    r = c.invoke(new_request(10, {"producerGroup": "p", "topic": topic, "defaultTopic": "TBW102",
                                  "defaultTopicQueueNums": "4", "queueId": "0", "sysFlag": "0",
                                  "bornTimestamp": str(int(time.time() * 1000)), "flag": "0",
                                  "properties": props}, body.encode()), 5)
    return r


def pop(c, group="RG", topic="RL", client="rc-1", n=32, poll=500, born=None, invisible=20000):
    return c.invoke(new_request(POP_LITE, {"clientId": client, "consumerGroup": group, "topic": topic,
                                           "maxMsgNum": str(n), "invisibleTime": str(invisible),
                                           "pollTime": str(poll),
                                           "bornTime": str(int(time.time() * 1000) if born is None else born)}), 5)


def ctl(c, action, names, client="rc-1", group="RG", topic="RL"):
    body = {"subscriptionSet": [{"action": action, "clientId": client, "group": group, "topic": topic,
                                 "liteTopicSet": names, "version": 0}]}
    return c.invoke(new_request(CTL, None, orjson.dumps(body)), 5)


def test_with_properties_keeps_the_record_valid():
    from rmqd.store.message import MessageToStore
    import tempfile
    from rmqd.store.message_store import MessageStore
    from tests.store.conftest import small_config
    with tempfile.TemporaryDirectory() as d:
        st = MessageStore(small_config(d))
        st.start()
        try:
            r = st.put_message(MessageToStore(topic="T", queue_id=0, body=b"hello",
                                              properties=encode_properties({"a": "1"})))
            rec = st.read_message(r.wrote_offsets[0])
        finally:
            st.shutdown()
    m = decode_message(with_properties(rec, {"INNER_MULTI_QUEUE_OFFSET": "7"}))
    assert m.body == b"hello" and m.properties["a"] == "1" and m.properties["INNER_MULTI_QUEUE_OFFSET"] == "7"


def test_pop_lite_pre_checks(srv):
    _, c = srv
    assert pop(c, born=int(time.time() * 1000) - 10_000, poll=0).code == 210          # POLLING_TIMEOUT
    assert pop(c, n=33).code == 29                                                  # INVALID_PARAMETER
    assert pop(c, topic="nope").code == 17                                          # TOPIC_NOT_EXIST
    assert pop(c, topic="RN", group="RX").code == 29                                # not a LITE topic
    assert pop(c, group="nope").code == 26                                          # SUBSCRIPTION_GROUP_NOT_EXIST
    assert pop(c, group="RP").code == 29                                            # not bound to RL
    assert c.invoke(new_request(CTL, None, b""), 5).code == 604                     # ILLEGAL_OPERATION
    assert ctl(c, "PARTIAL_ADD", ["ok"], group="RP").code != 0


def test_subscribe_pop_ack_over_remoting(srv):
    s, c = srv
    assert ctl(c, "PARTIAL_ADD", ["r-a", "r-b"]).code == 0
    for i in range(3):
        assert send(c, "r-a", f"a{i}").code == 0
        assert send(c, "r-b", f"b{i}").code == 0
        assert send(c, "r-c", f"c{i}").code == 0
    resp = pop(c, poll=1000)
    assert resp.code == 0, resp.remark
    msgs = decode_messages(resp.body)
    assert sorted(m.body for m in msgs) == sorted(b"%s%d" % (k, i) for k in (b"a", b"b") for i in range(3))
    counts = resp.ext_fields["orderCountInfo"].split(";")
    assert counts == ["0"] * 6 and resp.ext_fields["reviveQid"] == "999"
    pop_time, invisible = resp.ext_fields["popTime"], resp.ext_fields["invisibleTime"]
    for m in msgs:                 # the receipt as the 5.5 proxy builds it: offset = INNER_MULTI_QUEUE_OFFSET
        off = m.properties["INNER_MULTI_QUEUE_OFFSET"]
        lite = m.properties["__LITE_TOPIC"]
        assert m.properties["INNER_MULTI_DISPATCH"] == f"%LMQ%$RL${lite}"
        extra = f"{off} {pop_time} {invisible} 999 0 {s.broker.config.brokerName} 0 {off}"
        r = c.invoke(new_request(200051, {"consumerGroup": "RG", "topic": "RL", "queueId": "0", "extraInfo": extra,
                                          "offset": off, "liteTopic": lite}), 5)
        assert r.code == 0, r.remark
    offsets = s.broker.consumer_offset_manager
    assert offsets.query_offset("RG", "%LMQ%$RL$r-a", 0) == 3
    assert s.broker.pop_service.inflight() == {} or all(not k[0].startswith("%LMQ%$RL") for k in
                                                         s.broker.pop_service.inflight())
    assert pop(c, poll=200).code == 210                                  # nothing more: POLLING_TIMEOUT
    info = orjson.loads(c.invoke(new_request(200074), 5).body)
    assert info["currentLmqNum"] >= 3 and info["liteSubscriptionCount"] >= 2
    # as 5.5's LiteMetadataUtil: each LITE topic's lite.topic.expiration (-1: unset), each bind topic's lite groups
    assert info["topicMeta"] == {"RL": -1} and info["groupMeta"] == {"RL": ["RG"], "RN": ["RX"]}
    topic_info = orjson.loads(c.invoke(new_request(200076, {"parentTopic": "RL", "liteTopic": "r-a"}), 5).body)
    assert topic_info["topicOffset"]["maxOffset"] == 3 and topic_info["subscriber"] == [
        {"clientId": "rc-1", "group": "RG"}]
    client_info = orjson.loads(c.invoke(new_request(200077, {"clientId": "rc-1"}), 5).body)
    assert client_info["liteTopicSet"] == ["r-a", "r-b"]
    group_info = orjson.loads(c.invoke(new_request(200078, {"group": "RG"}), 5).body)
    assert group_info["totalLagCount"] == 3 and group_info["lagCountTopK"] == [{"liteTopic": "r-c", "lagCount": 3}]
    parent = orjson.loads(c.invoke(new_request(200075, {"topic": "RL"}), 5).body)
    assert parent["groups"] == ["RG"] and parent["liteTopicCount"] >= 3
    assert ctl(c, "COMPLETE_REMOVE", []).code == 0
    assert c.invoke(new_request(200077, {"clientId": "rc-1"}), 5).code != 0


def test_a_lite_record_names_its_lmq_and_a_normal_topic_record_does_not(srv):
    """As 5.5's send processor: the stored record of a lite message on a LITE parent carries INNER_MULTI_DISPATCH
    (a 5.x client sees it among the user properties); on a NORMAL topic the lite property is stored as it came."""
    s, c = srv
    for topic in ("RL", "RN"):
        r = send(c, "stored-1", f"rec-{topic}", topic=topic)
        assert r.code == 0, r.remark
        raw = s.broker.store.read_message(int(r.ext_fields["msgId"][-16:], 16))
        props = decode_message(raw).properties
        assert props["__LITE_TOPIC"] == "stored-1"
        assert props.get("INNER_MULTI_DISPATCH") == ("%LMQ%$RL$stored-1" if topic == "RL" else None)


def test_lite_admin_codes_refuse_a_parent_that_is_not_lite_as_java(srv):
    """GET_PARENT_TOPIC_INFO / GET_LITE_TOPIC_INFO: Java's LiteManagerProcessor checks; 5.5's mqadmin prints
    ``[broker] error.`` for them."""
    _, c = srv
    for topic, answer in (("RN", (29, "Topic [RN] type not match.")),
                          ("NoSuchParent", (17, "Topic [NoSuchParent] not exist."))):
        for code, ext in ((200075, {"topic": topic}), (200076, {"parentTopic": topic, "liteTopic": "l1"})):
            r = c.invoke(new_request(code, ext), 5)
            assert (r.code, r.remark) == answer, (code, topic)


def test_broker_lite_info_counts_as_java(srv):
    """GET_BROKER_LITE_INFO: the store type setting, the topics with consume queues, the whole offset table."""
    s, c = srv
    info = orjson.loads(c.invoke(new_request(200074), 5).body)
    assert info["storeType"] == "default"
    assert info["cqTableSize"] == len(s.broker.store.topics())
    assert info["offsetTableSize"] == len(s.broker.consumer_offset_manager.table)
