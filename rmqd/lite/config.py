"""Broker settings of priority messages (5.4) and Lite Mode (5.5), under the Java ``BrokerConfig`` /
``ProxyConfig`` / ``MessageStoreConfig`` names and defaults.

Read from the broker's properties (``broker.conf`` and the command line), so ``minLiteTTl=60000`` in a
broker.conf means what it means to the Java broker. rmqd needs no ``enableLmq`` / ``enableMultiDispatch``
(Java requires both for Lite Mode; its lite index is not an LMQ consume queue), and accepts both.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import ClassVar, Mapping, Self, SupportsInt


def _coerce(name: str, default: object, value: object) -> object:
    """``value`` (a property's text, or already typed) as the type of ``default`` (the settings are int or bool)."""
    if isinstance(default, bool):
        return value.strip().lower() == "true" if isinstance(value, str) else bool(value)
    if not isinstance(default, int):
        raise TypeError(f"{name}: a {type(default).__name__} setting is not read from properties")
    if isinstance(value, str):
        return int(value.strip())
    if isinstance(value, SupportsInt):
        return int(value)
    raise TypeError(f"{name}: {value!r} is not an integer")


class _FromProperties:
    __dataclass_fields__: ClassVar[dict[str, dataclasses.Field[object]]]     # the subclasses are dataclasses

    @classmethod
    def from_properties(cls, props: Mapping[str, object]) -> Self:
        """The settings in ``props`` (Java names; values as strings or typed), defaults for the rest."""
        kw: dict[str, object] = {}
        for f in dataclasses.fields(cls):
            if f.name in props and props[f.name] is not None:
                kw[f.name] = _coerce(f.name, f.default, props[f.name])
        return cls(**kw)


@dataclass
class PriorityConfig(_FromProperties):
    """POP ordering (``PopMessageProcessor`` / ``PopConsumerService``)."""

    popFromRetryProbability: int = 20               # % of POP requests reading the retry topic first
    popFromRetryProbabilityForPriority: int = 0     # the same in priority mode: retries come last
    priorityOrderAsc: bool = True                   # a higher queue id is a higher priority
    useSeparateRetryQueue: bool = False             # retries keep their queue id (and so their priority)


@dataclass
class LiteConfig(_FromProperties):
    """Lite Mode: subscriptions, events, quotas and lifetimes."""

    maxLiteSubscriptionCount: int = 100_000         # broker-wide (client, lite topic) references
    liteSubscriptionCheckInterval: int = 120_000    # ms between scans for clients gone quiet
    liteSubscriptionCheckTimeoutMills: int = 180_000   # a client untouched this long loses its subscriptions
    liteTtlCheckInterval: int = 120_000             # ms between sweeps for expired lite topics
    minLiteTTl: int = 900_000                       # floor of inactivity before a lite topic expires
    liteEventCheckInterval: int = 10_000            # ms between scans that re-dispatch stuck events
    liteEventFullDispatchDelayTime: int = 10_000    # delay before re-offering a full client's lite topics
    maxClientEventCount: int = 100                  # event-set size when the group's value is not > 0
    enableLiteEventMode: bool = True                # false: each pop walks the client's whole subscription
    enableLmqQuota: bool = False                    # refuse a new lite topic beyond maxLmqConsumeQueueNum
    maxLmqConsumeQueueNum: int = 20_000
    maxLiteTopicSize: int = 64                      # bytes (UTF-8) of a lite topic name; pushed to clients
    maxSyncLiteSubscriptionRate: int = 5000         # PARTIAL_ADD requests per second (then TOO_MANY_REQUESTS)
    enableLmq: bool = False                         # accepted for Java broker.conf files; not needed by rmqd
    enableMultiDispatch: bool = False
