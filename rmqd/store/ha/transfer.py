"""The SYNC_MASTER wait (Java's ``HAService.GroupTransferService``).

A request is a CommitLog end offset, a deadline and a callback ``done(replicated: bool)``. It completes with True
as soon as a slave acknowledges an offset at or past it (:meth:`GroupTransferService.notify_transfer_some`, called
by the connection's reader thread, which runs the callbacks), or with False once its deadline passes (on this
service's thread). Callbacks must not block: they answer a client (``Connection.send_encoded``) or set an event.

Requests sit in a heap by offset (acks complete a prefix in O(k log n)) and in a deque in arrival order, which is
also deadline order because every request waits the same ``slaveTimeout``.
"""
from __future__ import annotations

import collections
import heapq
import itertools
import logging
import threading
import time
from typing import Callable

log = logging.getLogger(__name__)

Done = Callable[[bool], None]


class _Request:
    __slots__ = ("end_offset", "deadline", "done", "finished")

    def __init__(self, end_offset: int, deadline: float, done: Done) -> None:
        self.end_offset = end_offset
        self.deadline = deadline
        self.done = done
        self.finished = False


def _call(done: Done, ok: bool) -> None:
    try:
        done(ok)
    except Exception:
        log.exception("SYNC_MASTER wait callback failed")


class GroupTransferService:
    """Completes SYNC_MASTER waits (see the module docstring)."""

    def __init__(self, name: str = "rmqd-ha-group-transfer") -> None:
        self._lock = threading.Condition()
        self._by_offset: list = []
        self._by_deadline: collections.deque = collections.deque()
        self._seq = itertools.count()
        self._acked = -1
        self._stopping = False
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    @property
    def pending(self) -> int:
        return len(self._by_deadline)

    def start(self) -> None:
        self._thread.start()

    def put_request(self, end_offset: int, timeout_s: float, done: Done) -> None:
        """Call ``done(True)`` once a slave has everything before ``end_offset``, ``done(False)`` after
        ``timeout_s``. Never blocks."""
        with self._lock:
            if end_offset <= self._acked:
                ok = True
            elif self._stopping:
                ok = False
            else:
                req = _Request(end_offset, time.monotonic() + timeout_s, done)
                heapq.heappush(self._by_offset, (end_offset, next(self._seq), req))
                self._by_deadline.append(req)
                if len(self._by_deadline) == 1:
                    self._lock.notify()
                return
        _call(done, ok)

    def notify_transfer_some(self, acked: int) -> None:
        """A slave acknowledged ``acked``: complete every request at or below it (in the caller's thread)."""
        ready = []
        with self._lock:
            if acked <= self._acked:
                return
            self._acked = acked
            heap = self._by_offset
            while heap and heap[0][0] <= acked:
                req = heapq.heappop(heap)[2]
                if not req.finished:
                    req.finished = True
                    ready.append(req.done)
        for done in ready:
            _call(done, True)

    def _expire(self, now: float) -> list:
        expired = []
        dq = self._by_deadline
        while dq and (dq[0].finished or dq[0].deadline <= now or self._stopping):
            req = dq.popleft()
            if not req.finished:
                req.finished = True
                expired.append(req.done)
        if not dq:
            self._by_offset.clear()
        return expired

    def _run(self) -> None:
        while True:
            with self._lock:
                while not self._stopping:
                    dq = self._by_deadline
                    while dq and dq[0].finished:
                        dq.popleft()
                    if not dq:
                        self._by_offset.clear()
                        self._lock.wait()
                        continue
                    delay = dq[0].deadline - time.monotonic()
                    if delay <= 0:
                        break
                    self._lock.wait(delay)
                expired = self._expire(time.monotonic())
                stop = self._stopping
            if expired:
                log.warning("SYNC_MASTER: %d send(s) not acknowledged by a slave within slaveTimeout", len(expired))
            for done in expired:
                _call(done, False)
            if stop:
                return

    def shutdown(self) -> None:
        """Fail every waiting request and stop."""
        with self._lock:
            self._stopping = True
            self._lock.notify_all()
        if self._thread.is_alive():
            self._thread.join(5)
        with self._lock:
            rest = self._expire(time.monotonic())
        for done in rest:
            _call(done, False)
