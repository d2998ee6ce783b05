"""The PyPI RocketMQ 5 Python client (rocketmq-python-client 5.1.2, gRPC) against rmqd, unchanged.

Each test runs one client program in the client's own venv (``py5_python``) and checks what it
reports and what the broker stored."""
from __future__ import annotations

import textwrap


from clientrunner import run_client_script

from rmqd.remoting.command import new_request

PRELUDE5 = '''
import logging, time
from rocketmq import (ClientConfiguration, Credentials, FilterExpression, Message, Producer, SimpleConsumer,
                      PushConsumer, MessageListener, ConsumeResult, TransactionChecker, TransactionResolution)
ENDPOINT = _os.environ["ENDPOINT"]
CONFIG = ClientConfiguration(ENDPOINT, Credentials(_os.environ.get("AK", ""), _os.environ.get("SK", "")))

def receive_all(consumer, want, invisible=10, timeout=20, ack=True):
    got, end = [], time.time() + timeout
    while len(got) < want and time.time() < end:
        for m in consumer.receive(16, invisible) or []:
            got.append(m)
            if ack:
                consumer.ack(m)
    return got

def info(m):
    return dict(id=m.message_id, topic=m.topic, tag=m.tag, keys=sorted(m.keys), props=dict(m.properties),
                body=m.body.decode(), attempt=m.delivery_attempt, group=m.message_group)
'''


def run5(python: str, server, script: str, timeout: float = 60, **env):
    res = run_client_script(python, PRELUDE5 + textwrap.dedent(script), env={"ENDPOINT": server.grpc_addr, **env}, timeout=timeout)
    assert res.returncode == 0 and not res.timed_out, (res.stderr[-3000:], res.events)
    return res


def test_producer_and_simple_consumer(py5_python, grpc_server):
    grpc_server.create_topic("G5Normal")
    grpc_server.create_topic("G5Fifo", message_type="FIFO")
    grpc_server.create_topic("G5Delay", message_type="DELAY")
    res = run5(py5_python, grpc_server, '''
        p = Producer(CONFIG, ("G5Normal", "G5Fifo", "G5Delay"))
        p.startup()
        sent = {}
        for i, (tag, keys) in enumerate([(None, None), ("TagA", None), ("TagB", ("k1", "k2"))]):
            m = Message(); m.topic = "G5Normal"; m.body = f"body-{i}".encode()
            if tag: m.tag = tag
            if keys: m.keys = keys[0]; m.keys = keys[1]
            m.add_property("color", f"c{i}")
            r = p.send(m)
            sent[r.message_id] = i
        for i in range(3):
            m = Message(); m.topic = "G5Fifo"; m.body = f"fifo-{i}".encode(); m.message_group = "order-1"
            p.send(m)
        # the 5.x Python client takes whole seconds: start on a second boundary, so that "+ 3" is 3 s from now
        time.sleep(1.0 - time.time() % 1.0)
        delay_sent = time.time()
        m = Message(); m.topic = "G5Delay"; m.body = b"later"; m.delivery_timestamp = int(delay_sent) + 3
        delay_id = p.send(m).message_id
        emit(op="sent", ids=sent, delay_id=delay_id)
        c = SimpleConsumer(CONFIG, "G5Simple", {"G5Normal": FilterExpression(), "G5Fifo": FilterExpression(),
                                                "G5Delay": FilterExpression()}, await_duration=2)
        c.startup()
        for m in receive_all(c, 7, timeout=25):
            emit(op="got", age=time.time() - delay_sent, **info(m))
        c.shutdown(); p.shutdown()
    ''')
    sent = res.events_of("sent")[0]
    got = {e["id"]: e for e in res.events_of("got")}
    assert len(got) == 7
    for mid, i in sent["ids"].items():
        e = got[mid]
        assert e["body"] == f"body-{i}" and e["props"] == {"color": f"c{i}"} and e["attempt"] == 1
        assert e["tag"] == [None, "TagA", "TagB"][i]
        assert e["keys"] == ([], [], ["k1", "k2"])[i]
    fifo = [e for e in got.values() if e["topic"] == "G5Fifo"]
    assert sorted(e["body"] for e in fifo) == ["fifo-0", "fifo-1", "fifo-2"] and {e["group"] for e in fifo} == {"order-1"}
    delayed = got[sent["delay_id"]]
    assert delayed["body"] == "later" and delayed["age"] >= 2.5, delayed         # 3 s, less a margin for clocks
    # FIFO: one message group, one queue
    stored = [grpc_server.broker.store.get_max_offset("G5Fifo", q) for q in range(4)]
    assert sorted(stored) == [0, 0, 0, 3]


def test_tag_filter_redelivery_change_invisible_and_dlq(py5_python, grpc_server):
    grpc_server.create_topic("G5Retry")
    grpc_server.create_group("G5RetryGroup", retry_max_times=2)
    res = run5(py5_python, grpc_server, '''
        p = Producer(CONFIG, ("G5Retry",)); p.startup()
        for tag in ("skip", "keep"):
            m = Message(); m.topic = "G5Retry"; m.body = tag.encode(); m.tag = tag
            p.send(m)
        c = SimpleConsumer(CONFIG, "G5RetryGroup", {"G5Retry": FilterExpression("keep")}, await_duration=2)
        c.startup()
        # not acked: back after the invisible time with attempt + 1 (same id), up to the max attempts
        for _ in range(3):
            for m in receive_all(c, 1, invisible=1, timeout=10, ack=False):
                emit(op="got", t=time.time(), **info(m))
        # then: the DLQ, nothing more here
        emit(op="after_dlq", n=len(receive_all(c, 1, invisible=1, timeout=4)))
        # change invisible duration: a message extended to 4 s does not come back after 1 s
        m = Message(); m.topic = "G5Retry"; m.body = b"extend"; m.tag = "keep"; p.send(m)
        first = receive_all(c, 1, invisible=1, ack=False)[0]
        c.change_invisible_duration(first, 4)
        changed = time.time()
        again = receive_all(c, 1, invisible=10, timeout=10, ack=False)
        emit(op="late", n=len(again), attempt=again[0].delivery_attempt if again else None,
             after=time.time() - changed)
        c.ack(again[0])
        c.shutdown(); p.shutdown()
    ''', timeout=90)
    got = res.events_of("got")
    assert [e["body"] for e in got] == ["keep"] * 3 and len({e["id"] for e in got}) == 1
    assert [e["attempt"] for e in got] == [1, 2, 3]
    assert res.events_of("after_dlq")[0]["n"] == 0
    late = res.events_of("late")[0]
    assert late["n"] == 1 and late["attempt"] == 2 and late["after"] >= 3.5      # the new 4 s, not the old 1 s
    store = grpc_server.broker.store
    from rmqd.store.message import decode_message
    r = store.get_messages("%DLQ%G5RetryGroup", 0, 0, 10)
    dlq = [decode_message(bytes(b)) for b in r.buffers]
    assert [m.properties["UNIQ_KEY"] for m in dlq] == [got[0]["id"]] and dlq[0].body == b"keep"


def test_transactions_commit_rollback_and_check_back(py5_python, grpc_server):
    grpc_server.create_topic("G5Tx", message_type="TRANSACTION")
    res = run5(py5_python, grpc_server, '''
        class Checker(TransactionChecker):
            def check(self, message):
                emit(op="check", id=message.message_id, body=message.body.decode())
                return TransactionResolution.COMMIT
        p = Producer(CONFIG, ("G5Tx",), checker=Checker()); p.startup()
        ids = {}
        for what in ("commit", "rollback", "orphan"):
            tx = p.begin_transaction()
            m = Message(); m.topic = "G5Tx"; m.body = what.encode(); m.tag = "tx"
            r = p.send(m, tx)
            ids[what] = r.message_id
            if what == "commit": tx.commit()
            elif what == "rollback": tx.rollback()
        emit(op="sent", ids=ids)
        c = SimpleConsumer(CONFIG, "G5TxGroup", {"G5Tx": FilterExpression()}, await_duration=2)
        c.startup()
        got = receive_all(c, 2, timeout=30)
        time.sleep(1)
        got += receive_all(c, 1, timeout=1)
        for m in got:
            emit(op="got", **info(m))
        c.shutdown(); p.shutdown()
    ''', timeout=90)
    ids = res.events_of("sent")[0]["ids"]
    assert sorted(e["body"] for e in res.events_of("got")) == ["commit", "orphan"]
    assert {e["id"] for e in res.events_of("got")} == {ids["commit"], ids["orphan"]}
    checks = res.events_of("check")
    assert checks and {c["id"] for c in checks} == {ids["orphan"]}


def test_push_consumer(py5_python, grpc_server):
    grpc_server.create_topic("G5Push")
    res = run5(py5_python, grpc_server, '''
        import threading
        seen, lock = [], threading.Lock()
        class L(MessageListener):
            def consume(self, m):
                with lock:
                    seen.append(m)
                    first_try = m.body == b"fail-once" and m.delivery_attempt == 1
                return ConsumeResult.FAILURE if first_try else ConsumeResult.SUCCESS
        c = PushConsumer(CONFIG, "G5PushGroup", L(), {"G5Push": FilterExpression()})
        c.startup()
        p = Producer(CONFIG, ("G5Push",)); p.startup()
        for i in range(10):
            m = Message(); m.topic = "G5Push"; m.body = f"push-{i}".encode(); p.send(m)
        m = Message(); m.topic = "G5Push"; m.body = b"fail-once"; p.send(m)
        wait_until(lambda: len({x.message_id for x in seen}) >= 11 and any(
            x.body == b"fail-once" and x.delivery_attempt == 2 for x in seen), timeout=40)
        for m in seen:
            emit(op="got", body=m.body.decode(), attempt=m.delivery_attempt)
        p.shutdown(); c.shutdown()
    ''', timeout=90)
    bodies = [e["body"] for e in res.events_of("got")]
    assert sorted(set(bodies)) == sorted([f"push-{i}" for i in range(10)] + ["fail-once"])
    assert {"body": "fail-once", "attempt": 2, "op": "got"} in res.events_of("got")


def test_fifo_push_consumer_keeps_each_message_group_in_order(py5_python, grpc_server):
    grpc_server.create_topic("G5FifoPush", message_type="FIFO")
    grpc_server.create_group("G5FifoGroup", fifo=True)
    res = run5(py5_python, grpc_server, '''
        import threading
        log, lock, done = [], threading.Lock(), set()
        class L(MessageListener):
            def consume(self, m):
                body = m.body.decode()
                with lock:
                    fail = body == "g1-3" and not any(b == body for b, _ in log)
                    log.append((body, "fail" if fail else "ok"))
                    if not fail:
                        done.add(body)
                time.sleep(0.01)
                return ConsumeResult.FAILURE if fail else ConsumeResult.SUCCESS
        p = Producer(CONFIG, ("G5FifoPush",)); p.startup()
        for i in range(8):
            for g in range(3):
                m = Message(); m.topic = "G5FifoPush"; m.body = f"g{g}-{i}".encode(); m.message_group = f"group-{g}"
                p.send(m)
        c = PushConsumer(CONFIG, "G5FifoGroup", L(), {"G5FifoPush": FilterExpression()})
        c.startup()
        wait_until(lambda: len(done) >= 24, timeout=40)
        for body, outcome in log:
            emit(op="consumed", body=body, outcome=outcome)
        c.shutdown(); p.shutdown()
    ''', timeout=90)
    log = [(e["body"], e["outcome"]) for e in res.events_of("consumed")]
    assert ("g1-3", "fail") in log
    for g in range(3):
        ok = [b for b, outcome in log if b.startswith(f"g{g}-") and outcome == "ok"]
        assert ok == [f"g{g}-{i}" for i in range(8)], (g, ok)          # in order, each once
    seq = [b for b, _ in log]
    assert seq.index("g1-4") > max(i for i, (b, o) in enumerate(log) if b == "g1-3" and o == "ok")


def test_failing_fifo_push_consumer_forwards_to_the_dlq(py5_python, grpc_server, monkeypatch):
    """retryMaxTimes=1: the client's FIFO consume service tries twice, then calls
    ForwardMessageToDeadLetterQueue itself; the message lands in %DLQ%<group> and is not delivered again.
    (A concurrent push consumer nacks instead, and the broker's revive moves it to the DLQ.)"""
    grpc_server.create_topic("G5Poison", message_type="FIFO")
    grpc_server.create_group("G5PoisonGroup", retry_max_times=1, fifo=True)
    settles = grpc_server.endpoint.service.settles      # rmqd.grpc.settle_rpcs: the DLQ forward's job
    forwarded = []
    original = settles.forward_to_dlq

    async def spy(request, context):
        response = await original(request, context)
        forwarded.append((request.message_id, request.delivery_attempt, request.max_delivery_attempts,
                          response.status.code))
        return response
    monkeypatch.setattr(settles, "forward_to_dlq", spy)
    res = run5(py5_python, grpc_server, '''
        import threading
        seen, lock = [], threading.Lock()
        class L(MessageListener):
            def consume(self, m):
                with lock:
                    seen.append((m.message_id, m.delivery_attempt))
                return ConsumeResult.FAILURE
        p = Producer(CONFIG, ("G5Poison",)); p.startup()
        m = Message(); m.topic = "G5Poison"; m.body = b"poison"; m.message_group = "bad"
        mid = p.send(m).message_id
        c = PushConsumer(CONFIG, "G5PoisonGroup", L(), {"G5Poison": FilterExpression()})
        c.startup()
        wait_until(lambda: len(seen) >= 2, timeout=20)
        time.sleep(1.0)                      # the forward, and no third delivery
        emit(op="done", id=mid, seen=seen)
        c.shutdown(); p.shutdown()
    ''', timeout=60)
    done = res.events_of("done")[0]
    # two tries (the client retries a FIFO message locally, with the same delivery attempt), then the forward
    assert [mid for mid, _ in done["seen"]] == [done["id"], done["id"]], done
    assert [(mid, limit, code) for mid, _, limit, code in forwarded] == [(done["id"], 2, 20000)], forwarded
    r = grpc_server.broker.store.get_messages("%DLQ%G5PoisonGroup", 0, 0, 10)
    from rmqd.store.message import decode_message
    dlq = [decode_message(bytes(b)) for b in r.buffers]
    assert [(m.properties["UNIQ_KEY"], m.body) for m in dlq] == [(done["id"], b"poison")]


ACL_YML = """\
accounts:
  - {accessKey: py5User01, secretKey: py5Secret01, admin: false, defaultTopicPerm: DENY, defaultGroupPerm: SUB,
     topicPerms: ["G5AclPub=PUB|SUB", "G5AclSub=SUB"]}
  - {accessKey: py5Admin01, secretKey: py5AdminSk1, admin: true}
"""


def test_credentials_against_an_acl_enabled_server(py5_python, make_grpc_server, tmp_path):
    """The client signs its requests (authorization header): an allowed send goes through, a send to a
    topic the account may only subscribe to is refused with FORBIDDEN 40300; with a wrong secret nothing goes
    (UNAUTHORIZED 40100 on its route query)."""
    from rmqd.acl.signer import sign_request

    acl = tmp_path / "plain_acl.yml"
    acl.write_text(ACL_YML)
    server = make_grpc_server(aclEnable="true", aclFile=str(acl))
    for topic in ("G5AclPub", "G5AclSub"):
        ext = {"topic": topic, "defaultTopic": "TBW102", "readQueueNums": "1", "writeQueueNums": "1",
               "perm": "6", "topicFilterType": "SINGLE_TAG", "topicSysFlag": "0", "order": "false"}
        assert server.admin.invoke(new_request(17, sign_request(ext, None, "py5Admin01", "py5AdminSk1")), 10).code == 0
    script = '''
        p = Producer(CONFIG, ("G5AclPub",)); p.startup()
        for topic in ("G5AclPub", "G5AclSub"):
            m = Message(); m.topic = topic; m.body = b"signed"
            try:
                emit(op="send", topic=topic, id=p.send(m).message_id)
            except Exception as e:
                emit(op="send", topic=topic, code=getattr(e, "code", None), error=str(e))
        p.shutdown()
    '''
    res = run5(py5_python, server, script, AK="py5User01", SK="py5Secret01")
    sends = {e["topic"]: e for e in res.events_of("send")}
    assert sends["G5AclPub"].get("id") and server.broker.store.get_max_offset("G5AclPub", 0) == 1
    assert sends["G5AclSub"]["code"] == 40300 and "No default permission for topic:G5AclSub" in \
        sends["G5AclSub"]["error"], sends
    assert server.broker.store.get_max_offset("G5AclSub", 0) == 0
    wrong = run_client_script(py5_python, PRELUDE5 + textwrap.dedent('''
        p = Producer(CONFIG, ("G5AclPub",)); p.startup()
        m = Message(); m.topic = "G5AclPub"; m.body = b"unsigned"
        try:
            emit(op="send", id=p.send(m).message_id)
        except Exception as e:
            emit(op="send", code=getattr(e, "code", None), error=str(e))
        p.shutdown()
    '''), env={"ENDPOINT": server.grpc_addr, "AK": "py5User01", "SK": "wrongSecret1"}, timeout=30)
    (send,) = wrong.events_of("send")        # its QueryRoute got 40100; the client reports the route
    assert "id" not in send and "failed to fetch topic:G5AclPub route" in send["error"], send
    assert server.broker.store.get_max_offset("G5AclPub", 0) == 1
