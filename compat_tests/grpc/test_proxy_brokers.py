"""``rmqd proxy`` over ``rmqd serve --brokers 2``: the 5.x clients given the proxy's address only. The proxy spreads
the producers' messages over both brokers' queues and its consumers receive everything exactly once:

- the PyPI 5.1.2 client with TLS on (``tls_enable=True``: it checks the certificate, so the proxy serves a
  CA-issued one, ``tlsTestModeEnable=false``): a SimpleConsumer and a PushConsumer, FIFO per message group, a delay
  message, a transaction ended by the broker's check-back relayed over the proxy's Telemetry stream;
- the Java client (rocketmq-client-java 5.2.0) in its default configuration (TLS on, the proxy's permissive port
  with its test-mode certificate) running Grpc5Scenario's normal, fifo, delay, tx (check-back) and push sections;
- the Go v5 client (compat_tests/go/cmd/grpc5) with TLS as it comes and without;
- Lite Mode with the Python client: LitePushConsumers and a LiteSimpleConsumer (which polls one broker)."""
from __future__ import annotations

import time

import orjson
import pytest

from clientrunner import run_client_script
from gokit import BUILD_TIMEOUT, run_go_all
from go_outcomes import distinct, of, ok
from java5kit import run_java5
from processes import RmqdProcess
from rmqd_proxy import FAST_PROXY, RmqdProxy
from test_grpc5_java import admin_commands
from test_grpc_tls import check_go_normal, go_normal
from test_grpc_python import PRELUDE5
from two_brokers import PUSH_ALL, admin, assert_fifo_tx_delay, assert_spread, stored_per_broker, wait_two_brokers

from rmqd.remoting.client import BlockingClient
from rmqd.remoting.command import new_request
from rmqd.testing.pki import TestPki

pytestmark = pytest.mark.timeout(500 + BUILD_TIMEOUT)


# check-backs after a second (the transaction scenario)
BROKER_CONF = "transactionCheckInterval=1000\ntransactionTimeOut=1000\n"


@pytest.fixture(scope="module")
def proxied(tmp_path_factory):
    """``rmqd serve --brokers 2`` (no gRPC of its own) and an ``rmqd proxy`` over its name server, serving a
    CA-issued certificate (the Python client checks it; the Java client takes any)."""
    tmp_path = tmp_path_factory.mktemp("proxied")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("RMQD_TLS_DIR", str(tmp_path / "tls"))
        (tmp_path / "broker.conf").write_text(BROKER_CONF)
        serve = RmqdProcess("serve", "--brokers", "2", "-c", str(tmp_path / "broker.conf"), "--namesrv-port", "0",
                            "--broker-port", "0", "--grpc-port", "0", "--no-metrics", "--console-port", "0",
                            "--store-dir", str(tmp_path / "store"), timeout=60)
        try:
            brokers = wait_two_brokers(serve.addr)
            assert sorted(brokers) == ["broker-a", "broker-b"]
            pki = TestPki(tmp_path / "pki")
            conf = dict(FAST_PROXY, tlsTestModeEnable="false", tlsCertPath=str(pki.server.cert),
                        tlsKeyPath=str(pki.server.key))
            with RmqdProxy(tmp_path / "proxy", serve.addr, conf) as proxy:
                proxy.ca = str(pki.ca)
                yield serve.addr, brokers, proxy
        finally:
            assert serve.stop(30) == 0


PYTHON = '''
import threading
TLS = dict(tls_enable=True)
p = Producer(CONFIG, ("PxSpread", "PxFifo", "PxDelay"), **TLS)
p.startup()
for i in range(40):
    m = Message(); m.topic = "PxSpread"; m.body = f"spread-{i}".encode()
    emit(op="sent", id=p.send(m).message_id)
for i in range(12):
    m = Message(); m.topic = "PxFifo"; m.body = f"g{i % 3}-{i // 3}".encode(); m.message_group = f"order-{i % 3}"
    emit(op="fifo-sent", id=p.send(m).message_id)
deliver_at = int(time.time()) + 3
m = Message(); m.topic = "PxDelay"; m.body = b"later"; m.delivery_timestamp = deliver_at
emit(op="delay-sent", id=p.send(m).message_id)
p.shutdown()
d = SimpleConsumer(CONFIG, "PxDelayG", {"PxDelay": FilterExpression()}, await_duration=2, **TLS)
d.startup()
for m in receive_all(d, 1, timeout=30):
    emit(op="delay", body=m.body.decode(), late=time.time() - deliver_at)
d.shutdown()
c = SimpleConsumer(CONFIG, "PxSpreadSimple", {"PxSpread": FilterExpression()}, await_duration=2, **TLS)
c.startup()
for m in receive_all(c, 40, timeout=60):
    emit(op="simple", id=m.message_id)
c.shutdown()
PUSH_GROUP, PUSH_TOPIC, PUSH_COUNT = "PxSpreadPush", "PxSpread", 40
''' + PUSH_ALL + '''
f = SimpleConsumer(CONFIG, "PxFifoG", {"PxFifo": FilterExpression()}, await_duration=2, **TLS)
f.startup()
for m in receive_all(f, 12, timeout=60):
    emit(op="fifo", body=m.body.decode(), group=m.message_group)
f.shutdown()

class Checker(TransactionChecker):
    def check(self, m):
        emit(op="check", body=m.body.decode())
        return TransactionResolution.COMMIT
tp = Producer(CONFIG, ("PxTx",), Checker(), **TLS)
tp.startup()
for body in ("tx-commit", "tx-open"):
    m = Message(); m.topic = "PxTx"; m.body = body.encode()
    t = tp.begin_transaction()
    tp.send(m, t)
    if body == "tx-commit":
        t.commit()
tc = SimpleConsumer(CONFIG, "PxTxG", {"PxTx": FilterExpression()}, await_duration=2, **TLS)
tc.startup()
for m in receive_all(tc, 2, timeout=60):
    emit(op="tx", body=m.body.decode())
tc.shutdown()
tp.shutdown()
'''


def test_python5_through_the_proxy_spreads_over_both_brokers_and_receives_everything_once(py5_python, proxied):
    namesrv, brokers, proxy = proxied
    admin("updateTopic", "-n", namesrv, "-c", "DefaultCluster", "-t", "PxSpread")
    admin("updateTopic", "-n", namesrv, "-c", "DefaultCluster", "-t", "PxFifo", "-a", "+message.type=FIFO")
    admin("updateTopic", "-n", namesrv, "-c", "DefaultCluster", "-t", "PxTx", "-a", "+message.type=TRANSACTION")
    admin("updateTopic", "-n", namesrv, "-c", "DefaultCluster", "-t", "PxDelay", "-a", "+message.type=DELAY")
    admin("updateSubGroup", "-n", namesrv, "-c", "DefaultCluster", "-g", "PxFifoG", "-o", "true")
    res = run_client_script(py5_python, PRELUDE5 + PYTHON, env={"ENDPOINT": proxy.grpc_addr,
                                                                "GRPC_DEFAULT_SSL_ROOTS_FILE_PATH": proxy.ca},
                            timeout=300)
    assert res.returncode == 0 and not res.timed_out, (res.stderr[-3000:], res.events[-5:], proxy.log_tail())
    assert_spread(res, brokers, "PxSpread", 40, "simple", "push")
    assert_fifo_tx_delay(res)
    assert "TLS" in proxy.log_tail(100000) or "tls" in proxy.log_tail(100000)


JAVA_SECTIONS = ("normal", "fifo", "delay", "tx", "push")


def test_java5_client_default_tls_through_the_proxy(proxied):
    """Grpc5Scenario (its sections' own assertions are in test_grpc5_java; here the facts) with the client's
    default configuration: TLS on."""
    namesrv, brokers, proxy = proxied
    wanted = {f"J5{k}Px" for k in ("Normal", "Fifo", "Delay", "Tx", "Push", "NormalG", "FifoG", "DelayG", "TxG",
                                    "PushG")}
    for cmd in admin_commands("Px"):
        name = cmd[cmd.index("-t") + 1] if "-t" in cmd else cmd[cmd.index("-g") + 1]
        if name in wanted:
            admin(cmd[0], "-n", namesrv, "-c", "DefaultCluster", *cmd[1:])
    res = run_java5("grpc", "Grpc5Scenario", proxy.grpc_addr, proxy.grpc_addr, "Px", *JAVA_SECTIONS, timeout=200,
                    system_props={"grpc5.tls": "default"})
    assert res.returncode == 0 and not res.timed_out, (res.stdout[-2000:], res.stderr[-3000:], proxy.log_tail())
    assert not res.events_of("error"), res.events_of("error")
    print({e["section"]: e["ms"] for e in res.events_of("done")})
    got = {e["section"]: [m["body"] for m in e["messages"]] for e in res.events_of("got")}
    assert sorted(got["normal"]) == ["n0", "n1", "n2"], got
    fifo = [b for b in got["fifo"] if b.startswith("g")]
    for g in range(2):
        assert [b for b in fifo if b.startswith(f"g{g}-")] == [f"g{g}-{i}" for i in range(4)], got["fifo"]
    assert got["delay"] == ["later"] and res.events_of("age")[0]["early"] is False, res.events_of("age")
    assert sorted(got["tx"]) == ["commit", "orphan"], got["tx"]
    assert [e["orphan"] for e in res.events_of("checked")] == [True]
    assert sorted(got["push"]) == sorted([f"push{i}" for i in range(4)] + ["fail-once"] * 2), got["push"]
    per = stored_per_broker(brokers, "J5PushPx")
    assert sum(per.values()) == 5 and min(per.values()) > 0, per              # both brokers store some
    assert "TLS" in proxy.log_tail(100000)


def test_go5_client_through_the_proxy_with_tls_and_without(proxied):
    """The Go v5 client with TLS as it comes (grpc5 -tls: TLS, the certificate not checked) on the proxy's
    permissive port, FIFO included, beside a plaintext one; what they sent is stored on the brokers."""
    namesrv, brokers, proxy = proxied
    for topic, group in (("PxGo", "px-go"), ("PxGoTls", "px-go-tls")):
        admin("updateTopic", "-n", namesrv, "-c", "DefaultCluster", "-t", topic)
        admin("updateSubGroup", "-n", namesrv, "-c", "DefaultCluster", "-g", group)
    admin("updateTopic", "-n", namesrv, "-c", "DefaultCluster", "-t", "PxGoFifo", "-a", "+message.type=FIFO")
    admin("updateSubGroup", "-n", namesrv, "-c", "DefaultCluster", "-g", "px-go-fifo", "-o", "true")
    runs = run_go_all({"normal": go_normal(proxy.grpc_addr, "PxGo", "px-go", False),
                       "normal-tls": go_normal(proxy.grpc_addr, "PxGoTls", "px-go-tls", True),
                       "fifo-tls": ["grpc5", "-endpoint", proxy.grpc_addr, "-topic", "PxGoFifo", "-group",
                                    "px-go-fifo", "-wait", "60", "-tls", "fifo"]}, 150)
    for name, topic in (("normal", "PxGo"), ("normal-tls", "PxGoTls")):
        check_go_normal(runs[name], f"Go {name} through the proxy", name.endswith("tls"))
        per = stored_per_broker(brokers, topic)
        assert sum(per.values()) == len(of(runs[name], "send")), (name, per)
    ok(runs["fifo-tls"], "Go fifo with TLS through the proxy")
    assert [e["tls"] for e in of(runs["fifo-tls"], "client")] == [True]
    per_group: dict[str, list[str]] = {}
    for e in distinct(of(runs["fifo-tls"], "recv"), "messageId"):
        per_group.setdefault(e["group"], []).append(e["body"])
    assert per_group == {f"group-{g}": [f"g{g}-s{s}" for s in range(5)] for g in range(3)}, per_group


def test_two_proxy_instances_behind_one_cluster_share_receipt_handles(proxied, tmp_path):
    """Stateless instances: messages a consumer received through one proxy are acked through another (the handle
    names the broker), sent through either; after the acks nothing comes back through either."""
    from differential5 import Session, consumer_settings, message_pb, producer_settings, received
    from test_grpc5_probes import ack_request, receive_request

    from rmqd.grpc.pb import definition_pb2 as d
    from rmqd.grpc.pb import service_pb2 as s

    namesrv, brokers, proxy = proxied
    admin("updateTopic", "-n", namesrv, "-c", "DefaultCluster", "-t", "PxTwo")
    with RmqdProxy(tmp_path / "second", namesrv) as second:
        a, b = proxy.grpc_addr, second.grpc_addr
        sent = set()
        for addr in (a, b):
            with Session(addr, producer_settings(addr, "PxTwo")) as p:
                for i in range(4):
                    msg = message_pb("PxTwo", f"{addr}-{i}".encode())
                    resp = p.call("SendMessage", s.SendMessageRequest(messages=[msg]))
                    assert resp.status.code == d.OK, resp.status
                    sent.add(resp.entries[0].message_id)
        req = receive_request("PxTwo-G", "PxTwo", invisible_ms=6000, poll_ms=1000)
        req.message_queue.broker.name = ""               # any broker: the proxy picks
        with Session(b, consumer_settings(b, "PxTwo-G", "PxTwo")) as cb, \
                Session(a, consumer_settings(a, "PxTwo-G", "PxTwo")) as ca:
            got: dict[str, object] = {}
            end = time.monotonic() + 30
            while len(got) < len(sent) and time.monotonic() < end:
                for m in received(cb.call("ReceiveMessage", req, timeout=10))[1]:
                    got[m.system_properties.message_id] = m
            assert set(got) == sent
            handles = list(got.values())
            for sess, part in ((ca, handles[::2]), (cb, handles[1::2])):       # half acked through the other one
                resp = sess.call("AckMessage", ack_request("PxTwo-G", "PxTwo", *part))
                assert resp.status.code == d.OK and all(e.status.code == d.OK for e in resp.entries), resp
            time.sleep(6.5)                                # past the invisible time: an unacked one would be back
            again = []
            for sess in (ca, cb, ca, cb):
                again += received(sess.call("ReceiveMessage", req, timeout=10))[1]
            assert again == [], [m.system_properties.message_id for m in again]


LITE = '''
p = Producer(CONFIG, ("PxLite",)); p.startup()
a, b = Collect(), Collect()
ca = LitePushConsumer(CONFIG, "PxLiteG", "PxLite", a); ca.startup()
cb = LitePushConsumer(CONFIG, "PxLiteG", "PxLite", b); cb.startup()
subscribe(ca, "chat-a", "chat-c"); subscribe(cb, "chat-b", "chat-d")
for i in range(10):
    for lite in ("chat-a", "chat-b", "chat-c", "chat-d", "nobody"):
        send(p, "PxLite", lite, f"{lite}-{i}")
ok = wait_for(lambda: len(a.got) >= 20 and len(b.got) >= 20, 40)
time.sleep(1.0)
emit(op="push", ok=ok, a=[g[:2] for g in a.got], b=[g[:2] for g in b.got])
ca.shutdown(); cb.shutdown()

import collections
sc = LiteSimpleConsumer("PxLite", CONFIG, "PxLiteS", await_duration=2); sc.startup()
names = [f"s{i}" for i in range(6)]
subscribe(sc, *names)
for i in range(5):
    for n in names:
        send(p, "PxLite", n, f"{n}-{i}")
got, again, held, last, end = [], [], None, time.time(), time.time() + 40
while time.time() < end:        # until every lite topic seen is complete, the held one is back, 4 s of nothing new
    batch = sc.receive(32, 15) or []
    for m in batch:
        if m.delivery_attempt > 1:
            again.append(m); sc.ack(m)
            continue
        got.append(m)
        if held is None and m.body.decode().endswith("-4"):
            held = m
            sc.change_invisible_duration(m, 2)
        else:
            sc.ack(m)
    last = time.time() if batch else last
    counts = collections.Counter(m.lite_topic for m in got)
    if counts and min(counts.values()) >= 5 and again and time.time() - last > 4:
        break
emit(op="simple", got=[(m.lite_topic, m.body.decode(), m.delivery_attempt) for m in got])
emit(op="again", got=[(m.lite_topic, m.body.decode(), m.delivery_attempt) for m in again])
if held is not None:
    other = next(m.lite_topic for m in got if m.lite_topic != held.lite_topic)
    sc.unsubscribe_lite(held.lite_topic)
    send(p, "PxLite", held.lite_topic, "late-gone"); send(p, "PxLite", other, "late-kept")
    late, end = [], time.time() + 15
    while time.time() < end and not late:
        for m in sc.receive(32, 10) or []:
            late.append(m); sc.ack(m)
    emit(op="late", gone=held.lite_topic, kept=other, got=[(m.lite_topic, m.body.decode()) for m in late])
sc.shutdown(); p.shutdown()
'''


def lite_stored(brokers: dict[str, str], parent: str, lite: str) -> dict[str, int]:
    """How many messages each broker holds of ``lite`` (GET_LITE_TOPIC_INFO, 5.5 mqadmin's getLiteTopicInfo)."""
    out = {}
    for name, addr in brokers.items():
        with BlockingClient(addr) as c:
            resp = c.invoke(new_request(200076, {"parentTopic": parent, "liteTopic": lite}))
            assert resp.code == 0, (name, resp.code, resp.remark)
            out[name] = orjson.loads(resp.body_bytes())["topicOffset"]["maxOffset"]
    return out


def test_python5_lite_through_the_proxy(py5_python, proxied):
    """The Python client's LitePushConsumer and LiteSimpleConsumer (5.5 Lite Mode) with the proxy's address only:
    each push consumer gets exactly its lite topics' messages in order, from both brokers; the simple consumer
    (which polls one broker: the client's) acks, changes an invisible time (back with attempt 2) and
    unsubscribes (nothing of that lite topic after)."""
    from test_lite_python import PRELUDE as LITE_PRELUDE

    namesrv, brokers, proxy = proxied
    admin("updateTopic", "-n", namesrv, "-c", "DefaultCluster", "-t", "PxLite", "-a", "+message.type=LITE")
    for group in ("PxLiteG", "PxLiteS"):
        admin("updateSubGroup", "-n", namesrv, "-c", "DefaultCluster", "-g", group, "--attributes",
              "+lite.bind.topic=PxLite")
    res = run_client_script(py5_python, LITE_PRELUDE + LITE, env={"ENDPOINT": proxy.grpc_addr}, timeout=150)
    assert res.returncode == 0 and not res.timed_out, (res.stderr[-3000:], res.events[-5:], proxy.log_tail())
    push = res.events_of("push")[0]
    assert push["ok"], (push, proxy.log_tail())
    for got, lites in ((push["a"], ("chat-a", "chat-c")), (push["b"], ("chat-b", "chat-d"))):
        for lite in lites:
            assert [body for lt, body in got if lt == lite] == [f"{lite}-{i}" for i in range(10)], (lite, got)
        assert {lt for lt, _ in got} == set(lites), got
    # the client's LiteSimpleConsumer polls the first readable queue of the route only (one broker, as through
    # Java's proxy): it gets every message of the lite topics on that broker, in order, and nothing else
    stored = {lite: lite_stored(brokers, "PxLite", lite) for lite in (f"s{i}" for i in range(6))}
    on = {name: sorted(lt for lt, counts in stored.items() if counts[name]) for name in brokers}
    simple = res.events_of("simple")[0]["got"]
    polled = sorted({lt for lt, _, _ in simple})
    assert polled in on.values() and all(on.values()), (polled, stored)      # one broker's lite topics, all of them
    for lite in polled:
        assert [b for lt, b, _ in simple if lt == lite] == [f"{lite}-{i}" for i in range(5)], (lite, simple)
    assert all(attempt == 1 for _, _, attempt in simple), simple
    (held,) = [b for _, b, _ in simple if b.endswith("-4")][:1]
    assert res.events_of("again")[0]["got"] == [[held[:2], held, 2]], res.events_of("again")
    late = res.events_of("late")[0]
    assert late["got"] == [[late["kept"], "late-kept"]], late               # nothing of the unsubscribed one
    per_lite = {lite: lite_stored(brokers, "PxLite", lite) for lite in ("chat-a", "chat-b", "chat-c", "chat-d")}
    assert {name for counts in per_lite.values() for name, n in counts.items() if n} == set(brokers), per_lite
