"""POP over remoting, byte-exact headers: pop, long polling, ack, batch ack, change invisible time,
redelivery after the invisible time, DLQ after the max attempts, restart in the middle of the
invisible time, and the Java broker's error codes."""
from __future__ import annotations

import threading
import time

import orjson
import pytest

from rmqd.processors.pop_ack import encode_bitset
from rmqd.remoting.client import BlockingClient
from rmqd.remoting.codes import ResponseCode
from rmqd.remoting.command import new_request
from rmqd.testing import EmbeddedServer
from tests.kit.waits import poll
from tests.pop.pop_helpers import (BATCH_ACK, NOTIFICATION, PEEK, POLLING_INFO, ack, change_invisible, create_group,
                                 create_topic, extra_info, pop, popped, send)

BROKER = {"brokerIP1": "127.0.0.1", "autoCreateSubscriptionGroup": "true"}


@pytest.fixture(scope="module")
def server():
    with EmbeddedServer(broker_properties=BROKER) as s:
        yield s


_n = iter(range(1000))


@pytest.fixture()
def names(client):
    i = next(_n)
    topic, group = f"PopT{i}", f"PopG{i}"
    create_topic(client, topic)
    create_group(client, group)
    return topic, group


def test_pop_response_fields_are_javas(client, names):
    topic, group = names
    uniq = [send(client, topic, f"m{i}".encode()) for i in range(3)]
    resp = pop(client, topic, group, invisible=60000)
    assert resp.code == 0 and resp.remark == "FOUND"
    e = resp.ext_fields
    assert set(e) == {"popTime", "invisibleTime", "reviveQid", "restNum", "startOffsetInfo", "msgOffsetInfo"}
    assert e["invisibleTime"] == "60000" and e["restNum"] == "0"
    assert e["startOffsetInfo"] == "0 0 0" and e["msgOffsetInfo"] == "0 0 0,1,2"
    assert 0 <= int(e["reviveQid"]) < 8 and abs(int(e["popTime"]) - time.time() * 1000) < 5000
    msgs = popped(resp)
    assert [m.body for m in msgs] == [b"m0", b"m1", b"m2"]
    assert [m.properties["UNIQ_KEY"] for m in msgs] == uniq
    # nothing left: the next pop times out as Java's does
    t0 = time.monotonic()
    again = pop(client, topic, group, poll=300)
    assert (again.code, again.remark) == (210, "NO_MESSAGE_IN_QUEUE")
    assert time.monotonic() - t0 >= 0.25
    assert again.ext_fields["startOffsetInfo"] == "" and again.body is None


def test_max_msg_nums_and_queue_split(client, names):
    topic, group = names
    for i in range(5):
        send(client, topic, b"x")
    resp = pop(client, topic, group, max_nums=2)
    assert resp.ext_fields["msgOffsetInfo"] == "0 0 0,1" and resp.ext_fields["restNum"] == "3"
    resp = pop(client, topic, group, queue_id=0, max_nums=32)
    assert resp.ext_fields["startOffsetInfo"] == "0 0 2" and resp.ext_fields["msgOffsetInfo"] == "0 0 2,3,4"


def test_long_poll_is_woken_by_a_send(client, server, names):
    topic, group = names
    out = {}
    c2 = BlockingClient(server.broker_addr)

    def poller():
        t0 = time.monotonic()
        out["resp"] = pop(c2, topic, group, poll=8000, timeout=15)
        out["took"] = time.monotonic() - t0

    th = threading.Thread(target=poller)
    th.start()
    time.sleep(0.3)
    send(client, topic, b"late")
    th.join(15)
    c2.close()
    assert out["resp"].code == 0 and popped(out["resp"])[0].body == b"late"
    assert out["took"] < 5


@pytest.mark.slow
def test_unacked_message_comes_back_from_the_retry_topic(client, names):
    topic, group = names
    uniq = send(client, topic, b"again", tags="TagA")
    first = pop(client, topic, group, invisible=1000)
    m = popped(first)[0]
    assert m.reconsume_times == 0
    resp = poll(lambda: (r := pop(client, topic, group, invisible=60000)).code == 0 and r, timeout=10)
    assert resp, "not redelivered after the invisible time"
    m2 = popped(resp)[0]
    assert m2.topic == f"%RETRY%{group}_{topic}" and resp.ext_fields["startOffsetInfo"].startswith("1 0 ")
    assert m2.reconsume_times == 1 and m2.body == b"again"
    assert m2.properties["UNIQ_KEY"] == uniq and m2.properties["TAGS"] == "TagA"
    assert m2.properties["RETRY_TOPIC"] == topic
    # acked (retry flag 1 in the extraInfo), it stays gone
    extra = extra_info(resp, m2)
    assert extra.split(" ")[4] == "1"
    assert ack(client, topic, group, extra, m2.queue_offset).code == 0
    time.sleep(1.2)
    assert pop(client, topic, group, poll=0).code == 210


def test_ack_and_batch_ack_prevent_redelivery(client, names):
    topic, group = names
    for i in range(4):
        send(client, topic, f"b{i}".encode())
    resp = pop(client, topic, group, invisible=1000, max_nums=1)
    m = popped(resp)[0]
    assert ack(client, topic, group, extra_info(resp, m), m.queue_offset).code == 0
    resp = pop(client, topic, group, invisible=1000)
    msgs = popped(resp)
    assert len(msgs) == 3
    e = resp.ext_fields
    so = int(e["startOffsetInfo"].split(" ")[2])
    body = {"brokerName": "broker-a", "acks": [{
        "c": group, "t": topic, "r": "0", "so": so, "q": 0, "rq": int(e["reviveQid"]), "pt": int(e["popTime"]),
        "it": int(e["invisibleTime"]), "b": encode_bitset([m.queue_offset - so for m in msgs])}]}
    assert client.invoke(new_request(BATCH_ACK, None, orjson.dumps(body)), 5).code == 0
    time.sleep(1.5)
    assert pop(client, topic, group).code == 210


@pytest.mark.slow
def test_change_invisible_time(client, names):
    topic, group = names
    send(client, topic, b"slow")
    resp = pop(client, topic, group, invisible=1000)
    m = popped(resp)[0]
    ch = change_invisible(client, topic, group, extra_info(resp, m), m.queue_offset, 4000)
    assert ch.code == 0 and set(ch.ext_fields) == {"popTime", "invisibleTime", "reviveQid"}
    assert ch.ext_fields["invisibleTime"] == "4000"
    time.sleep(1.5)
    assert pop(client, topic, group).code == 210           # the old deadline passed: still invisible
    new_extra = f"{m.queue_offset} {ch.ext_fields['popTime']} 4000 {ch.ext_fields['reviveQid']} 0 broker-a 0 " \
                f"{m.queue_offset}"
    assert ack(client, topic, group, new_extra, m.queue_offset).code == 0
    time.sleep(3)
    assert pop(client, topic, group).code == 210


def test_dlq_after_max_attempts(client, names):
    topic, group = names
    create_group(client, group, retry_max_times=1)
    uniq = send(client, topic, b"poison")
    attempts = 0
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and attempts < 2:
        resp = pop(client, topic, group, invisible=500, poll=1000)
        attempts += len(popped(resp))
    assert attempts == 2                                    # first delivery + retryMaxTimes redeliveries
    dlq = f"%DLQ%{group}"
    got = poll(lambda: (r := pop(client, dlq, "dlq-reader", init_mode=1)).code == 0 and popped(r), timeout=5)
    # stored as a 5.x consumer's send-back puts it there: one attempt more, delay level 0
    assert got and got[0].properties["UNIQ_KEY"] == uniq and got[0].reconsume_times == 3
    assert got[0].properties["DELAY"] == "0"
    assert pop(client, topic, group, poll=700).code == 210   # not delivered a third time


def test_errors_as_java(client, names, server):
    topic, group = names
    r = pop(client, "NoSuchTopic", group)
    assert r.code == 17 and r.remark.startswith("topic[NoSuchTopic] not exist, apply first please!")
    r = pop(client, topic, group, max_nums=33)
    assert r.code == 29 and r.remark == "the broker[127.0.0.1] pop message's num is greater than 32"
    r = pop(client, topic, group, queue_id=5)
    assert r.code == 29 and r.remark.startswith("queueId[5] is illegal, topic:[PopT")
    r = ack(client, topic, group, "garbage", 0)             # Java 5.5: ExtraInfoUtil's IllegalArgumentException
    assert r.code == 1 and r.remark.startswith("java.lang.IllegalArgumentException: ")
    send(client, topic, b"x")
    assert ack(client, topic, group, f"0 {int(time.time()*1000)} 1000 0 0 broker-a 0 99", 99).code == 208
    r = client.invoke(new_request(200050, {"consumerGroup": group, "topic": topic}), 5)
    assert r.code == 210               # Java 5.5: absent numbers are 0 (no messages asked for), not refused


def test_unknown_group_without_auto_create(tmp_path):
    with EmbeddedServer(broker_properties={"autoCreateSubscriptionGroup": "false"}) as s:
        c = BlockingClient(s.broker_addr)
        create_topic(c, "T1")
        r = pop(c, "T1", "NoGroup")
        assert r.code == 26 and r.remark.startswith("subscription group [NoGroup] does not exist")
        c.close()


def test_peek_notification_polling_info(client, names):
    topic, group = names
    n = client.invoke(new_request(NOTIFICATION, {"consumerGroup": group, "topic": topic, "queueId": "-1",
                                                 "pollTime": "200", "bornTime": "0"}), 5)
    assert n.code == 0 and n.ext_fields["hasMsg"] == "false"
    send(client, topic, b"peek-me")
    n = client.invoke(new_request(NOTIFICATION, {"consumerGroup": group, "topic": topic, "queueId": "-1",
                                                 "pollTime": "200", "bornTime": "0"}), 5)
    assert n.ext_fields["hasMsg"] == "true"
    p = client.invoke(new_request(PEEK, {"consumerGroup": group, "topic": topic, "queueId": "0", "maxMsgNums": "4"}), 5)
    assert p.code == 0 and popped(p)[0].body == b"peek-me"
    assert pop(client, topic, group).code == 0             # peek did not consume it
    info = client.invoke(new_request(POLLING_INFO, {"consumerGroup": group, "topic": topic, "queueId": "0"}), 5)
    assert info.code == 0 and info.ext_fields == {"pollingNum": "0"}


def test_query_assignment_and_request_mode(client, names, server):
    topic, group = names
    body = {"topic": topic, "consumerGroup": group, "clientId": "c1", "strategyName": "AVG",
            "messageModel": "CLUSTERING"}
    r = client.invoke(new_request(400, None, orjson.dumps(body)), 5)
    assert r.code == 0 and orjson.loads(r.body_bytes()) == {}   # c1 is not online: Java 5.5 leaves the list out
    mode = {"topic": topic, "consumerGroup": group, "mode": "POP", "popShareQueueNum": 0}
    assert client.invoke(new_request(401, None, orjson.dumps(mode)), 5).code == 0
    r = client.invoke(new_request(400, None, orjson.dumps(body)), 5)
    assert orjson.loads(r.body_bytes()) == {}                # POP mode too wants the group online (Java 5.5)
    online = {"clientID": "c1", "producerDataSet": [], "consumerDataSet": [{
        "groupName": group, "consumeType": "CONSUME_PASSIVELY", "messageModel": "CLUSTERING",
        "consumeFromWhere": "CONSUME_FROM_LAST_OFFSET", "subscriptionDataSet": [], "unitMode": False}]}
    assert client.invoke(new_request(34, None, orjson.dumps(online)), 5).code == 0
    r = client.invoke(new_request(400, None, orjson.dumps(body)), 5)
    assert orjson.loads(r.body_bytes())["messageQueueAssignments"] == [
        {"messageQueue": {"topic": topic, "brokerName": "broker-a", "queueId": -1}, "mode": "POP"}]
    server.restart()                                        # the mode is kept (messageRequestMode.json)
    with BlockingClient(server.broker_addr) as c2:
        assert c2.invoke(new_request(34, None, orjson.dumps(online)), 5).code == 0
        r = c2.invoke(new_request(400, None, orjson.dumps(body)), 5)
        assert orjson.loads(r.body_bytes())["messageQueueAssignments"][0]["mode"] == "POP"


def test_restart_in_the_middle_of_the_invisible_time_loses_nothing(tmp_path):
    with EmbeddedServer(store_dir=str(tmp_path), broker_properties=BROKER) as s:
        c = BlockingClient(s.broker_addr)
        create_topic(c, "RT")
        create_group(c, "RG")
        uniq = [send(c, "RT", f"r{i}".encode()) for i in range(3)]
        resp = pop(c, "RT", "RG", invisible=2000)
        msgs = popped(resp)
        assert len(msgs) == 3
        assert ack(c, "RT", "RG", extra_info(resp, msgs[0]), msgs[0].queue_offset).code == 0
        c.close()
        s.restart()
        c = BlockingClient(s.broker_addr)
        got = []
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and len(got) < 2:
            got += popped(pop(c, "RT", "RG", invisible=60000, poll=500))
        assert sorted(m.properties["UNIQ_KEY"] for m in got) == sorted(uniq[1:])
        assert pop(c, "RT", "RG", poll=800).code == 210     # nothing twice, the acked one not at all
        c.close()


def test_renewed_invisible_time_survives_a_restart(tmp_path):
    with EmbeddedServer(store_dir=str(tmp_path), broker_properties=BROKER) as s:
        c = BlockingClient(s.broker_addr)
        create_topic(c, "RN")
        create_group(c, "RNG")
        send(c, "RN", b"renewed")
        resp = pop(c, "RN", "RNG", invisible=1500)
        m = popped(resp)[0]
        e = resp.ext_fields
        key = ("RN", "RNG", 0, 0, int(e["popTime"]))
        assert s.broker.pop_service.renew([key], 60000, 5000) == [key]
        c.close()
        s.restart()
        c = BlockingClient(s.broker_addr)
        time.sleep(2)                                        # past the first 1.5 s
        assert pop(c, "RN", "RNG", poll=500).code == 210     # still invisible: the renewal was replayed
        assert ack(c, "RN", "RNG", extra_info(resp, m), m.queue_offset).code == 0   # the old handle still acks
        assert s.broker.pop_service.checkpoint_count == 0
        c.close()


def test_change_invisible_time_refuses_the_queue_max_offset_as_5x(client, names):
    """5.x (apache/rocketmq#9187) answers NO_MESSAGE to a change of invisible time at the queue's max offset (no
    message there yet); an ack there is still answered as before (AckMessageProcessor checks ``> max``)."""
    topic, group = names
    send(client, topic, b"one")
    resp = pop(client, topic, group, invisible=60000)
    m = popped(resp)[0]
    beyond = m.queue_offset + 1                                     # the queue's max offset
    extra = f"{beyond} {resp.ext_fields['popTime']} 60000 {resp.ext_fields['reviveQid']} 0 broker-a " \
            f"{m.queue_id} {beyond}"
    assert change_invisible(client, topic, group, extra, beyond, 4000).code == ResponseCode.NO_MESSAGE
    assert change_invisible(client, topic, group, extra_info(resp, m), m.queue_offset, 4000).code == 0
