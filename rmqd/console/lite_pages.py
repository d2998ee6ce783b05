"""Console feature pages for Lite Mode and priority messages (``/features/lite``, ``/features/priority``).

- **lite**: per LITE parent its lite topics (count, messages), every lite consumer (group, lite topics,
  pending events, delivered), and the lite topics with the largest backlog per group;
- **priority**: per PRIORITY topic and consumer group with an offset, the backlog per priority level (the
  level is the queue id; the top queue also holds every priority above it).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Optional

from rmqd.console import extensions
from rmqd.store.topic_attributes import is_priority_topic

if TYPE_CHECKING:
    from rmqd.console.handles import ConsoleBroker
    from rmqd.console.view_base import JsonObject

TOP = 20


def lite_page(broker: "ConsoleBroker") -> Optional["JsonObject"]:
    lp = broker.lite_priority
    if lp.manager is None:
        return None
    m, index = lp.manager, lp.lite_store.index
    parents = [[p, len(par.queues), par.messages] for p, par in sorted(index.parents.items())]
    clients = [[c.client_id, c.group, c.parent, len(c.topics), len(c.events), c.delivered, c.host]
               for c in sorted(list(m.clients.values()), key=lambda c: c.client_id)][:500]
    lag_by_group = sorted(m.lag().items())          # ((parent, group), (lag, oldest))
    backlog = [[parent, group, lag] for (parent, group), (lag, _oldest) in lag_by_group]
    top: list[list[str | int]] = []
    groups = {g for (_, g), _ in lag_by_group}
    for group in sorted(groups):
        parent = next(p for (p, g), _ in lag_by_group if g == group)
        lags = sorted(((m.backlog(group, parent, lite), lite) for lite in index.lite_topics(parent)), reverse=True)
        top += [[group, parent, lite, n] for n, lite in lags[:TOP] if n > 0]
    return {"summary": {"lite topics": index.lite_count, "lite consumers": len(m.clients),
                        "subscriptions": m.active, "limit (maxLiteSubscriptionCount)": lp.lite_config.maxLiteSubscriptionCount,
                        "expired lite topics": m.expired_total, "refused": dict(m.refused) or "none"},
            "tables": [{"id": "lite-parents", "title": "LITE topics", "columns": ["topic", "lite topics",
                                                                                "messages since start"],
                        "rows": parents},
                       {"id": "lite-lag", "title": "Backlog per group", "columns": ["topic", "group", "messages"],
                        "rows": backlog},
                       {"id": "lite-top", "title": f"Largest lite topic backlogs (top {TOP} per group)",
                        "columns": ["group", "topic", "lite topic", "messages"], "rows": top},
                       {"id": "lite-clients", "title": "Lite consumers", "columns": [
                           "client", "group", "topic", "lite topics", "pending events", "delivered", "address"],
                        "rows": clients}]}


def priority_backlog(broker: "ConsoleBroker") -> list[list[str | int]]:
    """[topic, group, level, backlog] for every PRIORITY topic and group with committed offsets."""
    ctx = broker.ctx
    store, offsets = ctx.store, ctx.offsets
    rows: list[list[str | int]] = []
    for tc in sorted(list(ctx.topics.table.values()), key=lambda t: t.topic_name):
        if not is_priority_topic(tc):
            continue
        for group in sorted(offsets.which_group_by_topic(tc.topic_name)):
            for qid in reversed(range(tc.read_queue_nums)):
                off = offsets.query_offset(group, tc.topic_name, qid)
                end = store.get_max_offset(tc.topic_name, qid)
                rows.append([tc.topic_name, group, qid, max(0, end - max(off, 0)) if off >= 0 else end])
    return rows


def priority_page(broker: "ConsoleBroker") -> Optional["JsonObject"]:
    lp = broker.lite_priority
    cfg = lp.priority_config
    return {"summary": {"priorityOrderAsc": cfg.priorityOrderAsc,
                        "popFromRetryProbabilityForPriority": cfg.popFromRetryProbabilityForPriority,
                        "requests served in priority order": lp.queue_selector.priority_pops},
            "tables": [{"id": "priority-backlog", "title": "Backlog per priority level",
                        "columns": ["topic", "group", "level (queue)", "messages"], "rows": priority_backlog(broker)}]}


def register() -> None:
    extensions.register("lite", lite_page)
    extensions.register("priority", priority_page)
