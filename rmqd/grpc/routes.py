"""Routes for 5.x clients: which gRPC endpoint serves each broker's queues.

A 5.x proxy in local mode (one beside every broker) answers QueryRoute with the name server's route of the topic,
every broker of it at the broker's host and the proxy's gRPC port (``ProxyTopicRouteData(route, grpcPort)``); in
cluster mode every broker is at the proxy's own address (the addresses the client asked with). Both build the
queues as ``RouteActivity`` does: per queue data, per broker id, the read-only, write-only, read-write and
inaccessible queues in that order.

rmqd's brokers may run on one host with a gRPC port each (``rmqd serve --brokers N``), so a broker's endpoint is
its host and the port its endpoint keeps in the name servers' KV table (:mod:`rmqd.grpc.advertise`): a broker
without one (gRPC off, or a Java broker) has no endpoint and its queues are left out, with a log line. The broker
this endpoint serves is at the addresses the client used (it reached it through them). A master's entry lists its
group's other replicas after it: a client whose channel finds the master gone goes on to a replica, which passes
sends, receives, acks and the like to whichever broker is master (:mod:`rmqd.grpc.master_link`); while the name
server has no master for a group (an election), the last master entry stays in the route for :data:`MASTER_GRACE_S`.
Each entry's scheme is its hosts' as the proxy names them (:func:`address_scheme`: a client asking through
``localhost`` gets DOMAIN_NAME, not ``ipv4:localhost``, which gRPC refuses).

:func:`message_queues` and :func:`assignments` are pure (a cluster-mode front reuses them with its own
``endpoints_of``); :class:`ClusterRoutes` fetches and keeps what they read.
"""
from __future__ import annotations

import asyncio
import dataclasses
import ipaddress
import logging
import time
from typing import Awaitable, Callable, Iterable, Mapping, Optional, Sequence

from rmqd.grpc.advertise import NAMESPACE
from rmqd.grpc.json_fields import array, integer, obj
from rmqd.grpc.pb import definition_pb2 as d
from rmqd.remoting import fastjson
from rmqd.remoting.codes import RequestCode, ResponseCode
from rmqd.remoting.command import RemotingCommand, new_request

log = logging.getLogger(__name__)

MASTER_ID = 0
ROUTE_TTL_S = 3.0            # a topic's route from the name server is asked again after this
PORT_TTL_S = 10.0            # the brokers' gRPC ports are asked again after this
PORT_MISSING_TTL_S = 1.0     # ... or after this while a broker of the route has none (it may be starting)
MASTER_GRACE_S = 60.0        # how long a group without a master keeps its last master entry
CALL_TIMEOUT_S = 3.0

Address = tuple[str, int]
Invoke = Callable[[str, RemotingCommand, float], Awaitable[RemotingCommand]]


@dataclasses.dataclass(frozen=True)
class QueueData:
    broker_name: str
    read_queue_nums: int
    write_queue_nums: int
    perm: int


@dataclasses.dataclass(frozen=True)
class BrokerGroup:
    name: str
    addrs: dict[int, str]                       # broker id -> remoting address


@dataclasses.dataclass(frozen=True)
class TopicRoute:
    queue_datas: tuple[QueueData, ...]
    groups: tuple[BrokerGroup, ...]


def parse_topic_route(body: bytes) -> TopicRoute:
    """The name server's TopicRouteData (fastjson: broker ids as bare numbers)."""
    raw = obj(fastjson.loads_lenient(body))
    queues = tuple(QueueData(str(q.get("brokerName", "")), integer(q.get("readQueueNums", 0)),
                             integer(q.get("writeQueueNums", 0)), integer(q.get("perm", 0)))
                   for q in map(obj, array(raw.get("queueDatas"))))
    groups = tuple(BrokerGroup(str(b.get("brokerName", "")),
                               {integer(k): str(v) for k, v in obj(b.get("brokerAddrs")).items()})
                   for b in map(obj, array(raw.get("brokerDatas"))))
    return TopicRoute(queues, groups)


def _permission(perm: int) -> d.Permission.ValueType:
    readable, writable = bool(perm & 4), bool(perm & 2)
    return d.READ_WRITE if readable and writable else d.READ if readable else d.WRITE if writable else d.NONE


def _queues_of(q: QueueData, topic: d.Resource, broker: d.Broker,
               accept: Sequence[d.MessageType.ValueType]) -> list[d.MessageQueue]:
    """``RouteActivity.genMessageQueueFromQueueData``: read-only, write-only, read-write, then inaccessible ids."""
    readable, writable = bool(q.perm & 4), bool(q.perm & 2)
    r = w = rw = n = 0
    if readable and writable:
        rw = min(q.write_queue_nums, q.read_queue_nums)
        r, w = q.read_queue_nums - rw, q.write_queue_nums - rw
    elif writable:
        w = q.write_queue_nums
    elif readable:
        r = q.read_queue_nums
    else:
        n = max(1, q.write_queue_nums, q.read_queue_nums)
    out: list[d.MessageQueue] = []
    qid = 0
    for count, perm in ((r, d.READ), (w, d.WRITE), (rw, d.READ_WRITE), (n, d.NONE)):
        for _ in range(count):
            out.append(d.MessageQueue(topic=topic, id=qid, permission=perm, broker=broker,
                                      accept_message_types=accept))
            qid += 1
    return out


def address_scheme(host: str) -> d.AddressScheme.ValueType:
    """The scheme the proxy gives a host (``proxy.common.Address.buildScheme``): an IPv4 literal IPv4, an IPv6
    literal IPv6, anything else DOMAIN_NAME."""
    try:
        ip = ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return d.DOMAIN_NAME
    return d.IPv4 if ip.version == 4 else d.IPv6


def endpoints_pb(endpoints: Sequence[Address]) -> d.Endpoints:
    """``endpoints`` as one Endpoints: the scheme of the first address, and only the addresses of that scheme (an
    entry may hold the name a client asked with beside replicas' IP literals); a DOMAIN_NAME entry holds one
    address, as the 5.x clients refuse more ("Multiple addresses not allowed in domain schema")."""
    scheme = address_scheme(endpoints[0][0])
    kept = [(h, p) for h, p in endpoints if address_scheme(h) == scheme]
    if scheme == d.DOMAIN_NAME:
        kept = kept[:1]
    return d.Endpoints(scheme=scheme, addresses=[d.Address(host=h.strip("[]"), port=p) for h, p in kept])


def _broker(name: str, broker_id: int, endpoints: Sequence[Address]) -> d.Broker:
    return d.Broker(name=name, id=broker_id, endpoints=endpoints_pb(endpoints))


def message_queues(route: TopicRoute, topic: d.Resource, accept: Sequence[d.MessageType.ValueType],
                   endpoints: Mapping[tuple[str, int], Sequence[Address]]) -> list[d.MessageQueue]:
    """QueryRoute's queues: ``endpoints[(brokerName, brokerId)]`` is where that broker is served (a broker missing
    from it is left out)."""
    out: list[d.MessageQueue] = []
    for q in route.queue_datas:
        for (name, broker_id) in sorted(k for k in endpoints if k[0] == q.broker_name):
            eps = endpoints[(name, broker_id)]
            if eps:
                out.extend(_queues_of(q, topic, _broker(name, broker_id, eps), accept))
    return out


def assignments(route: TopicRoute, topic: d.Resource, endpoints: Mapping[tuple[str, int], Sequence[Address]],
                per_queue: bool = False) -> list[d.Assignment]:
    """QueryAssignment's, from each readable group's master: queue -1 (the proxy's for most groups), or with
    ``per_queue`` (a FIFO group) each readable queue. As the proxy's, without accepted message types."""
    out: list[d.Assignment] = []
    for q in route.queue_datas:
        eps = endpoints.get((q.broker_name, MASTER_ID))
        if not eps or not q.perm & 4 or q.read_queue_nums <= 0:
            continue
        broker = _broker(q.broker_name, MASTER_ID, eps)
        for qid in (range(q.read_queue_nums) if per_queue else (-1,)):
            mq = d.MessageQueue(topic=topic, id=qid, permission=_permission(q.perm), broker=broker)
            out.append(d.Assignment(message_queue=mq))
    return out


def _host_of(addr: str) -> str:
    return addr.rpartition(":")[0].strip("[]")


class ClusterRoutes:
    """The name server's routes and the brokers' gRPC ports, asked through ``invoke`` and kept (local mode)."""

    def __init__(self, invoke: Invoke, namesrv_addrs: Callable[[], list[str]], own_broker: Callable[[], str],
                 own_endpoint: Callable[[], Address]) -> None:
        self.invoke = invoke
        self.namesrv_addrs = namesrv_addrs
        self.own_broker = own_broker
        self.own_endpoint = own_endpoint
        self._routes: dict[str, tuple[float, Optional[TopicRoute]]] = {}
        self._route_calls: dict[str, asyncio.Future[Optional[TopicRoute]]] = {}
        self._ports: Optional[tuple[float, dict[str, int]]] = None     # (asked at, broker address -> gRPC port)
        self._port_call: Optional[asyncio.Future[dict[str, int]]] = None
        self._unserved: set[str] = set()                        # brokers logged as having no endpoint
        self._masters: dict[str, tuple[float, list[Address]]] = {}   # group -> (seen at, its master entry)

    # ------------------------------------------------------------------ the name server
    async def topic_route(self, topic: str) -> Optional[TopicRoute]:
        """The topic's route (kept :data:`ROUTE_TTL_S`); None when the name servers do not know it or cannot be
        reached (then the last one known, if any)."""
        now = time.monotonic()
        kept = self._routes.get(topic)
        if kept is not None and now - kept[0] < ROUTE_TTL_S:
            return kept[1]
        call = self._route_calls.get(topic)
        if call is None:
            call = self._route_calls[topic] = asyncio.ensure_future(self._fetch_route(topic, kept))
            call.add_done_callback(lambda _f: self._route_calls.pop(topic, None))
        return await asyncio.shield(call)

    async def _fetch_route(self, topic: str,
                           kept: Optional[tuple[float, Optional[TopicRoute]]]) -> Optional[TopicRoute]:
        failures = []
        for addr in self.namesrv_addrs():
            try:
                resp = await self.invoke(addr, new_request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic}),
                                         CALL_TIMEOUT_S)
            except (OSError, ConnectionError, asyncio.TimeoutError) as exc:
                failures.append(f"{addr}: {exc!r}")
                continue
            route = None
            if resp.code == ResponseCode.SUCCESS and resp.body:
                try:
                    route = parse_topic_route(bytes(resp.body))
                except (ValueError, TypeError) as exc:
                    log.warning("gRPC route: name server %s sent an unreadable route of %s: %s", addr, topic, exc)
                    failures.append(f"{addr}: unreadable")
                    continue
            self._routes[topic] = (time.monotonic(), route)
            return route
        if failures:
            log.warning("gRPC route of %s: no name server answered (%s); %s", topic, "; ".join(failures),
                        "the last route known" if kept else "this broker's queues only")
        return kept[1] if kept else None

    # ------------------------------------------------------------------ the brokers' gRPC ports
    async def grpc_ports(self, missing: bool = False) -> dict[str, int]:
        """Every broker's gRPC port (broker address -> port) from the name servers' KV table (kept
        :data:`PORT_TTL_S`, or :data:`PORT_MISSING_TTL_S` when the caller misses a broker in it; the last one
        known when no name server answers)."""
        now = time.monotonic()
        if self._ports is not None and now - self._ports[0] < (PORT_MISSING_TTL_S if missing else PORT_TTL_S):
            return self._ports[1]
        if self._port_call is None:
            self._port_call = asyncio.ensure_future(self._ask_ports())

            def done(_f: asyncio.Future[dict[str, int]]) -> None:
                self._port_call = None
            self._port_call.add_done_callback(done)
        return await asyncio.shield(self._port_call)

    async def _ask_ports(self) -> dict[str, int]:
        failures = []
        for addr in self.namesrv_addrs():
            try:
                resp = await self.invoke(addr, new_request(RequestCode.GET_KVLIST_BY_NAMESPACE,
                                                           {"namespace": NAMESPACE}), CALL_TIMEOUT_S)
            except (OSError, ConnectionError, asyncio.TimeoutError) as exc:
                failures.append(f"{addr}: {exc!r}")
                continue
            ports: dict[str, int] = {}
            if resp.code == ResponseCode.SUCCESS and resp.body:
                table = obj(obj(fastjson.loads_lenient(bytes(resp.body))).get("table"))
                ports = {str(k): integer(v) for k, v in table.items() if str(v).strip().isdigit()}
            self._ports = (time.monotonic(), ports)
            return ports
        log.warning("gRPC route: no name server said the brokers' gRPC ports (%s)", "; ".join(failures))
        return self._ports[1] if self._ports is not None else {}

    # ------------------------------------------------------------------ endpoints
    async def endpoints(self, route: TopicRoute, asked: Sequence[Address]) -> dict[tuple[str, int], list[Address]]:
        """Where each (brokerName, brokerId) of ``route`` is served: this endpoint's broker at ``asked`` (the
        addresses the client used; this endpoint's own when empty), the others at their host and gRPC port; a
        master's entry followed by its group's other replicas."""
        own = self.own_broker()
        own_eps = list(asked) or [self.own_endpoint()]
        pairs = [(g.name, bid, addr) for g in route.groups for bid, addr in g.addrs.items()]
        others = {addr for _, _, addr in pairs if addr != own}
        ports = await self.grpc_ports() if others else {}
        if others - ports.keys():            # a broker that just started writes its port a moment after registering
            ports = await self.grpc_ports(missing=True)
        single: dict[tuple[str, int], list[Address]] = {}
        for name, bid, addr in pairs:
            if addr == own:
                single[(name, bid)] = own_eps
            elif ports.get(addr):
                single[(name, bid)] = [(_host_of(addr), ports[addr])]
            elif addr not in self._unserved:
                self._unserved.add(addr)
                log.info("gRPC route: broker %s (%s) has no gRPC endpoint in the name servers: its queues are left "
                         "out", addr, name)
        out: dict[tuple[str, int], list[Address]] = {}
        now = time.monotonic()
        for group in route.groups:
            replicas = [ep for bid in sorted(group.addrs) if bid != MASTER_ID
                        for ep in single.get((group.name, bid), ())]
            for bid in group.addrs:
                if (group.name, bid) in single:
                    out[(group.name, bid)] = list(single[(group.name, bid)])
            master = single.get((group.name, MASTER_ID))
            if master:
                entry = _unique(master + replicas)
                out[(group.name, MASTER_ID)] = entry
                self._masters[group.name] = (now, entry)
            elif replicas:
                last = self._masters.get(group.name)
                if last is not None and now - last[0] < MASTER_GRACE_S:
                    out[(group.name, MASTER_ID)] = _unique(last[1] + replicas)
        return out


def _unique(addresses: Iterable[Address]) -> list[Address]:
    seen, out = set(), []
    for a in addresses:
        if a not in seen:
            seen.add(a)
            out.append(a)
    return out


def local_route(broker_name: str, broker_addr: str, read_queue_nums: int, write_queue_nums: int,
                perm: int) -> TopicRoute:
    """This broker alone (the name server does not know the topic yet, or cannot be reached)."""
    return TopicRoute((QueueData(broker_name, read_queue_nums, write_queue_nums, perm),),
                      (BrokerGroup(broker_name, {MASTER_ID: broker_addr}),))
