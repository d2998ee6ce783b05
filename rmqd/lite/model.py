"""The lite registry's values (:class:`LiteClient`: one lite consumer's session; :class:`LiteError`: a refusal;
:class:`OffsetOption`: where a subscription starts) and :class:`LiteState`, the state the parts of
:class:`rmqd.lite.subscriptions.LiteSubscriptionManager` share."""
from __future__ import annotations

import asyncio
import itertools
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Optional, TypedDict

if TYPE_CHECKING:
    from rmqd.lite.config import LiteConfig
    from rmqd.pop.handles import LiteGroups, LiteOffsets, TopicLookup
    from rmqd.pop.service import PopService
    from rmqd.store.lite.index import LiteIndex

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


class LiteState:
    """The registry's state (set in LiteSubscriptionManager's ``__init__``), declared for the parts that use it."""

    config: LiteConfig
    index: LiteIndex
    pop_service: PopService
    topics: TopicLookup
    groups: LiteGroups
    offsets: LiteOffsets
    clock: Callable[[], float]
    wall_ms: Callable[[], int]
    clients: dict[str, LiteClient]
    subscribers: dict[str, dict[str, list[str]]]     # lmq -> group -> client ids
    active: int                                       # (client, lite topic) references
    started_ms: int
    expired_total: int
    refused: dict[str, int]
    _lock: threading.RLock
    _deadlines: list[tuple[int, int, str, str]]       # (deadline ms, seq, group, lmq)
    _seq: itertools.count[int]
    _rate_window: int
    _rate_count: int
