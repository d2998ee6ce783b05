"""rmqd.grpc.routes: the queues as the proxy's RouteActivity lays them out, every broker at the endpoint that serves
it (its host and the gRPC port it keeps in the name servers' KV table), the asked broker at the client's addresses, a master's entry followed
by its replicas, the last master kept through an election, and brokers without gRPC left out."""
from __future__ import annotations

import asyncio

import pytest

from rmqd.grpc.advertise import NAMESPACE
from rmqd.grpc.pb import definition_pb2 as d
from rmqd.grpc.routes import (BrokerGroup, ClusterRoutes, QueueData, TopicRoute, address_scheme, assignments,
                              endpoints_pb, message_queues, parse_topic_route)
from rmqd.remoting.codes import RequestCode
from rmqd.remoting.command import new_response

TOPIC = d.Resource(name="T")
ANY = [d.NORMAL]


def test_queue_layout_is_route_activitys():
    route = TopicRoute((QueueData("a", 8, 4, 6), QueueData("b", 2, 2, 4), QueueData("c", 0, 3, 0)),
                       (BrokerGroup("a", {0: "h:1"}), BrokerGroup("b", {0: "h:2"}), BrokerGroup("c", {0: "h:3"})))
    eps = {("a", 0): [("h", 11)], ("b", 0): [("h", 12)], ("c", 0): [("h", 13)]}
    qs = message_queues(route, TOPIC, ANY, eps)
    a = [(q.id, q.permission) for q in qs if q.broker.name == "a"]
    assert a == [(i, d.READ) for i in range(4)] + [(i, d.READ_WRITE) for i in range(4, 8)]
    assert [(q.id, q.permission) for q in qs if q.broker.name == "b"] == [(0, d.READ), (1, d.READ)]
    assert [(q.id, q.permission) for q in qs if q.broker.name == "c"] == [(i, d.NONE) for i in range(3)]
    assert {q.broker.name: q.broker.endpoints.addresses[0].port for q in qs} == {"a": 11, "b": 12, "c": 13}
    found = assignments(route, TOPIC, eps)
    assert [(x.message_queue.broker.name, x.message_queue.id) for x in found] == [("a", -1), ("b", -1)]
    assert not any(x.message_queue.accept_message_types for x in found)           # as the proxy's
    fifo = assignments(route, TOPIC, eps, per_queue=True)                         # a FIFO group: each readable queue
    assert [(x.message_queue.broker.name, x.message_queue.id) for x in fifo] == \
        [("a", i) for i in range(8)] + [("b", 0), ("b", 1)]


def test_parse_fastjson_route():
    body = (b'{"brokerDatas":[{"brokerAddrs":{0:"127.0.0.1:10911",1:"127.0.0.1:10915"},"brokerName":"broker-a",'
            b'"cluster":"DefaultCluster"}],"queueDatas":[{"brokerName":"broker-a","perm":6,"readQueueNums":4,'
            b'"topicSysFlag":0,"writeQueueNums":4}]}')
    route = parse_topic_route(body)
    assert route.groups == (BrokerGroup("broker-a", {0: "127.0.0.1:10911", 1: "127.0.0.1:10915"}),)
    assert route.queue_datas == (QueueData("broker-a", 4, 4, 6),)


@pytest.mark.parametrize("body", [b'[1,2]', b'{"queueDatas":{"brokerName":"a"}}', b'{"queueDatas":[{"perm":[6]}]}',
                                  b'{"brokerDatas":[{"brokerAddrs":["127.0.0.1:10911"]}]}'])
def test_a_route_with_fields_of_other_json_types_is_unreadable(body):
    """rmqd.grpc.json_fields: a field of another JSON type than the route's is a TypeError (the caller's
    "unreadable" answer), null or absent ones read as empty."""
    with pytest.raises(TypeError):
        parse_topic_route(body)
    assert parse_topic_route(b'{"queueDatas":null}') == TopicRoute((), ())


class FakeCluster:
    """A name server answering GET_ROUTEINFO_BY_TOPIC and the gRPC ports' KV namespace."""

    def __init__(self, route: bytes, ports: dict[str, int]) -> None:
        self.route, self.ports, self.calls = route, ports, []

    async def invoke(self, addr, request, timeout):
        self.calls.append((addr, request.code))
        if request.code == RequestCode.GET_ROUTEINFO_BY_TOPIC:
            return new_response(0, None, None, self.route)
        assert request.code == RequestCode.GET_KVLIST_BY_NAMESPACE and request.ext_fields["namespace"] == NAMESPACE
        table = ",".join(f'"{a}":"{p}"' for a, p in self.ports.items())
        return new_response(0, None, None, ('{"table":{%s}}' % table).encode())


def group_route(master: bool = True) -> bytes:
    addrs = ('0:"10.0.0.1:10911",' if master else "") + '1:"10.0.0.2:10915",2:"10.0.0.3:10919"'
    return (('{"brokerDatas":[{"brokerAddrs":{%s},"brokerName":"g"},{"brokerAddrs":{0:"10.0.0.9:10911"},'
             '"brokerName":"java"}],"queueDatas":[{"brokerName":"g","perm":6,"readQueueNums":2,"writeQueueNums":2},'
             '{"brokerName":"java","perm":6,"readQueueNums":2,"writeQueueNums":2}]}') % addrs).encode()


def test_endpoints_own_broker_at_the_asked_addresses_master_then_replicas_java_broker_left_out(caplog):
    async def go():
        fake = FakeCluster(group_route(), {"10.0.0.1:10911": 8081, "10.0.0.3:10919": 8083})
        routes = ClusterRoutes(fake.invoke, lambda: ["ns:9876"], lambda: "10.0.0.2:10915", lambda: ("10.0.0.2", 8082))
        route = await routes.topic_route("T")
        eps = await routes.endpoints(route, [("proxy.example", 443)])
        assert eps == {("g", 0): [("10.0.0.1", 8081), ("proxy.example", 443), ("10.0.0.3", 8083)],
                       ("g", 1): [("proxy.example", 443)], ("g", 2): [("10.0.0.3", 8083)]}
        await routes.endpoints(route, [])
        assert sum(1 for _, code in fake.calls if code == RequestCode.GET_KVLIST_BY_NAMESPACE) == 1   # kept
        qs = message_queues(route, TOPIC, ANY, eps)
        assert {q.broker.name for q in qs} == {"g"} and {q.broker.id for q in qs} == {0, 1, 2}
        # an election: the name server has no master for g; the last master entry stays (its replicas forward)
        fake.route = group_route(master=False)
        routes._routes.clear()
        eps = await routes.endpoints(await routes.topic_route("T"), [])
        assert eps[("g", 0)] == [("10.0.0.1", 8081), ("10.0.0.2", 8082), ("10.0.0.3", 8083)]
    with caplog.at_level("INFO", logger="rmqd.grpc.routes"):
        asyncio.run(go())
    assert "broker 10.0.0.9:10911 (java) has no gRPC endpoint in the name servers" in caplog.text


def test_a_broker_whose_port_is_not_written_yet_is_asked_for_again_within_a_second():
    """A master writes its gRPC port only once other brokers registered (rmqd.grpc.advertise): a replica asked
    for a route just before must not leave the master out for the ports' whole TTL."""
    def kv_calls(fake: FakeCluster) -> int:
        return sum(1 for _, code in fake.calls if code == RequestCode.GET_KVLIST_BY_NAMESPACE)

    async def go():
        fake = FakeCluster(group_route(), {"10.0.0.3:10919": 8083})
        routes = ClusterRoutes(fake.invoke, lambda: ["ns:9876"], lambda: "10.0.0.2:10915", lambda: ("10.0.0.2", 8082))
        route = await routes.topic_route("T")
        assert ("g", 0) not in await routes.endpoints(route, [])            # not written yet: left out
        fake.ports["10.0.0.1:10911"] = 8081                                   # the master writes it
        assert ("g", 0) not in await routes.endpoints(route, [])            # asked again at most once a second
        assert kv_calls(fake) == 1
        routes._ports = (routes._ports[0] - 1.5, routes._ports[1])           # 1.5 s later
        eps = await routes.endpoints(route, [])
        assert eps[("g", 0)] == [("10.0.0.1", 8081), ("10.0.0.2", 8082), ("10.0.0.3", 8083)]
        assert kv_calls(fake) == 2
    asyncio.run(go())


def test_a_name_server_that_does_not_answer_keeps_the_last_route(caplog):
    async def go():
        fake = FakeCluster(group_route(), {})
        routes = ClusterRoutes(fake.invoke, lambda: ["ns:9876"], lambda: "x:1", lambda: ("x", 2))
        first = await routes.topic_route("T")

        async def down(addr, request, timeout):
            raise asyncio.TimeoutError()
        routes.invoke = down
        routes._routes["T"] = (0.0, first)              # expired
        assert await routes.topic_route("T") is first
    asyncio.run(go())
    assert "no name server answered" in caplog.text


def test_an_unreadable_route_keeps_the_last_route(caplog):
    async def go():
        fake = FakeCluster(group_route(), {})
        routes = ClusterRoutes(fake.invoke, lambda: ["ns:9876"], lambda: "x:1", lambda: ("x", 2))
        first = await routes.topic_route("T")
        fake.route = b'{"queueDatas":"not a list"}'
        routes._routes["T"] = (0.0, first)              # expired
        assert await routes.topic_route("T") is first
    asyncio.run(go())
    assert "unreadable route" in caplog.text


@pytest.mark.parametrize("perm", [2, 0])
def test_no_readable_queue_no_assignment(perm):
    route = TopicRoute((QueueData("a", 4, 4, perm),), (BrokerGroup("a", {0: "h:1"}),))
    assert assignments(route, TOPIC, {("a", 0): [("h", 1)]}) == []


@pytest.mark.slow
def test_an_endpoint_keeps_its_port_in_the_name_servers_kv_table_while_others_may_route_to_it(tmp_path):
    """Alone, a broker writes nothing (a single ``rmqd serve`` leaves the KV table and its file alone); once another
    broker registers, its port is in the table; closing removes it."""
    import time

    from rmqd.grpc import advertise
    from rmqd.grpc.endpoint import GrpcEndpoint
    from rmqd.remoting.client import BlockingClient
    from rmqd.remoting.command import new_request
    from rmqd.testing import EmbeddedServer

    endpoint = GrpcEndpoint("127.0.0.1", 0)
    server = EmbeddedServer(store_dir=str(tmp_path / "store"), endpoints=lambda: [endpoint]).start()
    kv = server.services.namesrv.kv_config
    try:
        time.sleep(advertise.ALONE_INTERVAL_S + 1)
        assert kv.get(NAMESPACE, server.broker.address) is None
        with BlockingClient(server.namesrv_addr) as c:          # another broker registers (while connected)
            body = b'{"topicConfigSerializeWrapper":{"topicConfigTable":{},"dataVersion":{"counter":1,"timestamp":1}}}'
            resp = c.invoke(new_request(103, {"brokerName": "broker-z", "brokerAddr": "127.0.0.1:1", "clusterName":
                                              "DefaultCluster", "haServerAddr": "127.0.0.1:2", "brokerId": "0"},
                                        body), 5)
            assert resp.code == 0, resp.remark
            deadline = time.monotonic() + 2 * advertise.ALONE_INTERVAL_S + 5
            while kv.get(NAMESPACE, server.broker.address) is None and time.monotonic() < deadline:
                time.sleep(0.1)
            assert kv.get(NAMESPACE, server.broker.address) == str(endpoint.port)
        assert NAMESPACE.encode() not in kv.snapshot()           # never written to the name server's file
    finally:
        server.stop()
    assert kv.get(NAMESPACE, server.broker_addr) is None          # removed when the endpoint closed
    server.cleanup()


@pytest.mark.parametrize("host, scheme", [("127.0.0.1", d.IPv4), ("10.0.0.2", d.IPv4), ("::1", d.IPv6),
                                          ("[fe80::1]", d.IPv6), ("localhost", d.DOMAIN_NAME),
                                          ("proxy.example", d.DOMAIN_NAME), ("1.2.3", d.DOMAIN_NAME)])
def test_a_hosts_scheme_is_the_proxys(host, scheme):
    """``proxy.common.Address.buildScheme``: a 5.x client builds its channel target from it (ipv4:localhost:N is
    refused by gRPC)."""
    assert address_scheme(host) == scheme


def test_an_entrys_scheme_and_addresses_suit_the_clients():
    """One scheme per entry, the first address's; a name the client asked with beside replicas' IP literals: the
    name alone (a DOMAIN_NAME entry of several addresses is refused by the 5.x clients)."""
    def view(eps):
        pb = endpoints_pb(eps)
        return pb.scheme, [(a.host, a.port) for a in pb.addresses]
    assert view([("localhost", 81)]) == (d.DOMAIN_NAME, [("localhost", 81)])
    assert view([("10.0.0.1", 81), ("10.0.0.3", 83)]) == (d.IPv4, [("10.0.0.1", 81), ("10.0.0.3", 83)])
    assert view([("::1", 81)]) == (d.IPv6, [("::1", 81)])
    assert view([("localhost", 81), ("10.0.0.3", 83), ("other.example", 84)]) == (d.DOMAIN_NAME, [("localhost", 81)])
    assert view([("10.0.0.1", 81), ("proxy.example", 443), ("10.0.0.3", 83)]) == \
        (d.IPv4, [("10.0.0.1", 81), ("10.0.0.3", 83)])
    route = TopicRoute((QueueData("a", 1, 1, 6),), (BrokerGroup("a", {0: "h:1"}),))
    (q,) = message_queues(route, TOPIC, ANY, {("a", 0): [("localhost", 8081)]})
    (x,) = assignments(route, TOPIC, {("a", 0): [("localhost", 8081)]})
    assert q.broker.endpoints.scheme == x.message_queue.broker.endpoints.scheme == d.DOMAIN_NAME
