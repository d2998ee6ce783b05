"""Lag trend samples: total lag of every consumer group, sampled every ``interval_s``.

Kept in memory for the last ``keep`` samples (default 360: one hour at 10 s); at most
``max_groups`` groups are tracked (the ones with the largest lag win when there are more).
"""
from __future__ import annotations

import collections
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rmqd.console.view import RemoteClusterView


class LagHistory:
    def __init__(self, keep: int = 360, max_groups: int = 2000) -> None:
        self.keep = keep
        self.max_groups = max_groups
        self.series: dict[str, collections.deque[tuple[int, int]]] = {}

    def record(self, lags: dict[str, int], now_ms: int | None = None) -> None:
        now_ms = int(time.time() * 1000) if now_ms is None else now_ms
        if len(lags) > self.max_groups:
            lags = dict(sorted(lags.items(), key=lambda kv: -kv[1])[: self.max_groups])
        for group, lag in lags.items():
            s = self.series.get(group)
            if s is None:
                if len(self.series) >= self.max_groups:
                    continue
                s = self.series[group] = collections.deque(maxlen=self.keep)
            s.append((now_ms, int(lag)))

    def of(self, group: str) -> list[tuple[int, int]]:
        return list(self.series.get(group, ()))

    def sample(self, view: "RemoteClusterView") -> None:
        """One pass over the view's groups (``group_lags()`` if it has one)."""
        fn = getattr(view, "group_lags", None)
        if fn is not None:
            self.record(fn())
            return
        lags = {}
        for group in list(view.group_names())[: self.max_groups]:
            lags[group] = view.group_summary(group).get("lag", 0)
        self.record(lags)
