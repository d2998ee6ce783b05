"""ConsoleEndpoint: the console as a ``Services`` endpoint (``rmqd serve``, ``rmqd console``)."""
from __future__ import annotations

import ipaddress
import logging
import secrets
from typing import TYPE_CHECKING, Optional

from rmqd.common.http_endpoint import LazyHttpEndpoint

if TYPE_CHECKING:
    import socket

    from aiohttp import web

    from rmqd.console.handles import ConsoleServices
    from rmqd.console.view import RemoteClusterView

log = logging.getLogger(__name__)


def is_loopback(host: str) -> bool:
    if host in ("localhost", ""):
        return host == "localhost"
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class ConsoleEndpoint(LazyHttpEndpoint):
    """Serves the console for the in-process broker, or for ``namesrv_addr``'s cluster when given.

    It binds before the broker starts (``starts_early``): while the store recovers, ``/healthz``
    answers 503 and every other request 503 too; its view is made on first use, once everything is up."""

    def __init__(self, host: str = "127.0.0.1", port: int = 8080, read_only: bool = False,
                 token: Optional[str] = None, namesrv_addr: Optional[str] = None,
                 require_token: Optional[bool] = None, lag_interval_s: float = 10.0,
                 optional: bool = False) -> None:
        super().__init__(host, port, optional)     # optional: a taken port is a warning (serve's default)
        self.read_only = read_only
        self.namesrv_addr = namesrv_addr
        need = (not is_loopback(host)) if require_token is None else require_token
        self.token = (token or secrets.token_urlsafe(18)) if need else None
        self.lag_interval_s = lag_interval_s
        self._app: Optional[web.Application] = None
        self._services: Optional[ConsoleServices] = None

    async def start(self, services: "ConsoleServices") -> None:
        """Bind the port now; load the HTTP stack (aiohttp, the views) when the first connection waits
        on it, so a console nobody opens costs no memory (the pending connection is accepted then)."""
        if (self.namesrv_addr is None and services.broker is None and services.namesrv is None):
            raise ValueError("the console needs a broker in this process or a name server address")
        self._services = services
        self._bind("console", self._serve, lambda exc: f"console not started: {self.host}:{self.port}: "
                                                       f"{exc.strerror or exc} (use --console-port)")

    async def activate(self) -> None:
        """Start the HTTP server on the bound socket now (also started by the first connection)."""
        if self._site is not None:
            await self._site.ensure_active()

    async def _serve(self, sock: "socket.socket") -> "web.AppRunner":
        from aiohttp import web

        from rmqd.console.app import build_app, loopback_hosts
        services = self._services
        if services is None:
            raise RuntimeError("the console's HTTP server started before the console")
        hosts = loopback_hosts(self.port, self.host) if self.token is None and is_loopback(self.host) else None
        app = build_app(self._make_view, self.read_only, self.token, ready=services.ready,
                        lag_interval_s=self.lag_interval_s, allowed_hosts=hosts,
                        cookie_suffix=str(self.port))
        self._app = app
        runner = web.AppRunner(app, access_log=None, shutdown_timeout=2.0)
        await runner.setup()
        await web.SockSite(runner, sock).start()
        log.debug("console HTTP server started on %s", self.url)
        return runner

    @property
    def _runner(self) -> Optional["web.AppRunner"]:
        # LazyHttpSite keeps whatever its activate function returned: here _serve's runner
        runner: Optional[web.AppRunner] = self._site.runner if self._site is not None else None
        return runner

    def _make_view(self) -> "RemoteClusterView":
        """The view, made on first use (the name server's address is known by then)."""
        from rmqd.console.local_view import LocalClusterView
        from rmqd.console.view import RemoteClusterView
        services = self._services
        if services is None:
            raise RuntimeError("the console's view is made after the console starts")
        if self.namesrv_addr or services.broker is None:
            addr = self.namesrv_addr or (services.namesrv.address if services.namesrv else None)
            if addr is None:            # start() refuses a console with neither
                raise ValueError("the console needs a broker in this process or a name server address")
            return RemoteClusterView(addr)
        return LocalClusterView(services)

    @property
    def view(self) -> Optional["RemoteClusterView"]:
        """The console's view (made on first use; None before the HTTP server is up)."""
        from rmqd.console.app import STATE
        return self._app[STATE].view if self._app is not None else None

    async def close(self) -> None:
        await self._close_site()
        if self._app is not None:
            from rmqd.console.app import STATE
            self._app[STATE].close_view()
            self._app = None

    @property
    def url(self) -> str:
        return self._url("/")

    def describe(self) -> list[str]:
        if self.failed:
            return [f"rmqd {self.failed}"]
        mode = " (read-only)" if self.read_only else ""
        lines = [f"rmqd console on {self.url}{mode}"]
        if self.token:
            lines.append(f"rmqd console token: {self.token} (open {self.url}?token={self.token})")
        return lines

    def ready_parts(self) -> list[str]:
        if self.failed:
            return ["console off (port taken)"]
        return [f"console {self.url}" + (" (read-only)" if self.read_only else "")]
