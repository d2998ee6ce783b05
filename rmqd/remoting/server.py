"""RemotingServer: accepts connections on one or more ports of the running (uv)loop.

With TLS (``tls``: :class:`rmqd.tls.contexts.ServerTls`, mode permissive or enforcing) each port is a
:class:`rmqd.tls.acceptor.TlsAcceptor`: a connection is TLS or plaintext by its first byte, as Java's remoting
server; with TLS disabled (or none given) the loop's own ``create_server`` accepts, as before.
"""
from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Callable, Iterable

from rmqd.remoting.busy_poll import BusyPoll
from rmqd.remoting.command import DEFAULT_MAX_FRAME_LENGTH
from rmqd.remoting.connection import Connection
from rmqd.remoting.dispatch import Dispatcher

if TYPE_CHECKING:
    from rmqd.tls.acceptor import TlsAcceptor
    from rmqd.tls.contexts import ServerTls

log = logging.getLogger(__name__)

FIRST_BYTE_TIMEOUT_S = 120.0    # a TLS-or-plaintext port closes a silent connection after this (Java's idle close)


class RemotingServer:
    """Serves one dispatcher on ``host`` at ``port`` (and any extra ports, e.g. the VIP port)."""

    def __init__(self, dispatcher: Dispatcher, host: str = "127.0.0.1", port: int = 0, *,
                 extra_ports: Iterable[int] = (), name: str = "server",
                 max_frame_length: int = DEFAULT_MAX_FRAME_LENGTH, busy_poll_us: int = 0,
                 max_idle_s: float = 0, tls: "ServerTls | None" = None) -> None:
        """``max_idle_s``: close a connection that read and wrote nothing for this long (the Java
        server's ``serverChannelMaxIdleTimeSeconds``; 0 = never). ``tls``: the server's TLS (None: plaintext)."""
        self.dispatcher = dispatcher
        self.host = host
        self.port = port
        self.extra_ports = list(extra_ports)
        self.name = name
        self.max_frame_length = max_frame_length
        self.busy_poll_us = busy_poll_us
        self._busy_poll: BusyPoll | None = None
        self.connections: set[Connection] = set()
        self.bound_ports: list[int] = []
        self._servers: list[asyncio.base_events.Server] = []
        self.tls = tls
        self._acceptors: list["TlsAcceptor"] = []
        self._close_listeners: list[Callable[[Connection], None]] = []
        self.max_idle_s = max_idle_s
        self._idle_sweep: asyncio.TimerHandle | None = None

    def add_close_listener(self, callback: Callable[[Connection], None]) -> None:
        """Called (on the loop) for every connection of this server that closes."""
        self._close_listeners.append(callback)

    def _make_connection(self) -> Connection:
        conn = Connection(self.dispatcher, max_frame_length=self.max_frame_length,
                          on_close=self._forget, name=self.name)
        for callback in self._close_listeners:
            conn.add_close_listener(callback)
        conn.busy_poll = self._busy_poll
        return conn

    def _forget(self, conn: Connection) -> None:
        self.connections.discard(conn)

    async def start(self) -> list[int]:
        """Bind every port; returns the bound ports (port 0 picks a free one)."""
        loop = asyncio.get_running_loop()
        self.dispatcher.start(loop)
        if self.busy_poll_us > 0:
            self._busy_poll = BusyPoll(loop, self.busy_poll_us)

        def factory() -> Connection:
            conn = self._make_connection()
            self.connections.add(conn)
            return conn

        for port in [self.port, *self.extra_ports]:
            if self.tls is not None and self.tls.settings.enabled:
                from rmqd.tls.acceptor import TlsAcceptor
                acceptor = TlsAcceptor(self.tls, factory, name=self.name,
                                       first_byte_timeout_s=self.max_idle_s or FIRST_BYTE_TIMEOUT_S)
                self._acceptors.append(acceptor)
                self.bound_ports.append(acceptor.listen(self.host, port))
                continue
            server = await loop.create_server(factory, self.host, port, reuse_address=True, backlog=1024)
            self._servers.append(server)
            self.bound_ports.append(server.sockets[0].getsockname()[1])
        self.port = self.bound_ports[0]
        if self.max_idle_s > 0:
            self._idle_sweep = loop.call_later(self._sweep_period(), self._sweep_idle)
        log.debug("%s listening on %s", self.name, ", ".join(f"{self.host}:{p}" for p in self.bound_ports))
        return self.bound_ports

    def _sweep_period(self) -> float:
        """How often idle connections are looked for: a quarter of the idle time, 10 s at most, so one is
        closed between ``max_idle_s`` and ``max_idle_s`` + that after its last read or write."""
        return min(max(self.max_idle_s / 4, 0.05), 10.0)

    def _sweep_idle(self) -> None:
        loop = asyncio.get_running_loop()
        now = loop.time()
        for conn in list(self.connections):
            if conn.active:
                conn.active, conn.idle_since = False, now
            elif not conn.closed and now - conn.idle_since >= self.max_idle_s:
                log.info("%s: closing %s, idle for %.0f s (serverChannelMaxIdleTimeSeconds %g)", self.name,
                         conn.remote_address, now - conn.idle_since, self.max_idle_s)
                conn.close()
        self._idle_sweep = loop.call_later(self._sweep_period(), self._sweep_idle)

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    async def close(self) -> None:
        if self._idle_sweep is not None:
            self._idle_sweep.cancel()
            self._idle_sweep = None
        for server in self._servers:
            server.close()
        for acceptor in self._acceptors:
            acceptor.close()
        self._acceptors.clear()
        for conn in list(self.connections):
            conn.close()
        for server in self._servers:
            try:
                await asyncio.wait_for(server.wait_closed(), 2.0)
            except asyncio.TimeoutError:
                log.warning("%s: timed out waiting for connections to close", self.name)
        self._servers.clear()
        self.dispatcher.shutdown()
