"""Remoting clients: an asyncio one (broker -> name server) and a blocking one (admin, tests)."""
from __future__ import annotations

import asyncio
import logging
import select
import socket
import ssl
import threading
import time
from typing import TYPE_CHECKING, Callable

from rmqd.remoting.command import (
    DEFAULT_MAX_FRAME_LENGTH,
    RPC_ONEWAY,
    FrameReader,
    RemotingCommand,
    encode_frame_bytes,
)
from rmqd.remoting.connection import Connection
from rmqd.remoting.dispatch import Dispatcher

if TYPE_CHECKING:
    from rmqd.tls.contexts import ClientTls

log = logging.getLogger(__name__)


def split_address(addr: str) -> tuple[str, int]:
    host, _, port = addr.strip().rpartition(":")
    return host, int(port)


class RemotingClient:
    """Keeps one connection per address on the running loop and multiplexes calls by opaque; over TLS when
    ``tls`` says ``tls.enable`` (as Java's NettyRemotingClient with useTLS)."""

    def __init__(self, dispatcher: Dispatcher | None = None, connect_timeout: float = 3.0,
                 tls: "ClientTls | None" = None, signer: Callable[[RemotingCommand], None] | None = None) -> None:
        """``signer``: called with every request before it is sent (the broker's own credentials, access control
        2.0's ``innerClientAuthenticationCredentials``)."""
        self.dispatcher = dispatcher
        self.connect_timeout = connect_timeout
        self.tls = tls
        self.signer = signer
        self._conns: dict[str, Connection] = {}
        self._locks: dict[str, asyncio.Lock] = {}

    async def connection(self, addr: str) -> Connection:
        conn = self._conns.get(addr)
        if conn is not None and not conn.closed:
            return conn
        lock = self._locks.setdefault(addr, asyncio.Lock())
        async with lock:
            conn = self._conns.get(addr)
            if conn is not None and not conn.closed:
                return conn
            host, port = split_address(addr)
            loop = asyncio.get_running_loop()
            context = await self.tls.context() if self.tls is not None else None
            _, made = await asyncio.wait_for(loop.create_connection(
                lambda: Connection(self.dispatcher, max_frame_length=DEFAULT_MAX_FRAME_LENGTH, name="client"),
                host, port, ssl=context, server_hostname="" if context is not None else None),
                self.connect_timeout)
            self._conns[addr] = made
            return made

    async def invoke(self, addr: str, request: RemotingCommand, timeout: float = 3.0) -> RemotingCommand:
        conn = await self.connection(addr)
        if self.signer is not None:
            self.signer(request)
        return await conn.invoke(request, timeout)

    async def invoke_oneway(self, addr: str, request: RemotingCommand) -> None:
        conn = await self.connection(addr)
        if self.signer is not None:
            self.signer(request)
        conn.invoke_oneway(request)

    def close(self) -> None:
        for conn in self._conns.values():
            conn.close()
        self._conns.clear()


class BlockingClient:
    """A plain-socket client for one address: ``invoke`` waits for the matching response.

    Requests the server pushes on this connection (e.g. NOTIFY_CONSUMER_IDS_CHANGED) are kept in
    ``server_requests`` for inspection.  Thread-safe for sequential callers.
    """

    def __init__(self, addr: str, timeout: float = 5.0, ssl_context: "ssl.SSLContext | None | bool" = True,
                 source_host: str | None = None) -> None:
        """``ssl_context``: TLS with this context; True (the default): as the environment says (``TLS_ENABLE``,
        :func:`rmqd.tls.contexts.process_client_context`); None or False: plaintext. ``source_host``: the local
        address to connect from (e.g. ``127.0.0.2``, another loopback source)."""
        self.addr = addr
        self.timeout = timeout
        if ssl_context is True:
            from rmqd.tls.contexts import process_client_context
            ssl_context = process_client_context()
        sock = socket.create_connection(split_address(addr), timeout,
                                        source_address=(source_host, 0) if source_host else None)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.tls = bool(ssl_context)
        if ssl_context:
            try:
                sock = ssl_context.wrap_socket(sock, server_hostname=None)
            except BaseException:
                sock.close()
                raise
        self.sock = sock
        self.reader = FrameReader()
        self.server_requests: list[RemotingCommand] = []
        self._responses: dict[int, RemotingCommand] = {}
        self._opaque = 0
        self._lock = threading.Lock()

    def __enter__(self) -> "BlockingClient":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass

    def peer_closed(self) -> bool:
        """Whether the server has closed this connection (e.g. after ``serverChannelMaxIdleTimeSeconds``
        of silence), looked at without blocking or consuming anything."""
        try:
            if self.tls:                        # no peeking under TLS: read what is there (frames are kept)
                if self.sock.pending():         # type: ignore[attr-defined]
                    return False
                readable, _, _ = select.select([self.sock], [], [], 0)
                if readable:
                    self.read_some(0.05)
                return False
            readable, _, _ = select.select([self.sock], [], [], 0)
            if not readable:
                return False
            return self.sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b""
        except ConnectionError:
            return True
        except BlockingIOError:
            return False
        except (OSError, ValueError):           # reset, or closed on this side
            return True

    def _next_opaque(self) -> int:
        self._opaque = (self._opaque + 1) & 0x7FFFFFFF
        return self._opaque

    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def send(self, request: RemotingCommand) -> int:
        """Write ``request`` (assigning an opaque if it has none); returns the opaque."""
        if not request.opaque:
            request.opaque = self._next_opaque()
        self.sock.sendall(encode_frame_bytes(request))
        return request.opaque

    def invoke(self, request: RemotingCommand, timeout: float | None = None) -> RemotingCommand:
        with self._lock:
            request.opaque = self._next_opaque()
            request.flag &= ~RPC_ONEWAY
            self.sock.sendall(encode_frame_bytes(request))
            return self.wait_response(request.opaque, timeout)

    def invoke_oneway(self, request: RemotingCommand) -> None:
        with self._lock:
            request.opaque = self._next_opaque()
            request.flag |= RPC_ONEWAY
            self.sock.sendall(encode_frame_bytes(request))

    def wait_response(self, opaque: int, timeout: float | None = None) -> RemotingCommand:
        deadline = time.monotonic() + (timeout if timeout is not None else self.timeout)
        while opaque not in self._responses:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"no response for opaque {opaque} from {self.addr}")
            self.read_some(remaining)
        return self._responses.pop(opaque)

    def read_some(self, timeout: float) -> bool:
        """Read once from the socket; returns False on EOF."""
        self.sock.settimeout(timeout)
        try:
            data = self.sock.recv(1 << 20)
        except socket.timeout:
            return True
        if not data:
            raise ConnectionError(f"connection to {self.addr} closed")
        for cmd in self.reader.feed(data):
            if cmd.flag & 1:
                self._responses[cmd.opaque] = cmd
            else:
                self.server_requests.append(cmd)
        return True


class BlockingClientPool:
    """One kept :class:`BlockingClient` per address, shared by threads (``rmqd admin``, the console, the
    Spark connector's tasks and driver).

    A kept connection the server has closed (the Java and rmqd servers close one idle for
    ``serverChannelMaxIdleTimeSeconds``, 120 s) is found by a non-blocking peek when it is asked for, and
    replaced: a request is not written to a connection already known dead."""

    def __init__(self, connect_timeout: float = 5.0) -> None:
        self.connect_timeout = connect_timeout
        self._by_addr: dict[str, BlockingClient] = {}
        self._lock = threading.Lock()

    def get(self, addr: str) -> BlockingClient:
        """The kept connection to ``addr``, or a new one."""
        c = self._by_addr.get(addr)
        if c is not None and c.peer_closed():
            log.info("connection to %s was closed by the server; connecting again", addr)
            self.drop(addr, c)
            c = None
        if c is None:
            new = BlockingClient(addr, self.connect_timeout)
            with self._lock:
                c = self._by_addr.setdefault(addr, new)
            if c is not new:                    # another thread connected first
                new.close()
        return c

    def connected(self, addr: str) -> BlockingClient | None:
        """The kept connection to ``addr``, if there is one (no check, no connecting)."""
        return self._by_addr.get(addr)

    def drop(self, addr: str, client: BlockingClient | None = None) -> None:
        """Close and forget the connection to ``addr`` (only if it is still ``client``, when given)."""
        with self._lock:
            if client is None:
                client = self._by_addr.pop(addr, None)
            elif self._by_addr.get(addr) is client:
                del self._by_addr[addr]
        if client is not None:
            client.close()

    def close(self) -> None:
        with self._lock:
            clients = list(self._by_addr.values())
            self._by_addr.clear()
        for c in clients:
            c.close()
