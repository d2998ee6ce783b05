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
"""
from __future__ import annotations

import asyncio
import heapq
import itertools
import logging
import random
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Iterable, Optional, TypedDict

from rmqd.pop.checkpoint import now_ms
from rmqd.lite.config import LiteConfig
from rmqd.pop.service import PopResult, PopService
from rmqd.store import group_attributes as ga
from rmqd.store.lite.index import LiteIndex
from rmqd.store.lite.names import check_name, lmq_name, parse_lmq
from rmqd.store.lite.view import record_store_time
from rmqd.store.topic_attributes import is_lite_topic, lite_expiration_minutes

if TYPE_CHECKING:
    from rmqd.pop.handles import LiteGroups, LiteOffsets, TopicLookup
    from rmqd.store.metadata import SubscriptionGroupConfig

log = logging.getLogger(__name__)

PARTIAL_ADD, PARTIAL_REMOVE, COMPLETE_ADD, COMPLETE_REMOVE = 0, 1, 2, 3
ACTIONS = {PARTIAL_ADD: "PARTIAL_ADD", PARTIAL_REMOVE: "PARTIAL_REMOVE", COMPLETE_ADD: "COMPLETE_ADD",
           COMPLETE_REMOVE: "COMPLETE_REMOVE"}
QUOTA_SLACK = 300                   # the proxy refuses a request set over quota + 300
BLOCKED_NO_POLL_MS, BLOCKED_PENDING_MS, BLACKLIST_MS = 35_000, 10_000, 10_000


class LiteError(Exception):
    """A refused lite request; ``kind`` names the 5.x code (the front ends map it)."""

    ILLEGAL_LITE_TOPIC = "ILLEGAL_LITE_TOPIC"
    ILLEGAL_TOPIC = "ILLEGAL_TOPIC"
    ILLEGAL_GROUP = "ILLEGAL_CONSUMER_GROUP"
    TOPIC_NOT_FOUND = "TOPIC_NOT_FOUND"
    GROUP_NOT_FOUND = "CONSUMER_GROUP_NOT_FOUND"
    FORBIDDEN = "FORBIDDEN"
    SUBSCRIPTION_QUOTA = "LITE_SUBSCRIPTION_QUOTA_EXCEEDED"
    TOPIC_QUOTA = "LITE_TOPIC_QUOTA_EXCEEDED"
    TOO_MANY_REQUESTS = "TOO_MANY_REQUESTS"
    BAD_REQUEST = "BAD_REQUEST"

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message


@dataclass
class OffsetOption:
    """Where a PARTIAL_ADD starts: ``policy`` LAST (keep) / MIN / MAX, or an ``offset``, or ``tail_n``
    (``timestamp`` is ignored, as in Java)."""

    policy: str = "LAST"
    offset: Optional[int] = None
    tail_n: Optional[int] = None
    timestamp: Optional[int] = None


class LiteClientInfo(TypedDict):
    """One lite client as the admin's lite client info answers it (the JSON body's keys)."""

    clientId: str
    group: str
    bindTopic: str
    liteTopicCount: int
    liteTopicSet: list[str]
    pendingEvents: int
    delivered: int
    host: str


@dataclass(eq=False)
class LiteClient:
    """One lite consumer's session."""

    client_id: str
    group: str
    parent: str
    topics: set[str] = field(default_factory=set)           # subscribed lite topic names
    events: dict[str, None] = field(default_factory=dict)   # lite names with news, in arrival order (a set)
    capacity: int = 400
    last_sync: float = 0.0
    last_poll: float = 0.0
    events_since: float = 0.0          # when the oldest pending event arrived (0: none)
    blacklisted_until: float = 0.0
    full: bool = False                 # an event was refused: re-offer its lite topics later
    host: str = ""
    waiter: Optional[asyncio.Future[bool]] = None
    loop: Optional[asyncio.AbstractEventLoop] = None
    notify: Optional[Callable[[str], None]] = None      # NotifyUnsubscribeLite(lite) to the client
    delivered: int = 0


class LiteSubscriptionManager:
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

    # ------------------------------------------------------------------ checks
    def _refuse(self, kind: str, message: str) -> LiteError:
        self.refused[kind] = self.refused.get(kind, 0) + 1
        return LiteError(kind, message)

    def check_group(self, group: str, parent: str) -> SubscriptionGroupConfig:
        """The group's config, refusing what the proxy refuses (unknown, not a lite group, other bind topic)."""
        tc = self.topics.get(parent)
        if tc is None:
            raise self._refuse(LiteError.TOPIC_NOT_FOUND, f"topic not found: {parent}")
        if not is_lite_topic(tc):
            raise self._refuse(LiteError.ILLEGAL_TOPIC, f"topic {parent} is not a LITE topic (message.type=LITE)")
        sg = self.groups.find(group) if group else None
        if sg is None:
            raise self._refuse(LiteError.GROUP_NOT_FOUND, f"consumer group not found: {group}")
        bind = ga.bind_topic(sg)
        if bind is None:
            raise self._refuse(LiteError.ILLEGAL_GROUP,
                               f"consumer group {group} is not a lite group (no {ga.LITE_BIND_TOPIC})")
        if bind != parent:
            raise self._refuse(LiteError.ILLEGAL_TOPIC,
                               f"topic {parent} is not the bind topic {bind} of consumer group {group}")
        if not sg.consume_enable:
            raise self._refuse(LiteError.FORBIDDEN, f"consumer group {group} cannot consume (consumeEnable=false)")
        return sg

    def check_names(self, names: Iterable[str]) -> None:
        for name in names:
            reason = check_name(name, self.config.maxLiteTopicSize)
            if reason:
                raise self._refuse(LiteError.ILLEGAL_LITE_TOPIC, f"{reason}: {name!r}")

    def quota_of(self, group_config: SubscriptionGroupConfig) -> int:
        q = ga.get_int(group_config, ga.LITE_CLIENT_QUOTA)
        return q if q >= 0 else 1 << 31

    def _rate_ok(self) -> bool:
        now = int(self.clock())
        if now != self._rate_window:
            self._rate_window, self._rate_count = now, 0
        self._rate_count += 1
        return self._rate_count <= self.config.maxSyncLiteSubscriptionRate

    # ------------------------------------------------------------------ SyncLiteSubscription
    def sync(self, client_id: str, group: str, parent: str, action: int, names: Iterable[str],
             option: Optional[OffsetOption] = None, host: str = "",
             notify: Optional[Callable[[str], None]] = None) -> None:
        """Apply one SyncLiteSubscription; raises LiteError with the 5.x code's name."""
        names = list(dict.fromkeys(names))
        log.debug("lite: %s of %s on %s: %s %s", client_id, group, parent, ACTIONS.get(action, action), names[:20])
        if action not in ACTIONS:
            raise self._refuse(LiteError.BAD_REQUEST, f"unknown lite subscription action {action}")
        if action == COMPLETE_REMOVE:
            self.drop_client(client_id, "COMPLETE_REMOVE")
            return
        sg = self.check_group(group, parent)
        quota = self.quota_of(sg)
        if len(names) > quota + QUOTA_SLACK:
            raise self._refuse(LiteError.SUBSCRIPTION_QUOTA,
                               f"lite subscription set of {len(names)} exceeds the quota {quota}")
        self.check_names(names)
        if action == PARTIAL_ADD and not self._rate_ok():
            raise self._refuse(LiteError.TOO_MANY_REQUESTS,
                               f"lite subscription rate over {self.config.maxSyncLiteSubscriptionRate}/s")
        dispatch: list[str] = []
        evicted: list[tuple[LiteClient, str]] = []
        with self._lock:
            c = self._session(client_id, group, parent, sg, host, notify)
            if action == PARTIAL_ADD:
                new = [n for n in names if n not in c.topics]
                if new and self.active + len(new) > self.config.maxLiteSubscriptionCount:
                    raise self._refuse(LiteError.SUBSCRIPTION_QUOTA,
                                       f"the broker holds {self.active} lite subscriptions, the limit is "
                                       f"{self.config.maxLiteSubscriptionCount} (maxLiteSubscriptionCount)")
                for n in new:
                    evicted += self._add(c, n, sg)
                for n in names:
                    if option is not None:
                        self._apply_offset(group, parent, n, option)
                dispatch = names if option is not None else new
            elif action == PARTIAL_REMOVE:
                reset = ga.get_bool(sg, ga.LITE_RESET_UNSUBSCRIBE)
                for n in names:
                    if n in c.topics:
                        self._remove(c, n)
                        if reset:
                            self.offsets.commit_offset("", group, lmq_name(parent, n), 0, 0)
            else:                                                   # COMPLETE_ADD: replace the set
                want = set(names)
                for n in list(c.topics - want):
                    self._remove(c, n)
                new = [n for n in names if n not in c.topics]
                if new and self.active + len(new) > self.config.maxLiteSubscriptionCount:
                    raise self._refuse(LiteError.SUBSCRIPTION_QUOTA,
                                       f"the broker holds {self.active} lite subscriptions, the limit is "
                                       f"{self.config.maxLiteSubscriptionCount} (maxLiteSubscriptionCount)")
                exclusive = ga.get(sg, ga.LITE_SUB_MODEL) == "Exclusive"
                for n in new:
                    if exclusive and self._owned_by_other(c, n):     # evicted earlier: tell it again
                        evicted.append((c, n))
                        continue
                    evicted += self._add(c, n, sg)
                dispatch = new
        for other, name in evicted:
            self._tell_unsubscribed(other, name)
        for n in dispatch:
            self._offer_if_backlog(group, parent, n)

    def _session(self, client_id: str, group: str, parent: str, sg: SubscriptionGroupConfig, host: str,
                 notify: Optional[Callable[[str], None]]) -> LiteClient:
        c = self.clients.get(client_id)
        if c is not None and (c.group != group or c.parent != parent):
            self._drop_locked(c)
            c = None
        if c is None:
            c = self.clients[client_id] = LiteClient(client_id, group, parent)
        cap = ga.get_int(sg, ga.LITE_MAX_EVENTS)
        c.capacity = cap if cap > 0 else self.config.maxClientEventCount
        c.last_sync = self.clock()
        if host:
            c.host = host
        if notify is not None:
            c.notify = notify
        return c

    def attach(self, client_id: str, group: str, parent: str, group_config: SubscriptionGroupConfig, host: str = "",
               notify: Optional[Callable[[str], None]] = None) -> LiteClient:
        """The client's session (made on its first receive, before any subscription, so a later one wakes it)."""
        with self._lock:
            c = self.clients.get(client_id)
            if c is not None and c.group == group and c.parent == parent:
                if notify is not None and c.notify is None:
                    c.notify = notify
                return c
            return self._session(client_id, group, parent, group_config, host, notify)

    def touch(self, client_id: str) -> None:
        c = self.clients.get(client_id)
        if c is not None:
            c.last_sync = self.clock()

    def _owned_by_other(self, c: LiteClient, name: str) -> bool:
        ids = self.subscribers.get(lmq_name(c.parent, name), {}).get(c.group, ())
        return any(cid != c.client_id for cid in ids)

    def _add(self, c: LiteClient, name: str, sg: SubscriptionGroupConfig) -> list[tuple[LiteClient, str]]:
        """Subscribe ``c`` to ``name`` (lock held); returns the clients an Exclusive group evicts."""
        key = lmq_name(c.parent, name)
        by_group = self.subscribers.setdefault(key, {})
        ids = by_group.setdefault(c.group, [])
        evicted = []
        if ga.get(sg, ga.LITE_SUB_MODEL) == "Exclusive":
            for other_id in [i for i in ids if i != c.client_id]:
                other = self.clients.get(other_id)
                if other is not None:
                    self._remove(other, name)
                    evicted.append((other, name))
            if evicted and ga.get_bool(sg, ga.LITE_RESET_EXCLUSIVE):
                self.offsets.commit_offset("", c.group, key, 0, 0)
            by_group = self.subscribers.setdefault(key, {})      # the evictions may have emptied it
            ids = by_group.setdefault(c.group, [])
        ids.append(c.client_id)
        c.topics.add(name)
        self.active += 1
        return evicted

    def _remove(self, c: LiteClient, name: str) -> None:
        key = lmq_name(c.parent, name)
        c.topics.discard(name)
        c.events.pop(name, None)
        self.active -= 1
        by_group = self.subscribers.get(key)
        if by_group is not None:
            ids = by_group.get(c.group)
            if ids is not None and c.client_id in ids:
                ids.remove(c.client_id)
                if not ids:
                    del by_group[c.group]
            if not by_group:
                del self.subscribers[key]

    def _tell_unsubscribed(self, c: LiteClient, name: str) -> None:
        log.info("lite: %s of %s evicted from %s (Exclusive)", c.client_id, c.group, lmq_name(c.parent, name))
        if c.notify is not None:
            try:
                c.notify(name)
            except Exception:
                log.exception("lite: NotifyUnsubscribeLite to %s failed", c.client_id)

    def _apply_offset(self, group: str, parent: str, lite: str, option: OffsetOption) -> None:
        """OffsetOption of a PARTIAL_ADD (LAST keeps the offset; TIMESTAMP is ignored, as Java does)."""
        lmq = lmq_name(parent, lite)
        q = self.index.queue(parent, lite)
        mx = q.max_offset if q is not None else 0
        current = self.offsets.query_offset(group, lmq, 0)
        if option.offset is not None:
            target = max(0, min(option.offset, mx))
        elif option.tail_n is not None:
            if current < 0:
                return
            target = max(0, current - option.tail_n)
        elif option.policy == "MIN":
            target = q.min_offset if q is not None else 0
        elif option.policy == "MAX":
            target = mx
        else:
            return
        self.pop_service.forget_memory(lmq, group, 0)     # a batch in flight must not move the new offset on ack
        self.offsets.commit_offset("", group, lmq, 0, target)

    def drop_client(self, client_id: str, why: str = "") -> bool:
        """Forget a client and its subscriptions; its pending events go to the group's other clients."""
        with self._lock:
            c = self.clients.get(client_id)
            if c is None:
                return False
            pending = self._drop_locked(c)
        if why:
            log.info("lite: client %s of %s dropped (%s), %d lite subscriptions released", client_id, c.group,
                     why, len(pending))
        for name in pending:
            self._offer_if_backlog(c.group, c.parent, name)
        self._wake(c)
        return True

    def _drop_locked(self, c: LiteClient) -> list[str]:
        names = list(c.topics)
        for n in names:
            self._remove(c, n)
        self.clients.pop(c.client_id, None)
        return names

    # ------------------------------------------------------------------ events
    def on_arrival(self, parent: str, lite: str) -> None:
        """Index callback (any thread): new messages on ``lite``: one client per subscribed group."""
        key = lmq_name(parent, lite)
        by_group = self.subscribers.get(key)
        if not by_group:
            return
        for group in list(by_group):
            self._dispatch(group, parent, lite)

    def _dispatch(self, group: str, parent: str, lite: str, exclude: str = "") -> bool:
        with self._lock:
            ids = list(self.subscribers.get(lmq_name(parent, lite), {}).get(group, ()))
            if not ids:
                return False
            now = self.clock()
            start = random.randrange(len(ids))
            order = ids[start:] + ids[:start]
            chosen = None
            for cid in order:
                c = self.clients.get(cid)
                if c is not None and cid != exclude and c.blacklisted_until <= now:
                    chosen = c
                    break
            if chosen is None:                 # nobody else qualifies: the excluded or blacklisted ones
                chosen = next((self.clients[cid] for cid in order if cid in self.clients), None)
            if chosen is None:
                return False
            if lite not in chosen.events:
                if len(chosen.events) >= chosen.capacity:
                    chosen.full = True
                    return False
                if not chosen.events:
                    chosen.events_since = now
                chosen.events[lite] = None
        self._wake(chosen)
        return True

    def _offer_if_backlog(self, group: str, parent: str, lite: str) -> None:
        if self.has_work(group, parent, lite):
            self._dispatch(group, parent, lite)

    def has_work(self, group: str, parent: str, lite: str) -> bool:
        """Whether a pop of the lite topic for ``group`` could hand something out now."""
        key = lmq_name(parent, lite)
        q = self.index.queue(parent, lite)
        if q is None:
            return False
        if self.pop_service.queue_locked(key, group, 0):
            return False
        off = self.offsets.query_offset(group, key, 0)
        return (off < 0 and q.max_offset > q.min_offset) or off < q.max_offset or \
            bool(self.pop_service.open_orderly_count(key, group, 0))

    def on_ack(self, group: str, lmq: str) -> None:
        """An ack may have unblocked the lite topic: offer it again if it has more."""
        pl = parse_lmq(lmq)
        if pl is not None:
            self._offer_if_backlog(group, pl[0], pl[1])

    def _on_orderly(self, topic: str, group: str, qid: int, deadline: Optional[int]) -> None:
        """PopService: a lite topic's batch was handed out (watch its deadline) or is all acked (offer it)."""
        if topic[:1] != "%" or parse_lmq(topic) is None:
            return
        if deadline is None:
            self.on_ack(group, topic)
        else:
            self.watch_deadline(group, topic, deadline)

    def watch_deadline(self, group: str, lmq: str, deadline_ms: int) -> None:
        """Offer the lite topic again once its in-flight batch is due (not acked in time)."""
        with self._lock:
            heapq.heappush(self._deadlines, (deadline_ms, next(self._seq), group, lmq))

    def _wake(self, c: LiteClient) -> None:
        fut, loop = c.waiter, c.loop
        if fut is None or loop is None:
            return

        def done() -> None:
            if not fut.done():
                fut.set_result(True)
        try:
            loop.call_soon_threadsafe(done)
        except RuntimeError:           # loop closed at shutdown
            pass

    async def wait(self, client_id: str, timeout_s: float) -> bool:
        """Park until the client has events (True) or ``timeout_s`` passes (False)."""
        c = self.clients.get(client_id)
        if c is None or timeout_s <= 0:
            if timeout_s > 0:
                await asyncio.sleep(min(timeout_s, 0.2))
            return False
        if c.events:
            return True
        loop = asyncio.get_running_loop()
        fut = loop.create_future()
        c.waiter, c.loop = fut, loop
        try:
            if c.events:
                return True
            await asyncio.wait_for(asyncio.shield(fut), timeout_s)
            return True
        except asyncio.TimeoutError:
            return False
        finally:
            if c.waiter is fut:
                c.waiter = None

    # ------------------------------------------------------------------ pop (POP executor threads)
    def pop(self, client_id: str, max_nums: int, invisible_ms: int, client_host: str = "") -> PopResult:
        """Messages of the client's lite topics with events (all its lite topics with event mode off)."""
        with self._lock:
            c = self.clients.get(client_id)
            if c is None:
                return PopResult(now_ms(), int(invisible_ms), 0)
            c.last_poll = self.clock()
            if self.config.enableLiteEventMode:
                names = [n for n in c.events if n in c.topics]
                c.events.clear()
                c.events_since = 0.0
            else:
                names = list(c.topics)
            group, parent = c.group, c.parent
        queues = [(lmq_name(parent, n), 0) for n in names]
        result = self.pop_service.pop_queues(group, queues, max_nums, invisible_ms, client_host)
        leftover: list[str] = []
        if len(result.messages) >= max_nums:
            # lite topics the batch limit left unread keep their event (not checked one by one: a stale event
            # costs one empty read); the last one read may have more than the batch took
            leftover = names[result.visited:]
            if result.visited and self.has_work(group, parent, names[result.visited - 1]):
                leftover.append(names[result.visited - 1])
        if leftover:
            with self._lock:
                for n in leftover:
                    if n in c.topics and len(c.events) < c.capacity:
                        c.events[n] = None
        c.delivered += len(result.messages)
        return result

    def subscribed(self, client_id: str, lmq: str) -> bool:
        c = self.clients.get(client_id)
        pl = parse_lmq(lmq)
        return c is not None and pl is not None and pl[0] == c.parent and pl[1] in c.topics

    # ------------------------------------------------------------------ periodic work
    def run_due(self, now: Optional[int] = None) -> int:
        """Offer lite topics whose in-flight batch is due (not acked within its invisible time)."""
        now = self.wall_ms() if now is None else now
        due = []
        with self._lock:
            while self._deadlines and self._deadlines[0][0] <= now:
                _, _, group, lmq = heapq.heappop(self._deadlines)
                due.append((group, lmq))
        for group, lmq in dict.fromkeys(due):
            self.on_ack(group, lmq)
        return len(due)

    def check_events(self) -> None:
        """Re-dispatch the events of blocked clients; re-offer the lite topics of clients whose set was full."""
        now = self.clock()
        blocked, refill = [], []
        with self._lock:
            for c in list(self.clients.values()):
                no_poll_ms = (now - (c.last_poll or c.last_sync)) * 1000
                pending_ms = (now - c.events_since) * 1000 if c.events and c.events_since else 0
                if c.events and (no_poll_ms > BLOCKED_NO_POLL_MS or
                                 (pending_ms > BLOCKED_PENDING_MS and no_poll_ms > BLOCKED_PENDING_MS)):
                    blocked.append((c, list(c.events)))
                    c.events.clear()
                    c.events_since = 0.0
                    c.blacklisted_until = now + BLACKLIST_MS / 1000
                elif c.full and len(c.events) < c.capacity // 5 + 1:
                    c.full = False
                    refill.append(c)
        for c, names in blocked:
            log.info("lite: client %s of %s looks blocked; %d events re-dispatched", c.client_id, c.group, len(names))
            for n in names:
                if self.has_work(c.group, c.parent, n):
                    self._dispatch(c.group, c.parent, n, exclude=c.client_id)
        for c in refill:
            for n in list(c.topics):
                if self.has_work(c.group, c.parent, n):
                    self._dispatch(c.group, c.parent, n)

    def full_dispatch(self, group: str, client_id: Optional[str] = None) -> int:
        """Offer every subscribed lite topic with work (admin TRIGGER_LITE_DISPATCH); returns how many."""
        n = 0
        with self._lock:
            pairs = [(c.parent, name) for c in self.clients.values() if c.group == group and
                     (client_id is None or c.client_id == client_id) for name in c.topics]
        for parent, name in dict.fromkeys(pairs):
            if self.has_work(group, parent, name):
                n += self._dispatch(group, parent, name)
        return n

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

    # ------------------------------------------------------------------ views (admin, metrics)
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

