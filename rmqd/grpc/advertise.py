"""This broker's gRPC port, kept in the name servers' KV table where the other brokers' endpoints read it.

A 5.x proxy in local mode routes a client to every broker at that broker's host and the proxy's one port. rmqd's
brokers may share a host with a gRPC port each, so each endpoint writes its port under namespace
:data:`NAMESPACE`, key = the broker's address as it registers (``brokerIP1:listenPort``), on every name server, and
:class:`rmqd.grpc.routes.ClusterRoutes` reads the namespace. The KV table is the name server's own (Java's has it
too; rmqd's keeps this namespace in memory only, as its broker table), asked with no broker-side ACL in the
way. A broker alone in its name servers' view writes nothing (a single
``rmqd serve`` leaves the KV table and its file alone): it looks again every :data:`ALONE_INTERVAL_S`; once others
are there, the entry is checked every :data:`CHECK_INTERVAL_S` (a name server that restarted empty gets it again)
and removed when the endpoint closes.
"""
from __future__ import annotations

import asyncio
import logging
from typing import Awaitable, Callable, Optional

from rmqd.grpc.json_fields import obj
from rmqd.namesrv.kvconfig import NAMESPACE_GRPC_ENDPOINT
from rmqd.remoting import fastjson
from rmqd.remoting.codes import RequestCode, ResponseCode
from rmqd.remoting.command import RemotingCommand, new_request

log = logging.getLogger(__name__)

NAMESPACE = NAMESPACE_GRPC_ENDPOINT
CHECK_INTERVAL_S = 30.0
ALONE_INTERVAL_S = 1.0
CALL_TIMEOUT_S = 3.0

Invoke = Callable[[str, RemotingCommand, float], Awaitable[RemotingCommand]]


class GrpcPortAdvertiser:
    """Keeps ``broker_addr -> port`` in every name server's KV table while the endpoint runs."""

    def __init__(self, invoke: Invoke, namesrv_addrs: Callable[[], list[str]], broker_addr: Callable[[], str],
                 port: int) -> None:
        self.invoke = invoke
        self.namesrv_addrs = namesrv_addrs
        self.broker_addr = broker_addr
        self.port = port
        self._task: Optional[asyncio.Task[None]] = None
        self._failing: set[str] = set()          # name servers whose last check failed (logged once)
        self._written: set[str] = set()          # name servers holding the entry

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name="grpc-port-advertiser")

    async def _run(self) -> None:
        while True:
            if self._written or await self._others_registered():
                await asyncio.gather(*(self._ensure(addr) for addr in self.namesrv_addrs()))
            await asyncio.sleep(CHECK_INTERVAL_S if self._written else ALONE_INTERVAL_S)

    async def _others_registered(self) -> bool:
        """Whether a name server knows a broker address other than this broker's (someone may route here)."""
        own = self.broker_addr()
        for namesrv in self.namesrv_addrs():
            try:
                resp = await self.invoke(namesrv, new_request(RequestCode.GET_BROKER_CLUSTER_INFO), CALL_TIMEOUT_S)
            except (OSError, ConnectionError, asyncio.TimeoutError):
                continue
            if resp.code != ResponseCode.SUCCESS or not resp.body:
                continue
            table = obj(obj(fastjson.loads_lenient(bytes(resp.body))).get("brokerAddrTable"))
            return any(str(addr) != own for data in table.values()
                       for addr in obj(obj(data).get("brokerAddrs")).values())
        return False

    async def _ensure(self, namesrv: str) -> None:
        key, value = self.broker_addr(), str(self.port)
        try:
            resp = await self.invoke(namesrv, new_request(RequestCode.GET_KV_CONFIG,
                                                          {"namespace": NAMESPACE, "key": key}), CALL_TIMEOUT_S)
            if resp.code != ResponseCode.SUCCESS or (resp.ext_fields or {}).get("value") != value:
                resp = await self.invoke(namesrv, new_request(RequestCode.PUT_KV_CONFIG, {
                    "namespace": NAMESPACE, "key": key, "value": value}), CALL_TIMEOUT_S)
                if resp.code != ResponseCode.SUCCESS:
                    raise ConnectionError(f"PUT_KV_CONFIG answered {resp.code} {resp.remark}")
                log.debug("gRPC endpoint %s:%s written in name server %s", key, value, namesrv)
            self._written.add(namesrv)
        except (OSError, ConnectionError, asyncio.TimeoutError) as exc:
            if namesrv not in self._failing:
                log.warning("gRPC: cannot tell name server %s this broker's gRPC port (%r); other brokers' routes "
                            "leave this broker out until it can", namesrv, exc)
            self._failing.add(namesrv)
            return
        if namesrv in self._failing:
            self._failing.discard(namesrv)
            log.info("gRPC: name server %s knows this broker's gRPC port again", namesrv)

    async def close(self) -> None:
        """Stop, and remove the entry from the name servers (bounded: a name server that is gone is left)."""
        if self._task is not None:
            self._task.cancel()
            self._task = None
        key = self.broker_addr()
        written, self._written = self._written, set()

        async def remove(namesrv: str) -> None:
            try:
                await self.invoke(namesrv, new_request(RequestCode.DELETE_KV_CONFIG,
                                                       {"namespace": NAMESPACE, "key": key}), 1.0)
            except (OSError, ConnectionError, asyncio.TimeoutError) as exc:
                log.debug("gRPC: could not remove this broker's port from name server %s: %r", namesrv, exc)
        await asyncio.gather(*(remove(a) for a in written))
