"""What POP is given of the broker: the narrow interfaces :class:`rmqd.pop.service.PopService` and
:class:`rmqd.lite.subscriptions.LiteSubscriptionManager` use, instead of the broker's managers.

The broker passes its store chain (through the lite view, :mod:`rmqd.store.lite.view`), its topic table
(through the lite topics view), its subscription groups and its consumer offsets
(:mod:`rmqd.store.metadata`), and the POP metrics recorder (:class:`rmqd.metrics.recorders.PopCounters`).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Container, Mapping, Optional, Protocol

if TYPE_CHECKING:
    from rmqd.cython_ext.store_put import DispatchRequest, MessageToStore, PutMessageResult
    from rmqd.store.api import MessageFilter
    from rmqd.store.metadata import SubscriptionGroupConfig, TopicConfig
    from rmqd.store.results import GetMessageResult


class PopStore(Protocol):
    """The store reads and writes of POP (a part of :class:`rmqd.store.api.MessageStoreAPI`)."""

    def get_max_offset(self, topic: str, queue_id: int) -> int: ...
    def get_min_offset(self, topic: str, queue_id: int) -> int: ...
    def get_message_store_timestamp(self, topic: str, queue_id: int, queue_offset: int) -> int: ...

    def get_messages(self, topic: str, queue_id: int, offset: int, max_nums: int,
                     max_total_bytes: Optional[int] = None,
                     message_filter: Optional["MessageFilter"] = None) -> "GetMessageResult": ...

    def put_message(self, msg: "MessageToStore") -> "PutMessageResult":
        """Append one record (revive-log records, revived and dead-lettered messages)."""


class AddDispatchListener(Protocol):
    """The store's ``add_dispatch_listener``: POP's long polling registers its wake-up with it."""

    def __call__(self, fn: Callable[["DispatchRequest"], None], topic: Optional[str] = None,
                 watch: Optional[Container[tuple[str, int]]] = None) -> None: ...


class TopicLookup(Protocol):
    """The topic table, read."""

    def get(self, topic: str) -> Optional["TopicConfig"]: ...


class PopTopics(TopicLookup, Protocol):
    """The topic table: the topics POP reads, and the revive, retry and DLQ topics it creates."""

    def add_system_topic(self, tc: "TopicConfig") -> None: ...

    def create_topic_in_send_message_back_method(self, topic: str, client_queue_nums: int, perm: int = ...,
                                                 topic_sys_flag: int = 0) -> "TopicConfig": ...

    def update(self, tc: "TopicConfig") -> None: ...


class PopGroups(Protocol):
    """The subscription groups (retry max times, FIFO, lite binding)."""

    def find(self, group: str) -> Optional["SubscriptionGroupConfig"]: ...

    @property
    def table(self) -> Mapping[str, "SubscriptionGroupConfig"]:
        """Every group by name, read without creating one (POLLING_INFO, the lite expiry sweep)."""

    @property
    def auto_create(self) -> bool:
        """Whether an unknown group is created on first use (autoCreateSubscriptionGroup)."""


class LiteGroups(PopGroups, Protocol):
    """The subscription groups as the lite expiry sweep reads them (every group, by name)."""


class PopOffsets(Protocol):
    """The consumer offsets POP reads and commits (the same table 4.x consumers use)."""

    def query_offset(self, group: str, topic: str, queue_id: int) -> int: ...
    def commit_offset(self, client_host: str, group: str, topic: str, queue_id: int, offset: int) -> None: ...


class LiteOffsets(PopOffsets, Protocol):
    """The consumer offsets as lite delivery uses them: dropped with an expired lite topic, read for the lag."""

    def remove_offset(self, group: str, topic: Optional[str] = None) -> int: ...

    @property
    def table(self) -> Mapping[str, Mapping[int, int]]:
        """``topic@group`` -> {queue id: offset}."""


class ReviveRecorder(Protocol):
    """Where POP counts its revive-log writes, settled checkpoints and retries (the POP metrics)."""

    def on_revive_put(self, group: str, topic: str, tag: str, status: str) -> None: ...
    def on_settled(self, group: str, topic: str, revive_qid: int, ck_records: int, ack_records: int) -> None: ...
    def on_retry_put(self, group: str, topic: str, status: str) -> None: ...
