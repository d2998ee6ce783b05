"""``GET /metrics`` (Prometheus text) and ``GET /healthz`` beside the broker, on its event loop.

Joins ``rmqd serve`` (on by default at 5557) and ``rmqd broker`` as a ``Services`` endpoint.  The port is
bound at start; aiohttp and the collector load on the first connection (:class:`rmqd.common.lazy_http.LazyHttpSite`),
so an endpoint nobody scrapes costs no memory.  A scrape runs in a one-thread executor (scrapes queue behind
each other, the loop never waits for one).
"""
from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import socket
from typing import TYPE_CHECKING, Optional

from rmqd.common.http_endpoint import LazyHttpEndpoint

if TYPE_CHECKING:
    from aiohttp import web

    from rmqd.metrics.handles import MetricsServices

log = logging.getLogger(__name__)

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
EXPORTER_TYPES = {"0": "DISABLE", "1": "OTLP_GRPC", "2": "PROM", "3": "LOG"}


def exporter_type(value: object) -> str:
    """metricsExporterType by name or number (Java accepts both)."""
    v = str(value or "DISABLE").strip().upper()
    return EXPORTER_TYPES.get(v, v)


class MetricsEndpoint(LazyHttpEndpoint):
    """Prometheus pull endpoint for the broker of the ``Services`` it joins.  It binds before the broker
    starts (``starts_early``), so ``/healthz`` answers 503 while the store recovers.  With ``optional``
    (``rmqd serve``'s default port) a taken port is a note in the start-up block, not a failure."""

    def __init__(self, host: str = "127.0.0.1", port: int = 5557, optional: bool = False) -> None:
        super().__init__(host, port, optional)
        self._services: Optional["MetricsServices"] = None
        self._executor = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="rmqd-metrics")

    async def start(self, services: "MetricsServices") -> None:
        self._services = services
        self._bind("metrics", self._serve, lambda exc: f"metrics not started: {self.host}:{self.port} is in use "
                                                       f"({exc.strerror or exc}; use --metrics-port)")

    async def _serve(self, sock: socket.socket) -> "web.AppRunner":
        """The HTTP server, started on the bound socket when the first connection arrives."""
        from aiohttp import web
        app = web.Application()
        app.router.add_get("/metrics", self._metrics)
        app.router.add_get("/healthz", self._healthz)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        await web.SockSite(runner, sock).start()
        return runner

    async def close(self) -> None:
        await self._close_site()
        self._executor.shutdown(wait=False)

    def describe(self) -> list[str]:
        if self.failed:
            return [f"rmqd {self.failed}"]
        return [f"rmqd metrics on {self.url}"]

    @property
    def url(self) -> str:
        return self._url("/metrics")

    def ready_parts(self) -> list[str]:
        if self.failed:
            return ["metrics off (port taken)"]
        return [f"metrics {self.url}"]

    async def _metrics(self, request: "web.Request") -> "web.Response":
        from aiohttp import web
        services = self._services
        broker = services.broker if services is not None else None
        if services is None or broker is None:
            return web.Response(status=503, text="no broker in this process\n")
        if not services.ready():
            return web.Response(status=503, text="the broker is starting (or stopping)\n")
        from rmqd.metrics.collector import collect
        loop = asyncio.get_running_loop()
        text = await loop.run_in_executor(self._executor, collect, broker)
        return web.Response(body=text.encode("utf-8"), headers={"Content-Type": CONTENT_TYPE})

    async def _healthz(self, request: "web.Request") -> "web.Response":
        return health_response(self._services)


def health_response(services: Optional["MetricsServices"]) -> "web.Response":
    """200 ``ok`` when the process's name server and broker are up, else 503."""
    from aiohttp import web
    ready = services is not None and services.ready()
    return web.json_response({"status": "ok" if ready else "starting"}, status=200 if ready else 503)
