"""ByteRate: bytes per second of a growing byte counter, measured over windows of at least one second."""
from __future__ import annotations

import time


class ByteRate:
    """The rate of a counter the caller owns; :meth:`sample` takes the counter's total now and answers the rate
    of the last window of one second or more (the previous answer until a second has passed)."""

    __slots__ = ("_when", "_total", "_rate")

    def __init__(self) -> None:
        self._when = time.monotonic()
        self._total = 0
        self._rate = 0.0

    def sample(self, total: int) -> float:
        now = time.monotonic()
        if now - self._when >= 1.0:
            self._rate = (total - self._total) / (now - self._when)
            self._when, self._total = now, total
        return self._rate
