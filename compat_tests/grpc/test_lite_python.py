"""5.5 Lite Mode with the PyPI 5.1.2 Python client (LitePushConsumer, LiteSimpleConsumer), unchanged.

Each test runs client programs in the client's own venv and checks what they report: only subscribed
lite topics' messages arrive, subscriptions change while messages are in flight, a restarted consumer
resumes its lite topics, quotas and bad names are refused with the 5.5 codes, idle lite topics expire."""
from __future__ import annotations

import textwrap
import time

import orjson
import pytest
from clientrunner import run_client_script

from rmqd.remoting.command import new_request

PRELUDE = '''
import logging, threading, time
from rocketmq import (ClientConfiguration, Credentials, ConsumeResult, LitePushConsumer, LiteSimpleConsumer,
                      Message, MessageListener, Producer)
ENDPOINT = _os.environ["ENDPOINT"]
CONFIG = ClientConfiguration(ENDPOINT, Credentials("", ""))

def send(p, topic, lite, body):
    m = Message(); m.topic = topic; m.body = body.encode(); m.lite_topic = lite
    return p.send(m)

class Collect(MessageListener):
    def __init__(self, fail_first=0):
        self.got, self.lock, self.fail_first, self.failed = [], threading.Lock(), fail_first, set()
    def consume(self, m):
        with self.lock:
            if len(self.failed) < self.fail_first and m.message_id not in self.failed:
                self.failed.add(m.message_id)
                return ConsumeResult.FAILURE
            self.got.append((m.lite_topic, m.body.decode(), m.delivery_attempt, time.time()))
        return ConsumeResult.SUCCESS

def subscribe(consumer, *names):
    """subscribe_lite, then the whole set at once: the 5.1.2 client sends a PARTIAL_ADD's name as a string, so
    the broker sees its characters; its COMPLETE_ADD (every 30 s, or subscribe_lite_all()) carries the names."""
    for n in names:
        consumer.subscribe_lite(n)
    consumer.subscribe_lite_all()

def wait_for(pred, timeout=20):
    end = time.time() + timeout
    while time.time() < end and not pred():
        time.sleep(0.05)
    return pred()
'''


def run_lite(python, server, script, timeout=90, **env):
    res = run_client_script(python, PRELUDE + textwrap.dedent(script), env={"ENDPOINT": server.grpc_addr, **env},
                            timeout=timeout)
    assert res.returncode == 0 and not res.timed_out, (res.stderr[-3000:], res.events)
    return res


def lite_setup(server, parent, group, **group_attrs):
    server.create_topic(parent, queues=4, message_type="LITE")
    attrs = {"+lite.bind.topic": parent, **{"+" + k: str(v) for k, v in group_attrs.items()}}
    body = orjson.dumps({"groupName": group, "consumeEnable": True, "consumeFromMinEnable": True,
                         "consumeBroadcastEnable": True, "retryQueueNums": 1, "retryMaxTimes": 16, "brokerId": 0,
                         "whichBrokerWhenConsumeSlowly": 1, "notifyConsumerIdsChangedEnable": True,
                         "attributes": attrs})
    resp = server.admin.invoke(new_request(200, None, body), 10)
    assert resp.code == 0, resp.remark


def test_lite_push_consumer_gets_only_its_lite_topics(py5_python, grpc_server):
    lite_setup(grpc_server, "LP1", "GLP1")
    res = run_lite(py5_python, grpc_server, '''
        p = Producer(CONFIG, ("LP1",)); p.startup()
        a, b = Collect(), Collect()
        ca = LitePushConsumer(CONFIG, "GLP1", "LP1", a); ca.startup()
        cb = LitePushConsumer(CONFIG, "GLP1", "LP1", b); cb.startup()
        subscribe(ca, "chat-a", "chat-ab"); subscribe(cb, "chat-b", "chat-ab2")
        for i in range(20):
            send(p, "LP1", "chat-a", f"a{i}"); send(p, "LP1", "chat-b", f"b{i}"); send(p, "LP1", "nobody", f"n{i}")
        ok = wait_for(lambda: len(a.got) >= 20 and len(b.got) >= 20)
        time.sleep(1.0)
        emit(op="done", ok=ok, a=[g[:2] for g in a.got], b=[g[:2] for g in b.got])
        ca.shutdown(); cb.shutdown(); p.shutdown()
    ''')
    done = res.events_of("done")[0]
    assert done["ok"], (done, res.stderr[-4000:])
    assert done["a"] == [["chat-a", f"a{i}"] for i in range(20)]       # in order, nothing else
    assert done["b"] == [["chat-b", f"b{i}"] for i in range(20)]
