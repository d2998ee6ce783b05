"""In which order a POP reads a topic's queues, and whether it reads the retry topic first.

:class:`PopService` asks its selector once per pop of queue -1 (every queue). The default
(:class:`RotatingQueueSelector`) is the Java broker's: a random start queue spreads consumers over the
queues, and ``popFromRetryProbability`` % of requests read the POP retry topic first.

5.4 priority mode is :class:`rmqd.lite.priority_selector.PriorityQueueSelector`, given to PopService by the
broker (POP knows only the :class:`QueueSelector` interface).
"""
from __future__ import annotations

import random
from dataclasses import dataclass
from typing import TYPE_CHECKING, Optional, Protocol

if TYPE_CHECKING:
    from rmqd.store.metadata import SubscriptionGroupConfig, TopicConfig


class QueueSelector(Protocol):
    def select(self, topic_config: TopicConfig, group_config: Optional[SubscriptionGroupConfig],
               qids: list[int]) -> tuple[list[int], bool, bool]:
        """(queue ids in reading order, read the retry topic first?, skip a queue another pop holds?)."""


def rotate(qids: list[int]) -> list[int]:
    if len(qids) > 1:
        k = random.randrange(len(qids))
        qids = qids[k:] + qids[:k]
    return qids


class RetryShare(Protocol):
    """The setting the rotating order reads (``rmqd.lite.config.PriorityConfig`` has it, under the Java name)."""

    @property
    def popFromRetryProbability(self) -> int: ...


@dataclass(frozen=True)
class JavaRetryShare:
    """The Java broker's default: 20 % of POP requests read the retry topic first."""

    popFromRetryProbability: int = 20


class RotatingQueueSelector:
    """A random start queue; ``popFromRetryProbability`` % of requests read the retry topic first."""

    def __init__(self, config: Optional[RetryShare] = None) -> None:
        self.retry_share: RetryShare = config or JavaRetryShare()

    def select(self, topic_config: TopicConfig, group_config: Optional[SubscriptionGroupConfig],
               qids: list[int]) -> tuple[list[int], bool, bool]:
        return rotate(qids), random.randrange(100) < self.retry_share.popFromRetryProbability, False
