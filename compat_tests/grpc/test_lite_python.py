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
        end = time.time() + 10
        while True:      # the client's quota is 0 until the broker's Settings arrive (asynchronously)
            try:
                consumer.subscribe_lite(n)
                break
            except Exception as e:
                if "quota: 0" not in str(e) or time.time() > end:
                    raise
                time.sleep(0.05)
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


def test_retry_simple_consumer_invisible_and_unsubscribe(py5_python, grpc_server):
    """Push: a failed message comes back with delivery attempt 2 (the others of its batch once). Simple: ack, change invisible time, redelivery, and nothing of a lite topic after its
    unsubscribe returns."""
    lite_setup(grpc_server, "LP2", "GLP2")
    lite_setup(grpc_server, "LP3", "GLP3")
    res = run_lite(py5_python, grpc_server, '''
        p = Producer(CONFIG, ("LP2", "LP3")); p.startup()
        col = Collect(fail_first=1)
        push = LitePushConsumer(CONFIG, "GLP2", "LP2", col); push.startup()
        subscribe(push, "retry-me")
        for i in range(3):
            send(p, "LP2", "retry-me", f"r{i}")
        wait_for(lambda: len(col.got) >= 3, 30)
        emit(op="push", got=[g[:3] for g in col.got])
        push.shutdown()

        sc = LiteSimpleConsumer("LP3", CONFIG, "GLP3", await_duration=2); sc.startup()
        subscribe(sc, "x", "y")
        for i in range(4):
            send(p, "LP3", "x", f"x{i}"); send(p, "LP3", "y", f"y{i}")
        got, end = [], time.time() + 20
        while len(got) < 8 and time.time() < end:
            for m in sc.receive(32, 10) or []:
                got.append(m)
        emit(op="first", got=[(m.lite_topic, m.body.decode(), m.delivery_attempt) for m in got])
        # ack all of y and x0..x2; x3: longer invisible time, then back with attempt 2 (not acked)
        for m in got:
            if m.body != b"x3":
                sc.ack(m)
            else:
                sc.change_invisible_duration(m, 2)
        t0 = time.time()
        again, end = [], time.time() + 15
        while not again and time.time() < end:
            again = [m for m in sc.receive(32, 10) or []]
        emit(op="again", got=[(m.lite_topic, m.body.decode(), m.delivery_attempt) for m in again], after=time.time() - t0)
        for m in again:
            sc.ack(m)
        sc.unsubscribe_lite("y")
        for i in range(3):
            send(p, "LP3", "y", f"late-y{i}"); send(p, "LP3", "x", f"late-x{i}")
        late, end = [], time.time() + 6
        while time.time() < end and len([m for m in late if m.lite_topic == "x"]) < 3:
            for m in sc.receive(32, 10) or []:
                late.append(m); sc.ack(m)
        emit(op="late", got=[(m.lite_topic, m.body.decode()) for m in late])
        sc.shutdown(); p.shutdown()
    ''')
    push = res.events_of("push")[0]["got"]
    assert sorted(map(tuple, push)) == [("retry-me", "r0", 2), ("retry-me", "r1", 1), ("retry-me", "r2", 1)]
    first = res.events_of("first")[0]["got"]
    assert sorted(b for _, b, _ in first) == sorted([f"x{i}" for i in range(4)] + [f"y{i}" for i in range(4)])
    assert [b for lt, b, _ in first if lt == "x"] == ["x0", "x1", "x2", "x3"]
    again = res.events_of("again")[0]
    assert again["got"] == [["x", "x3", 2]] and again["after"] >= 1.0
    late = res.events_of("late")[0]["got"]
    assert [b for lt, b in late if lt == "x"] == ["late-x0", "late-x1", "late-x2"]
    assert not [b for lt, b in late if lt == "y"]          # unsubscribed: nothing of y any more


def test_subscription_churn_with_messages_in_flight(py5_python, grpc_server):
    """One consumer keeps its lite topics while another subscribes and unsubscribes others under a steady
    stream: the first loses nothing; the second never gets a message sent after its unsubscribe returned."""
    lite_setup(grpc_server, "LP4", "GLP4")
    res = run_lite(py5_python, grpc_server, '''
        p = Producer(CONFIG, ("LP4",)); p.startup()
        keep, churn = Collect(), Collect()
        ck = LitePushConsumer(CONFIG, "GLP4", "LP4", keep); ck.startup()
        cc = LitePushConsumer(CONFIG, "GLP4", "LP4", churn); cc.startup()
        subscribe(ck, "keep-0", "keep-1", "keep-2")
        sent_keep, unsub_at, sends = [], {}, []
        stop = threading.Event()
        def produce():
            i = 0
            while not stop.is_set():
                for k in range(3):
                    send(p, "LP4", f"keep-{k}", f"k{k}-{i}"); sent_keep.append(f"k{k}-{i}")
                for c in range(4):
                    sends.append((f"churn-{c}", f"c{c}-{i}", time.time())); send(p, "LP4", f"churn-{c}", f"c{c}-{i}")
                i += 1
                time.sleep(0.01)
        t = threading.Thread(target=produce); t.start()
        for rnd in range(6):
            c = rnd % 4
            subscribe(cc, f"churn-{c}")
            time.sleep(0.4)
            cc.unsubscribe_lite(f"churn-{c}")
            unsub_at[f"churn-{c}"] = time.time()
            time.sleep(0.1)
        stop.set(); t.join()
        wait_for(lambda: len(keep.got) >= len(sent_keep), 30)
        time.sleep(1.0)
        emit(op="done", sent_keep=sent_keep, keep=[g[1] for g in keep.got],
             churn=[(g[0], g[1], g[3]) for g in churn.got], unsub_at=unsub_at, sends=sends)
        ck.shutdown(); cc.shutdown(); p.shutdown()
    ''', timeout=120)
    done = res.events_of("done")[0]
    assert sorted(done["keep"]) == sorted(done["sent_keep"])                # nothing lost, nothing twice
    sent_at = {body: ts for _, body, ts in done["sends"]}
    assert done["churn"], "the churning consumer received nothing while subscribed"
    # the last unsubscribe of each lite topic: nothing sent after it returned reached the consumer
    late = [(lt, body) for lt, body, _ in done["churn"] if sent_at[body] > done["unsub_at"][lt]]
    assert not late, late


def test_restarted_consumer_resumes_its_lite_topics(py5_python, grpc_server):
    """A consumer stops; messages arrive meanwhile; a new consumer (a new client id) of the group subscribing
    the lite topic gets exactly those, not the ones already acked."""
    lite_setup(grpc_server, "LP5", "GLP5")
    res = run_lite(py5_python, grpc_server, '''
        p = Producer(CONFIG, ("LP5",)); p.startup()
        col = Collect()
        c = LitePushConsumer(CONFIG, "GLP5", "LP5", col); c.startup()
        subscribe(c, "session-1")
        for i in range(5):
            send(p, "LP5", "session-1", f"before{i}")
        assert wait_for(lambda: len(col.got) >= 5)
        time.sleep(0.5)
        c.shutdown()
        for i in range(5):
            send(p, "LP5", "session-1", f"while-down{i}")
        col2 = Collect()
        c2 = LitePushConsumer(CONFIG, "GLP5", "LP5", col2); c2.startup()
        subscribe(c2, "session-1")
        wait_for(lambda: len(col2.got) >= 5)
        time.sleep(1.0)
        emit(op="second", first=[g[1] for g in col.got], got=[g[1] for g in col2.got])
        c2.shutdown(); p.shutdown()
    ''')
    ev = res.events_of("second")[0]
    assert ev["first"] == [f"before{i}" for i in range(5)]
    assert ev["got"] == [f"while-down{i}" for i in range(5)]


def test_quota_refusals_with_the_client(py5_python, make_grpc_server):
    server = make_grpc_server(enableLmqQuota="true", maxLmqConsumeQueueNum="3")
    lite_setup(server, "LP6", "GLP6", **{"lite.sub.client.quota": 2})
    server.create_topic("PN6")
    res = run_lite(py5_python, server, '''
        from rocketmq.v5.exception import LiteSubscriptionQuotaExceededException, LiteTopicQuotaExceededException
        p = Producer(CONFIG, ("LP6", "PN6")); p.startup()
        codes = {}
        for i in range(4):
            try:
                send(p, "LP6", f"t{i}", "x")
            except LiteTopicQuotaExceededException as e:
                codes["topic_quota"] = (i, e.code)
        send(p, "LP6", "t0", "an existing lite topic still takes messages")
        try:
            m = Message(); m.topic = "PN6"; m.body = b"x"; m.priority = 3
            p.send(m)
        except Exception as e:
            codes["priority_on_normal"] = (type(e).__name__, getattr(e, "code", None), str(e))
        c = LiteSimpleConsumer("LP6", CONFIG, "GLP6", await_duration=1); c.startup()
        subscribe(c, "a")
        try:
            c.subscribe_lite("bad name!")
        except Exception as e:
            codes["bad_name"] = (type(e).__name__, getattr(e, "code", None))
        subscribe(c, "b")
        try:
            c.subscribe_lite("c")
        except LiteSubscriptionQuotaExceededException as e:
            codes["client_quota"] = e.code
        emit(op="codes", **codes)
        c.shutdown(); p.shutdown()
    ''')
    codes = res.events_of("codes")[0]
    assert codes["topic_quota"] == [3, 42901]              # LITE_TOPIC_QUOTA_EXCEEDED for the 4th lite topic
    # the route says PN6 takes NORMAL only and the Settings say validate_message_type (as the proxy's do): the
    # client refuses the priority message itself (on a server that did not say so: 40014, as test_lite_grpc checks)
    assert codes["priority_on_normal"][1] is None and "not match" in codes["priority_on_normal"][2], codes
    assert codes["client_quota"] == 42902                   # the quota the broker pushed in Settings
    assert codes["bad_name"][1] == 40020                    # ILLEGAL_LITE_TOPIC from the broker


def test_idle_lite_topic_expires(py5_python, make_grpc_server):
    server = make_grpc_server(minLiteTTl="0", liteTtlCheckInterval="200")
    lite_setup(server, "LP7", "GLP7")
    resp = server.admin.invoke(new_request(17, {"topic": "LP7", "readQueueNums": "4", "writeQueueNums": "4",
                                                "perm": "6", "attributes": "+lite.topic.expiration=1"}), 10)
    assert resp.code == 0, resp.remark
    run_lite(py5_python, server, '''
        p = Producer(CONFIG, ("LP7",)); p.startup()
        col = Collect()
        c = LitePushConsumer(CONFIG, "GLP7", "LP7", col); c.startup()
        subscribe(c, "old", "fresh")
        send(p, "LP7", "old", "o1"); send(p, "LP7", "fresh", "f1")
        assert wait_for(lambda: len(col.got) >= 2)
        c.shutdown(); p.shutdown()
    ''')
    lp = server.broker.lite_priority
    index, offsets = lp.lite_store.index, server.broker.consumer_offset_manager
    assert index.exists("LP7", "old") and offsets.query_offset("GLP7", "%LMQ%$LP7$old", 0) == 1
    index.queue("LP7", "fresh").last_store_ts = int(time.time() * 1000) + 3600_000     # keep one fresh
    lp.manager.wall_ms = lambda: int(time.time() * 1000) + 61_000                     # a minute and more later
    deadline = time.time() + 5
    while index.exists("LP7", "old") and time.time() < deadline:
        time.sleep(0.1)
    assert not index.exists("LP7", "old") and index.exists("LP7", "fresh")
    assert offsets.query_offset("GLP7", "%LMQ%$LP7$old", 0) == -1
    lp.manager.wall_ms = lambda: int(time.time() * 1000)
    res = run_lite(py5_python, server, '''
        p = Producer(CONFIG, ("LP7",)); p.startup()
        col = Collect()
        c = LitePushConsumer(CONFIG, "GLP7", "LP7", col); c.startup()
        subscribe(c, "old")
        send(p, "LP7", "old", "o2")
        wait_for(lambda: len(col.got) >= 1)
        emit(op="again", got=[g[1] for g in col.got])
        c.shutdown(); p.shutdown()
    ''')
    assert res.events_of("again")[0]["got"] == ["o2"]              # a new lite topic of the same name
    assert index.queue("LP7", "old").max_offset == 1


def test_priority_order_under_a_backlog(py5_python, grpc_server):
    """Many low-priority messages, then a few high ones: a consumer started afterwards gets the high ones
    first (a SimpleConsumer: in receive order; a PushConsumer: within its first batch)."""
    grpc_server.create_topic("PRIO", queues=8, message_type="PRIORITY")
    res = run_lite(py5_python, grpc_server, '''
        from rocketmq import SimpleConsumer, PushConsumer, FilterExpression
        p = Producer(CONFIG, ("PRIO",)); p.startup()
        for i in range(120):
            m = Message(); m.topic = "PRIO"; m.body = f"low{i}".encode(); m.priority = i % 2
            p.send(m)
        for i in range(5):
            m = Message(); m.topic = "PRIO"; m.body = f"high{i}".encode(); m.priority = 7 + i
            p.send(m)
        orders = {}
        for kind in ("simple", "push"):
            order = orders[kind] = []
            if kind == "simple":
                c = SimpleConsumer(CONFIG, "GPRIO_simple", {"PRIO": FilterExpression()}, await_duration=2); c.startup()
                end = time.time() + 20
                while len(order) < 125 and time.time() < end:
                    for m in c.receive(16, 15) or []:
                        order.append((m.body.decode(), m.priority)); c.ack(m)
            else:
                class L(MessageListener):
                    def consume(self, m):
                        order.append((m.body.decode(), m.priority)); return ConsumeResult.SUCCESS
                c = PushConsumer(CONFIG, "GPRIO_push", L(), {"PRIO": FilterExpression()}, consumption_thread_count=1)
                c.startup()
                wait_for(lambda: len(order) >= 125, 30)
            c.shutdown()
        emit(op="order", **orders)
        p.shutdown()
    ''')
    ev = res.events_of("order")[0]
    for kind in ("simple", "push"):
        order = ev[kind]
        assert len(order) == 125, kind
        highs = [i for i, (body, _) in enumerate(order) if body.startswith("high")]
        assert order[highs[0]][1] >= 7
        if kind == "simple":
            assert highs == [0, 1, 2, 3, 4], order[:8]
            # priorities 7..11 all map to the top queue (8 queues = 8 levels): FIFO among them
            assert [order[i] for i in highs] == [[f"high{i}", 7 + i] for i in range(5)]
            assert order[5][1] == 1                       # then priority 1 before priority 0
        else:
            assert max(highs) < 32, highs                  # all within the first batch
