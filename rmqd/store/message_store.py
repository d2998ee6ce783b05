"""MessageStore: the local store (Java ``DefaultMessageStore``), a facade over its parts.

CommitLog + consume queues (:mod:`.consume_queues`) + IndexFiles, written by the C put engine
(:mod:`rmqd.cython_ext.store_put`), made durable by :mod:`.flush` / :mod:`.durability`, trimmed by
:mod:`.retention`, brought back after a restart by :mod:`.recovery`. It is the end of the layer chain
(:mod:`rmqd.store.layers`): the compaction and tier layers wrap it and read it through its public
per-queue views (:meth:`MessageStore.local_queue`).

Threading: every public method is blocking and thread-safe.  Appends (commit log write, consume
queue entry, index items) happen synchronously under one put lock, so a message is visible to
:meth:`MessageStore.get_messages` as soon as ``put_message`` returns (before the SYNC_FLUSH wait).
Dispatch listeners run after the put lock is released, in the putting thread.

Buffers returned by :meth:`get_messages` are zero-copy ``memoryview`` slices of the commit log
mapping; they stay valid (and keep the mapping alive) until released, even if retention deletes
the segment meanwhile (see :mod:`rmqd.store.mapped_file`).  ``read_message`` and ``query_message``
return copies.
"""
from __future__ import annotations

import logging
import os
import threading
import time
from typing import TYPE_CHECKING, Callable, Container, Optional, Sequence, Union

from rmqd.common.constants import SCHEDULE_TOPIC  # noqa: F401 (re-exported)
from rmqd.cython_ext import store_put as _sp
from rmqd.cython_ext.store_put import DispatchRequest, PutMessageResult  # noqa: F401 (re-exported)
from rmqd.common.service_thread import ServiceThread
from rmqd.store.checkpoint import StoreCheckpoint
from rmqd.store.commitlog import CommitLog
from rmqd.store.config import (DEFAULT_DELAY_LEVELS, JAVA_DISK_RATIO_DEFAULTS, DelayLevelTable,  # noqa: F401
                               StoreConfig, disk_ratio_property, disk_ratio_variable, parse_delay_levels,
                               resolve_disk_ratios, wall_clock_ms)
from rmqd.store.consume_queues import ConsumeQueueTable
from rmqd.store.durability import Durability, notify_durable, put_durable
from rmqd.store.flush import StoreFlusher, flush_services
from rmqd.store.index_file import IndexService
from rmqd.store.local_queue import LocalQueue
from rmqd.store.message import MessageToStore, pack_host
from rmqd.store.page_warmer import PageWarmer
from rmqd.store.recovery import AbortFile, StoreDirLock, recover
from rmqd.store.results import (GetMessageResult, GetMessageStatus, PutMessageStatus, QueryResult,  # noqa: F401
                                StoreCounters, StoreStats)
from rmqd.store.retention import CleanCommitLogService

if TYPE_CHECKING:
    from _typeshed import ReadableBuffer

    from rmqd.store.api import MessageFilter
    from rmqd.store.layer import RetentionGuard

log = logging.getLogger(__name__)

# A dispatch listener as the store keeps it (read by the put engine in C): called for every message, or
# ``(topic, fn)`` for the messages of one topic, or ``(watch, fn)`` for those whose (topic, queueId) is in
# the live container ``watch``.
DispatchListener = Callable[[DispatchRequest], None]
ListenerEntry = Union[DispatchListener, tuple[str, DispatchListener],
                      tuple[Container[tuple[str, int]], DispatchListener]]


def _physical_memory() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        return 8 << 30


class MessageStore:
    """The local message store (see the module docstring)."""

    # the end of the layer chain (rmqd.store.layer): no layer below this one
    compaction = None
    tier = None

    def __init__(self, config: StoreConfig):
        self.config = resolve_disk_ratios(config)
        self._clock = config.clock
        seg = config.mapped_file_size_commitlog
        self.max_record_size = min(seg - 8, config.max_message_size + 64 * 1024 + 512)
        self.commitlog = CommitLog(config.commitlog_dir, seg, self.max_record_size)
        self.index = IndexService(config.index_dir, config.max_hash_slot_num, config.max_index_num, self._clock)
        self.consume_queues = ConsumeQueueTable(config.consume_queue_dir, config.mapped_file_size_consume_queue)
        self.hot_data_limit = int(_physical_memory() * config.access_message_in_memory_max_ratio / 100)
        self._put_lock = threading.Lock()
        self._listeners: list[ListenerEntry] = []
        self._counters = StoreCounters()
        self._engine = _sp.PutEngine(config, self.commitlog, self.index, self.consume_queues, self._put_lock,
                                     DelayLevelTable(config.message_delay_level).tags_code, pack_host,
                                     self._listeners, config.max_message_size, self.max_record_size,
                                     None if config.clock is wall_clock_ms else config.clock)
        self.durability = Durability()
        self.retention = CleanCommitLogService(config, self.commitlog, self.consume_queues, self.index,
                                               self._engine, self._counters, lambda: self._clock())
        self.flusher: Optional[StoreFlusher] = None          # made at start, with the checkpoint
        self._dir_lock = StoreDirLock(config.store_root_dir)
        self._abort = AbortFile(config.store_root_dir)
        self._checkpoint: Optional[StoreCheckpoint] = None
        self._confirm_offset_source: Optional[Callable[[], int]] = None
        self._services: list[ServiceThread] = []
        self._warmer: Optional[PageWarmer] = None

    # ------------------------------------------------------------------ the chain, the engine, the clock
    @property
    def message_store(self) -> "MessageStore":
        return self

    @property
    def put_engine(self) -> _sp.PutEngine:
        """The C put engine, for the send lane that appends on the event loop (ASYNC_FLUSH)."""
        return self._engine

    @property
    def clock(self) -> Callable[[], int]:
        """Milliseconds clock for store timestamps (tests may replace it at run time)."""
        return self._clock

    @clock.setter
    def clock(self, fn: Callable[[], int]) -> None:
        self._clock = fn
        self._engine.clock = None if fn is wall_clock_ms else fn

    @property
    def abort_file(self) -> str:
        return self._abort.path

    def add_retention_guard(self, guard: "RetentionGuard") -> None:
        """Ask ``guard`` (a :class:`~rmqd.store.layer.RetentionGuard`, a layer above) before CommitLog
        files are deleted and before an emptied consume queue is dropped."""
        self.retention.guards.append(guard)

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> None:
        """Recover (fast after a clean shutdown, verifying after a crash) and start the services."""
        cfg = self.config
        for d in (cfg.store_root_dir, cfg.commitlog_dir, cfg.consume_queue_dir, cfg.index_dir):
            os.makedirs(d, exist_ok=True)
        self._dir_lock.acquire()
        self._checkpoint = StoreCheckpoint(os.path.join(cfg.store_root_dir, "checkpoint"))
        self.flusher = StoreFlusher(self.commitlog, self.consume_queues, self.index, self._checkpoint,
                                    self._engine, self._put_lock)
        self.flusher.confirm_offset = self._confirm_offset_source
        abnormal = self._abort.exists()
        t0 = time.perf_counter()
        recover(self.commitlog, self.consume_queues, self.index, self._checkpoint, self._engine, abnormal,
                cfg.check_crc_on_recover, self.max_record_size)
        self.flusher.flush_logics()
        (log.info if abnormal else log.debug)(
            "store recovered (%s) in %.3fs: commitlog [%d, %d), %d consume queues",
            "abnormal" if abnormal else "normal", time.perf_counter() - t0,
            self.commitlog.min_offset(), self.commitlog.max_offset(), len(self.consume_queues))
        self._abort.create()
        self._counters.set(start_time_ms=self.clock())
        self._engine.running = True
        self.commitlog.start()
        self.retention.check_disk()
        self._services = flush_services(cfg, self.flusher, self.durability) + [self.retention]
        self._engine.latency_by_caller = self.durability.waits     # put_durable counts put + wait
        for svc in self._services:
            svc.start()
        if cfg.warm_mapped_pages:
            self._warmer = PageWarmer(self)
            self._warmer.start()

    def shutdown(self) -> None:
        """Stop the services, flush everything, write the checkpoint and remove the abort marker."""
        if not self._engine.running:
            return
        with self._put_lock:
            self._engine.running = False
            self._engine.reset()
        if self._warmer is not None:
            self._warmer.shutdown()
            self._warmer = None
        for svc in self._services:
            svc.shutdown()
        self._services = []
        assert self.flusher is not None and self._checkpoint is not None, "made by start()"
        self.flusher.flush_all()
        self.commitlog.shutdown()
        self.consume_queues.close()
        self.index.close()
        self._checkpoint.close()
        self._abort.remove()
        self._dir_lock.release()

    def flush(self) -> None:
        """Flush the commit log, consume queues, index files and the checkpoint now."""
        assert self.flusher is not None, "made by start()"
        self.flusher.flush_all()

    # ------------------------------------------------------------------ put
    def put_message(self, msg: MessageToStore) -> PutMessageResult:
        """Append one message.  Thread-safe, blocking (SYNC_FLUSH waits for the fsync)."""
        if not self.durability.waits:
            return self._engine.put_message(msg)
        return self._put_durable([msg])

    def put_messages(self, msgs: Sequence[MessageToStore]) -> PutMessageResult:
        """Append a batch (one topic/queue, contiguous queue offsets) atomically w.r.t. other puts, in one
        C call (:class:`~rmqd.cython_ext.store_put.PutEngine`); validation precedes any byte written."""
        if not self.durability.waits:
            return self._engine.put_messages(msgs)
        return self._put_durable(msgs)

    def _put_durable(self, msgs: Sequence[MessageToStore]) -> PutMessageResult:
        return put_durable(self._engine, self.durability, msgs, self.config.sync_flush_timeout_ms)

    def count_received(self, records: int, nbytes: int) -> None:
        """A slave's appended records count as its puts (putMessageTimesTotal), as Java's reput counts them."""
        self._counters.received(records, nbytes)

    def on_flushed(self, end_offset: int, done: Callable[[bool], None]) -> None:
        """Durable without blocking: ``done(True)`` (on the durability stage's thread) once every stage
        reached ``end_offset`` (SYNC_FLUSH: the group commit flushed it), ``done(False)`` when one timed
        out; with no stage (ASYNC_FLUSH), at once True (:func:`~rmqd.store.durability.notify_durable`)."""
        notify_durable(self._engine, self.durability, end_offset, done)

    def append_to_commitlog(self, offset: int, data: "ReadableBuffer") -> int:
        """A slave's append (Java ``DefaultMessageStore.appendToCommitLog``): write ``data``, a range of
        the master's CommitLog starting at ``offset`` (which must be where this CommitLog ends), then
        dispatch its whole records to consume queues, index and dispatch listeners as a local put does;
        a record cut at the end of ``data`` is dispatched by the append that completes it. Returns the
        new CommitLog end. Raises ValueError for a wrong offset (nothing written) and RuntimeError when
        the store is not running."""
        if not self._engine.running:
            raise RuntimeError("message store is not running")
        with self._put_lock:
            end = self.commitlog.append_raw(offset, data)
        start = self._engine.dispatched_where
        self._engine.dispatch_range(start if 0 <= start < offset else offset, end)
        return end

    def add_dispatch_listener(self, fn: Callable[[DispatchRequest], None],
                              topic: Optional[str] = None, watch: Optional[Container[tuple[str, int]]] = None) -> None:
        """Call ``fn(DispatchRequest)`` after each message is appended and dispatched (in the
        putting thread, after the put lock is released).  With ``topic``, only for messages of
        that topic; with ``watch``, only when ``(topic, queue_id) in watch`` (a live container the
        caller keeps up to date).  Filtered in C: no request object, no Python call otherwise."""
        if topic is not None:
            self._listeners.append((topic, fn))
        elif watch is not None:
            self._listeners.append((watch, fn))
        else:
            self._listeners.append(fn)

    # ------------------------------------------------------------------ consume queues
    def local_queue(self, topic: str, queue_id: int) -> Optional[LocalQueue]:
        """A read view of the local consume queue of (topic, queueId), None if there is none."""
        cq = self.consume_queues.get(topic, queue_id)
        return LocalQueue(cq, self.commitlog, self.config, self._counters, self.hot_data_limit) if cq else None

    def local_queues(self) -> list[LocalQueue]:
        """Views of every local consume queue."""
        return [LocalQueue(cq, self.commitlog, self.config, self._counters, self.hot_data_limit)
                for cq in self.consume_queues.queues()]

    def queue_keys(self) -> list[tuple[str, int]]:
        """Every (topic, queueId) with a local consume queue."""
        return self.consume_queues.keys()

    def topics(self) -> set[str]:
        return self.consume_queues.topics()

    def get_max_offset(self, topic: str, queue_id: int) -> int:
        cq = self.consume_queues.get(topic, queue_id)
        return cq.max_offset if cq else 0

    def get_min_offset(self, topic: str, queue_id: int) -> int:
        cq = self.consume_queues.get(topic, queue_id)
        return cq.min_offset if cq else 0

    def check_in_disk_by_consume_offset(self, topic: str, queue_id: int, consume_offset: int) -> bool:
        """Java's ``checkInDiskByConsumeOffset`` (:meth:`LocalQueue.is_cold`); False without the entry."""
        q = self.local_queue(topic, queue_id)
        return q is not None and q.is_cold(consume_offset)

    def get_message_store_timestamp(self, topic: str, queue_id: int, queue_offset: int) -> int:
        """Store time of the message at ``queue_offset`` or -1."""
        q = self.local_queue(topic, queue_id)
        return q.store_time(queue_offset) if q is not None else -1

    def get_earliest_message_time(self, topic: str, queue_id: int) -> int:
        q = self.local_queue(topic, queue_id)
        return q.earliest_time() if q is not None else -1

    def get_offset_by_time(self, topic: str, queue_id: int, timestamp: int) -> int:
        q = self.local_queue(topic, queue_id)
        return q.offset_by_time(timestamp) if q is not None else 0

    def delete_topic(self, topic: str) -> int:
        """Drop every consume queue of ``topic``; returns how many were removed."""
        with self._put_lock:
            gone = self.consume_queues.remove_topic(topic)
            self._engine.drop_topic(topic)
        return len(gone)

    def clean_expired_consume_queues(self) -> list[tuple[str, int]]:
        """Java's ``cleanExpiredConsumerQueue`` (mqadmin cleanExpiredCQ): drop every consume queue whose last
        message ends below the CommitLog's min offset; its queue offsets restart at 0, as Java's do.
        SCHEDULE_TOPIC_XXXX is kept as in Java, and so are queues whose records a layer above still serves
        (:meth:`~rmqd.store.layer.RetentionGuard.keeps_queue`). Returns what went."""
        with self._put_lock:
            dropped = self.consume_queues.remove_expired(self.commitlog.min_offset(), self.retention.keeps_queue)
            for key in dropped:
                self._engine.states.pop(key, None)
        return dropped

    # ------------------------------------------------------------------ reads
    def get_messages(self, topic: str, queue_id: int, offset: int, max_nums: int,
                     max_total_bytes: Optional[int] = None,
                     message_filter: Optional["MessageFilter"] = None) -> GetMessageResult:
        """Read up to ``max_nums`` messages from logical ``offset`` (status table of README §3.3)."""
        t0 = time.perf_counter()
        try:
            q = self.local_queue(topic, queue_id)
            if q is None:
                return GetMessageResult(GetMessageStatus.NO_MATCHED_LOGIC_QUEUE, 0, 0, 0)
            return q.get_messages(offset, max_nums, max_total_bytes, message_filter)
        finally:
            self.record_get_time(t0)

    def record_get_time(self, started: float) -> None:
        """Count one read that began at ``time.perf_counter() == started`` (layers serving a read
        themselves call it, so the store's stats see every read)."""
        self._counters.get_done((time.perf_counter() - started) * 1000)

    def get_messages_resident(self, topic: str, queue_id: int, offset: int, max_nums: int,
                              tag_codes: Optional[Sequence[int]]) -> Optional[GetMessageResult]:
        """The event-loop fast path of :meth:`get_messages` (:meth:`LocalQueue.get_messages_resident`):
        None when it cannot serve the pull; then :meth:`get_messages` must (in a thread that may block).
        ``tag_codes`` None matches every tag; otherwise the tag hash codes to keep."""
        q = self.local_queue(topic, queue_id)
        return q.get_messages_resident(offset, max_nums, tag_codes) if q is not None else None

    def read_message(self, phys_offset: int) -> Optional[bytes]:
        """One whole record at ``phys_offset`` (copy), or None if gone or not a valid record."""
        v = self.commitlog.read_record(phys_offset)
        return bytes(v) if v is not None else None

    def query_message(self, topic: str, key: str, max_num: int, begin_ts: int = 0,
                      end_ts: int = 2 ** 62) -> QueryResult:
        """Messages indexed under ``topic#key`` (KEYS token or UNIQ_KEY), newest first."""
        r = self.index.query(topic, key, max_num, begin_ts, end_ts)
        msgs = []
        for off in r.phy_offsets:
            v = self.commitlog.read_record(off)
            if v is not None:
                msgs.append(bytes(v))
        return QueryResult(msgs, r.index_last_update_timestamp, r.index_last_update_phyoffset)

    def record_confirm_offset_from(self, source: Callable[[], int]) -> None:
        """Keep a controller-mode replica's confirmOffset in the checkpoint: ``source()`` is read at every logics
        flush (every ``flushIntervalConsumeQueue``, and at shutdown)."""
        self._confirm_offset_source = source
        if self.flusher is not None:
            self.flusher.confirm_offset = source

    def recorded_confirm_offset(self) -> int:
        """The confirmOffset the checkpoint holds (-1: none)."""
        return self._checkpoint.confirm_offset if self._checkpoint is not None else -1

    def commitlog_min_offset(self) -> int:
        return self.commitlog.min_offset()

    def commitlog_max_offset(self) -> int:
        return self.commitlog.max_offset()

    def pickup_store_timestamp(self, phys_offset: int, size: int = 64) -> int:
        """Store time of the record at CommitLog ``phys_offset``, -1 if it is gone."""
        return self.commitlog.pickup_store_timestamp(phys_offset, size)

    # ------------------------------------------------------------------ retention
    def run_retention_once(self) -> int:
        """One retention run now (:class:`~rmqd.store.retention.CleanCommitLogService`)."""
        return self.retention.run_retention_once()

    def execute_delete_files_manually(self) -> int:
        """Java's executeDeleteFilesManually (DELETE_EXPIRED_COMMITLOG)."""
        return self.retention.execute_delete_files_manually()

    # ------------------------------------------------------------------ stats
    def lock_time_mills(self) -> int:
        """How long the put in progress has held the put lock, in ms (0 when no put runs): Java's
        ``MessageStore.lockTimeMills`` (``pageCacheLockTimeMills`` in the runtime info)."""
        return self._engine.lock_time_mills()

    def topic_put_totals(self) -> dict[str, tuple[int, int]]:
        """Messages and record bytes stored per topic since start (counted in the put engine)."""
        return {topic: (c.nums, c.size) for topic, c in list(self._engine.topic_counters.items())}

    @property
    def stats(self) -> StoreStats:
        """Snapshot of runtime statistics."""
        return self._counters.snapshot(self._engine, self.commitlog,
                                       self.retention.disk_ratio(self.config.consume_queue_dir))
