"""The gRPC port in TLS permissive mode: TLS and plaintext clients on one port, as the 5.x proxy's.

grpcio serves a port either with TLS or without, never both. This front owns the public port; the first byte of
each connection (0x16: a TLS handshake record, as the proxy's ``ProxyAndTlsProtocolNegotiator`` tells them apart)
picks one of two loopback ports of the same gRPC service: the plaintext one, or the TLS one (grpcio's C core does
the handshake and the records, off the event loop). Plaintext that does not start with the HTTP/2 preface is
closed here, with a log line. The front only moves bytes, both ways, with back-pressure:
one read and one write per chunk on the loop, no parsing, no copying into Python objects beyond the chunk itself.

The gRPC service sees the front's loopback address as its peer; :meth:`GrpcFront.client_of` gives the client's
(ACL address checks, client channels). A connection that sends nothing within the handshake timeout is closed; a
TLS connection the endpoint closes before answering anything (a handshake that failed or did not finish in
grpcio's handshake timeout) is logged with the client's address.
"""
from __future__ import annotations

import asyncio
import logging
from typing import Awaitable, Callable, Optional, cast

log = logging.getLogger(__name__)

TLS_HANDSHAKE_RECORD = 0x16
HTTP2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"     # what every plaintext HTTP/2 (gRPC) client sends first
HIGH_WATER = 1 << 20            # pause the other side's reading above this much unsent


def _stream(transport: asyncio.BaseTransport) -> asyncio.Transport:
    """The transport asyncio hands a stream protocol's ``connection_made``: a stream transport (uvloop's too),
    typed as the base class by asyncio's protocol."""
    return cast(asyncio.Transport, transport)


class _Backend(asyncio.Protocol):
    """The front's connection to a loopback gRPC port: what it reads goes to the client."""

    def __init__(self, front: "_ClientSide") -> None:
        self.front = front
        self.transport: Optional[asyncio.Transport] = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = _stream(transport)
        self.transport.set_write_buffer_limits(high=HIGH_WATER)

    def data_received(self, data: bytes) -> None:
        self.front.answered += len(data)
        self.front.client().write(data)

    def connection_lost(self, exc: Optional[Exception]) -> None:
        self.front.backend_closed(exc)

    def pause_writing(self) -> None:
        self.front.client().pause_reading()

    def resume_writing(self) -> None:
        if not self.front.closed:
            self.front.client().resume_reading()


class _ClientSide(asyncio.Protocol):
    """One client connection of the public port."""

    def __init__(self, owner: "GrpcFront") -> None:
        self.owner = owner
        self.transport: Optional[asyncio.Transport] = None
        self.backend: Optional[_Backend] = None
        self.pending: Optional[list[bytes]] = []          # read before the backend connection is up
        self.peer = ("", 0)
        self.tls = False
        self.answered = 0                                 # bytes the endpoint sent to the client
        self.closed = False
        self._silence: Optional[asyncio.TimerHandle] = None
        self._backend_port = 0

    def client(self) -> asyncio.Transport:
        """The client's connection (made before any callback that uses it)."""
        if self.transport is None:
            raise RuntimeError(f"gRPC front: no client connection yet for {self.peer}")
        return self.transport

    # ------------------------------------------------------------------ client side
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = _stream(transport)
        self.transport.set_write_buffer_limits(high=HIGH_WATER)
        peer = transport.get_extra_info("peername") or ("", 0)
        self.peer = (peer[0], peer[1])
        self._silence = asyncio.get_running_loop().call_later(self.owner.handshake_timeout_s, self._silent)

    def _silent(self) -> None:
        log.info("gRPC: closing the connection from %s:%d: nothing received in %.0f s", *self.peer,
                 self.owner.handshake_timeout_s)
        self.client().close()

    def data_received(self, data: bytes) -> None:
        backend = self.backend
        if backend is not None and backend.transport is not None:
            backend.transport.write(data)
            return
        pending = self.pending
        if pending is None:                 # the endpoint could not be reached; closing
            return
        if not pending:                     # the first bytes: TLS or plaintext
            if self._silence is not None:
                self._silence.cancel()
                self._silence = None
            self.tls = data[0] == TLS_HANDSHAKE_RECORD
            if not self.tls and not HTTP2_PREFACE.startswith(data[:len(HTTP2_PREFACE)]):
                log.warning("gRPC: %s:%d sent neither a TLS handshake nor the HTTP/2 preface (%r): closed",
                            *self.peer, data[:16])
                self.pending = None
                self.client().close()
                return
            asyncio.get_running_loop().create_task(self._connect())
        pending.append(data)
        if sum(map(len, pending)) > HIGH_WATER:
            self.client().pause_reading()

    async def _connect(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            port = await (self.owner.tls_port() if self.tls else self.owner.plain_port())
            self._backend_port = port
            transport, backend = await loop.create_connection(lambda: _Backend(self), "127.0.0.1", port)
        except Exception as exc:
            log.error("gRPC: cannot reach the %s endpoint for %s:%d (%s: %s): closing it",
                      "TLS" if self.tls else "plaintext", *self.peer, type(exc).__name__, exc)
            self.client().close()
            return
        if self.closed:
            transport.close()
            return
        self.backend = backend
        local = transport.get_extra_info("sockname")
        if local:
            self.owner.clients[local[1]] = self.peer
        transport.writelines(self.pending or [])
        self.pending = None
        self.client().resume_reading()

    def connection_lost(self, exc: Optional[Exception]) -> None:
        self.closed = True
        if self._silence is not None:
            self._silence.cancel()
        if self.backend is not None and self.backend.transport is not None:
            self.backend.transport.close()

    def pause_writing(self) -> None:
        if self.backend is not None and self.backend.transport is not None:
            self.backend.transport.pause_reading()

    def resume_writing(self) -> None:
        if self.backend is not None and self.backend.transport is not None:
            self.backend.transport.resume_reading()

    # ------------------------------------------------------------------ backend side
    def backend_closed(self, exc: Optional[Exception]) -> None:
        if self.backend is not None and self.backend.transport is not None:
            local = self.backend.transport.get_extra_info("sockname")
            if local:
                self.owner.clients.pop(local[1], None)
        if self.closed:
            return
        if self.tls and self.answered == 0:
            log.warning("gRPC: TLS handshake with %s:%d failed or did not finish in %.1f s (the endpoint closed the "
                        "connection before answering): closed", *self.peer, self.owner.handshake_timeout_s)
        self.client().close()


class GrpcFront:
    """The public gRPC port of TLS permissive mode (see the module docstring)."""

    def __init__(self, host: str, port: int, plain_port: Callable[[], Awaitable[int]],
                 tls_port: Callable[[], Awaitable[int]], handshake_timeout_s: float) -> None:
        self.host = host
        self.port = port
        self.plain_port = plain_port
        self.tls_port = tls_port
        self.handshake_timeout_s = handshake_timeout_s
        self.clients: dict[int, tuple[str, int]] = {}      # the front's loopback source port -> the client
        self._server: Optional[asyncio.base_events.Server] = None

    async def start(self) -> int:
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(lambda: _ClientSide(self), self.host, self.port, reuse_address=True,
                                                backlog=1024)
        self.port = self._server.sockets[0].getsockname()[1]
        return self.port

    def client_of(self, host: str, port: int) -> tuple[str, int]:
        """The client behind the gRPC peer ``host:port`` (the front's own loopback connection), or that peer."""
        if host in ("127.0.0.1", "::1", "::ffff:127.0.0.1"):
            return self.clients.get(port, (host, port))
        return host, port

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            self._server = None
