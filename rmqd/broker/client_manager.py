"""ConsumerManager / ProducerManager: who is online, per group, on which channel.

Java: ``broker/client/ConsumerManager``, ``ConsumerGroupInfo``, ``ProducerManager``.  Tables are
touched from pool threads (heartbeats) and the loop (connection close, expiry scan), so every
mutation happens under one lock per manager.  Consumer-id change notifications are returned to the
caller (or given to ``on_group_changed``) rather than sent under the lock.
"""
from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Optional

from rmqd.common.json_values import json_int
from rmqd.filter import ExpressionMessageFilter, SQLParseError, is_tag_type
from rmqd.store.config import wall_clock_ms as now_ms

if TYPE_CHECKING:
    from rmqd.broker.handles import ClientConnection
    from rmqd.remoting.fastjson import JsonValue

# a SubscriptionData as a client sends it (JSON) and as the broker keeps it
SubscriptionData = dict[str, "JsonValue"]

log = logging.getLogger(__name__)

CONSUME_TYPES = ["CONSUME_ACTIVELY", "CONSUME_PASSIVELY", "CONSUME_POP"]
MESSAGE_MODELS = ["BROADCASTING", "CLUSTERING"]
CONSUME_FROM_WHERE = [
    "CONSUME_FROM_LAST_OFFSET", "CONSUME_FROM_LAST_OFFSET_AND_FROM_MIN_WHEN_BOOT_FIRST",
    "CONSUME_FROM_MIN_OFFSET", "CONSUME_FROM_MAX_OFFSET", "CONSUME_FROM_FIRST_OFFSET",
    "CONSUME_FROM_TIMESTAMP",
]


def enum_name(value: object, names: list[str], default: str) -> str:
    """Java enums arrive as names (Java/Go) or ordinals (C++); normalise to the name."""
    if value is None:
        return default
    if isinstance(value, bool):
        return default
    if isinstance(value, int):
        return names[value] if 0 <= value < len(names) else default
    s = str(value)
    if s.lstrip("-").isdigit():
        i = int(s)
        return names[i] if 0 <= i < len(names) else default
    return s


@dataclass(eq=False)
class ClientChannelInfo:
    """One client on one connection (Java ClientChannelInfo)."""

    conn: "ClientConnection"
    client_id: str
    language: str
    version: int
    last_update: int = field(default_factory=now_ms)

    def to_connection_json(self) -> dict[str, str | int]:
        """The ``Connection`` JSON shape used by admin bodies."""
        return {"clientAddr": self.conn.remote_address, "clientId": self.client_id,
                "language": self.language, "version": self.version}


class SubscriptionEntry:
    """A registered SubscriptionData plus its compiled broker-side filter (if any)."""

    __slots__ = ("data", "sub_version", "filter", "filter_error")

    def __init__(self, data: SubscriptionData) -> None:
        self.data = data
        self.sub_version = json_int(data.get("subVersion") or 0)
        self.filter: Optional[ExpressionMessageFilter] = None
        self.filter_error: Optional[str] = None
        try:
            self.filter = ExpressionMessageFilter.from_subscription_data(data)
        except SQLParseError as exc:
            self.filter_error = str(exc)
            log.warning("subscription %r of topic %s does not compile: %s", data.get("subString"),
                        data.get("topic"), exc)

    @property
    def is_tag(self) -> bool:
        expression_type = self.data.get("expressionType")
        return is_tag_type(str(expression_type) if expression_type else None)


def normalize_subscription(sub: SubscriptionData) -> SubscriptionData:
    """SubscriptionData as Java would re-serialize it (C++ sends strings/ints, omits fields)."""
    out = dict(sub)
    out["subVersion"] = json_int(out.get("subVersion") or 0)
    out.setdefault("classFilterMode", False)
    out.setdefault("codeSet", [])
    out.setdefault("tagsSet", [])
    out.setdefault("expressionType", "TAG")
    if not out.get("expressionType"):
        out["expressionType"] = "TAG"
    out.pop("filterClassSource", None)
    return out


class ConsumerGroupInfo:
    """Channels and subscriptions of one consumer group."""

    def __init__(self, group: str, consume_type: str, message_model: str, consume_from_where: str) -> None:
        self.group = group
        self.consume_type = consume_type
        self.message_model = message_model
        self.consume_from_where = consume_from_where
        self.channels: dict["ClientConnection", ClientChannelInfo] = {}
        self.subscriptions: dict[str, SubscriptionEntry] = {}
        # a pull named a newer subVersion than the group's (SUBSCRIPTION_NOT_LATEST) since its subscriptions last
        # came: a 5.x client whose rebalance heartbeat was skipped sends none again unless asked (IS_SUB_CHANGE)
        self.subscription_behind = False
        self.last_update = now_ms()

    def client_ids(self) -> list[str]:
        return [c.client_id for c in self.channels.values()]

    def find_channel(self, client_id: str) -> Optional[ClientChannelInfo]:
        for info in self.channels.values():
            if info.client_id == client_id:
                return info
        return None

    def update_channel(self, info: ClientChannelInfo, consume_type: str, message_model: str,
                       consume_from_where: str) -> bool:
        """Register/refresh a channel; True when the channel is new to the group."""
        self.consume_type = consume_type
        self.message_model = message_model
        self.consume_from_where = consume_from_where
        old = self.channels.get(info.conn)
        if old is None:
            self.channels[info.conn] = info
            new = True
        else:
            if old.client_id != info.client_id:
                log.error("consumer group %s: channel %s changed client id %s -> %s", self.group,
                          info.conn.remote_address, old.client_id, info.client_id)
                old.client_id = info.client_id
            old.last_update = info.last_update
            new = False
        self.last_update = now_ms()
        return new

    def update_subscriptions(self, subs: list[SubscriptionData]) -> bool:
        """Java rule: replace a topic's entry only for a newer subVersion; drop absent topics.

        Returns True when topics were added or removed.
        """
        changed = False
        seen = set()
        for raw in subs:
            sub = normalize_subscription(raw)
            topic = sub.get("topic")
            if not isinstance(topic, str):
                log.warning("consumer group %s: a subscription without a topic is ignored: %r", self.group, raw)
                continue
            seen.add(topic)
            old = self.subscriptions.get(topic)
            if old is None:
                self.subscriptions[topic] = SubscriptionEntry(sub)
                changed = True
            elif json_int(sub["subVersion"]) > old.sub_version:
                self.subscriptions[topic] = SubscriptionEntry(sub)
        for topic in [t for t in self.subscriptions if t not in seen]:
            del self.subscriptions[topic]
            changed = True
        self.subscription_behind = False
        self.last_update = now_ms()
        return changed


class ConsumerManager:
    """group → ConsumerGroupInfo.  ``on_group_changed(group, conns)`` sends notifications."""

    def __init__(self, on_group_changed: Optional[Callable[[str, list["ClientConnection"]], None]] = None) -> None:
        self._groups: dict[str, ConsumerGroupInfo] = {}
        self._lock = threading.RLock()
        self.on_group_changed = on_group_changed
        # 5.x's consumerCompensationTable: group -> (consume type, topic -> the subscription a pull named, or None
        # for a pop), from the pulls and pops seen since start and kept after the group's clients leave: a group's
        # subscription is read there when it has none registered (QUERY_SUBSCRIPTION_BY_CONSUMER), and the lag
        # metrics cover those groups (Java's ConsumerLagCalculator reads getConsumerGroupInfo(group, true))
        self._compensation: dict[str, tuple[str, dict[str, Optional[SubscriptionData]]]] = {}

    def compensate(self, group: str, consume_type: str, topic: str,
                   subscription: Optional[SubscriptionData] = None) -> None:
        """A pull naming its subscription, or a pop, of ``group`` on ``topic`` (Java compensateBasicConsumerInfo and
        compensateSubscribeData); cheap when nothing changes."""
        entry = self._compensation.get(group)
        if entry is not None and entry[0] == consume_type and topic in entry[1] and \
                (subscription is None or entry[1][topic] == subscription):
            return
        with self._lock:
            entry = self._compensation.get(group)
            topics = dict(entry[1]) if entry is not None else {}
            if subscription is not None or topic not in topics:
                topics[topic] = subscription
            self._compensation[group] = (consume_type, topics)

    def compensated_subscription(self, group: str, topic: str) -> Optional[SubscriptionData]:
        entry = self._compensation.get(group)
        return entry[1].get(topic) if entry is not None else None

    def forget(self, group: str) -> None:
        """The group was deleted: drop what the compensation table kept of it."""
        with self._lock:
            self._compensation.pop(group, None)

    def groups_seen(self) -> dict[str, tuple[str, frozenset[str]]]:
        """Every group online now or in the compensation table: group -> (consume type, topics); an online group's
        own subscriptions win (5.x getConsumerGroupInfo(group, fromCompensationTable=true))."""
        out = {group: (ct, frozenset(topics)) for group, (ct, topics) in list(self._compensation.items())}
        for group, info in list(self._groups.items()):
            out[group] = (info.consume_type, frozenset(info.subscriptions))
        return out

    def get(self, group: str) -> Optional[ConsumerGroupInfo]:
        return self._groups.get(group)

    def groups(self) -> dict[str, ConsumerGroupInfo]:
        return dict(self._groups)

    def find_subscription(self, group: str, topic: str) -> Optional[SubscriptionEntry]:
        info = self._groups.get(group)
        return info.subscriptions.get(topic) if info else None

    def _notify(self, group: str, info: Optional[ConsumerGroupInfo], notify: bool) -> None:
        if notify and self.on_group_changed is not None and info is not None:
            self.on_group_changed(group, list(info.channels))

    def register(self, group: str, channel: ClientChannelInfo, consume_type: str, message_model: str,
                 consume_from_where: str, subscriptions: Optional[list[SubscriptionData]],
                 notify: bool = True) -> bool:
        """Heartbeat registration; returns True when membership or subscriptions changed. ``subscriptions``
        None: a 5.x heartbeat without them (v2, fingerprint unchanged): the group's stay as they are."""
        with self._lock:
            info = self._groups.get(group)
            if info is None:
                info = self._groups[group] = ConsumerGroupInfo(group, consume_type, message_model,
                                                               consume_from_where)
            r1 = info.update_channel(channel, consume_type, message_model, consume_from_where)
            r2 = info.update_subscriptions(subscriptions) if subscriptions is not None else False
            changed = r1 or r2
        if changed:
            self._notify(group, info, notify)
        return changed

    def unregister(self, group: str, conn: "ClientConnection", notify: bool = True) -> bool:
        with self._lock:
            info = self._groups.get(group)
            if info is None or info.channels.pop(conn, None) is None:
                return False
            if not info.channels:
                del self._groups[group]
        self._notify(group, info, notify)
        return True

    def do_channel_close(self, conn: "ClientConnection") -> list[str]:
        """Remove ``conn`` from every group; notifies the remaining members.  Returns the groups."""
        removed = []
        with self._lock:
            for group, info in list(self._groups.items()):
                if info.channels.pop(conn, None) is not None:
                    removed.append((group, info))
                    if not info.channels:
                        del self._groups[group]
        for group, info in removed:
            self._notify(group, info, True)
        return [g for g, _ in removed]

    def scan_not_active(self, timeout_ms: int) -> list["ClientConnection"]:
        """Drop channels silent for more than ``timeout_ms``; returns their connections."""
        limit = now_ms() - timeout_ms
        expired = []
        changed = []
        with self._lock:
            for group, info in list(self._groups.items()):
                dead = [c for c, ch in info.channels.items() if ch.last_update < limit]
                for c in dead:
                    log.warning("consumer group %s: channel %s (%s) expired", group, c.remote_address,
                                info.channels[c].client_id)
                    del info.channels[c]
                    expired.append(c)
                if dead:
                    changed.append((group, info))
                    if not info.channels:
                        del self._groups[group]
        for group, info in changed:
            self._notify(group, info, True)
        return expired


class ProducerManager:
    """group → {conn: ClientChannelInfo} (Java ProducerManager)."""

    MAX_EMPTIED = 10000

    def __init__(self) -> None:
        self._groups: dict[str, dict["ClientConnection", ClientChannelInfo]] = {}
        # groups whose producers all disconnected or expired: Java keeps their (empty) entry, so
        # GET_PRODUCER_CONNECTION_LIST answers an empty set for them instead of "not exist"
        self._emptied: dict[str, None] = {}
        self._lock = threading.Lock()

    def _forget(self, group: str, keep_name: bool) -> None:
        del self._groups[group]
        if keep_name:
            self._emptied[group] = None
            if len(self._emptied) > self.MAX_EMPTIED:
                self._emptied.pop(next(iter(self._emptied)))

    def known(self, group: str) -> bool:
        """Has ``group`` had a producer since start (Java's group table has an entry for it)?"""
        return group in self._groups or group in self._emptied

    def register(self, group: str, channel: ClientChannelInfo) -> None:
        with self._lock:
            self._emptied.pop(group, None)
            chans = self._groups.setdefault(group, {})
            old = chans.get(channel.conn)
            if old is None:
                chans[channel.conn] = channel
            else:
                old.last_update = channel.last_update
                old.client_id = channel.client_id

    def unregister(self, group: str, conn: "ClientConnection") -> None:
        with self._lock:
            chans = self._groups.get(group)
            if chans is not None:
                chans.pop(conn, None)
                if not chans:
                    self._forget(group, keep_name=False)

    def get(self, group: str) -> list[ClientChannelInfo]:
        return list(self._groups.get(group, {}).values())

    def groups(self) -> dict[str, list[ClientChannelInfo]]:
        return {g: list(c.values()) for g, c in self._groups.items()}

    def available_channel(self, group: str) -> Optional["ClientConnection"]:
        """A live connection of ``group`` (for broker → producer calls)."""
        for info in self._groups.get(group, {}).values():
            if not info.conn.closed:
                return info.conn
        return None

    def do_channel_close(self, conn: "ClientConnection") -> None:
        with self._lock:
            for group, chans in list(self._groups.items()):
                if chans.pop(conn, None) is not None and not chans:
                    self._forget(group, keep_name=True)

    def scan_not_active(self, timeout_ms: int) -> list["ClientConnection"]:
        limit = now_ms() - timeout_ms
        expired = []
        with self._lock:
            for group, chans in list(self._groups.items()):
                for c in [c for c, ch in chans.items() if ch.last_update < limit]:
                    log.warning("producer group %s: channel %s expired", group, c.remote_address)
                    del chans[c]
                    expired.append(c)
                if not chans:
                    self._forget(group, keep_name=True)
        return expired
