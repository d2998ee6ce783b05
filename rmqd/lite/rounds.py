"""Lite Mode's background rounds: due in-flight batches, blocked clients, quiet clients, idle lite topics and the
lite index's retention, each at its Java interval."""
from __future__ import annotations

import time
from typing import TYPE_CHECKING

from rmqd.common.service_thread import ServiceThread

if TYPE_CHECKING:
    from rmqd.lite.wiring import LitePriority


class LiteRounds(ServiceThread):
    """Lite Mode's background rounds (once a second; each kind of work at its own Java interval)."""

    def __init__(self, lp: "LitePriority") -> None:
        super().__init__("lite-service", interval=0.2)
        self.lp = lp
        self._last: dict[str, float] = {}
        self.started = time.monotonic()

    def _due(self, what: str, interval_ms: int) -> bool:
        now = time.monotonic()
        if now - self._last.get(what, self.started) >= interval_ms / 1000.0:
            self._last[what] = now
            return True
        return False

    def run_once(self) -> None:
        m, cfg = self.lp.manager, self.lp.lite_config
        assert m is not None            # LitePriority.install makes the manager before this service
        m.run_due()
        if self._due("events", cfg.liteEventCheckInterval):
            m.check_events()
        if self._due("clients", cfg.liteSubscriptionCheckInterval):
            m.expire_clients()
        if (time.monotonic() - self.started) * 1000 >= cfg.minLiteTTl and self._due("ttl", cfg.liteTtlCheckInterval):
            m.sweep_expired()
        if self._due("trim", 10_000):
            self.lp.lite_store.trim()
