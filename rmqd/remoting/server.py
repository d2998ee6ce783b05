"""RemotingServer: accepts connections on one or more ports of the running (uv)loop."""
from __future__ import annotations

import asyncio
import logging
from typing import Callable, Iterable

from rmqd.remoting.busy_poll import BusyPoll
from rmqd.remoting.command import DEFAULT_MAX_FRAME_LENGTH
from rmqd.remoting.connection import Connection
from rmqd.remoting.dispatch import Dispatcher

log = logging.getLogger(__name__)


class RemotingServer:
    """Serves one dispatcher on ``host`` at ``port`` (and any extra ports, e.g. the VIP port)."""

    def __init__(self, dispatcher: Dispatcher, host: str = "127.0.0.1", port: int = 0, *,
                 extra_ports: Iterable[int] = (), name: str = "server",
                 max_frame_length: int = DEFAULT_MAX_FRAME_LENGTH, busy_poll_us: int = 0) -> None:
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
        self._close_listeners: list[Callable[[Connection], None]] = []

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
            server = await loop.create_server(factory, self.host, port, reuse_address=True, backlog=1024)
            self._servers.append(server)
            self.bound_ports.append(server.sockets[0].getsockname()[1])
        self.port = self.bound_ports[0]
        log.info("%s listening on %s", self.name, ", ".join(f"{self.host}:{p}" for p in self.bound_ports))
        return self.bound_ports

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    async def close(self) -> None:
        for server in self._servers:
            server.close()
        for conn in list(self.connections):
            conn.close()
        for server in self._servers:
            try:
                await asyncio.wait_for(server.wait_closed(), 2.0)
            except asyncio.TimeoutError:
                log.warning("%s: timed out waiting for connections to close", self.name)
        self._servers.clear()
        self.dispatcher.shutdown()
