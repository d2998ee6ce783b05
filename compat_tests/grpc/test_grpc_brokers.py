"""Every broker speaks gRPC: ``rmqd serve --brokers 2`` runs broker-b in its own process with its own gRPC endpoint
(the next port), and the route a 5.x client gets from any endpoint points each broker's queues at the endpoint that
serves them, as a 5.x proxy in local mode beside each broker. A topic on both brokers: the PyPI 5.1.2 producer,
given broker-a's endpoint only, spreads 40 messages over both brokers' stores; a SimpleConsumer and a PushConsumer
(its assignments name both brokers) each receive all 40, once. The Java 5.x client with its default configuration
(TLS) does the same through both brokers' permissive ports."""
from __future__ import annotations

import collections
import json
import subprocess
import sys
import time

import pytest

from java5kit import run_java5
from processes import RmqdProcess
from test_grpc_python import PRELUDE5

from clientrunner import run_client_script
from rmqd.grpc.advertise import NAMESPACE
from rmqd.common.localports import free_port_block
from rmqd.remoting.codes import RequestCode
from rmqd.remoting.client import BlockingClient
from rmqd.remoting.command import new_request

pytestmark = pytest.mark.timeout(400)


def cluster_brokers(namesrv: str) -> dict[str, str]:
    with BlockingClient(namesrv) as c:
        info = json.loads(c.invoke(new_request(106)).body_bytes().replace(b"{0:", b'{"0":'))
    return {name: data["brokerAddrs"]["0"] for name, data in info["brokerAddrTable"].items()}


def grpc_ports(namesrv: str) -> dict[str, str]:
    """The brokers' gRPC ports as the name server's KV table has them (broker address -> port)."""
    with BlockingClient(namesrv) as c:
        resp = c.invoke(new_request(RequestCode.GET_KVLIST_BY_NAMESPACE, {"namespace": NAMESPACE}))
    return json.loads(resp.body_bytes()).get("table", {}) if resp.code == 0 and resp.body_bytes() else {}


def stored_per_broker(brokers: dict[str, str], topic: str) -> dict[str, int]:
    per = collections.Counter()
    for name, addr in brokers.items():
        with BlockingClient(addr) as c:
            for qid in range(8):              # updateTopic's default: 8 queues
                per[name] += int(c.invoke(new_request(30, {"topic": topic, "queueId": str(qid)})).ext_fields["offset"])
    return dict(per)


def admin(*args: str) -> None:
    res = subprocess.run([sys.executable, "-m", "rmqd.runtime.cli", "admin", *args], capture_output=True, text=True,
                         timeout=60)
    assert res.returncode == 0 and "success" in res.stdout.lower(), (res.stdout, res.stderr)


@pytest.fixture
def two_brokers(tmp_path, monkeypatch):
    monkeypatch.setenv("RMQD_TLS_DIR", str(tmp_path / "tls"))
    grpc = free_port_block(2)
    serve = RmqdProcess("serve", "--brokers", "2", "--namesrv-port", "0", "--broker-port", "0", "--grpc-port",
                        str(grpc), "--no-metrics", "--console-port", "0", "--store-dir", str(tmp_path / "store"),
                        timeout=60)
    try:
        deadline = time.monotonic() + 30
        while len(cluster_brokers(serve.addr)) < 2 and time.monotonic() < deadline:
            time.sleep(0.2)
        brokers = cluster_brokers(serve.addr)
        assert sorted(brokers) == ["broker-a", "broker-b"]
        # each broker writes its gRPC port to the name server once the other registered (rmqd.grpc.advertise,
        # within a second): until then a route leaves that broker out, and a client keeps a route for 30 s
        while len(grpc_ports(serve.addr)) < 2 and time.monotonic() < deadline:
            time.sleep(0.2)
        assert sorted(grpc_ports(serve.addr)) == sorted(brokers.values())
        yield serve.addr, brokers, [f"127.0.0.1:{grpc}", f"127.0.0.1:{grpc + 1}"]
    finally:
        assert serve.stop(30) == 0


def test_python5_producer_spreads_over_both_brokers_and_consumers_get_everything(py5_python, two_brokers):
    namesrv, brokers, grpc = two_brokers
    admin("updateTopic", "-n", namesrv, "-c", "DefaultCluster", "-t", "Spread5")
    res = run_client_script(py5_python, PRELUDE5 + '''
import threading
ROUTE_ENDPOINTS = set()
p = Producer(CONFIG, ("Spread5",))
p.startup()
for i in range(40):
    m = Message(); m.topic = "Spread5"; m.body = f"spread-{i}".encode()
    emit(op="sent", id=p.send(m).message_id)
p.shutdown()
# serve's defaults are the proxy's: a long poll of at least 5 s within the request timeout (3 s) + await
c = SimpleConsumer(CONFIG, "Spread5Simple", {"Spread5": FilterExpression()}, await_duration=5)
c.startup()
for m in receive_all(c, 40, timeout=60):
    emit(op="simple", id=m.message_id)
c.shutdown()
seen, lock = [], threading.Lock()
class L(MessageListener):
    def consume(self, m):
        with lock:
            seen.append(m.message_id)
        return ConsumeResult.SUCCESS
pc = PushConsumer(CONFIG, "Spread5Push", L(), {"Spread5": FilterExpression()})
pc.startup()
end = time.time() + 60
while len(set(seen)) < 40 and time.time() < end:
    time.sleep(0.2)
time.sleep(1.0)
pc.shutdown()
for mid in seen:
    emit(op="push", id=mid)
''', env={"ENDPOINT": grpc[0]}, timeout=200)
    assert res.returncode == 0 and not res.timed_out, (res.stderr[-3000:], res.events[-5:])
    sent = [e["id"] for e in res.events_of("sent")]
    assert len(set(sent)) == 40
    per = stored_per_broker(brokers, "Spread5")
    assert sum(per.values()) == 40 and min(per.values()) > 0, per          # both brokers store some
    simple = collections.Counter(e["id"] for e in res.events_of("simple"))
    assert set(simple) == set(sent) and set(simple.values()) == {1}, simple
    push = collections.Counter(e["id"] for e in res.events_of("push"))
    assert set(push) == set(sent) and set(push.values()) == {1}, push


def test_route_points_each_brokers_queues_at_its_own_endpoint(two_brokers):
    """QueryRoute at either endpoint: broker-a's queues at broker-a's endpoint, broker-b's at broker-b's (the
    endpoint asked is named by the addresses the client used)."""
    import grpc as grpcio

    from rmqd.grpc.pb import definition_pb2 as d
    from rmqd.grpc.pb import service_pb2 as s
    from rmqd.grpc.pb import service_pb2_grpc as sg

    namesrv, brokers, endpoints = two_brokers
    admin("updateTopic", "-n", namesrv, "-c", "DefaultCluster", "-t", "Route5")
    for asked in endpoints:
        host, port = asked.rsplit(":", 1)
        with grpcio.insecure_channel(asked) as ch:
            resp = sg.MessagingServiceStub(ch).QueryRoute(
                s.QueryRouteRequest(topic=d.Resource(name="Route5"), endpoints=d.Endpoints(
                    scheme=d.IPv4, addresses=[d.Address(host=host, port=int(port))])),
                metadata=[("x-mq-client-id", "route-test")], timeout=10)
        assert resp.status.code == d.OK
        where = {(q.broker.name, q.broker.endpoints.addresses[0].port) for q in resp.message_queues}
        assert where == {("broker-a", int(endpoints[0].rsplit(":", 1)[1])),
                         ("broker-b", int(endpoints[1].rsplit(":", 1)[1]))}, where
        assert len(resp.message_queues) == 16 and {q.permission for q in resp.message_queues} == {d.READ_WRITE}


def test_java5_client_default_tls_through_both_brokers(two_brokers):
    namesrv, brokers, grpc = two_brokers
    admin("updateTopic", "-n", namesrv, "-c", "DefaultCluster", "-t", "Spread5Java")
    admin("updateSubGroup", "-n", namesrv, "-c", "DefaultCluster", "-g", "spread5-java")
    res = run_java5("grpc", "Grpc5Smoke", grpc[0], "Spread5Java", "spread5-java", "20", "default", timeout=200)
    assert res.returncode == 0 and not res.timed_out, (res.stdout[-2000:], res.stderr[-3000:])
    assert sorted(e["body"] for e in res.events_of("receive")) == sorted(f"smoke-{i}" for i in range(20))
    per = stored_per_broker(brokers, "Spread5Java")
    assert sum(per.values()) == 20 and min(per.values()) > 0, per
