"""Lite subscriptions (Java ``LiteSubscriptionRegistry``): SyncLiteSubscription's PARTIAL_ADD / PARTIAL_REMOVE /
COMPLETE_ADD / COMPLETE_REMOVE with the 5.5 checks and quotas, an Exclusive group's evictions, offset options, and
the clients' sessions (see :mod:`rmqd.lite.subscriptions`)."""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Callable, Iterable, Optional

from rmqd.lite.delivery import LiteDelivery
from rmqd.lite.model import (ACTIONS, COMPLETE_REMOVE, PARTIAL_ADD, PARTIAL_REMOVE, QUOTA_SLACK, LiteClient,
                             LiteError, OffsetOption)
from rmqd.store import group_attributes as ga
from rmqd.store.lite.names import check_name, lmq_name
from rmqd.store.topic_attributes import is_lite_topic

if TYPE_CHECKING:
    from rmqd.store.metadata import SubscriptionGroupConfig

log = logging.getLogger(__name__)


class LiteRegistry(LiteDelivery):
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
