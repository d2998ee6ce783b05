"""Slave side of the HA connection (Java's ``HAService.HAClient``), on one thread.

Connects to the master's HA address (``haMasterAddress``, else the one the name server answers the registration
with), reports this CommitLog's max offset at once (Java waits ``haSendHeartbeatInterval`` first; the master
takes either), then reads transfers straight into a reusable buffer, appends and dispatches every complete one
(:class:`~rmqd.store.ha.slave_append.SlaveAppender`) and reports the new max offset after each read, and at least
every ``haSendHeartbeatInterval``. ``haHousekeepingInterval`` without a byte from the master closes the
connection. Any protocol fault (offset not this slave's max, a bad size, a transfer crossing a file end, a damaged
record, the connection closing inside a transfer) is logged with its cause, the undispatched bytes are cut off, and
the client reconnects after 5 s (as Java's ``waitForRunning(5000)``), reporting its max offset again.
"""
from __future__ import annotations

import logging
import select
import socket
import threading
import time
from typing import TYPE_CHECKING, Callable, Optional, TypedDict

from rmqd.store.ha.config import HAConfig
from rmqd.store.ha.protocol import HEADER_SIZE, TRANSFER_HEADER, HAProtocolError, pack_report
from rmqd.store.ha.rate import ByteRate
from rmqd.store.ha.slave_append import SlaveAppender

if TYPE_CHECKING:
    from rmqd.store.layer import StoreChain


class HAClientRuntimeInfo(TypedDict):
    """5.x ``HAClientRuntimeInfo`` (JSON)."""

    masterAddr: str
    transferredByteInSecond: int
    maxOffset: int
    lastReadTimestamp: int
    lastWriteTimestamp: int
    masterFlushOffset: int
    isActivated: bool

log = logging.getLogger(__name__)

RECONNECT_DELAY_S = 5.0
CONNECT_TIMEOUT_S = 3.0
READ_BUFFER = 4 * 1024 * 1024


class HAClient:
    """Replicates from the master while active (the broker is a slave) and a master address is known."""

    reconnect_delay_s = RECONNECT_DELAY_S

    def __init__(self, store: "StoreChain", config: HAConfig) -> None:
        self.store = store
        self.config = config
        self.appender = SlaveAppender(store)
        self._master: Optional[str] = None
        self._active = False
        self._cond = threading.Condition()
        self._stopping = False
        self._sock: Optional[socket.socket] = None
        self._thread = threading.Thread(target=self._run, name="rmqd-ha-client", daemon=True)
        self.last_read_ms = 0
        self.last_write_ms = 0
        self.reported = 0
        self.bytes_received = 0
        self.connected = False
        self.last_error = ""
        #: called (from this client's thread) with the address after each failed connect: the broker asks the name
        #: servers again, as a master that restarted may listen on another HA port
        self.on_connect_failed: Optional[Callable[[str], None]] = None
        self._rate = ByteRate()

    # ------------------------------------------------------------------ control
    def start(self) -> None:
        self._thread.start()

    def set_active(self, active: bool) -> None:
        with self._cond:
            self._active = active
            self._cond.notify_all()
        if not active:
            self._close_socket()

    def update_master_address(self, addr: Optional[str]) -> None:
        with self._cond:
            if addr == self._master:
                return
            log.info("HA client: master address %s -> %s", self._master, addr)
            self._master = addr
            self._cond.notify_all()
        self._close_socket()              # a different master: start over with it

    @property
    def master_address(self) -> Optional[str]:
        return self._master

    def shutdown(self) -> None:
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        self._close_socket()
        if self._thread.is_alive():
            self._thread.join(5)

    def _close_socket(self) -> None:
        sock = self._sock
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass                      # not connected any more
            sock.close()

    def runtime_info(self) -> HAClientRuntimeInfo:
        """5.x ``HAClientRuntimeInfo``."""
        rate = self._rate.sample(self.bytes_received)
        return {"masterAddr": self._master or "", "transferredByteInSecond": int(rate),
                "maxOffset": self.store.commitlog_max_offset(), "lastReadTimestamp": self.last_read_ms,
                "lastWriteTimestamp": self.last_write_ms, "masterFlushOffset": 0,
                "isActivated": self._active and self.connected}

    # ------------------------------------------------------------------ loop
    def _target(self) -> Optional[str]:
        with self._cond:
            while not self._stopping and not (self._active and self._master):
                self._cond.wait()
            return None if self._stopping else self._master

    def _run(self) -> None:
        while True:
            addr = self._target()
            if addr is None:
                return
            try:
                self._replicate(addr)
            except Exception:
                log.exception("HA client towards %s failed", addr)
            finally:
                self.connected = False
                self._sock = None
            with self._cond:
                if self._stopping:
                    return
                self._cond.wait(self.reconnect_delay_s)

    def _connect(self, addr: str) -> Optional[socket.socket]:
        host, _, port = addr.rpartition(":")
        try:
            sock = socket.create_connection((host, int(port)), timeout=CONNECT_TIMEOUT_S)
        except (OSError, ValueError) as exc:
            if self.last_error != f"connect {addr}":
                log.warning("HA client: cannot connect to master %s: %r", addr, exc)
                self.last_error = f"connect {addr}"
            if self.on_connect_failed is not None:
                try:
                    self.on_connect_failed(addr)
                except Exception:
                    log.exception("HA client: the unreachable-master hook failed for %s", addr)
            return None
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.settimeout(None)
        return sock

    def _replicate(self, addr: str) -> None:
        sock = self._connect(addr)
        if sock is None:
            return
        with self._cond:
            if self._stopping or not self._active or self._master != addr:
                sock.close()
                return
            self._sock = sock
        self.connected = True
        self.last_error = ""
        appender = self.appender
        appender.reset()
        cfg = self.config
        heartbeat_s = cfg.send_heartbeat_interval_ms / 1000
        housekeeping_s = cfg.housekeeping_interval_ms / 1000
        buf = bytearray(READ_BUFFER)
        view = memoryview(buf)
        filled = 0
        try:
            self.reported = self.store.commitlog_max_offset()
            self._report(sock, self.reported)
            log.info("HA client: connected to master %s, reporting offset %d", addr, self.reported)
            last_read = last_write = time.monotonic()
            while True:
                now = time.monotonic()
                if now - last_write >= heartbeat_s:
                    self._report(sock, self.reported)
                    last_write = now
                wait = min(heartbeat_s - (now - last_write), housekeeping_s - (now - last_read))
                ready, _, _ = select.select([sock], [], [], max(0.0, wait))
                if not ready:
                    if time.monotonic() - last_read > housekeeping_s:
                        raise HAProtocolError(f"no data from the master for {cfg.housekeeping_interval_ms} ms "
                                              "(haHousekeepingInterval)")
                    continue
                if filled == len(buf):
                    raise HAProtocolError(f"a transfer larger than the read buffer ({len(buf)} bytes)")
                n = sock.recv_into(view[filled:])
                if n == 0:
                    if filled:
                        raise HAProtocolError(f"the master closed the connection inside a transfer ({filled} bytes "
                                              "of a truncated frame dropped)")
                    log.info("HA client: master %s closed the connection", addr)
                    return
                last_read = time.monotonic()
                self.last_read_ms = int(time.time() * 1000)
                self.bytes_received += n
                filled += n
                used = self._consume(view, filled)
                if used:
                    rest = filled - used
                    if rest:
                        buf[:rest] = view[used:filled]
                    filled = rest
                mx = self.store.commitlog_max_offset()
                if mx > self.reported:
                    self._report(sock, mx)
                    self.reported = mx
                    last_write = time.monotonic()
        except HAProtocolError as exc:
            log.error("HA client: closing the connection to master %s: %s", addr, exc)
            self._undo()
        except OSError as exc:
            with self._cond:
                quiet = self._stopping or not self._active or self._master != addr
            if not quiet:
                log.warning("HA client: connection to master %s failed: %r", addr, exc)
            self._undo()
        finally:
            self._close_socket()
            self._sock = None

    def _report(self, sock: socket.socket, offset: int) -> None:
        sock.sendall(pack_report(offset))
        self.last_write_ms = int(time.time() * 1000)

    def _consume(self, view: memoryview, filled: int) -> int:
        """Append (and so verify and dispatch) every whole transfer in ``view[:filled]``; returns the bytes used."""
        pos = 0
        max_body = self.store.commitlog.file_size
        while filled - pos >= HEADER_SIZE:
            offset, size = TRANSFER_HEADER.unpack_from(view, pos)
            if size < 0 or size > max_body:
                raise HAProtocolError(f"the master sent a transfer of {size} bytes at offset {offset}")
            if offset < 0:
                raise HAProtocolError(f"the master sent a negative offset {offset}")
            if size == 0 or filled - pos < HEADER_SIZE + size:
                mx = self.store.commitlog_max_offset()
                if mx and offset != mx:          # Java checks every header, whole or not
                    raise HAProtocolError(f"master pushed offset {offset} not equal to the max offset of this "
                                          f"slave {mx}")
                if size:
                    if HEADER_SIZE + size > len(view):
                        raise HAProtocolError(f"a transfer of {size} bytes is larger than the read buffer")
                    break
            else:
                self.appender.append(offset, view[pos + HEADER_SIZE:pos + HEADER_SIZE + size])
            pos += HEADER_SIZE + size
        return pos

    def _undo(self) -> None:
        """After bad input: cut off what was appended but not verified, and go on from there next time."""
        try:
            self.appender.rollback()
        except Exception:
            log.exception("HA client: cutting the CommitLog back to %d failed", self.appender.checked)
        self.appender.reset()
