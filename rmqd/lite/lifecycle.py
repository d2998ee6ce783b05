"""Lite lifetimes (Java ``LiteLifecycleManager``): clients whose subscriptions went unsynced for
``liteSubscriptionCheckTimeoutMills`` are dropped; lite topics idle past their parent's ``lite.topic.expiration``
(and ``minLiteTTl``) are deleted with their offsets and subscriptions."""
from __future__ import annotations

import logging
from typing import Optional

from rmqd.lite.registry import LiteRegistry
from rmqd.store import group_attributes as ga
from rmqd.store.lite.names import lmq_name
from rmqd.store.topic_attributes import lite_expiration_minutes

log = logging.getLogger(__name__)


class LiteLifecycle(LiteRegistry):
    def expire_clients(self) -> list[str]:
        """Drop clients whose subscription was untouched for ``liteSubscriptionCheckTimeoutMills``."""
        limit = self.clock() - self.config.liteSubscriptionCheckTimeoutMills / 1000.0
        gone = [cid for cid, c in list(self.clients.items()) if c.last_sync < limit]
        for cid in gone:
            self.drop_client(cid, "no subscription sync for %d ms" % self.config.liteSubscriptionCheckTimeoutMills)
        return gone

    def sweep_expired(self, now_wall: Optional[int] = None) -> int:
        """Delete lite topics idle longer than their parent's ``lite.topic.expiration`` (and ``minLiteTTl``):
        the index entry, the consumer offsets of every group bound to the parent, the subscriptions (no
        notification, as Java). Returns how many."""
        now = self.wall_ms() if now_wall is None else now_wall
        bound: dict[str, list[str]] = {}
        for name, sg in list(self.groups.table.items()):
            b = ga.bind_topic(sg)
            if b:
                bound.setdefault(b, []).append(name)
        minutes_of: dict[str, int] = {}
        expired = []
        for parent, lite, q in self.index.items():
            minutes = minutes_of.get(parent)
            if minutes is None:
                minutes = minutes_of[parent] = lite_expiration_minutes(self.topics.get(parent))
            if minutes <= 0 or not q.last_store_ts:
                continue
            inactive = now - q.last_store_ts
            if inactive >= self.config.minLiteTTl and inactive > minutes * 60_000:
                expired.append((parent, lite))
        for parent, lite in expired:
            key = lmq_name(parent, lite)
            self.index.delete(parent, lite)
            for group in bound.get(parent, ()):
                self.offsets.remove_offset(group, key)
            with self._lock:
                for group, ids in list(self.subscribers.get(key, {}).items()):
                    for cid in list(ids):
                        c = self.clients.get(cid)
                        if c is not None:
                            self._remove(c, lite)
        if expired:
            self.expired_total += len(expired)
            log.info("lite: %d lite topics expired", len(expired))
        return len(expired)
