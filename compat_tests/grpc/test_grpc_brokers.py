"""Every broker speaks gRPC: ``rmqd serve --brokers 2`` runs broker-b in its own process with its own gRPC endpoint
(the next port), and the route a 5.x client gets from any endpoint points each broker's queues at the endpoint that
serves them, as a 5.x proxy in local mode beside each broker. A topic on both brokers: the PyPI 5.1.2 producer,
given broker-a's endpoint only, spreads 40 messages over both brokers' stores; a SimpleConsumer and a PushConsumer
(its assignments name both brokers) each receive all 40, once. The Java 5.x client with its default configuration
(TLS) does the same through both brokers' permissive ports."""
from __future__ import annotations

import pytest

from java5kit import run_java5
from processes import RmqdProcess
from test_grpc_python import PRELUDE5
from two_brokers import PUSH_ALL, SEND_AND_RECEIVE, admin, assert_spread, grpc_ports, stored_per_broker, wait_two_brokers

from clientrunner import run_client_script
from rmqd.common.localports import free_port_block
from tests.kit.waits import wait_until

pytestmark = pytest.mark.timeout(400)


@pytest.fixture
def two_brokers(tmp_path, monkeypatch):
    monkeypatch.setenv("RMQD_TLS_DIR", str(tmp_path / "tls"))
    grpc = free_port_block(2)
    serve = RmqdProcess("serve", "--brokers", "2", "--namesrv-port", "0", "--broker-port", "0", "--grpc-port",
                        str(grpc), "--no-metrics", "--console-port", "0", "--store-dir", str(tmp_path / "store"),
                        timeout=60)
    try:
        brokers = wait_two_brokers(serve.addr)
        assert sorted(brokers) == ["broker-a", "broker-b"]
        # each broker writes its gRPC port to the name server once the other registered (rmqd.grpc.advertise,
        # within a second): until then a route leaves that broker out, and a client keeps a route for 30 s
        ports = wait_until(lambda: (lambda t: t if len(t) == 2 else None)(grpc_ports(serve.addr)), 30, interval=0.2,
                           what="both brokers' gRPC ports in the name server's KV table")
        assert sorted(ports) == sorted(brokers.values())
        yield serve.addr, brokers, [f"127.0.0.1:{grpc}", f"127.0.0.1:{grpc + 1}"]
    finally:
        assert serve.stop(30) == 0


def test_python5_producer_spreads_over_both_brokers_and_consumers_get_everything(py5_python, two_brokers):
    namesrv, brokers, grpc = two_brokers
    admin("updateTopic", "-n", namesrv, "-c", "DefaultCluster", "-t", "Spread5")
    # serve's defaults are the proxy's: a long poll of at least 5 s within the request timeout (3 s) + await
    res = run_client_script(py5_python, PRELUDE5 + '''
import threading
SPREAD_TOPIC, SPREAD_COUNT, SIMPLE_GROUP, AWAIT, SIMPLE_OP = "Spread5", 40, "Spread5Simple", 5, "simple"
PUSH_GROUP, PUSH_TOPIC, PUSH_COUNT, TLS = "Spread5Push", "Spread5", 40, {}
''' + SEND_AND_RECEIVE + PUSH_ALL, env={"ENDPOINT": grpc[0]}, timeout=200)
    assert res.returncode == 0 and not res.timed_out, (res.stderr[-3000:], res.events[-5:])
    assert_spread(res, brokers, "Spread5", 40, "simple", "push")


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
