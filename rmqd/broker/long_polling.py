"""Long polling for PULL_MESSAGE (Java ``PullRequestHoldService``, README §3.3, §6.1).

A pull that finds nothing (PULL_NOT_FOUND) with the SUSPEND flag is parked under
``(topic, queueId)``.  It is re-run (in the pull pool, with suspension disabled, no offset commit)
when a matching message is dispatched to that queue, when its hold time runs out, or when the
periodic sweep sees the queue grew past the requested offset.

Threads: ``suspend`` runs on pull-pool threads, ``on_dispatch`` on store put threads (it only does
a dict membership test unless something is parked there); all matching and timers run on the loop.
"""
from __future__ import annotations

import asyncio
import logging
import threading
import time
from typing import TYPE_CHECKING, Callable, Optional

from rmqd.store.message import decode_properties

if TYPE_CHECKING:
    from rmqd.cython_ext.store_put import DispatchRequest
    from rmqd.filter import ExpressionMessageFilter
    from rmqd.remoting.command import RemotingCommand
    from rmqd.remoting.connection import Connection

log = logging.getLogger(__name__)


class PullRequest:
    __slots__ = ("conn", "request", "topic", "queue_id", "offset", "filter", "deadline", "timer",
                 "done", "wakeable")

    def __init__(self, conn: "Connection", request: "RemotingCommand", topic: str, queue_id: int, offset: int,
                 message_filter: Optional["ExpressionMessageFilter"], timeout_ms: int, wakeable: bool = True) -> None:
        self.conn = conn
        self.request = request
        self.topic = topic
        self.queue_id = queue_id
        self.offset = offset
        self.filter = message_filter
        self.deadline = time.monotonic() + timeout_ms / 1000.0
        self.timer: Optional[asyncio.TimerHandle] = None
        self.done = False
        self.wakeable = wakeable

    def matches(self, tags_code: Optional[int], properties: Optional[str]) -> bool:
        f = self.filter
        if f is None:
            return True
        if not f.is_matched_by_consume_queue(tags_code):
            return False
        if properties is None:
            return True
        return f.is_matched_by_commit_log(None, lambda: decode_properties(properties))


class PullRequestHoldService:
    """Holds parked pulls; ``rerun(conn, request)`` re-executes one without suspension."""

    def __init__(self, loop: asyncio.AbstractEventLoop, get_max_offset: Callable[[str, int], int],
                 rerun: Callable[["Connection", "RemotingCommand"], None], check_interval_s: float = 5.0) -> None:
        self.loop = loop
        self.get_max_offset = get_max_offset
        self.rerun = rerun
        self.check_interval_s = check_interval_s
        self._holds: dict[tuple[str, int], list[PullRequest]] = {}
        self._lock = threading.Lock()
        self._sweeper: Optional[asyncio.TimerHandle] = None

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> None:
        self._sweeper = self.loop.call_later(self.check_interval_s, self._sweep)

    def shutdown(self) -> None:
        if self._sweeper is not None:
            self._sweeper.cancel()
            self._sweeper = None
        with self._lock:
            holds = [pr for lst in self._holds.values() for pr in lst]
            self._holds.clear()
        for pr in holds:
            pr.done = True
            if pr.timer is not None:
                pr.timer.cancel()

    @property
    def watched_queues(self) -> dict[tuple[str, int], list[PullRequest]]:
        """Live ``(topic, queue_id) -> holds`` map: the store calls :meth:`on_dispatch` only for
        messages of these queues."""
        return self._holds

    @property
    def hold_count(self) -> int:
        return sum(len(v) for v in self._holds.values())

    # ------------------------------------------------------------------ parking (pool thread)
    def suspend(self, pr: PullRequest) -> None:
        key = (pr.topic, pr.queue_id)
        if pr.wakeable:
            with self._lock:
                self._holds.setdefault(key, []).append(pr)
        self.loop.call_soon_threadsafe(self._arm, pr)
        # A message may have landed between the store read and the registration above.
        if pr.wakeable and self.get_max_offset(pr.topic, pr.queue_id) > pr.offset:
            self.loop.call_soon_threadsafe(self.notify_message_arriving, pr.topic, pr.queue_id,
                                           None, None, None)

    def _arm(self, pr: PullRequest) -> None:
        if pr.done:
            return
        delay = max(0.0, pr.deadline - time.monotonic())
        pr.timer = self.loop.call_later(delay, self._expire, pr)

    def _expire(self, pr: PullRequest) -> None:
        pr.timer = None
        if self._take(pr):
            self._run(pr)

    def _take(self, pr: PullRequest) -> bool:
        """Mark ``pr`` finished and unpark it; False if somebody else already did."""
        if pr.done:
            return False
        pr.done = True
        if pr.wakeable:
            key = (pr.topic, pr.queue_id)
            with self._lock:
                lst = self._holds.get(key)
                if lst is not None:
                    try:
                        lst.remove(pr)
                    except ValueError:
                        pass
                    if not lst:
                        del self._holds[key]
        if pr.timer is not None:
            pr.timer.cancel()
            pr.timer = None
        return True

    def _run(self, pr: PullRequest) -> None:
        if pr.conn.closed:
            return
        try:
            self.rerun(pr.conn, pr.request)
        except Exception:
            log.exception("re-running held pull %s/%d@%d failed", pr.topic, pr.queue_id, pr.offset)

    # ------------------------------------------------------------------ waking
    def on_dispatch(self, req: "DispatchRequest") -> None:
        """Store dispatch listener (any thread): cheap unless a pull is parked on that queue."""
        if (req.topic, req.queue_id) in self._holds:
            try:
                self.loop.call_soon_threadsafe(self.notify_message_arriving, req.topic, req.queue_id,
                                               req.queue_offset + 1, req.tags_code, req.properties)
            except RuntimeError:  # loop closed during shutdown
                pass

    def notify_message_arriving(self, topic: str, queue_id: int, max_offset: Optional[int],
                                tags_code: Optional[int], properties: Optional[str]) -> None:
        """Loop thread: re-run every parked pull of the queue the new message satisfies."""
        key = (topic, queue_id)
        with self._lock:
            lst = list(self._holds.get(key, ()))
        if not lst:
            return
        if max_offset is None:
            max_offset = self.get_max_offset(topic, queue_id)
        now = time.monotonic()
        for pr in lst:
            wake = False
            if max_offset > pr.offset:
                try:
                    wake = pr.matches(tags_code, properties)
                except Exception:
                    log.exception("filter check of held pull %s/%d failed", topic, queue_id)
                    wake = True
            if wake or now >= pr.deadline:
                if self._take(pr):
                    self._run(pr)

    def _sweep(self) -> None:
        try:
            with self._lock:
                keys = list(self._holds)
            for topic, queue_id in keys:
                self.notify_message_arriving(topic, queue_id, None, None, None)
        except Exception:
            log.exception("long-polling sweep failed")
        self._sweeper = self.loop.call_later(self.check_interval_s, self._sweep)
