"""Master side of one slave's HA connection (Java's ``HAConnection``: a reader and a writer thread).

Reader: takes the slave's 8-byte reports. The first one says where the transfer starts (0: at the start of the
master's current CommitLog file, as Java does, so a fresh slave gets no older files); every later one acknowledges
and wakes the SYNC_MASTER waits up to it. A report beyond the master's max offset, below its min offset, or not at
a record boundary closes the connection with a log line naming the cause (Java checks only the first of these,
and only after the first report; here nothing is sent to such a slave).

Writer: from the start offset on, sends what the CommitLog holds in transfers of at most ``haTransferBatchSize``
bytes that never cross a file, several per ``sendmsg`` (memoryview slices of the mapped file: no copy in Python,
no per-message work), and a heartbeat (size 0) after ``haSendHeartbeatInterval`` without a write. It waits for new
data on the service's wake-up (every SYNC_MASTER put rings it) or polls every ``poll_interval_s``.

Either side closes after ``haHousekeepingInterval`` without progress (the socket's timeout).
"""
from __future__ import annotations

import collections
import logging
import socket
import threading
import time
from typing import TYPE_CHECKING, Union

from rmqd.cython_ext.ha_verify import AT_BOUNDARY, IN_PADDING, locate
from rmqd.store.ha.protocol import HEADER_SIZE, REPORT, REPORT_SIZE, HAProtocolError, pack_header
from rmqd.store.ha.rate import ByteRate

if TYPE_CHECKING:
    from rmqd.store.ha.service import DefaultHAService

log = logging.getLogger(__name__)

_MARKS_MAX = 65536


def send_all(sock: socket.socket, buffers: list[Union[bytes, memoryview]]) -> int:
    """``sendmsg`` every buffer, resuming after partial sends; returns the bytes sent."""
    total = 0
    bufs = [memoryview(b).cast("B") if not isinstance(b, bytes) else b for b in buffers]
    while bufs:
        n = sock.sendmsg(bufs)
        total += n
        while bufs and n >= len(bufs[0]):
            n -= len(bufs[0])
            bufs.pop(0)
        if n:
            bufs[0] = memoryview(bufs[0])[n:]
    return total


class HAConnection:
    """One slave, seen from the master."""

    #: bytes of one slave report, and of one transfer header (the AutoSwitch variant has larger ones)
    report_size = REPORT_SIZE
    header_size = HEADER_SIZE

    def __init__(self, service: "DefaultHAService", sock: socket.socket, addr: tuple[str, int]) -> None:
        self.service = service
        self.sock = sock
        self.addr = f"{addr[0]}:{addr[1]}"
        self.slave_request_offset = -1
        self.slave_ack_offset = -1
        self.transfer_from = -1
        self.bytes_sent = 0
        self.connected_at = time.time()
        self._rate = ByteRate()
        self._marks: collections.deque[tuple[int, float]] = collections.deque(maxlen=_MARKS_MAX)   # (end offset sent, when)
        self._requested = threading.Event()
        # the writer's bell: a plain lock the writer holds while there is nothing new; ring() releases it
        self._bell = threading.Lock()
        self._bell.acquire()
        self._closed = threading.Event()
        self._close_lock = threading.Lock()
        self.close_reason = ""
        cfg = service.config
        sock.settimeout(cfg.housekeeping_interval_ms / 1000)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._reader = threading.Thread(target=self._read_loop, name=f"rmqd-ha-read-{self.addr}", daemon=True)
        self._writer = threading.Thread(target=self._write_loop, name=f"rmqd-ha-write-{self.addr}", daemon=True)

    def start(self) -> None:
        self._reader.start()
        self._writer.start()

    def ring(self) -> None:
        """New CommitLog data (any thread): end the writer's wait."""
        try:
            self._bell.release()
        except RuntimeError:
            pass                                      # already rung

    @property
    def closed(self) -> bool:
        return self._closed.is_set()

    # ------------------------------------------------------------------ status
    def lag_bytes(self, master_max: int) -> int:
        return max(0, master_max - max(self.slave_ack_offset, 0))

    def lag_millis(self) -> int:
        """Age of the oldest byte sent to the slave and not yet acknowledged (0 when it has everything sent)."""
        ack = self.slave_ack_offset
        for end, when in list(self._marks):
            if end > ack:
                return int((time.monotonic() - when) * 1000)
        return 0

    def transferred_per_second(self) -> float:
        return self._rate.sample(self.bytes_sent)

    # ------------------------------------------------------------------ close
    def close(self, reason: str, error: bool = True) -> None:
        with self._close_lock:
            if self._closed.is_set():
                return
            self.close_reason = reason
            self._closed.set()
        (log.error if error else log.info)("HA connection to slave %s closed: %s", self.addr, reason)
        self._requested.set()
        self.ring()
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass                         # already reset by the peer
        self.sock.close()
        self.service.remove_connection(self)

    def join(self, timeout: float) -> None:
        for t in (self._reader, self._writer):
            if t is not threading.current_thread() and t.is_alive():
                t.join(timeout)

    # ------------------------------------------------------------------ reader
    def _read_loop(self) -> None:
        unit = self.report_size
        buf = bytearray(unit * 512)
        view = memoryview(buf)
        filled = 0
        try:
            while not self._closed.is_set():
                try:
                    n = self.sock.recv_into(view[filled:])
                except socket.timeout:
                    raise HAProtocolError(f"no report from the slave for {self.service.config.housekeeping_interval_ms}"
                                          " ms (haHousekeepingInterval)")
                if n == 0:
                    self.close("the slave closed the connection", error=False)
                    return
                filled += n
                if filled < unit:
                    continue
                whole = filled - filled % unit
                offset = self._decode_report(buf, whole - unit)
                rest = filled - whole
                if rest:
                    buf[:rest] = buf[whole:filled]
                filled = rest
                self._on_report(offset)
        except Exception as exc:
            self._close_after("read", exc)

    def _decode_report(self, buf: bytearray, pos: int) -> int:
        """The offset in the report at ``buf[pos:]`` (Java keeps only the newest of those read at once)."""
        offset: int = REPORT.unpack_from(buf, pos)[0]
        return offset

    def _frame_header(self, offset: int, size: int) -> bytes:
        """The header of a transfer of ``size`` bytes at ``offset`` (size 0: a heartbeat)."""
        return pack_header(offset, size)

    def _bound(self, start: int, avail: int) -> int:
        """How much of ``avail`` bytes from ``start`` one round may send (the AutoSwitch variant stops at the end
        of the epoch holding ``start``)."""
        return avail

    def _on_report(self, offset: int) -> None:
        if self.slave_request_offset < 0:
            master_max = self.service.store.commitlog_max_offset()
            self._check_start(offset, master_max)
            self.slave_request_offset = offset
            self.slave_ack_offset = offset
            log.info("HA: slave %s requests offset %d (master max %d)", self.addr, offset, master_max)
            self._requested.set()
        else:
            if offset > max(self.transfer_from, self.slave_request_offset):     # more than it was sent
                master_max = self.service.store.commitlog_max_offset()
                raise HAProtocolError(f"slave acknowledged offset {offset}, beyond the master's max offset "
                                      f"{master_max}" if offset > master_max else
                                      f"slave acknowledged offset {offset}, beyond what was sent to it "
                                      f"({self.transfer_from})")
            self.slave_ack_offset = offset
        marks = self._marks
        while marks and marks[0][0] <= offset:
            marks.popleft()
        self.service.notify_transfer_some(offset)

    def _check_start(self, offset: int, master_max: int) -> None:
        """A slave's first report must name a place in the master's CommitLog where a record starts."""
        if offset < 0:
            raise HAProtocolError(f"slave reported a negative offset {offset}")
        if offset == 0 or offset == master_max:
            return
        if offset > master_max:
            raise HAProtocolError(f"slave requests offset {offset}, beyond the master's max offset {master_max} "
                                  "(the slave has data this master never wrote)")
        cl = self.service.store.commitlog
        if offset < cl.min_offset():
            raise HAProtocolError(f"slave requests offset {offset}, below the master's min offset "
                                  f"{cl.min_offset()} (retention removed it): rebuild the slave's store")
        mf = cl.mfq.find(offset)
        if mf is None:
            raise HAProtocolError(f"slave requests offset {offset}, which no CommitLog file of the master holds")
        where = locate(mf.mm, offset - mf.file_from_offset, mf.wrote_pos, cl.file_size)
        if where not in (AT_BOUNDARY, IN_PADDING):       # padding: the slave got part of a file's BLANK end
            raise HAProtocolError(f"slave requests offset {offset}, which is not at a record boundary of the "
                                  "master's CommitLog (a different CommitLog, or another mapedFileSizeCommitLog)")

    # ------------------------------------------------------------------ writer
    def _write_loop(self) -> None:
        svc = self.service
        cfg = svc.config
        heartbeat_s = cfg.send_heartbeat_interval_ms / 1000
        try:
            while not self._requested.wait(1.0):
                if self._closed.is_set():
                    return
            if self._closed.is_set():
                return
            start = self._start_offset()
            self.transfer_from = start
            log.info("HA: master transfers data from %d to slave %s (it requested %d)", start, self.addr,
                     self.slave_request_offset)
            last_write = time.monotonic()
            bell = self._bell
            while not self._closed.is_set():
                bell.acquire(False)                   # take a ring that came before this look
                svc.looking()
                if self._send_round():
                    last_write = time.monotonic()
                    continue
                now = time.monotonic()
                if now - last_write >= heartbeat_s:
                    send_all(self.sock, [self._frame_header(self.transfer_from, 0)])
                    last_write = now
                    continue
                bell.acquire(True, max(0.0, min(svc.poll_interval_s, heartbeat_s - (now - last_write))))
        except (socket.timeout, TimeoutError):
            self.close(f"the slave took no data for {cfg.housekeeping_interval_ms} ms (haHousekeepingInterval)")
        except Exception as exc:
            self._close_after("write", exc)

    def _close_after(self, verb: str, exc: Exception) -> None:
        """Close after the ``verb`` ("read" or "write") loop ended with ``exc`` (called from its handler): bad
        input closes with its reason; a socket error is expected once closed, else a quiet close; anything else is
        logged with its trace."""
        if isinstance(exc, HAProtocolError):
            self.close(str(exc))
        elif isinstance(exc, OSError):
            if not self._closed.is_set():
                self.close(f"{verb} failed: {exc!r}", error=False)
        else:
            log.exception("HA %ser of slave %s failed", verb, self.addr)
            self.close(f"{verb}er failed: {exc!r}")

    def _start_offset(self) -> int:
        """Where the transfer starts: the slave's first report; 0 means the start of the master's current
        CommitLog file, as Java's DefaultHA does (the AutoSwitch variant overrides this)."""
        start = self.slave_request_offset
        if start == 0:
            master_max = self.service.store.commitlog_max_offset()
            start = master_max - master_max % self.service.config.commitlog_file_size
        return start

    def _send_round(self) -> bool:
        """Send what the CommitLog holds after ``transfer_from`` in the file that holds it (up to one round's
        bytes); False when there is nothing to send."""
        cl = self.service.store.commitlog
        start = self.transfer_from
        mf = cl.mfq.find(start)
        if mf is None:
            if start < cl.min_offset():
                raise HAProtocolError(f"the slave needs offset {start}, below the master's min offset "
                                      f"{cl.min_offset()} (retention removed it)")
            return False
        pos = start - mf.file_from_offset
        avail = mf.wrote_pos - pos
        if avail <= 0:
            return False
        cfg = self.service.config
        batch = cfg.transfer_batch_size
        avail = self._bound(start, min(avail, max(batch, cfg.max_round_bytes)))
        if avail <= 0:
            return False
        buffers: list[Union[bytes, memoryview]] = []
        views: list[memoryview] = []
        off = start
        while avail > 0:
            n = min(batch, avail)
            buffers.append(self._frame_header(off, n))
            view = mf.view(pos, n)
            buffers.append(view)
            views.append(view)
            off += n
            pos += n
            avail -= n
        # before the send: its ack may come back at once (a failed send closes the connection)
        self._marks.append((off, time.monotonic()))
        self.transfer_from = off
        self.bytes_sent += send_all(self.sock, buffers) - self.header_size * (len(buffers) // 2)
        for view in views:
            view.release()
        return True
