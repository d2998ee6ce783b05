"""Delay levels, consumer retry and DLQ through the C++ clients (1.x and 2.x)."""
from __future__ import annotations

import dataclasses
import time

import pytest
from scenarios import PUSH_CONSUMER, Background, create_topic, produce, wait_for

from rmqd.remoting.client import BlockingClient
from rmqd.remoting.command import new_request
from rmqd.store.message import decode_messages

FAST = " ".join(["1s"] * 18)

# A push consumer that fails some bodies every time (and others only the first time), reporting
# each delivery attempt; it stops once it has seen ``attempts`` deliveries of the poison bodies
# and ``expect`` successes, or at the timeout.
FAILING_CONSUMER = r'''
from rocketmq.client import PushConsumer
A = _json.loads(_os.environ['SCENARIO_ARGS'])
c = PushConsumer(A['group'])
c.set_namesrv_addr(NAMESRV)
always = set(A.get('fail_always', []))
state = {'ok': 0, 'poison': 0}

def on_message(msg):
    body = msg.body.decode('utf-8', 'replace')
    emit(op='recv', body=body, topic=msg.topic, reconsume=msg.reconsume_times, t=_time.time())
    if body in always:
        state['poison'] += 1
        return 'RECONSUME_LATER'
    state['ok'] += 1
    return True

subscribe_raw(c, A['topic'], '*', on_message)
c.start()
emit(op='started')
wait_until(lambda: state['ok'] >= A['expect'] and state['poison'] >= A['attempts'], A['timeout'])
_time.sleep(A.get('linger', 0))
emit(op='done', ok=state['ok'], poison=state['poison'])
c.shutdown()
'''


def pull_queue(broker_addr: str, topic: str, queue_id: int = 0) -> list:
    ext = {"consumerGroup": "CG_INSPECT", "topic": topic, "queueId": str(queue_id), "queueOffset": "0",
           "maxMsgNums": "32", "sysFlag": "4", "commitOffset": "0", "suspendTimeoutMillis": "0",
           "subVersion": "0", "subscription": "*"}
    with BlockingClient(broker_addr) as c:
        resp = c.invoke(new_request(11, ext))
    return decode_messages(resp.body_bytes()) if resp.code == 0 and resp.body is not None else []


def set_retry_max_times(rmqd_server, group: str, times: int) -> None:
    """UPDATE_AND_CREATE_SUBSCRIPTIONGROUP (200) when the admin processor answers it, else in-process."""
    body = ('{"groupName":"%s","consumeEnable":true,"consumeFromMinEnable":true,'
            '"consumeBroadcastEnable":true,"retryQueueNums":1,"retryMaxTimes":%d,"brokerId":0,'
            '"whichBrokerWhenConsumeSlowly":1,"notifyConsumerIdsChangedEnable":true}' % (group, times)).encode()
    with BlockingClient(rmqd_server.broker_addr) as c:
        resp = c.invoke(new_request(200, None, body))
    mgr = rmqd_server.broker.subscription_group_manager
    if resp.code != 0:
        mgr.update(dataclasses.replace(mgr.find(group), retry_max_times=times))
    assert mgr.find(group).retry_max_times == times


def precreate_retry_topic(rmqd_server, group: str) -> None:
    """The C++ consumer asks for the %RETRY% route before its first heartbeat creates the topic,
    then only refreshes routes periodically (same with a Java broker); create it up front so a
    retried message is pulled as soon as it is delivered."""
    rmqd_server.broker.topic_config_manager.create_retry_topic(group)


def test_delay_level_2_arrives_after_5s(client, rmqd_server):
    name, python = client
    ns = rmqd_server.namesrv_addr
    topic = f"CompatDelay_{name}"
    # The consumer must find the topic's route at its first lookup: its next one is 30 s later.
    create_topic(rmqd_server.broker_addr, topic)
    consumer = Background(python, PUSH_CONSUMER, ns, dict(topic=topic, group=f"CG_delay_{name}", expect=1,
                                                          timeout=25, linger=0.5), timeout=40)
    sent = produce(python, ns, topic, 1, "sync", prefix="late", delay_level=2)
    (s,) = sent.events_of("send")
    assert s["status"] == 0
    res = consumer.result(45)
    (r,) = res.events_of("recv")
    assert r["body"] == "late-0" and r["topic"] == topic
    elapsed = r["t"] - s["ts"]
    assert 5.0 <= elapsed < 7.0, elapsed


@pytest.mark.rmqd_broker(messageDelayLevel=FAST)
def test_failed_message_is_redelivered_with_reconsume_times_1(client, rmqd_server):
    name, python = client
    ns = rmqd_server.namesrv_addr
    topic = f"CompatRetry_{name}"
    produce(python, ns, topic, 1, "sync", prefix="warm")
    precreate_retry_topic(rmqd_server, f"CG_retry_{name}")
    consumer = Background(python, PUSH_CONSUMER, ns,
                          dict(topic=topic, group=f"CG_retry_{name}", expect=4, timeout=30, linger=1.0,
                               fail_bodies=["r-1"]), timeout=45)
    time.sleep(2.0)       # a new group starts at offset 0 (messages in memory): warm-0 is the 4th
    produce(python, ns, topic, 3, "sync", prefix="r")
    res = consumer.result(50)
    recv = [(e["body"], e["reconsume"]) for e in res.events_of("recv") if e["body"].startswith("r-")]
    assert ("r-1", 0) in recv and ("r-1", 1) in recv, recv
    assert sorted(b for b, _ in recv) == ["r-0", "r-1", "r-1", "r-2"], recv
    first, retried = [e for e in res.events_of("recv") if e["body"] == "r-1"]
    assert retried["topic"] == topic         # the client restores the topic from RETRY_TOPIC
    assert 0.9 <= retried["t"] - first["t"] < 4.0    # level 3 = 1 s here, + pull wake-up


@pytest.mark.rmqd_broker(messageDelayLevel=FAST)
def test_message_lands_in_dlq_after_max_retries(client, rmqd_server):
    name, python = client
    ns, broker = rmqd_server.namesrv_addr, rmqd_server.broker_addr
    topic, group = f"CompatDlq_{name}", f"CG_dlq_{name}"
    set_retry_max_times(rmqd_server, group, 2)
    # 1.x sends no maxReconsumeTimes (group value 2 applies); 2.x sends its own 16 (version >= 121)
    attempts = 3 if name == "cpp1" else 17
    produce(python, ns, topic, 1, "sync", prefix="warm")
    precreate_retry_topic(rmqd_server, group)
    consumer = Background(python, FAILING_CONSUMER, ns,
                          dict(topic=topic, group=group, expect=1, attempts=attempts, timeout=38,
                               fail_always=["poison-0"], linger=1.0), timeout=50)
    time.sleep(2.0)
    produce(python, ns, topic, 1, "sync", prefix="poison")
    dlq = wait_for(lambda: pull_queue(broker, f"%DLQ%{group}"), 40, interval=0.3, what="message in the DLQ")
    res = consumer.result(55)
    tries = [e["reconsume"] for e in res.events_of("recv") if e["body"] == "poison-0"]
    assert tries == list(range(attempts)), tries
    (d,) = dlq
    assert d.body == b"poison-0" and d.reconsume_times == attempts
    # Java's send back to the DLQ sets delay level 0: the record shows DELAY=0
    assert d.properties["RETRY_TOPIC"] == topic and d.properties["DELAY"] == "0"
