"""Busy polling: keep the event loop polling for a short while after each request.

A loop with nothing to do blocks in epoll_wait and its thread sleeps; the next request then
pays the wake-up (on a VM an inter-processor interrupt through the hypervisor: tens of µs,
often more than handling the request).  When requests have recently been arriving
less than ``budget_us`` apart (a moving average of the gaps), ``BusyPoll`` keeps one callback
re-scheduled for ``budget_us`` after each read, so the loop polls with a zero timeout and picks
the next request up at once.  Sparse traffic, whose next request would not come within the
budget anyway, never starts a spin, and an idle server sleeps as before: CPU is spent only where
it buys latency.  The same trade as Linux's ``SO_BUSY_POLL``; ``busyPollMicros=0`` turns it off.

A spinning loop holds a whole core. When other processes on the host need that core (clients on
the same machine: a producer and a consumer beside the broker), spinning starves them and costs
more latency than it saves, so ``BusyPoll`` spins only while the rest of the host leaves a core
idle: every 0.2 s of traffic it compares the host's busy CPU time (``/proc/stat``) with its own.
"""
from __future__ import annotations

import asyncio
import os
import time

_now = time.perf_counter
_yield = os.sched_yield
_CLK_TCK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
SAMPLE_S = 0.2


def host_busy_seconds() -> float:
    """CPU seconds the whole host spent busy (user, nice, system, irq, softirq) since boot,
    or -1 where /proc/stat cannot be read."""
    try:
        with open("/proc/stat", "rb") as f:
            fields = f.readline().split()
    except OSError:
        return -1.0
    user, nice, system, _idle, _iowait, irq, softirq = (int(v) for v in fields[1:8])
    return (user + nice + system + irq + softirq) / _CLK_TCK


class HostCpu:
    """Whether the rest of the host leaves this process a core of its own, sampled lazily."""

    def __init__(self, cpus: int | None = None, share: float = 0.8) -> None:
        self.limit = max(0.0, ((cpus or os.cpu_count() or 1) - 1) * share)
        self._t = _now()
        self._host = host_busy_seconds()
        self._own = time.process_time()
        self.others = 0.0          # cores the other processes used in the last sample
        self.spare = self._host >= 0 and self.limit > 0

    def sample(self, now: float) -> bool:
        """Re-sample if the last sample is older than SAMPLE_S; True while a core is spare."""
        if now - self._t < SAMPLE_S or self._host < 0:
            return self.spare
        host, own = host_busy_seconds(), time.process_time()
        wall = now - self._t
        self.others = max(0.0, (host - self._host) - (own - self._own)) / wall
        self._t, self._host, self._own = now, host, own
        self.spare = self.others <= self.limit
        return self.spare


class BusyPoll:
    def __init__(self, loop: asyncio.AbstractEventLoop, budget_us: int) -> None:
        self._loop = loop
        self._budget = budget_us / 1e6
        self._last = 0.0
        self._gap = 0.01           # moving average of the time between reads (s)
        self._spinning = False
        self.spins_started = 0
        self.host = HostCpu()

    def touch(self) -> None:
        """Note a read now; polls on if reads have been coming within the budget and the host
        has a core to spare."""
        now = _now()
        gap = now - self._last
        self._gap += ((gap if gap < 1.0 else 1.0) - self._gap) * 0.125
        self._last = now
        if not self._spinning and self._gap < self._budget and self.host.sample(now):
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
