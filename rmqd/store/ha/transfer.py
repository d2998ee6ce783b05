"""The SYNC_MASTER wait (Java's ``HAService.GroupTransferService``).

A request is a CommitLog end offset, a deadline and a callback ``done(replicated: bool)``. It completes with True
as soon as a slave acknowledges an offset at or past it (:meth:`GroupTransferService.notify_transfer_some`, called
by the connection's reader thread, which runs the callbacks), or with False once its deadline passes (on this
service's thread, which looks every ``tick_s``, as Java's service polls). Callbacks must not block: they answer a
client (``Connection.send_encoded``) or set an event.

Requests wait in one deque in arrival order, which is also deadline order (every request waits the same
``slaveTimeout``) and, for the sends of the event loop, offset order. An acknowledgement completes the requests
from the left while their offset is covered; a request that arrived out of offset order (two pool threads' puts)
waits behind its predecessor, which the same CommitLog range acknowledges a moment later. Adding is an append under
a plain lock, completing a popleft: the per-message cost of SYNC_MASTER is a few hundred nanoseconds here.
"""
from __future__ import annotations

import collections
import logging
import threading
import time
from typing import Callable

log = logging.getLogger(__name__)

Done = Callable[[bool], None]


def _call(done: Done, ok: bool) -> None:
    try:
        done(ok)
    except Exception:
        log.exception("SYNC_MASTER wait callback failed")


class GroupTransferService:
    """Completes SYNC_MASTER waits (see the module docstring)."""

    tick_s = 0.05

    def __init__(self, name: str = "rmqd-ha-group-transfer") -> None:
        self._lock = threading.Lock()
        self._waiting: collections.deque[tuple[int, float, Done]] = collections.deque()   # (end, deadline, done)
        self._acked = -1
        self._stopping = False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    @property
    def pending(self) -> int:
        return len(self._waiting)

    def start(self) -> None:
        self._thread.start()

    def put_request(self, end_offset: int, timeout_s: float, done: Done) -> None:
        """Call ``done(True)`` once a slave has everything before ``end_offset``, ``done(False)`` after
        ``timeout_s``. Never blocks."""
        with self._lock:
            if end_offset > self._acked and not self._stopping:
                self._waiting.append((end_offset, time.monotonic() + timeout_s, done))
                return
            ok = end_offset <= self._acked
        _call(done, ok)

    def reset(self) -> None:
        """Forget the acknowledged offset (a broker that becomes master again after its CommitLog was cut back
        must not answer new puts from an old acknowledgement)."""
        with self._lock:
            self._acked = -1

    def notify_transfer_some(self, acked: int) -> None:
        """A slave acknowledged ``acked``: complete the waits it covers (in the caller's thread)."""
        ready = []
        with self._lock:
            if acked <= self._acked:
                return
            self._acked = acked
            waiting = self._waiting
            while waiting and waiting[0][0] <= acked:
                ready.append(waiting.popleft()[2])
        for done in ready:
            _call(done, True)

    def _expire(self, now: float) -> list[Done]:
        expired = []
        with self._lock:
            waiting = self._waiting
            while waiting and (waiting[0][1] <= now or self._stopping):
                expired.append(waiting.popleft()[2])
        return expired

    def _run(self) -> None:
        while True:
            stop = self._stop.wait(self.tick_s)
            expired = self._expire(time.monotonic())
            if expired and not stop:
                log.warning("SYNC_MASTER: %d send(s) not acknowledged by a slave within slaveTimeout", len(expired))
            for done in expired:
                _call(done, False)
            if stop:
                return

    def shutdown(self) -> None:
        """Fail every waiting request and stop."""
        with self._lock:
            self._stopping = True
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(5)
        for done in self._expire(time.monotonic()):
            _call(done, False)
