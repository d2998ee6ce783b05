"""What the admin codes, the console and the metrics read of the lite registry: a client's info, a group's
subscriptions, a lite topic's subscribers, backlogs and the consumer lag per parent."""
from __future__ import annotations

from typing import Optional

from rmqd.lite.model import LiteClientInfo, LiteState
from rmqd.store.lite.names import lmq_name, parse_lmq
from rmqd.store.lite.view import record_store_time


class LiteViews(LiteState):
    def client_info(self, client_id: str) -> Optional[LiteClientInfo]:
        c = self.clients.get(client_id)
        if c is None:
            return None
        return {"clientId": c.client_id, "group": c.group, "bindTopic": c.parent, "liteTopicCount": len(c.topics),
                "liteTopicSet": sorted(c.topics), "pendingEvents": len(c.events), "delivered": c.delivered,
                "host": c.host}

    def group_subscriptions(self, group: str) -> dict[str, list[str]]:
        """client id -> its lite topics, for one group."""
        with self._lock:
            return {c.client_id: sorted(c.topics) for c in self.clients.values() if c.group == group}

    def subscribers_of(self, parent: str, lite: str) -> dict[str, list[str]]:
        return {g: list(ids) for g, ids in self.subscribers.get(lmq_name(parent, lite), {}).items()}

    def backlog(self, group: str, parent: str, lite: str) -> int:
        q = self.index.queue(parent, lite)
        if q is None:
            return 0
        off = self.offsets.query_offset(group, lmq_name(parent, lite), 0)
        return max(0, q.max_offset - (off if off >= 0 else q.min_offset))

    def lag(self, group: Optional[str] = None) -> dict[tuple[str, str], tuple[int, int]]:
        """(parent, group) -> (messages behind, store time of the oldest unconsumed one) over every lite topic a
        group has an offset in (Java ``LiteConsumerLagCalculator``: the consumer-lag series of the parent)."""
        out: dict[tuple[str, str], list[int]] = {}
        for key, queues in list(self.offsets.table.items()):
            if not key.startswith("%LMQ%$"):
                continue
            lmq, _, grp = key.rpartition("@")
            if group is not None and grp != group:
                continue
            pl = parse_lmq(lmq)
            if pl is None:
                continue
            off = queues.get(0, -1)
            q = self.index.queue(*pl)
            if q is None or off < 0 or off >= q.max_offset:
                continue
            acc = out.setdefault((pl[0], grp), [0, 0])
            acc[0] += q.max_offset - max(off, q.min_offset)
            first = max(off, q.min_offset)
            if first < q.max_offset:
                rec = self.index.store.read_message(q.phys[first - q.base])
                ts = record_store_time(rec) if rec is not None else 0
                if ts and (acc[1] == 0 or ts < acc[1]):
                    acc[1] = ts
        return {k: (v[0], v[1]) for k, v in out.items()}
