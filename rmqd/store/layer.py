"""StoreLayer: a store that wraps the next one (Java ``AbstractPluginMessageStore``).

A layer holds ``inner`` (the next store down the chain, ending at the local
:class:`~rmqd.store.message_store.MessageStore`) and offers the whole
:class:`~rmqd.store.api.MessageStoreAPI`: every method delegates to ``inner`` here, and a layer overrides
only what it changes (the compaction layer its topics' reads, the tier the reads the local store can no
longer answer). Lifecycle: a layer starts after the stores below it and shuts down before them, so it may
use them in both.

Layers that must be asked before the local store deletes CommitLog files or drops a consume queue
register a :class:`RetentionGuard` with the local store (``local.add_retention_guard``).

A layer sees the next store as a :class:`StoreChain`. A layer that truly needs the local store's parts (its
queues, its CommitLog, its retention: compaction and the tier) gets them as a
:class:`~rmqd.store.api.LocalStoreAPI` passed in by the chain's builder (:func:`rmqd.store.layers.build_store`),
never by reaching down the chain (tests/test_architecture.py checks). Only the local store's replication
(``rmqd.store.ha``), which appends to and truncates its CommitLog, takes the whole local store
(``message_store``).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Container, Optional, Protocol, Sequence

from rmqd.store.api import MessageStoreAPI

if TYPE_CHECKING:
    from rmqd.cython_ext.store_put import DispatchRequest, MessageToStore, PutEngine, PutMessageResult
    from rmqd.store.api import MessageFilter
    from rmqd.store.commitlog import CommitLog
    from rmqd.store.compaction.store import CompactionStore
    from rmqd.store.config import StoreConfig
    from rmqd.store.local_queue import LocalQueue
    from rmqd.store.message_store import MessageStore
    from rmqd.store.results import GetMessageResult, QueryResult, StoreStats
    from rmqd.store.tier.store import TieredStore


class RetentionGuard(Protocol):
    """A layer's say in the local store's retention (CleanCommitLogService)."""

    def before_delete(self) -> int:
        """Called before CommitLog files are deleted: copy what must outlive them, then return the CommitLog
        offset below which files may go (``1 << 62``: no limit)."""

    def keeps_queue(self, topic: str, queue_id: int, max_offset: int) -> bool:
        """This layer still serves the records of a local consume queue that retention emptied (so
        ``clean_expired_consume_queues`` keeps it)."""


class StoreChain(MessageStoreAPI, Protocol):
    """A store of the chain as the layer above it sees it: the API and the local store's extras every layer
    passes down (the local store and every layer offer this)."""

    @property
    def message_store(self) -> "MessageStore":
        """The local store itself, for its replication (``rmqd.store.ha``) only."""

    @property
    def commitlog(self) -> "CommitLog": ...

    @property
    def clock(self) -> Callable[[], int]: ...

    @clock.setter
    def clock(self, fn: Callable[[], int]) -> None: ...

    def local_queues(self) -> list["LocalQueue"]: ...
    def run_retention_once(self) -> int: ...
    def flush(self) -> None: ...


class StoreLayer:
    """Delegates the store interface to ``inner``; see the module docstring."""

    def __init__(self, inner: StoreChain) -> None:
        self.inner = inner

    # ---- the chain
    @property
    def message_store(self) -> "MessageStore":
        """The local store itself, for its replication (``rmqd.store.ha``) only."""
        return self.inner.message_store

    @property
    def compaction(self) -> Optional["CompactionStore"]:
        return self.inner.compaction

    @property
    def tier(self) -> Optional["TieredStore"]:
        return self.inner.tier

    @property
    def config(self) -> "StoreConfig":
        return self.inner.config

    @property
    def commitlog(self) -> "CommitLog":
        return self.inner.commitlog

    @property
    def clock(self) -> Callable[[], int]:
        return self.inner.clock

    @clock.setter
    def clock(self, fn: Callable[[], int]) -> None:
        self.inner.clock = fn

    # ---- lifecycle
    def start(self) -> None:
        self.inner.start()

    def shutdown(self) -> None:
        self.inner.shutdown()

    # ---- writes
    def put_message(self, msg: "MessageToStore") -> "PutMessageResult":
        return self.inner.put_message(msg)

    def put_messages(self, msgs: Sequence["MessageToStore"]) -> "PutMessageResult":
        return self.inner.put_messages(msgs)

    def on_flushed(self, end_offset: int, done: Callable[[bool], None]) -> None:
        self.inner.on_flushed(end_offset, done)

    @property
    def put_engine(self) -> "PutEngine":
        return self.inner.put_engine

    def add_dispatch_listener(self, fn: Callable[["DispatchRequest"], None], topic: Optional[str] = None,
                              watch: Optional[Container[tuple[str, int]]] = None) -> None:
        self.inner.add_dispatch_listener(fn, topic, watch)

    # ---- queue offsets and times
    def get_max_offset(self, topic: str, queue_id: int) -> int:
        return self.inner.get_max_offset(topic, queue_id)

    def get_min_offset(self, topic: str, queue_id: int) -> int:
        return self.inner.get_min_offset(topic, queue_id)

    def get_message_store_timestamp(self, topic: str, queue_id: int, queue_offset: int) -> int:
        return self.inner.get_message_store_timestamp(topic, queue_id, queue_offset)

    def get_earliest_message_time(self, topic: str, queue_id: int) -> int:
        return self.inner.get_earliest_message_time(topic, queue_id)

    def get_offset_by_time(self, topic: str, queue_id: int, timestamp: int) -> int:
        return self.inner.get_offset_by_time(topic, queue_id, timestamp)

    def check_in_disk_by_consume_offset(self, topic: str, queue_id: int, consume_offset: int) -> bool:
        return self.inner.check_in_disk_by_consume_offset(topic, queue_id, consume_offset)

    # ---- reads
    def get_messages(self, topic: str, queue_id: int, offset: int, max_nums: int,
                     max_total_bytes: Optional[int] = None,
                     message_filter: Optional["MessageFilter"] = None) -> "GetMessageResult":
        return self.inner.get_messages(topic, queue_id, offset, max_nums, max_total_bytes, message_filter)

    def get_messages_resident(self, topic: str, queue_id: int, offset: int, max_nums: int,
                              tag_codes: Optional[Sequence[int]]) -> Optional["GetMessageResult"]:
        return self.inner.get_messages_resident(topic, queue_id, offset, max_nums, tag_codes)

    def read_message(self, phys_offset: int) -> Optional[bytes]:
        return self.inner.read_message(phys_offset)

    def query_message(self, topic: str, key: str, max_num: int, begin_ts: int = 0,
                      end_ts: int = 2 ** 62) -> "QueryResult":
        return self.inner.query_message(topic, key, max_num, begin_ts, end_ts)

    # ---- the CommitLog
    def commitlog_min_offset(self) -> int:
        return self.inner.commitlog_min_offset()

    def commitlog_max_offset(self) -> int:
        return self.inner.commitlog_max_offset()

    def pickup_store_timestamp(self, phys_offset: int, size: int = 64) -> int:
        return self.inner.pickup_store_timestamp(phys_offset, size)

    # ---- topics and queues
    def topics(self) -> set[str]:
        return self.inner.topics()

    def queue_keys(self) -> list[tuple[str, int]]:
        return self.inner.queue_keys()

    def local_queue(self, topic: str, queue_id: int) -> Optional["LocalQueue"]:
        return self.inner.local_queue(topic, queue_id)

    def local_queues(self) -> list["LocalQueue"]:
        return self.inner.local_queues()

    def delete_topic(self, topic: str) -> int:
        return self.inner.delete_topic(topic)

    def clean_expired_consume_queues(self) -> list[tuple[str, int]]:
        return self.inner.clean_expired_consume_queues()

    # ---- admin and stats
    def execute_delete_files_manually(self) -> int:
        return self.inner.execute_delete_files_manually()

    def run_retention_once(self) -> int:
        return self.inner.run_retention_once()

    def flush(self) -> None:
        self.inner.flush()

    def lock_time_mills(self) -> int:
        return self.inner.lock_time_mills()

    @property
    def stats(self) -> "StoreStats":
        return self.inner.stats

    def topic_put_totals(self) -> dict[str, tuple[int, int]]:
        return self.inner.topic_put_totals()
