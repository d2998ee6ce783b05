"""Bucket counts of a histogram metric, per label tuple (rendered by :func:`rmqd.metrics.families.render`)."""
from __future__ import annotations

import bisect

#: One series of a histogram: its non-cumulative bucket counts (``len(bounds) + 1``) and the sum of what it saw.
Series = tuple[list[int], float]


class Histogram:
    """Non-cumulative bucket counts + sum per label tuple."""

    __slots__ = ("bounds", "series")

    def __init__(self, bounds: tuple[float, ...]) -> None:
        self.bounds = bounds
        self.series: dict[tuple[str, ...], Series] = {}

    def observe(self, labels: tuple[str, ...], value: float, n: int = 1) -> None:
        s = self.series.get(labels)
        counts, total = ([0] * (len(self.bounds) + 1), 0.0) if s is None else s
        counts[bisect.bisect_left(self.bounds, value)] += n
        self.series[labels] = (counts, total + value * n)
