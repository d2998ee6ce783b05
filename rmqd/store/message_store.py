"""MessageStore facade: CommitLog + ConsumeQueues + IndexFiles with flush, recovery, retention.

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

import fcntl
import logging
import os
import threading
import time
from typing import Callable, Container, Optional, Sequence

from rmqd import progress
from rmqd.fileutil import disk_partition_space_used_percent
from rmqd.store.checkpoint import StoreCheckpoint
from rmqd.store.commitlog import PAGE, CommitLog
from rmqd.store.config import (DEFAULT_DELAY_LEVELS, JAVA_DISK_RATIO_DEFAULTS, StoreConfig,  # noqa: F401 (re-exported)
                               disk_ratio_property, disk_ratio_variable, parse_delay_levels, resolve_disk_ratios,
                               wall_clock_ms)
from rmqd.store.consume_queues import ConsumeQueueTable
from rmqd.store.cq_check import repair_consume_queues
from rmqd.store.local_queue import LocalQueue
from rmqd.store.index_file import IndexService
from rmqd.store.page_warmer import PageWarmer
from rmqd.store.message import MessageToStore, find_property, pack_host, tags_code_of
from rmqd.cython_ext import store_put as _sp
from rmqd.cython_ext.store_put import DispatchRequest, PutMessageResult  # noqa: F401 (public API)
from rmqd.store.results import (GetMessageResult, GetMessageStatus, PutMessageStatus, QueryResult,  # noqa: F401
                                StoreCounters, StoreStats)

log = logging.getLogger(__name__)

SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX"
MAX_MANUAL_DELETE_FILE_TIMES = 20    # retention runs that honour one DELETE_EXPIRED_COMMITLOG (Java's)


def _physical_memory() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        return 8 << 30


class _GroupCommit(threading.Thread):
    """SYNC_FLUSH group commit: one msync covers every pending request.

    A request is an end offset, a deadline and a callback ``done(flushed: bool)`` run on this thread
    once the CommitLog is flushed past the offset (True) or the deadline passed first (False).
    Requests that arrive while a flush runs share the next one."""

    def __init__(self, store: "MessageStore"):
        super().__init__(name="rmqd-store-group-commit", daemon=True)
        self.store = store
        self._cv = threading.Condition()
        self._reqs: list = []
        self._stopping = False

    def on_flushed(self, offset: int, timeout_s: float, done: Callable[[bool], None]) -> None:
        """Call ``done(True)`` once everything before ``offset`` is on disk (``done(False)`` after
        ``timeout_s``); never blocks."""
        with self._cv:
            if not self._stopping:
                self._reqs.append((offset, time.monotonic() + timeout_s, done))
                self._cv.notify()
                return
        done(self.store.commitlog.flushed_where >= offset)

    def wait_flushed(self, offset: int, timeout_s: float) -> bool:
        ev = threading.Event()
        result = [False]

        def done(flushed: bool) -> None:
            result[0] = flushed
            ev.set()
        self.on_flushed(offset, timeout_s, done)
        ev.wait(timeout_s + 1.0)
        return result[0]

    @staticmethod
    def _call(done: Callable[[bool], None], flushed: bool) -> None:
        try:
            done(flushed)
        except Exception:
            log.exception("group commit callback failed")

    def run(self) -> None:
        while True:
            with self._cv:
                while not self._reqs and not self._stopping:
                    self._cv.wait()
                batch, self._reqs = self._reqs, []
                stop = self._stopping
            if batch:
                try:
                    self.store._flush_commitlog()
                except Exception:
                    log.exception("group commit flush failed; %d putters will time out", len(batch))
                flushed = self.store.commitlog.flushed_where
                now = time.monotonic()
                retry = []
                for req in batch:
                    if req[0] <= flushed:
                        self._call(req[2], True)
                    elif now >= req[1] or stop:
                        self._call(req[2], False)
                    else:
                        retry.append(req)
                if retry:
                    with self._cv:
                        self._reqs[:0] = retry
                    time.sleep(0.001)      # a failing flush must not spin
            if stop:
                with self._cv:
                    rest, self._reqs = self._reqs, []
                for req in rest:
                    self._call(req[2], self.store.commitlog.flushed_where >= req[0])
                return

    def shutdown(self) -> None:
        with self._cv:
            self._stopping = True
            self._cv.notify()
        self.join(5)


class MessageStore:
    """RocketMQ-style message store (see module docstring for threading/lifetime rules)."""

    def __init__(self, config: StoreConfig):
        self.config = resolve_disk_ratios(config)
        self._clock = config.clock
        seg = config.mapped_file_size_commitlog
        self.max_record_size = min(seg - 8, config.max_message_size + 64 * 1024 + 512)
        self.commitlog = CommitLog(config.commitlog_dir, seg, self.max_record_size)
        self.index = IndexService(config.index_dir, config.max_hash_slot_num, config.max_index_num,
                                  self._clock)
        self.consume_queues = ConsumeQueueTable(config.consume_queue_dir, config.mapped_file_size_consume_queue)
        self._put_lock = threading.Lock()
        self._listeners: list[Callable[[DispatchRequest], None]] = []
        self._delay_levels = parse_delay_levels(config.message_delay_level)
        self._engine = _sp.PutEngine(self, self.commitlog, self.index, self._put_lock,
                                     None if config.clock is wall_clock_ms else config.clock,
                                     self._tags_code, pack_host, self._fail, self._listeners,
                                     config.max_message_size, self.max_record_size)
        self._shutdown_done = False
        self._unreadable_paths: set[str] = set()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._group_commit: Optional[_GroupCommit] = None
        self._warmer: Optional[PageWarmer] = None
        self._counters = StoreCounters()
        self._checkpoint: Optional[StoreCheckpoint] = None
        self._lock_fd = -1
        self._last_thorough_flush = 0.0
        self.hot_data_limit = int(_physical_memory() * config.access_message_in_memory_max_ratio / 100)
        self._manual_delete_times = 0
        self._retention_guards: list = []    # layers asked before CommitLog files go (rmqd.store.layer)

    @property
    def clock(self) -> Callable[[], int]:
        """Milliseconds clock for store timestamps (tests may replace it at run time)."""
        return self._clock

    @clock.setter
    def clock(self, fn: Callable[[], int]) -> None:
        self._clock = fn
        self._engine.clock = None if fn is wall_clock_ms else fn

    # the bottom of the layer chain (rmqd.store.layer): no layer below this one
    compaction = None
    tier = None

    @property
    def local(self) -> "MessageStore":
        return self

    def add_retention_guard(self, guard) -> None:
        """Ask ``guard`` (a :class:`~rmqd.store.layer.RetentionGuard`, a layer above) before CommitLog
        files are deleted and before an emptied consume queue is dropped."""
        self._retention_guards.append(guard)

    @property
    def put_engine(self) -> _sp.PutEngine:
        """The C put engine, for the send lane that appends on the event loop (ASYNC_FLUSH)."""
        return self._engine

    # state shared with the C put engine
    @property
    def _running(self) -> bool:
        return self._engine.running

    @_running.setter
    def _running(self, v: bool) -> None:
        self._engine.running = v

    @property
    def _disk_full(self) -> bool:
        return self._engine.disk_full

    @_disk_full.setter
    def _disk_full(self, v: bool) -> None:
        self._engine.disk_full = v

    @property
    def _last_store_ts(self) -> int:
        return self._engine.last_store_ts

    @_last_store_ts.setter
    def _last_store_ts(self, v: int) -> None:
        self._engine.last_store_ts = v

    # ------------------------------------------------------------------ lifecycle
    @property
    def abort_file(self) -> str:
        return os.path.join(self.config.store_root_dir, "abort")

    def start(self) -> None:
        """Recover (fast after a clean shutdown, verifying after a crash) and start services."""
        cfg = self.config
        for d in (cfg.store_root_dir, cfg.commitlog_dir, cfg.consume_queue_dir, cfg.index_dir):
            os.makedirs(d, exist_ok=True)
        self._lock_fd = os.open(os.path.join(cfg.store_root_dir, "lock"), os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(self._lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(self._lock_fd)
            raise RuntimeError(f"store {cfg.store_root_dir} is locked by another process")
        self._checkpoint = StoreCheckpoint(os.path.join(cfg.store_root_dir, "checkpoint"))
        abnormal = os.path.exists(self.abort_file)
        t0 = time.perf_counter()
        self._recover(abnormal)
        log.info("store recovered (%s) in %.3fs: commitlog [%d, %d), %d consume queues",
                 "abnormal" if abnormal else "normal", time.perf_counter() - t0,
                 self.commitlog.min_offset(), self.commitlog.max_offset(), len(self.consume_queues))
        fd = os.open(self.abort_file, os.O_WRONLY | os.O_CREAT, 0o644)
        os.fsync(fd)
        os.close(fd)
        self._counters.set(start_time_ms=self.clock())
        self._running = True
        self.commitlog.start()
        self._check_disk()
        if cfg.flush_disk_type == "SYNC_FLUSH":
            self._group_commit = _GroupCommit(self)
            self._group_commit.start()
            self._engine.latency_by_caller = True     # _put_sync counts put + flush wait
        else:
            self._spawn("rmqd-store-flush-commitlog", self._async_flush_loop)
        self._spawn("rmqd-store-flush-cq", self._cq_flush_loop)
        if cfg.warm_mapped_pages:
            self._warmer = PageWarmer(self)
            self._warmer.start()
        self._spawn("rmqd-store-clean", self._clean_loop)

    def _spawn(self, name: str, target: Callable[[], None]) -> None:
        t = threading.Thread(target=target, name=name, daemon=True)
        t.start()
        self._threads.append(t)

    def shutdown(self) -> None:
        """Stop services, flush everything, write the checkpoint and remove the abort marker."""
        if not self._running:
            return
        with self._put_lock:
            self._running = False
            self._engine.reset()
        self._stop.set()
        if self._warmer is not None:
            self._warmer.stop()
            self._warmer = None
        if self._group_commit:
            self._group_commit.shutdown()
        for t in self._threads:
            t.join(5)
        self._flush_commitlog()
        self._flush_logics()
        self.commitlog.shutdown()
        self.consume_queues.close()
        self.index.close()
        self._checkpoint.close()
        os.unlink(self.abort_file)
        os.close(self._lock_fd)
        self._lock_fd = -1

    # ------------------------------------------------------------------ recovery
    def _recover(self, abnormal: bool) -> None:
        cl = self.commitlog
        ck = self._checkpoint
        cl.mfq.load()
        self.consume_queues.load()
        self.index.load()
        files = cl.mfq.files
        if abnormal:
            idx_from = self.index.destroy_after(ck.index_offset)
            dispatch_from = min(ck.logics_offset, idx_from)
            start = min(ck.physic_offset, dispatch_from)
        else:
            dispatch_from = min(ck.logics_offset, ck.index_offset)
            start = files[max(0, len(files) - 3)].file_from_offset if files else 0
            start = min(start, dispatch_from)
        start = max(start, cl.min_offset())
        valid_end = cl.recover(start, self.config.check_crc_on_recover or abnormal)
        for cq in self.consume_queues.queues():
            cq.truncate_dirty(valid_end)
        dispatch_from = max(dispatch_from, cl.min_offset())
        redo = repair_consume_queues(self.consume_queues.queues(), cl, valid_end, self.max_record_size)
        if redo is not None and max(redo, cl.min_offset()) < dispatch_from:   # rebuild damaged CQs
            dispatch_from = max(redo, cl.min_offset())
            cl.recover(dispatch_from, True)
        self._redispatch(dispatch_from, valid_end)
        self.consume_queues.correct_min_offsets(cl.min_offset())
        self._engine.reset()
        self._flush_logics()

    def _redispatch(self, start: int, end: int) -> None:
        """Dispatch the CommitLog records in [start, end) to consume queues and index, one C call per
        segment (:meth:`~rmqd.cython_ext.store_put.PutEngine.dispatch_range`)."""
        cl = self.commitlog
        pos = cl.first_record_at(start) if start < end else end
        if pos >= end:
            return
        log.info("re-dispatching commit log [%d, %d)", pos, end)
        with progress.phase("re-dispatching records", end - pos, "B") as p:
            while pos < end:
                stop = min(end, cl.roll_next_file(pos))
                reached = self._engine.dispatch_range(pos, stop, False)
                p.advance(stop - pos)
                if reached < stop:          # logged by the engine; verified records never stop it
                    break
                pos = stop

    # ------------------------------------------------------------------ put
    def _tags_code(self, topic: str, props: str, store_ts: int) -> int:
        if topic == SCHEDULE_TOPIC:
            lvl = find_property(props, "DELAY")
            if lvl and lvl.lstrip("-").isdigit():
                level = min(max(int(lvl), 1), len(self._delay_levels))
                return store_ts + self._delay_levels[level - 1]
        return tags_code_of(props)

    def put_message(self, msg: MessageToStore) -> PutMessageResult:
        """Append one message.  Thread-safe, blocking (SYNC_FLUSH waits for the fsync)."""
        if self._group_commit is None:
            return self._engine.put_message(msg)
        return self._put_sync([msg])

    def put_messages(self, msgs: Sequence[MessageToStore]) -> PutMessageResult:
        """Append a batch (one topic/queue, contiguous queue offsets) atomically w.r.t. other puts.

        The append (record, consume queue entry, index items, dispatch listeners) runs in
        :class:`rmqd.cython_ext.store_put.PutEngine`; validation happens before any byte is written.
        """
        if self._group_commit is None:
            return self._engine.put_messages(msgs)
        return self._put_sync(msgs)

    def _put_sync(self, msgs: Sequence[MessageToStore]) -> PutMessageResult:
        t0 = time.perf_counter()
        r = self._engine.put_messages(msgs)
        if r.status is not PutMessageStatus.PUT_OK:
            return r
        cfg = self.config
        if find_property(msgs[0].properties or "", "WAIT") != "false":
            end_offset = r.end_offset
            if not self._group_commit.wait_flushed(end_offset, cfg.sync_flush_timeout_ms / 1000):
                r.status = PutMessageStatus.FLUSH_DISK_TIMEOUT
                r.remark = f"flush did not complete within {cfg.sync_flush_timeout_ms} ms"
                log.warning("SYNC_FLUSH timeout for offset %d", end_offset)
        self._engine.record_latency((time.perf_counter() - t0) * 1000)
        return r

    def append_to_commitlog(self, offset: int, data) -> int:
        """A slave's append (Java ``DefaultMessageStore.appendToCommitLog``): write ``data``, a range of
        the master's CommitLog starting at ``offset`` (which must be where this CommitLog ends), then
        dispatch its whole records to consume queues, index and dispatch listeners as a local put does;
        a record cut at the end of ``data`` is dispatched by the append that completes it. Returns the
        new CommitLog end. Raises ValueError for a wrong offset (nothing written) and RuntimeError when
        the store is not running."""
        if not self._running:
            raise RuntimeError("message store is not running")
        with self._put_lock:
            end = self.commitlog.append_raw(offset, data)
        start = self._engine.dispatched_where
        self._engine.dispatch_range(start if 0 <= start < offset else offset, end)
        return end

    def on_flushed(self, end_offset: int, done: Callable[[bool], None]) -> None:
        """SYNC_FLUSH without blocking: ``done(True)`` on the group-commit thread once the
        CommitLog is on disk up to ``end_offset``, ``done(False)`` after ``syncFlushTimeout``.
        Under ASYNC_FLUSH, at once with True."""
        gc = self._group_commit
        if gc is None:
            done(True)
            return
        t0 = time.perf_counter()

        def finished(flushed: bool) -> None:
            if not flushed:
                log.warning("SYNC_FLUSH timeout for offset %d", end_offset)
            self._engine.record_latency((time.perf_counter() - t0) * 1000)
            done(flushed)
        gc.on_flushed(end_offset, self.config.sync_flush_timeout_ms / 1000, finished)

    def _fail(self, status: PutMessageStatus, remark: str) -> PutMessageResult:
        self._counters.put_failed()
        return PutMessageResult(status, remark=remark)

    def add_dispatch_listener(self, fn: Callable[[DispatchRequest], None],
                              topic: Optional[str] = None, watch: Optional[Container] = None) -> None:
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
    def _find_cq(self, topic: str, queue_id: int, create: bool = False):
        """The put engine's callback: the consume queue of (topic, queueId), created on first use."""
        if create:
            return self.consume_queues.find_or_create(topic, queue_id)
        return self.consume_queues.get(topic, queue_id)

    def local_queue(self, topic: str, queue_id: int) -> Optional[LocalQueue]:
        """A read view of the local consume queue of (topic, queueId), None if there is none."""
        cq = self.consume_queues.get(topic, queue_id)
        if cq is None:
            return None
        return LocalQueue(cq, self.commitlog, self.config, self._counters, self.hot_data_limit)

    def local_queues(self) -> list[LocalQueue]:
        """Views of every local consume queue."""
        return [LocalQueue(cq, self.commitlog, self.config, self._counters, self.hot_data_limit)
                for cq in self.consume_queues.queues()]

    def queue_keys(self) -> list[tuple[str, int]]:
        """Every (topic, queueId) with a local consume queue."""
        return self.consume_queues.keys()

    def get_max_offset(self, topic: str, queue_id: int) -> int:
        cq = self.consume_queues.get(topic, queue_id)
        return cq.max_offset if cq else 0

    def get_min_offset(self, topic: str, queue_id: int) -> int:
        cq = self.consume_queues.get(topic, queue_id)
        return cq.min_offset if cq else 0

    def check_in_disk_by_consume_offset(self, topic: str, queue_id: int, consume_offset: int) -> bool:
        """Java's ``checkInDiskByConsumeOffset``: is the message at ``consume_offset`` further behind
        the CommitLog head than ``access_message_in_memory_max_ratio`` % of RAM ("cold")?
        False when the queue or the entry does not exist."""
        q = self.local_queue(topic, queue_id)
        return q is not None and q.is_cold(consume_offset)

    def pickup_store_timestamp(self, phys_offset: int, size: int = 64) -> int:
        """Store time of the record at CommitLog ``phys_offset``, -1 if it is gone."""
        return self.commitlog.pickup_store_timestamp(phys_offset, size)

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
        message ends below the CommitLog's min offset (retention removed all of its messages); its queue
        offsets restart at 0, as Java's do. SCHEDULE_TOPIC_XXXX is kept as in Java, and so are queues whose
        records another layer still serves (compaction topics, the tiered store's). Returns what went."""
        def keep(topic: str, qid: int, n: int) -> bool:
            return any(g.keeps_queue(topic, qid, n) for g in self._retention_guards)

        with self._put_lock:
            dropped = self.consume_queues.remove_expired(self.commitlog_min_offset(), keep)
            for key in dropped:
                self._engine.states.pop(key, None)
        return dropped

    def topics(self) -> set[str]:
        return self.consume_queues.topics()

    def topic_put_totals(self) -> dict[str, tuple[int, int]]:
        """Messages and record bytes stored per topic since start (counted in the put engine)."""
        return {topic: (c.nums, c.size) for topic, c in list(self._engine.topic_counters.items())}

    # ------------------------------------------------------------------ get
    def get_messages(self, topic: str, queue_id: int, offset: int, max_nums: int,
                     max_total_bytes: Optional[int] = None, message_filter=None) -> GetMessageResult:
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
        """The event-loop fast path of :meth:`get_messages`: FOUND or NO_MATCHED_MESSAGE for a pull
        whose ConsumeQueue and CommitLog pages are all resident (no page fault can block the
        caller), with the records in one ``bytes`` (``buffers == [body]``). None when it cannot
        serve the pull; then :meth:`get_messages` must (in a thread that may block).

        ``tag_codes`` None matches every tag; otherwise the tag hash codes to keep. Store layers
        (compaction, tier) that route a queue elsewhere answer None for it."""
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

    def commitlog_min_offset(self) -> int:
        return self.commitlog.min_offset()

    def commitlog_max_offset(self) -> int:
        return self.commitlog.max_offset()

    # ------------------------------------------------------------------ flush
    def _flush_commitlog(self) -> None:
        ts = self._last_store_ts
        self.commitlog.flush()
        self._checkpoint.physic_msg_timestamp = max(self._checkpoint.physic_msg_timestamp, ts)
        self._checkpoint.physic_offset = self.commitlog.flushed_where

    def _flush_logics(self) -> None:
        with self._put_lock:
            disp = self.commitlog.max_offset()
            ts = self._last_store_ts
        self.consume_queues.flush()
        self.index.flush()
        ck = self._checkpoint
        ck.logics_offset = ck.index_offset = disp
        ck.logics_msg_timestamp = ck.index_msg_timestamp = ts
        ck.physic_offset = self.commitlog.flushed_where
        ck.flush()

    def flush(self) -> None:
        """Flush the commit log, consume queues, index files and the checkpoint now."""
        self._flush_commitlog()
        self._flush_logics()

    def _async_flush_loop(self) -> None:
        cfg = self.config
        while not self._stop.wait(cfg.flush_interval_commitlog_ms / 1000):
            try:
                now = time.monotonic()
                thorough = now - self._last_thorough_flush >= cfg.flush_commitlog_thorough_interval_ms / 1000
                if thorough or self.commitlog.dirty_bytes() >= cfg.flush_least_pages * PAGE:
                    self._flush_commitlog()
                    if thorough:
                        self._last_thorough_flush = now
            except Exception:
                log.exception("async commit log flush failed")

    def _cq_flush_loop(self) -> None:
        while not self._stop.wait(self.config.flush_interval_consume_queue_ms / 1000):
            try:
                self._flush_logics()
            except Exception:
                log.exception("consume queue/index flush failed")

    # ------------------------------------------------------------------ retention
    def _disk_ratio(self, path: str) -> float:
        """Used-space percentage of the disk holding ``path``, as the Java broker computes it
        (:func:`rmqd.fileutil.disk_partition_space_used_percent`: a whole percent).  An unreadable
        path (the store directory vanished, I/O error) counts as a full disk, so writes are refused
        instead of failing in odd ways; it is logged once until it becomes readable again."""
        if self.config.disk_usage is not None:
            return float(self.config.disk_usage(path))
        fraction = disk_partition_space_used_percent(path)
        if fraction < 0:
            if path not in self._unreadable_paths:
                self._unreadable_paths.add(path)
                log.error("cannot read the disk usage of %s: treating the disk as full", path)
            return 100.0
        if path in self._unreadable_paths:
            self._unreadable_paths.discard(path)
            log.warning("disk usage of %s is readable again", path)
        return round(fraction * 100)

    def _check_disk(self) -> float:
        ratio = self._disk_ratio(self.config.commitlog_dir)
        full = ratio > self.config.disk_space_warning_level_ratio
        if full != self._disk_full:
            (log.error if full else log.info)("commit log disk usage %.1f%%: writes %s", ratio,
                                             "refused" if full else "allowed again")
        self._disk_full = full
        self._counters.set(commitlog_disk_ratio=ratio)
        return ratio

    def _clean_loop(self) -> None:
        while not self._stop.wait(self.config.clean_resource_interval_ms / 1000):
            try:
                self.run_retention_once()
            except Exception:
                log.exception("retention run failed")

    def execute_delete_files_manually(self) -> int:
        """Java's executeDeleteFilesManually (DELETE_EXPIRED_COMMITLOG): expired CommitLog files go now
        and in the next 20 retention runs whatever the hour; returns how many went now."""
        self._manual_delete_times = MAX_MANUAL_DELETE_FILE_TIMES
        return self.run_retention_once()

    def _is_delete_hour(self) -> bool:
        hour = time.localtime(self.clock() / 1000).tm_hour
        return any(h.strip().isdigit() and int(h) == hour for h in self.config.delete_when.split(";"))

    def run_retention_once(self) -> int:
        """Delete expired commit-log segments (and then unreachable CQ/index files).

        Runs at ``delete_when`` hours, or whenever disk usage exceeds ``disk_max_used_space_ratio``;
        above ``disk_space_clean_forcibly_ratio`` even unexpired segments go.  Returns the number
        of commit-log segments deleted.
        """
        cfg = self.config
        ratio = self._check_disk()
        space_full = ratio > cfg.disk_max_used_space_ratio
        force = ratio > cfg.disk_space_clean_forcibly_ratio
        manual = self._manual_delete_times > 0
        if manual:
            self._manual_delete_times -= 1
        deleted = 0
        if space_full or manual or self._is_delete_hour():
            now = self.clock()
            expired_ms = cfg.file_reserved_time_hours * 3600 * 1000
            n = 0
            # the layers first (compaction copies, the tier commits): a file goes only once they have it
            limit = min([g.before_delete() for g in self._retention_guards], default=1 << 62)
            for mf in self.commitlog.mfq.files[:-1]:
                if mf.end_offset > limit:
                    log.info("retention: keeping %s and later until the store layers have them (up to %d)",
                             mf.path, limit)
                    break
                try:
                    mtime = os.path.getmtime(mf.path) * 1000
                except FileNotFoundError:
                    log.warning("commit log segment %s vanished", mf.path)
                    mtime = 0
                if now >= mtime + expired_ms or force:
                    n += 1
                    if n >= cfg.delete_files_batch_max:
                        break
                else:
                    break
            if n:
                gone = self.commitlog.mfq.remove_first(n)
                deleted = len(gone)
                log.info("retention: deleted %d commit log segment(s) (disk %.1f%%), min offset now %d",
                         deleted, ratio, self.commitlog.min_offset())
        cl_min = self.commitlog.min_offset()
        self.consume_queues.delete_expired_files(cl_min)
        self.index.delete_expired(cl_min)
        return deleted

    # ------------------------------------------------------------------ stats
    def lock_time_mills(self) -> int:
        """How long the put in progress has held the put lock, in ms (0 when no put runs): Java's
        ``MessageStore.lockTimeMills`` (``pageCacheLockTimeMills`` in the runtime info)."""
        return self._engine.lock_time_mills()

    @property
    def stats(self) -> StoreStats:
        """Snapshot of runtime statistics."""
        s = self._counters.snapshot()
        e = self._engine
        s.put_message_times_total += e.put_times_total
        s.put_message_size_total += e.put_size_total
        s.put_latency_max_ms = max(s.put_latency_max_ms, e.put_latency_max_ms)
        s.put_distribution = e.put_distribution()
        s.commitlog_min_offset = self.commitlog.min_offset()
        s.commitlog_max_offset = self.commitlog.max_offset()
        s.commitlog_flushed_offset = self.commitlog.flushed_where
        # ReputMessageService.behind(): the bytes appended but not yet in ConsumeQueue/index. rmqd dispatches
        # each record inside the append, so this is only ever the record being written right now.
        dispatched = e.dispatched_where
        s.dispatch_behind_bytes = max(0, s.commitlog_max_offset - dispatched) if dispatched >= 0 else 0
        s.consume_queue_disk_ratio = self._disk_ratio(self.config.consume_queue_dir)
        return s
