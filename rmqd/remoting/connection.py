"""One remoting connection (server- or client-side) on the event loop.

The loop thread reads and decodes frames; requests go to the dispatcher, responses complete the
futures of calls this side made (``invoke``).  Replies produced on pool threads are handed back to
the loop in batches through ``LoopWriter`` so a burst of responses costs one loop wake-up.
"""
from __future__ import annotations

import asyncio
import collections
import itertools
import logging
import threading
import weakref
from typing import TYPE_CHECKING, Callable, Optional

from rmqd.remoting.command import (
    RPC_ONEWAY,
    BodyPart,
    FrameError,
    FrameReader,
    RemotingCommand,
    encode_frame,
    error_response,
    prepare_reply,
)
from rmqd.remoting.codes import ResponseCode

if TYPE_CHECKING:
    from rmqd.remoting.busy_poll import BusyPoll
    from rmqd.remoting.dispatch import Dispatcher

log = logging.getLogger(__name__)

WRITE_HIGH_WATER = 4 * 1024 * 1024
WRITE_LOW_WATER = 1 * 1024 * 1024


class LoopWriter:
    """Thread-safe queue of (connection, buffers) drained on the loop thread."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._queue: collections.deque[tuple[Connection, list[BodyPart]]] = collections.deque()
        self._scheduled = False

    def submit(self, conn: "Connection", buffers: "list[BodyPart]") -> None:
        self._queue.append((conn, buffers))
        if not self._scheduled:
            self._scheduled = True
            try:
                self._loop.call_soon_threadsafe(self._drain)
            except RuntimeError:  # loop closed during shutdown
                self._scheduled = False

    def _drain(self) -> None:
        self._scheduled = False
        queue = self._queue
        while queue:
            conn, buffers = queue.popleft()
            conn._write_buffers(buffers)


_writers: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, LoopWriter]" = weakref.WeakKeyDictionary()


def loop_writer(loop: asyncio.AbstractEventLoop) -> LoopWriter:
    writer = _writers.get(loop)
    if writer is None:
        writer = _writers[loop] = LoopWriter(loop)
    return writer


class Connection(asyncio.Protocol):
    """A remoting channel: decodes frames, dispatches requests, matches responses."""

    def __init__(self, dispatcher: "Dispatcher | None", *, max_frame_length: int,
                 on_close: Callable[["Connection"], None] | None = None, name: str = "remoting") -> None:
        self.dispatcher = dispatcher
        self.reader = FrameReader(max_frame_length)
        self.transport: asyncio.Transport | None = None
        self.loop: asyncio.AbstractEventLoop | None = None
        self.peer_host = ""
        self.peer_port = 0
        self.peer: tuple[str, int] = ("", 0)
        self.local_port = 0
        self.name = name
        self.closed = False
        self._pending: dict[int, asyncio.Future[RemotingCommand]] = {}
        self._opaques = itertools.count(1)
        self._on_close = on_close
        self._close_listeners: list[Callable[["Connection"], None]] = []
        self._loop_thread = 0
        self._writer: LoopWriter | None = None
        # While the requests of one read are handled, replies made on the loop collect here and
        # go out in one write (many requests in flight on one connection: one syscall, one wake-up).
        self._corked: list[BodyPart] | None = None
        self.busy_poll: BusyPoll | None = None      # the server's, if on
        self.active = True              # read or written since the server's idle sweep last looked
        self.idle_since = 0.0           # loop time that sweep found it quiet

    # -- identity ------------------------------------------------------------------------
    @property
    def remote_address(self) -> str:
        return f"{self.peer_host}:{self.peer_port}"

    def __repr__(self) -> str:
        return f"<Connection {self.name} {self.remote_address}{' closed' if self.closed else ''}>"

    def add_close_listener(self, callback: Callable[["Connection"], None]) -> None:
        self._close_listeners.append(callback)

    # -- asyncio.Protocol ------------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        self.loop = asyncio.get_running_loop()
        self._loop_thread = threading.get_ident()
        self._writer = loop_writer(self.loop)
        peer = transport.get_extra_info("peername") or ("", 0)
        self.peer_host, self.peer_port = peer[0], peer[1]
        self.peer = (self.peer_host, self.peer_port)
        sock = transport.get_extra_info("sockname") or ("", 0)
        self.local_port = sock[1]
        transport.set_write_buffer_limits(high=WRITE_HIGH_WATER, low=WRITE_LOW_WATER)  # type: ignore[attr-defined]

    def data_received(self, data: bytes) -> None:
        self.active = True
        dispatcher = self.dispatcher
        lane = dispatcher.lane if dispatcher is not None else None
        corked: list[BodyPart] = []
        self._corked = corked
        try:
            if lane is not None:
                # The fast lane walks the frames in C; what it does not serve it dispatches.
                lane.serve_data(self, data, corked)
            else:
                for cmd in self.reader.feed(data):
                    if cmd.flag & 1:
                        self._complete(cmd)
                    elif dispatcher is not None:
                        dispatcher.dispatch(self, cmd)
                    else:
                        log.warning("%s: %s sent request code %d to a client-only connection; ignored",
                                    self.name, self.remote_address, cmd.code)
        except FrameError as exc:
            hint = ""
            if data[:2] == b"\x16\x03":
                hint = (" (it looks like a TLS handshake: this port does not take TLS, tls.server.mode=disabled, "
                        "or it is a client port)")
            log.warning("%s: closing connection from %s: malformed frame: %s%s", self.name, self.remote_address, exc,
                        hint)
            if corked:                          # answers to the frames before the bad one go first
                self._write_buffers(corked)
                corked.clear()
            self.abort()
        finally:
            self._corked = None
            if corked:
                self._write_buffers(corked)
            if self.busy_poll is not None:
                self.busy_poll.touch()

    def lane_failed(self, cmd: RemotingCommand, exc: Exception) -> bytes:
        """The fast lane raised for ``cmd``: log it and answer like a processor bug (SYSTEM_ERROR)."""
        log.error("%s: fast lane failed for code %d from %s", self.name, cmd.code, self.remote_address,
                  exc_info=exc)
        if cmd.flag & RPC_ONEWAY:
            return b""
        return b"".join(encode_frame(prepare_reply(cmd, error_response(
            ResponseCode.SYSTEM_ERROR, f"{type(exc).__name__}: {exc}"))))

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        for fut in self._pending.values():
            if not fut.done():
                fut.set_exception(ConnectionError(f"connection to {self.remote_address} closed"))
        self._pending.clear()
        for callback in self._close_listeners:
            try:
                callback(self)
            except Exception:
                log.exception("%s: close listener failed for %s", self.name, self.remote_address)
        if self._on_close is not None:
            self._on_close(self)

    def pause_writing(self) -> None:
        # Backpressure: the peer is not reading; stop reading its requests until it catches up.
        if self.transport is not None:
            self.transport.pause_reading()

    def resume_writing(self) -> None:
        if self.transport is not None and not self.closed:
            self.transport.resume_reading()

    # -- writing -------------------------------------------------------------------------
    def _write_buffers(self, buffers: "list[BodyPart]") -> None:
        transport = self.transport
        if transport is None or self.closed or transport.is_closing():
            return
        self.active = True
        transport.writelines(buffers)

    def send(self, cmd: RemotingCommand) -> None:
        """Encode and write ``cmd``; callable from any thread."""
        self.send_encoded(encode_frame(cmd))

    def send_encoded(self, buffers: "list[BodyPart]") -> None:
        """Write already encoded frame buffers; callable from any thread."""
        if threading.get_ident() == self._loop_thread:
            corked = self._corked
            if corked is not None:
                corked += buffers
            else:
                self._write_buffers(buffers)
        elif self._writer is not None:
            self._writer.submit(self, buffers)

    def reply(self, request: RemotingCommand, response: RemotingCommand) -> None:
        """Answer ``request`` (no-op for oneway requests); callable from any thread."""
        if request.flag & RPC_ONEWAY:
            return
        self.send(prepare_reply(request, response))

    def abort(self) -> None:
        if self.transport is not None:
            self.transport.abort()

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()

    # -- calls this side originates -----------------------------------------------------------
    def _complete(self, response: RemotingCommand) -> None:
        fut = self._pending.pop(response.opaque, None)
        if fut is None:
            log.debug("%s: response for unknown opaque %d from %s", self.name, response.opaque, self.remote_address)
            return
        if not fut.done():
            fut.set_result(response)

    async def invoke(self, request: RemotingCommand, timeout: float = 3.0) -> RemotingCommand:
        """Send ``request`` and wait for its response (loop thread only)."""
        if self.closed:
            raise ConnectionError(f"connection to {self.remote_address} is closed")
        opaque = next(self._opaques) & 0x7FFFFFFF
        request.opaque = opaque
        request.flag &= ~1
        loop = self.loop
        if loop is None:
            raise ConnectionError(f"connection to {self.remote_address} is not open yet")
        fut = loop.create_future()
        self._pending[opaque] = fut
        self.send(request)
        try:
            return await asyncio.wait_for(fut, timeout)
        finally:
            self._pending.pop(opaque, None)

    def invoke_oneway(self, request: RemotingCommand) -> None:
        """Send ``request`` with the oneway flag; no response is expected."""
        request.opaque = next(self._opaques) & 0x7FFFFFFF
        request.flag = (request.flag | RPC_ONEWAY) & ~1
        self.send(request)
