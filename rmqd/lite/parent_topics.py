"""LMQ names folded into their LITE parent, so metrics and statistics keep one series per parent topic, not one per
lite topic."""
from __future__ import annotations

from typing import TYPE_CHECKING, Callable

from rmqd.store.lite.names import parse_lmq

if TYPE_CHECKING:
    from rmqd.metrics.recorders import PopCounters


def parent_topic(topic: str) -> str:
    """The LITE parent of an LMQ name, else the name itself (keeps metrics and stats per parent)."""
    pl = parse_lmq(topic) if topic[:1] == "%" else None
    return pl[0] if pl is not None else topic


class ParentTopicCounters:
    """POP's counters with LMQ names folded into their parent topic (one series per parent, not per lite topic)."""

    def __init__(self, counters: PopCounters) -> None:
        self._counters = counters

    def on_revive_put(self, group: str, topic: str, tag: str, status: str) -> None:
        self._counters.on_revive_put(group, parent_topic(topic), tag, status)

    def on_settled(self, group: str, topic: str, revive_qid: int, ck_records: int, ack_records: int) -> None:
        self._counters.on_settled(group, parent_topic(topic), revive_qid, ck_records, ack_records)

    def on_retry_put(self, group: str, topic: str, status: str) -> None:
        self._counters.on_retry_put(group, parent_topic(topic), status)


def fold_out(on_out: Callable[[str, str, int, int], None]) -> Callable[[str, str, int, int], None]:
    """POP's messages-out callback with lite topics counted under their parent."""
    return lambda group, topic, n, size: on_out(group, parent_topic(topic), n, size)
