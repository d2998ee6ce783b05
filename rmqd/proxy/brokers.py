"""The brokers behind ``rmqd proxy``: who they are, which is master, how to call them.

:class:`BrokerDirectory` keeps the name servers' view (topic routes through :class:`rmqd.grpc.routes.ClusterRoutes`,
the cluster table from GET_BROKER_CLUSTER_INFO) and calls a broker by its *name*: the request goes to that broker
group's master as the name servers see it now. A call that cannot reach the master (connection refused or lost)
asks the name servers again and, when the group has another master by then, goes to it (a failover followed);
a group without a master answers :class:`BrokerUnavailable`. Nothing is kept that another proxy instance would
need: every instance finds the same masters from the same name servers.
"""
from __future__ import annotations

import asyncio
import logging
import time
from typing import Callable, Optional

from rmqd.grpc.json_fields import integer, obj
from rmqd.grpc.routes import MASTER_ID, ClusterRoutes, TopicRoute
from rmqd.remoting import fastjson
from rmqd.remoting.client import RemotingClient
from rmqd.remoting.codes import RequestCode, ResponseCode
from rmqd.remoting.command import RemotingCommand, new_request

log = logging.getLogger(__name__)

CLUSTER_TTL_S = 5.0           # the cluster table is asked again after this
CLUSTER_MIN_GAP_S = 0.5       # a forced refresh (a master unreachable) at most this often
ISOLATE_S = 5.0               # a broker whose call failed is picked last for sends this long
CALL_TIMEOUT_S = 3.0
CONNECT_ERRORS = (OSError, ConnectionError)


class BrokerUnavailable(Exception):
    """A broker group without a reachable master."""


def parse_cluster_info(body: bytes) -> dict[str, dict[int, str]]:
    """GET_BROKER_CLUSTER_INFO's ``brokerAddrTable``: broker name -> {broker id: address}."""
    table = obj(obj(fastjson.loads_lenient(body)).get("brokerAddrTable"))
    return {str(name): {integer(k): str(v) for k, v in obj(obj(data).get("brokerAddrs")).items()}
            for name, data in table.items()}


class BrokerDirectory:
    """Name server view and calls by broker name, over one :class:`RemotingClient` (its connections to the
    brokers also carry the brokers' requests to the proxy: transaction check-backs, lite notices)."""

    def __init__(self, client: RemotingClient, namesrv_addrs: Callable[[], list[str]]) -> None:
        self.client = client
        self.namesrv_addrs = namesrv_addrs
        self.routes = ClusterRoutes(self._invoke_namesrv, namesrv_addrs, lambda: "", lambda: ("", 0))
        self.brokers: dict[str, dict[int, str]] = {}        # broker name -> {id: address}
        self._cluster_at = 0.0
        self._cluster_call: Optional[asyncio.Future[dict[str, dict[int, str]]]] = None
        self._failed: dict[str, float] = {}                  # broker name -> when a call to it last failed

    async def _invoke_namesrv(self, addr: str, request: RemotingCommand, timeout: float) -> RemotingCommand:
        return await self.client.invoke(addr, request, timeout)

    # ------------------------------------------------------------------ the name servers' view
    async def topic_route(self, topic: str, fresh: bool = False) -> Optional[TopicRoute]:
        if fresh:
            self.routes._routes.pop(topic, None)
        route = await self.routes.topic_route(topic)
        if route is not None:
            for group in route.groups:          # a route is newer news of its groups than the cluster table
                if group.addrs:
                    self.brokers[group.name] = dict(group.addrs)
        return route

    async def cluster(self, fresh: bool = False) -> dict[str, dict[int, str]]:
        """Every broker group (name -> {id: address}), asked again after :data:`CLUSTER_TTL_S` or when ``fresh``
        (at most every :data:`CLUSTER_MIN_GAP_S`)."""
        age = time.monotonic() - self._cluster_at
        if age < (CLUSTER_MIN_GAP_S if fresh else CLUSTER_TTL_S):
            return self.brokers
        if self._cluster_call is None:
            self._cluster_call = asyncio.ensure_future(self._ask_cluster())

            def done(_f: asyncio.Future[dict[str, dict[int, str]]]) -> None:
                self._cluster_call = None
            self._cluster_call.add_done_callback(done)
        return await asyncio.shield(self._cluster_call)

    async def _ask_cluster(self) -> dict[str, dict[int, str]]:
        failures: list[str] = []
        for addr in self.namesrv_addrs():
            try:
                resp = await self.client.invoke(addr, new_request(RequestCode.GET_BROKER_CLUSTER_INFO), CALL_TIMEOUT_S)
            except (*CONNECT_ERRORS, asyncio.TimeoutError) as exc:
                failures.append(f"{addr}: {exc!r}")
                continue
            if resp.code != ResponseCode.SUCCESS or not resp.body:
                failures.append(f"{addr}: {resp.code} {resp.remark}")
                continue
            try:
                self.brokers = parse_cluster_info(bytes(resp.body))
            except (ValueError, TypeError) as exc:
                failures.append(f"{addr}: unreadable cluster info ({exc})")
                continue
            self._cluster_at = time.monotonic()
            return self.brokers
        log.warning("proxy: no name server told the brokers (%s); the last table known is used", "; ".join(failures))
        self._cluster_at = time.monotonic()
        return self.brokers

    def master_of(self, name: str) -> Optional[str]:
        return self.brokers.get(name, {}).get(MASTER_ID)

    def name_of(self, addr: str) -> Optional[str]:
        for name, addrs in self.brokers.items():
            if addr in addrs.values():
                return name
        return None

    def failed_recently(self, name: str) -> bool:
        at = self._failed.get(name)
        return at is not None and time.monotonic() - at < ISOLATE_S

    # ------------------------------------------------------------------ calls
    async def master(self, name: str) -> str:
        """The master address of broker group ``name`` (the name servers asked again when it has none)."""
        addr = self.master_of(name)
        if addr is None:
            await self.cluster(fresh=True)
            addr = self.master_of(name)
        if addr is None:
            raise BrokerUnavailable(f"broker {name} has no master now")
        return addr

    async def invoke(self, name: str, request: RemotingCommand, timeout: float = CALL_TIMEOUT_S) -> RemotingCommand:
        """``request`` to the master of ``name``; a master that cannot be reached is looked up again once (a
        failover: the group's new master gets the request). Raises BrokerUnavailable, asyncio.TimeoutError."""
        addr = await self.master(name)
        try:
            return await self.client.invoke(addr, request, timeout)
        except CONNECT_ERRORS as exc:
            self._failed[name] = time.monotonic()
            await self.cluster(fresh=True)
            again = self.master_of(name)
            if again is None or again == addr:
                raise BrokerUnavailable(f"broker {name} ({addr}) unreachable: {exc!r}") from None
            log.info("proxy: broker %s master %s unreachable (%r); its new master is %s", name, addr, exc, again)
            return await self.client.invoke(again, _copy(request), timeout)

    async def invoke_oneway(self, name: str, request: RemotingCommand) -> None:
        addr = await self.master(name)
        try:
            await self.client.invoke_oneway(addr, request)
        except CONNECT_ERRORS as exc:
            self._failed[name] = time.monotonic()
            raise BrokerUnavailable(f"broker {name} ({addr}) unreachable: {exc!r}") from None

    def succeeded(self, name: str) -> None:
        self._failed.pop(name, None)


def _copy(request: RemotingCommand) -> RemotingCommand:
    """The same request with a new opaque (a retry must not reuse the failed call's)."""
    return new_request(request.code, dict(request.ext_fields or {}), request.body)


__all__ = ["BrokerDirectory", "BrokerUnavailable", "parse_cluster_info"]
