"""LiteSubscriptionManager: 5.5 Lite Mode subscriptions, events and delivery (Java ``LiteSubscriptionRegistry``,
``LiteEventDispatcher``, ``PopLiteMessageProcessor``, ``PopLiteLongPollingService``, ``LiteLifecycleManager``).

A lite consumer (client id) of a lite group (``lite.bind.topic`` = the LITE parent) subscribes lite topics
by name with SyncLiteSubscription (:meth:`sync`: PARTIAL_ADD / PARTIAL_REMOVE / COMPLETE_ADD /
COMPLETE_REMOVE). State is in memory, like Java's: clients re-send their whole set every 30 s, and a
client not heard from for ``liteSubscriptionCheckTimeoutMills`` loses its subscriptions.

**Delivery.** A message applied to the lite index (:mod:`rmqd.store.lite`) is an *event*: for each group
subscribed to its lite topic one client is picked (random start, skipping clients blacklisted as
blocked) and the lite topic joins that client's de-duplicated event set (``lite.sub.client.max.event.cnt``);
the client's long poll (keyed by client id) wakes. A pop takes lite topics from the event set and pops
each as an orderly queue through :class:`rmqd.pop.PopService` (:meth:`PopService.pop_queues`): one batch in
flight per (group, lite topic) until it is acked, then the next; a batch not acked within its invisible
time is handed out again with a higher delivery attempt, up to the group's max attempts, then to the DLQ.
Acks, expired batches, new subscriptions to lite topics with messages and a periodic scan
(``liteEventCheckInterval``) offer lite topics again, so nothing is left behind when an event set was full or
a client stopped polling (blocked: events pending and no poll for 10 s, or no poll for 35 s; its events go
to the group's other clients and it is skipped for 10 s).

**Quotas** (5.5 names and codes): lite names 1…``maxLiteTopicSize`` bytes of ``[A-Za-z0-9_-]``
(ILLEGAL_LITE_TOPIC); a request set over ``lite.sub.client.quota`` + 300, or new subscriptions beyond the
broker's ``maxLiteSubscriptionCount`` references (LITE_SUBSCRIPTION_QUOTA_EXCEEDED) — the per-client quota
itself is pushed to the clients in Settings and enforced by them, as with Java; PARTIAL_ADD over
``maxSyncLiteSubscriptionRate`` per second (TOO_MANY_REQUESTS). **Expiry**: a lite topic whose newest
message is older than the parent's ``lite.topic.expiration`` minutes (and ``minLiteTTl``) is deleted with its
offsets and subscriptions, unannounced (:meth:`sweep_expired`).

Threading: index callbacks come from putting threads, pops from POP executor threads, syncs from the event
loop; one lock guards the registry, and a parked long poll is woken on its loop.

Made of one module per job (mixins over :class:`rmqd.lite.model.LiteState`): :mod:`rmqd.lite.registry`
(subscriptions), :mod:`rmqd.lite.delivery` (events and pops), :mod:`rmqd.lite.lifecycle` (quiet clients, expired
lite topics) and :mod:`rmqd.lite.views` (what admin, console and metrics read).
"""
from __future__ import annotations

import itertools
import threading
import time
from typing import TYPE_CHECKING, Callable

from rmqd.lite.lifecycle import LiteLifecycle
from rmqd.lite.model import (ACTIONS, BLACKLIST_MS, BLOCKED_NO_POLL_MS, BLOCKED_PENDING_MS, COMPLETE_ADD, COMPLETE_REMOVE,
                             PARTIAL_ADD, PARTIAL_REMOVE, QUOTA_SLACK, LiteClient, LiteClientInfo, LiteError,
                             OffsetOption)
from rmqd.lite.views import LiteViews
from rmqd.pop.checkpoint import now_ms

if TYPE_CHECKING:
    from rmqd.lite.config import LiteConfig
    from rmqd.pop.handles import LiteGroups, LiteOffsets, TopicLookup
    from rmqd.pop.service import PopService
    from rmqd.store.lite.index import LiteIndex

__all__ = ["ACTIONS", "BLACKLIST_MS", "BLOCKED_NO_POLL_MS", "BLOCKED_PENDING_MS", "COMPLETE_ADD", "COMPLETE_REMOVE",
           "PARTIAL_ADD", "PARTIAL_REMOVE", "QUOTA_SLACK", "LiteClient", "LiteClientInfo", "LiteError",
           "LiteSubscriptionManager", "OffsetOption"]


class LiteSubscriptionManager(LiteLifecycle, LiteViews):
    """The lite registry and delivery of one broker (see the module docstring)."""

    def __init__(self, config: LiteConfig, index: LiteIndex, pop: PopService, topics: TopicLookup,
                 groups: LiteGroups, offsets: LiteOffsets, clock: Callable[[], float] = time.monotonic,
                 wall_ms: Callable[[], int] = now_ms) -> None:
        self.config = config
        self.index = index
        self.pop_service = pop
        self.topics = topics
        self.groups = groups
        self.offsets = offsets
        self.clock = clock
        self.wall_ms = wall_ms
        self.clients: dict[str, LiteClient] = {}
        self.subscribers: dict[str, dict[str, list[str]]] = {}     # lmq -> group -> client ids
        self.active = 0                                             # (client, lite topic) references
        self._lock = threading.RLock()
        self._deadlines: list[tuple[int, int, str, str]] = []       # (deadline ms, seq, group, lmq)
        self._seq = itertools.count()
        self._rate_window = 0
        self._rate_count = 0
        self.started_ms = wall_ms()
        self.expired_total = 0
        self.refused: dict[str, int] = {}
        index.on_arrival = self.on_arrival
        pop.orderly_listeners.append(self._on_orderly)
