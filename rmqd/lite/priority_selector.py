"""5.4 priority mode (RIP-80, ``PopConsumerService``'s KV path): the order a POP reads a PRIORITY topic's queues.

On a PRIORITY topic, ``priority.factor`` of every 100 requests of a group walk the queues from the highest
priority down (``priorityOrderAsc``: queue n-1 first), so a batch fills from the highest non-empty queue;
those requests read the retry topic first with ``popFromRetryProbabilityForPriority`` (default 0: retries
come last), and pass over a queue another pop holds (as Java's ``tryLock``) rather than wait for it. The other
requests keep the rotating order (:class:`rmqd.pop.queue_selector.RotatingQueueSelector`), which is the fairness
control. FIFO pops never use it (PopService calls its selector for non-orderly pops only).
"""
from __future__ import annotations

import itertools
import threading
from typing import TYPE_CHECKING, Optional

from rmqd.lite.config import PriorityConfig
from rmqd.pop.queue_selector import RotatingQueueSelector
from rmqd.store import group_attributes
from rmqd.store.topic_attributes import is_priority_topic

if TYPE_CHECKING:
    from rmqd.store.metadata import SubscriptionGroupConfig, TopicConfig


def _every(count: int, percent: int) -> bool:
    """Whether request number ``count`` is one of ``percent`` in every 100 (Java's KV-path counter rule)."""
    p = max(0, min(100, int(percent)))
    return p > 0 and count % max(1, 100 // p) == 0


class PriorityQueueSelector(RotatingQueueSelector):
    """Priority mode on PRIORITY topics (see the module docstring); rotating order elsewhere."""

    def __init__(self, config: Optional[PriorityConfig] = None) -> None:
        self.config: PriorityConfig = config or PriorityConfig()
        super().__init__(self.config)
        self._counters: dict[tuple[str, str], itertools.count[int]] = {}
        self._lock = threading.Lock()
        self.priority_pops = 0          # requests served in priority mode (metrics)

    def _count(self, key: tuple[str, str]) -> int:
        counter = self._counters.get(key)
        if counter is None:
            with self._lock:
                counter = self._counters.setdefault(key, itertools.count())
        return next(counter)

    def select(self, topic_config: TopicConfig, group_config: Optional[SubscriptionGroupConfig],
               qids: list[int]) -> tuple[list[int], bool, bool]:
        if not is_priority_topic(topic_config):
            return super().select(topic_config, group_config, qids)
        factor = group_attributes.get_int(group_config, group_attributes.PRIORITY_FACTOR)
        n = self._count((group_config.group_name if group_config is not None else "", topic_config.topic_name))
        if n % 100 >= factor:                   # this request keeps the fair, rotating order
            return super().select(topic_config, group_config, qids)
        self.priority_pops += 1
        ordered = sorted(qids, reverse=self.config.priorityOrderAsc)
        # every priority-mode pop starts at the top queue: one busy with another pop is passed over (Java's
        # tryLock), so concurrent consumers take the next levels instead of queueing behind each other
        return ordered, _every(n, self.config.popFromRetryProbabilityForPriority), True
