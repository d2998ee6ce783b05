"""Bucket counts of a histogram metric, per label tuple (rendered by :func:`rmqd.metrics.families.render`)."""
from __future__ import annotations

import bisect


class Histogram:
    """Non-cumulative bucket counts + sum per label tuple."""

    __slots__ = ("bounds", "series")

    def __init__(self, bounds: tuple[float, ...]) -> None:
        self.bounds = bounds
        self.series: dict[tuple, list] = {}

    def observe(self, labels: tuple, value: float, n: int = 1) -> None:
        s = self.series.get(labels)
        if s is None:
            s = self.series[labels] = [[0] * (len(self.bounds) + 1), 0.0]
        s[0][bisect.bisect_left(self.bounds, value)] += n
        s[1] += value * n
