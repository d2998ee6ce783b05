"""LazyHttpSite: an HTTP port bound at start whose server (aiohttp, the handlers) loads on the first connection.

The console and the metrics endpoint are on by default in ``rmqd serve``; most runs never open them. Binding
the port at start keeps the printed addresses true and a taken port an error at start, while aiohttp (about
10 MB of RSS and 0.1-0.4 s of imports) is loaded only when a connection waits on the socket; that connection
is accepted by the server once it runs.
"""
from __future__ import annotations

import asyncio
import logging
import socket
from typing import TYPE_CHECKING, Awaitable, Callable, Optional

if TYPE_CHECKING:
    from aiohttp import web

log = logging.getLogger(__name__)


class LazyHttpSite:
    """``bind()`` at start; ``activate(sock)`` (the caller's coroutine: build the app, start a ``SockSite`` on
    ``sock``, return its runner) runs when the first connection arrives, or when ``ensure_active()`` asks."""

    def __init__(self, host: str, port: int, activate: Callable[[socket.socket], Awaitable[web.AppRunner]],
                 name: str) -> None:
        self.host = host
        self.port = port
        self.name = name
        self.runner: Optional[web.AppRunner] = None
        self._activate_fn = activate
        self._sock: Optional[socket.socket] = None
        self._loop: Optional[asyncio.AbstractEventLoop] = None
        self._activating: Optional[asyncio.Future[None]] = None

    def bind(self) -> None:
        """Bind and listen now (OSError when the port is taken); the port picked for 0 is in ``port``."""
        family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
        sock = socket.create_server((self.host, self.port), family=family, backlog=128, reuse_port=False)
        sock.setblocking(False)
        self._sock = sock
        self.port = sock.getsockname()[1]
        self._loop = asyncio.get_running_loop()
        self._loop.add_reader(sock.fileno(), self._first_connection)

    @property
    def bound(self) -> bool:
        return self._sock is not None

    def _first_connection(self) -> None:
        self._begin().add_done_callback(self._log_failure)

    def _begin(self) -> asyncio.Future[None]:
        """Stop watching the socket (the server takes it over) and start the server, once."""
        if self._activating is None:
            assert self._loop is not None and self._sock is not None
            self._loop.remove_reader(self._sock.fileno())
            self._activating = asyncio.ensure_future(self._start(self._sock))
        return self._activating

    async def _start(self, sock: socket.socket) -> None:
        self.runner = await self._activate_fn(sock)
        log.debug("%s HTTP server started on %s:%s", self.name, self.host, self.port)

    def _log_failure(self, fut: asyncio.Future[None]) -> None:
        if not fut.cancelled() and fut.exception() is not None:
            log.error("starting the %s HTTP server on %s:%s failed", self.name, self.host, self.port,
                      exc_info=fut.exception())

    async def ensure_active(self) -> None:
        """Start the HTTP server on the bound socket now (no-op when it runs or the socket is closed)."""
        if self.runner is not None or self._sock is None:
            return
        await asyncio.shield(self._begin())

    async def close(self) -> None:
        sock = self._sock
        if self.runner is None and sock is not None and self._loop is not None:
            try:
                self._loop.remove_reader(sock.fileno())
            except (ValueError, OSError):
                pass
        act = self._activating
        if act is not None and not act.done():
            act.cancel()
        if self.runner is not None:
            await self.runner.cleanup()
            self.runner = None
        if sock is not None:
            sock.close()
            self._sock = None
