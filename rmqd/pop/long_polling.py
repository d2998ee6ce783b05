"""Long polling for POP and NOTIFICATION: park a request until its topic gets a message.

Waiters are keyed by topic (a pop on queue -1 reads every queue); the store's dispatch listener
(any thread) wakes the waiters of a topic on the loop.  Every wait is bounded by the request's poll
time, and the number of parked requests by ``max_polling`` (then POLLING_FULL), so a vanished
client holds nothing for longer than its poll time.
"""
from __future__ import annotations

import asyncio
import logging
import threading
from typing import TYPE_CHECKING, Callable, Iterable, Optional

if TYPE_CHECKING:
    from rmqd.cython_ext.store_put import DispatchRequest

log = logging.getLogger(__name__)


class PopLongPolling:
    def __init__(self, max_polling: int = 100_000) -> None:
        self.max_polling = max_polling
        self.loop: Optional[asyncio.AbstractEventLoop] = None
        self._waiters: dict[str, set[asyncio.Future[None]]] = {}
        self._counts: dict[tuple[str, str, int], int] = {}        # (topic, group, queueId) -> parked requests
        self._lock = threading.Lock()
        self._parked = 0
        # (topic, queueId) keys the store checks in C before calling on_dispatch
        self.watched: dict[tuple[str, int], int] = {}

    @property
    def polling_num(self) -> int:
        """Requests parked now."""
        return self._parked

    def polling_count(self, topic: str, group: str, queue_id: int) -> int:
        return self._counts.get((topic, group, queue_id), 0)

    async def wait(self, topics: Iterable[tuple[str, int]], group: str, queue_id: int, timeout_s: float,
                   ready: Optional[Callable[[], bool]] = None) -> str:
        """Wait up to ``timeout_s`` for a message on any of ``topics`` ((topic, queue count) pairs).
        ``ready`` (cheap, in memory) is asked once the waiter is registered, so a message stored
        between the caller's empty pop and the park is not missed.
        Returns ``"woken"``, ``"timeout"`` or ``"full"``."""
        if timeout_s <= 0:
            return "timeout"
        loop = asyncio.get_running_loop()
        self.loop = loop
        topics = list(topics)
        if self.polling_num >= self.max_polling:
            return "full"
        fut: asyncio.Future[None] = loop.create_future()
        key = (topics[0][0], group, queue_id)
        with self._lock:
            for topic, nums in topics:
                self._waiters.setdefault(topic, set()).add(fut)
                for q in range(max(nums, 1)):
                    self.watched[(topic, q)] = self.watched.get((topic, q), 0) + 1
            self._counts[key] = self._counts.get(key, 0) + 1
            self._parked += 1
        try:
            if ready is not None and ready():
                return "woken"
            await asyncio.wait_for(asyncio.shield(fut), timeout_s)
            return "woken"
        except asyncio.TimeoutError:
            return "timeout"
        finally:
            with self._lock:
                for topic, nums in topics:
                    s = self._waiters.get(topic)
                    if s is not None:
                        s.discard(fut)
                        if not s:
                            del self._waiters[topic]
                    for q in range(max(nums, 1)):
                        n = self.watched.get((topic, q), 0) - 1
                        if n > 0:
                            self.watched[(topic, q)] = n
                        else:
                            self.watched.pop((topic, q), None)
                self._parked -= 1
                n = self._counts.get(key, 0) - 1
                if n > 0:
                    self._counts[key] = n
                else:
                    self._counts.pop(key, None)

    def on_dispatch(self, req: DispatchRequest) -> None:
        """Store dispatch listener (any thread): wake the waiters of the message's topic."""
        loop = self.loop
        if loop is None or req.topic not in self._waiters:
            return
        try:
            loop.call_soon_threadsafe(self.notify, req.topic)
        except RuntimeError:      # loop closed during shutdown
            pass

    def notify_threadsafe(self, topic: str) -> None:
        """:meth:`notify` from any thread."""
        loop = self.loop
        if loop is None or topic not in self._waiters:
            return
        try:
            loop.call_soon_threadsafe(self.notify, topic)
        except RuntimeError:      # loop closed during shutdown
            pass

    def notify(self, topic: str) -> None:
        """Loop thread: wake every request parked on ``topic``."""
        with self._lock:
            futs = list(self._waiters.get(topic, ()))
        for fut in futs:
            if not fut.done():
                fut.set_result(None)
