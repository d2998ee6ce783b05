"""A listening port that speaks TLS and plaintext, decided per connection by its first byte.

Java's remoting server peeks at the first byte of a connection (``TlsModeHandler``): 0x16, a TLS handshake record,
gets an ``SslHandler`` in front of the codec; anything else is plaintext (refused in ``enforcing`` mode). Here the
byte is peeked with ``MSG_PEEK`` while the socket is still ours, so it stays in the kernel: a TLS connection is
handed to the loop's SSL transport (``connect_accepted_socket(ssl=...)``: OpenSSL does the handshake and the
records, in C), a plaintext one to a bare transport, and the protocol above reads the same frames either way.

Bad input: nothing sent (closed after ``first_byte_timeout_s``), a handshake that does not finish (closed after the
settings' handshake timeout), garbage or a refused certificate (the SSL error): each closes that connection with a
log line naming the peer; the port keeps serving the others.
"""
from __future__ import annotations

import asyncio
import errno
import logging
import socket
import ssl
from typing import Callable, Optional

from rmqd.tls.contexts import ServerTls
from rmqd.tls.settings import TlsMode

log = logging.getLogger(__name__)

TLS_HANDSHAKE_RECORD = 0x16
ACCEPTS_PER_WAKEUP = 64
EMFILE_PAUSE_S = 1.0


def _peer_of(sock: socket.socket) -> str:
    try:
        host, port = sock.getpeername()[:2]
        return f"{host}:{port}"
    except OSError:
        return "?"


def _read_and_close(conn: socket.socket) -> None:
    """Close a refused connection as Java does: after reading what it sent (a FIN; closing with unread bytes would
    be a reset, which the Java client reports differently: its request fails at once instead of timing out)."""
    try:
        while conn.recv(65536):
            pass
    except OSError:                         # nothing more to read now (EAGAIN), or the peer is gone
        pass
    conn.close()


class TlsAcceptor:
    """Accepts on one port and gives each connection to ``protocol_factory``, over TLS or plaintext by its first
    byte, as ``tls.mode`` allows (permissive: both; enforcing: TLS only; disabled: plaintext only)."""

    def __init__(self, tls: ServerTls, protocol_factory: Callable[[], asyncio.Protocol], *, name: str,
                 first_byte_timeout_s: float) -> None:
        self.tls = tls
        self.protocol_factory = protocol_factory
        self.name = name
        self.first_byte_timeout_s = first_byte_timeout_s
        self.sock: Optional[socket.socket] = None
        self._loop: Optional[asyncio.AbstractEventLoop] = None
        self._waiting: dict[socket.socket, asyncio.TimerHandle] = {}   # accepted, first byte not seen yet
        self._handshakes: set[asyncio.Task[None]] = set()
        self._resume: Optional[asyncio.TimerHandle] = None
        self.tls_connections = 0
        self.plaintext_connections = 0
        self.refused = 0

    def listen(self, host: str, port: int, backlog: int = 1024) -> int:
        """Bind and start accepting on the running loop; returns the bound port."""
        self._loop = asyncio.get_running_loop()
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        sock = socket.create_server((host, port), family=family, backlog=backlog, reuse_port=False)
        sock.setblocking(False)
        self.sock = sock
        self._loop.add_reader(sock.fileno(), self._accept)
        bound_port: int = sock.getsockname()[1]
        return bound_port

    def close(self) -> None:
        """Stop accepting; connections still waiting for their first byte are closed (established ones are the
        protocol's to close)."""
        if self._resume is not None:
            self._resume.cancel()
            self._resume = None
        if self.sock is not None and self._loop is not None:
            self._loop.remove_reader(self.sock.fileno())
            self.sock.close()
            self.sock = None
        for sock, timer in list(self._waiting.items()):
            self._drop(sock, timer)
        for task in list(self._handshakes):
            task.cancel()

    # ------------------------------------------------------------------ accepting
    def _accept(self) -> None:
        assert self.sock is not None and self._loop is not None
        for _ in range(ACCEPTS_PER_WAKEUP):
            try:
                conn, _ = self.sock.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:
                if exc.errno in (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM):
                    log.error("%s: cannot accept connections (%s); pausing accepts for %.0f s", self.name, exc,
                              EMFILE_PAUSE_S)
                    self._loop.remove_reader(self.sock.fileno())
                    self._resume = self._loop.call_later(EMFILE_PAUSE_S, self._resume_accepting)
                else:
                    log.warning("%s: accept failed: %s", self.name, exc)
                return
            conn.setblocking(False)
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            timer = self._loop.call_later(self.first_byte_timeout_s, self._silent, conn)
            self._waiting[conn] = timer
            self._loop.add_reader(conn.fileno(), self._first_bytes, conn)

    def _resume_accepting(self) -> None:
        self._resume = None
        if self.sock is not None and self._loop is not None:
            self._loop.add_reader(self.sock.fileno(), self._accept)

    def _drop(self, conn: socket.socket, timer: Optional[asyncio.TimerHandle]) -> None:
        self._waiting.pop(conn, None)
        if timer is not None:
            timer.cancel()
        if self._loop is not None and conn.fileno() >= 0:
            self._loop.remove_reader(conn.fileno())
        conn.close()

    def _silent(self, conn: socket.socket) -> None:
        log.info("%s: closing the connection from %s: nothing received in %.0f s", self.name, _peer_of(conn),
                 self.first_byte_timeout_s)
        self._drop(conn, None)

    def _refuse(self, conn: socket.socket, kind: str, mode: str) -> None:
        """Close a connection the port's mode does not take (``kind``: "an SSL" or "an insecure"), as Java logs it."""
        self.refused += 1
        log.warning("%s: %s intends to establish %s connection while this server is running in SSL %s mode "
                    "(tls.server.mode=%s): closed", self.name, _peer_of(conn), kind, mode, mode)
        _read_and_close(conn)

    def _first_bytes(self, conn: socket.socket) -> None:
        try:
            first = conn.recv(1, socket.MSG_PEEK)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as exc:
            log.debug("%s: connection from %s failed before its first byte: %s", self.name, _peer_of(conn), exc)
            self._drop(conn, self._waiting.get(conn))
            return
        assert self._loop is not None
        timer = self._waiting.pop(conn, None)
        if timer is not None:
            timer.cancel()
        self._loop.remove_reader(conn.fileno())
        if not first:                                        # closed before sending anything
            conn.close()
            return
        mode = self.tls.mode
        if first[0] == TLS_HANDSHAKE_RECORD:
            if mode is TlsMode.DISABLED:
                self._refuse(conn, "an SSL", "disabled")
                return
            task = self._loop.create_task(self._start_tls(conn))
            self._handshakes.add(task)
            task.add_done_callback(self._handshakes.discard)
            return
        if mode is TlsMode.ENFORCING:
            self._refuse(conn, "an insecure", "enforcing")
            return
        self.plaintext_connections += 1
        task = self._loop.create_task(self._start_plain(conn))
        self._handshakes.add(task)
        task.add_done_callback(self._handshakes.discard)

    async def _start_plain(self, conn: socket.socket) -> None:
        assert self._loop is not None
        peer = _peer_of(conn)
        try:
            await self._loop.connect_accepted_socket(self.protocol_factory, conn)
        except OSError as exc:              # the transport owns the socket now and has closed it
            log.debug("%s: plaintext connection from %s failed at once: %s", self.name, peer, exc)

    async def _start_tls(self, conn: socket.socket) -> None:
        assert self._loop is not None
        peer = _peer_of(conn)
        try:
            context = await self.tls.context()
        except Exception as exc:
            log.error("%s: TLS connection from %s closed: no SSL context (%s: %s)", self.name, peer,
                      type(exc).__name__, exc)
            conn.close()
            return
        timeout = self.tls.settings.handshake_timeout_s
        try:
            await self._loop.connect_accepted_socket(self.protocol_factory, conn, ssl=context,
                                                     ssl_handshake_timeout=timeout)
        except ssl.SSLError as exc:
            detail = getattr(exc, "verify_message", None) or str(exc)
            log.warning("%s: TLS handshake with %s failed: %s (%s): closed", self.name, peer,
                        getattr(exc, "reason", None) or type(exc).__name__, detail)
        except ConnectionAbortedError:
            log.warning("%s: TLS handshake with %s did not finish in %.1f s: closed", self.name, peer, timeout)
        except OSError as exc:
            log.info("%s: TLS connection from %s lost during the handshake: %s", self.name, peer, exc)
        else:
            self.tls_connections += 1
            log.debug("%s: TLS connection from %s", self.name, peer)
