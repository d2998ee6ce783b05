"""The store interface the rest of the broker uses (Java's ``MessageStore`` interface).

Processors, POP, gRPC, the console, metrics and admin talk to the store only through
:class:`MessageStoreAPI`. :func:`rmqd.store.layers.build_store` returns the outermost layer of the chain
(tier → compaction → local store); every layer offers this interface, so a caller never knows which
layer answers. The local store's own extras (``local_queue`` views, the CommitLog, flush and retention
runs) are for the layers, tools and tests; what a layer may use of the local store is
:class:`LocalStoreAPI`.

Threading: every method may block (disk reads, fsync) unless it says otherwise; call them from a
worker thread, not the event loop. ``get_messages_resident`` and ``on_flushed`` never block.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Container, Mapping, Optional, Protocol, Sequence

if TYPE_CHECKING:
    from rmqd.cython_ext.store_put import DispatchRequest, MessageToStore, PutEngine, PutMessageResult
    from rmqd.store.commitlog import CommitLog
    from rmqd.store.compaction.store import CompactionStore
    from rmqd.store.config import StoreConfig
    from rmqd.store.layer import RetentionGuard
    from rmqd.store.local_queue import LocalQueue
    from rmqd.store.results import GetMessageResult, QueryResult, StoreStats
    from rmqd.store.tier.store import TieredStore


class MessageFilter(Protocol):
    """A pull's message filter (Java ``MessageFilter``), asked for each entry a read passes."""

    def is_matched_by_consume_queue(self, tags_code: Optional[int]) -> bool:
        """Stage 1, from the consume-queue entry's tags code (None: unreadable, let through)."""

    def is_matched_by_commit_log(self, record: memoryview,
                                 get_properties: Optional[Callable[[], Optional[Mapping[str, str]]]] = None) -> bool:
        """Stage 2, on the stored record; ``get_properties()`` decodes its properties on demand."""


class MessageStoreAPI(Protocol):
    """What callers outside ``rmqd/store`` may use of a store (any layer of the chain)."""

    @property
    def config(self) -> "StoreConfig": ...

    # ---- lifecycle
    def start(self) -> None:
        """Recover and start the background services (blocking)."""

    def shutdown(self) -> None:
        """Stop the services, flush and close (blocking)."""

    # ---- writes
    def put_message(self, msg: "MessageToStore") -> "PutMessageResult":
        """Append one message (SYNC_FLUSH: returns once it is durable or the flush timed out)."""

    def put_messages(self, msgs: Sequence["MessageToStore"]) -> "PutMessageResult":
        """Append a batch of one queue atomically w.r.t. other puts."""

    def on_flushed(self, end_offset: int, done: Callable[[bool], None]) -> None:
        """``done(True)`` once the CommitLog is durable up to ``end_offset``, ``done(False)`` on timeout;
        never blocks (immediately True under ASYNC_FLUSH)."""

    @property
    def put_engine(self) -> "PutEngine":
        """The C put engine, for the send lane that appends on the event loop (ASYNC_FLUSH)."""

    def add_dispatch_listener(self, fn: Callable[["DispatchRequest"], None], topic: Optional[str] = None,
                              watch: Optional[Container[tuple[str, int]]] = None) -> None:
        """Call ``fn`` for each appended message (of ``topic``, or of the queues in ``watch``)."""

    # ---- queue offsets and times
    def get_max_offset(self, topic: str, queue_id: int) -> int: ...
    def get_min_offset(self, topic: str, queue_id: int) -> int: ...
    def get_message_store_timestamp(self, topic: str, queue_id: int, queue_offset: int) -> int: ...
    def get_earliest_message_time(self, topic: str, queue_id: int) -> int: ...
    def get_offset_by_time(self, topic: str, queue_id: int, timestamp: int) -> int: ...
    def check_in_disk_by_consume_offset(self, topic: str, queue_id: int, consume_offset: int) -> bool: ...

    # ---- reads
    def get_messages(self, topic: str, queue_id: int, offset: int, max_nums: int,
                     max_total_bytes: Optional[int] = None,
                     message_filter: Optional[MessageFilter] = None) -> "GetMessageResult": ...

    def get_messages_resident(self, topic: str, queue_id: int, offset: int, max_nums: int,
                              tag_codes: Optional[Sequence[int]]) -> Optional["GetMessageResult"]:
        """The event-loop fast path: an answer from resident pages only, or None (then call
        :meth:`get_messages` in a worker thread)."""

    def read_message(self, phys_offset: int) -> Optional[bytes]: ...
    def query_message(self, topic: str, key: str, max_num: int, begin_ts: int = 0,
                      end_ts: int = 2 ** 62) -> "QueryResult": ...

    # ---- the CommitLog
    def commitlog_min_offset(self) -> int: ...
    def commitlog_max_offset(self) -> int: ...

    def pickup_store_timestamp(self, phys_offset: int, size: int = 64) -> int:
        """Store time of the record at CommitLog ``phys_offset``, -1 if it is gone."""

    # ---- topics and queues
    def topics(self) -> set[str]: ...

    def queue_keys(self) -> list[tuple[str, int]]:
        """Every (topic, queueId) with a local consume queue."""

    def local_queue(self, topic: str, queue_id: int) -> Optional["LocalQueue"]:
        """A read view of the local consume queue of (topic, queueId), None if there is none."""

    def delete_topic(self, topic: str) -> int: ...
    def clean_expired_consume_queues(self) -> list[tuple[str, int]]: ...

    # ---- admin and stats
    def execute_delete_files_manually(self) -> int: ...
    def lock_time_mills(self) -> int: ...

    @property
    def stats(self) -> "StoreStats": ...

    def topic_put_totals(self) -> dict[str, tuple[int, int]]: ...

    # ---- the layers
    @property
    def compaction(self) -> Optional["CompactionStore"]:
        """The compaction layer in the chain (its admin: status, compact, topics), if any."""

    @property
    def tier(self) -> Optional["TieredStore"]:
        """The tiered-storage layer in the chain (its admin: commit_now, status), if any."""


class LocalStoreAPI(Protocol):
    """What a layer of the chain (compaction, tier) may use of the local store at the bottom
    (:class:`~rmqd.store.message_store.MessageStore`): its per-queue views, its CommitLog for reading
    records, a say in its retention, its clock and its read statistics."""

    @property
    def config(self) -> "StoreConfig": ...

    @property
    def commitlog(self) -> "CommitLog": ...

    @property
    def clock(self) -> Callable[[], int]:
        """Milliseconds clock of the store timestamps."""

    def local_queue(self, topic: str, queue_id: int) -> Optional["LocalQueue"]: ...
    def local_queues(self) -> list["LocalQueue"]: ...
    def queue_keys(self) -> list[tuple[str, int]]: ...
    def check_in_disk_by_consume_offset(self, topic: str, queue_id: int, consume_offset: int) -> bool: ...
    def pickup_store_timestamp(self, phys_offset: int, size: int = 64) -> int: ...

    def add_retention_guard(self, guard: "RetentionGuard") -> None:
        """Ask ``guard`` before CommitLog files are deleted and before an emptied consume queue is dropped."""

    def record_get_time(self, started: float) -> None:
        """Count one read that began at ``time.perf_counter() == started`` (a layer serving it itself)."""
