"""RemoteCluster: the cluster as the console reaches it over the remoting protocol, what every remote page
builds on: one ``rmqd.admin.client.AdminClient`` per executor thread (a broken connection dropped and the call
retried once), the brokers and masters from the name servers (the cluster info reused for a moment), and the
master of each broker of a topic's route.
"""
from __future__ import annotations

import logging
import threading
import time
from typing import Callable, Concatenate, Optional, ParamSpec, TypeVar, cast

from rmqd.admin.client import AdminClient, AdminError, broker_addr_of, tools_credentials
from rmqd.console.admin_bodies import ClusterInfoBody, RouteBody, RuntimeInfoBody
from rmqd.console.view_base import CLUSTER_INFO_TTL_S, BrokerRow, ClusterView, GroupPage, JsonObject, ViewError
from rmqd.remoting.codes import RequestCode, ResponseCode

log = logging.getLogger(__name__)

P = ParamSpec("P")
T = TypeVar("T")


class RemoteCluster(ClusterView):
    """The transport and the cluster's layout; the page families (rmqd.console.remote_*) add the pages."""

    def __init__(self, namesrv_addr: str, timeout: float = 5.0,
                 credentials: Optional[tuple[str, str]] = None) -> None:
        """``credentials``: (accessKey, secretKey) every request is signed with (brokers with access control on);
        by default ``$ROCKETMQ_HOME/conf/tools.yml``'s, as ``rmqd admin`` signs."""
        self.namesrv_addr = namesrv_addr
        self.timeout = timeout
        self.credentials = credentials if credentials is not None else tools_credentials()
        self._local = threading.local()
        self._clients: list[AdminClient] = []
        self._lock = threading.Lock()
        self._cluster_info: Optional[tuple[float, ClusterInfoBody]] = None

    # ------------------------------------------------------------------ transport
    @property
    def admin(self) -> AdminClient:
        c = getattr(self._local, "client", None)
        if c is None:
            c = self._local.client = AdminClient(self.namesrv_addr, self.timeout, credentials=self.credentials)
            with self._lock:
                self._clients.append(c)
        return c

    def _reset_client(self) -> None:
        c = getattr(self._local, "client", None)
        if c is not None:
            c.close()
            self._local.client = None

    def call(self, fn: Callable[Concatenate[AdminClient, P], T], *args: P.args, **kw: P.kwargs) -> T:
        """Run ``fn(admin, ...)``; a broken connection is dropped and the call retried once."""
        try:
            return fn(self.admin, *args, **kw)
        except TimeoutError:                          # the peer is slow, not gone: do not ask twice
            self._reset_client()
            raise
        except (OSError, ConnectionError) as exc:
            log.info("console: reconnecting after %s", exc)
            self._reset_client()
            return fn(self.admin, *args, **kw)

    def close(self) -> None:
        with self._lock:
            for c in self._clients:
                c.close()
            self._clients.clear()

    def _json(self, addr: str, code: int, ext: Optional[JsonObject] = None, body: Optional[bytes] = None) -> object:
        """The decoded JSON answer of ``code`` at ``addr`` (None when it has no body)."""
        answer: object = self.call(lambda a: a.call_json(addr, code, ext, body))
        return answer

    def _answer(self, shape: type[T], addr: str, code: int, ext: Optional[JsonObject] = None) -> T:
        """``_json``'s answer ({} without a body) read as ``shape``, the body the code is documented to answer
        with (rmqd.console.admin_bodies)."""
        # the JSON decode boundary: the broker's body is trusted to have its code's shape, as the pages always did
        return cast(T, self._json(addr, code, ext) or {})

    # ------------------------------------------------------------------ cluster layout
    def cluster_info(self) -> ClusterInfoBody:
        """GET_BROKER_CLUSTER_INFO, reused for CLUSTER_INFO_TTL_S (a page asks for it per row)."""
        now = time.monotonic()
        cached = self._cluster_info
        if cached is not None and now - cached[0] < CLUSTER_INFO_TTL_S:
            return cached[1]
        info: ClusterInfoBody = self.call(lambda a: a.cluster_info())
        self._cluster_info = (now, info)
        return info

    def brokers(self) -> list[BrokerRow]:
        """Every broker (masters and slaves) with cluster, name, id and address."""
        info = self.cluster_info()
        clusters = {name: cl for cl, names in (info.get("clusterAddrTable") or {}).items() for name in names}
        out: list[BrokerRow] = []
        for name, bd in sorted((info.get("brokerAddrTable") or {}).items()):
            for bid, addr in sorted((bd.get("brokerAddrs") or {}).items(), key=lambda kv: int(kv[0])):
                out.append({"cluster": clusters.get(name, bd.get("cluster", "")), "brokerName": name,
                            "brokerId": int(bid), "addr": addr})
        return out

    def masters(self) -> dict[str, str]:
        return {b["brokerName"]: b["addr"] for b in self.brokers() if b["brokerId"] == 0}

    def broker_runtime(self, addr: str) -> dict[str, str]:
        return self._answer(RuntimeInfoBody, addr, RequestCode.GET_BROKER_RUNTIME_INFO).get("table", {})

    @staticmethod
    def _route_masters(route: RouteBody) -> dict[str, str]:
        out = {}
        for bd in route.get("brokerDatas") or []:
            a = broker_addr_of(dict(bd), 0)
            if a:
                out[bd["brokerName"]] = a
        return out

    def route(self, topic: str) -> RouteBody:
        """GET_ROUTEINFO_BY_TOPIC."""
        return self.call(lambda a: a.route(topic))

    def route_masters(self, topic: str) -> dict[str, str]:
        try:
            return self._route_masters(self.route(topic))
        except AdminError as exc:
            if exc.code == ResponseCode.TOPIC_NOT_EXIST:
                raise ViewError(f"topic {topic} not found", 404)
            raise

    def group(self, group: str) -> GroupPage:
        """A consumer group's page (rmqd.console.remote_groups.RemoteGroups); the message pages resend through it."""
        raise NotImplementedError
