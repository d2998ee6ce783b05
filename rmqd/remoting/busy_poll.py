"""Busy polling: keep the event loop polling for a short while after each request.

A loop with nothing to do blocks in epoll_wait and its thread sleeps; the next request then
pays the wake-up (on a VM an inter-processor interrupt through the hypervisor: tens of µs,
often more than handling the request).  When requests have recently been arriving
less than ``budget_us`` apart (a moving average of the gaps), ``BusyPoll`` keeps one callback
re-scheduled for ``budget_us`` after each read, so the loop polls with a zero timeout and picks
the next request up at once.  Sparse traffic, whose next request would not come within the
budget anyway, never starts a spin, and an idle server sleeps as before: CPU is spent only where
it buys latency.  The same trade as Linux's ``SO_BUSY_POLL``; ``busyPollMicros=0`` turns it off.
"""
from __future__ import annotations

import asyncio
import os
import time

_now = time.perf_counter
_yield = os.sched_yield


class BusyPoll:
    def __init__(self, loop: asyncio.AbstractEventLoop, budget_us: int) -> None:
        self._loop = loop
        self._budget = budget_us / 1e6
        self._last = 0.0
        self._gap = 0.01           # moving average of the time between reads (s)
        self._spinning = False
        self.spins_started = 0

    def touch(self) -> None:
        """Note a read now; polls on if reads have been coming within the budget."""
        now = _now()
        gap = now - self._last
        self._gap += ((gap if gap < 1.0 else 1.0) - self._gap) * 0.125
        self._last = now
        if not self._spinning and self._gap < self._budget:
            self._spinning = True
            self.spins_started += 1
            self._loop.call_soon(self._spin)

    def _spin(self) -> None:
        if _now() - self._last < self._budget:
            # Polite spinning: a thread woken onto this CPU (often the client we just answered)
            # runs at once instead of waiting for our time slice to end.
            _yield()
            self._loop.call_soon(self._spin)
        else:
            self._spinning = False
