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

import enum
import fcntl
import logging
import os
import struct
import threading
import time
from dataclasses import dataclass, field
from typing import Callable, Container, Optional, Sequence

from rmqd import progress
from rmqd.cython_ext import message_codec as _codec
from rmqd.fileutil import disk_partition_space_used_percent
from rmqd.store.checkpoint import StoreCheckpoint
from rmqd.store.commitlog import PAGE, CommitLog
from rmqd.store.consume_queue import BLANK_ENTRY, CQ_UNIT, ConsumeQueue
from rmqd.store.cq_check import repair_consume_queues
from rmqd.store.index_file import IndexService
from rmqd.store.page_warmer import PageWarmer
from rmqd.store.message import (BORNHOST_V6_FLAG, MessageToStore, decode_properties, find_property,
                                pack_host, tags_code_of)
from rmqd.cython_ext import store_get as _sg
from rmqd.cython_ext import store_put as _sp
from rmqd.cython_ext.store_put import DispatchRequest, PutMessageResult  # noqa: F401 (public API)

log = logging.getLogger(__name__)

SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX"
MAX_MANUAL_DELETE_FILE_TIMES = 20    # retention runs that honour one DELETE_EXPIRED_COMMITLOG (Java's)
DEFAULT_DELAY_LEVELS = "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"
_UNIT_MS = {"s": 1000, "m": 60000, "h": 3600000, "d": 86400000}
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


def parse_delay_levels(spec: str) -> list[int]:
    """``"1s 5s ... 2h"`` → list of delays in ms (level i = index i-1)."""
    return [int(tok[:-1]) * _UNIT_MS[tok[-1]] for tok in spec.split()]


def _physical_memory() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        return 8 << 30


def _now_ms() -> int:
    return int(time.time() * 1000)


#: The Java 4.9.8 broker's disk thresholds (percent), the defaults of its system properties rocketmq.broker.<name>.
JAVA_DISK_RATIO_DEFAULTS = {"diskSpaceWarningLevelRatio": 90, "diskSpaceCleanForciblyRatio": 85}


def disk_ratio_variable(name: str) -> str:
    """The environment variable rmqd reads for Java's system property ``rocketmq.broker.<name>``."""
    return "ROCKETMQ_BROKER_" + name.upper()


def disk_ratio_property(name: str) -> float:
    """A disk threshold of :data:`JAVA_DISK_RATIO_DEFAULTS` in percent, from the environment.

    The Java 4.9.8 broker reads them from JVM system properties (``-Drocketmq.broker.diskSpaceWarningLevelRatio
    =0.95``); rmqd reads the same names from the environment (:func:`disk_ratio_variable`), like
    ``ROCKETMQ_BROKER_REBALANCE_LOCKMAXLIVETIME``. The value is a fraction as Java writes it (``0.95``) or a
    percent (``95``); anything else is logged and Java's default used."""
    default = JAVA_DISK_RATIO_DEFAULTS[name]
    var = disk_ratio_variable(name)
    raw = os.environ.get(var, "").strip()
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        value = float("nan")
    percent = value * 100 if value <= 1 else value
    if not 0 < percent <= 100:
        log.error("%s=%r is neither a fraction nor a percent of the disk: using %g %%", var, raw, default)
        return default
    return percent


@dataclass
class StoreConfig:
    store_root_dir: str
    mapped_file_size_commitlog: int = 1 << 30
    mapped_file_size_consume_queue: int = 300000 * CQ_UNIT
    flush_disk_type: str = "ASYNC_FLUSH"
    flush_interval_commitlog_ms: int = 500
    flush_commitlog_thorough_interval_ms: int = 10000
    flush_least_pages: int = 4
    flush_interval_consume_queue_ms: int = 1000
    sync_flush_timeout_ms: int = 5000
    max_message_size: int = 4 * 1024 * 1024
    file_reserved_time_hours: float = 72
    delete_when: str = "04"
    disk_max_used_space_ratio: int = 75
    # percents; Java's defaults unless ROCKETMQ_BROKER_DISKSPACE... is set (see disk_ratio_property)
    disk_space_clean_forcibly_ratio: float = field(
        default_factory=lambda: disk_ratio_property("diskSpaceCleanForciblyRatio"))
    disk_space_warning_level_ratio: float = field(
        default_factory=lambda: disk_ratio_property("diskSpaceWarningLevelRatio"))
    clean_resource_interval_ms: int = 10000
    delete_files_batch_max: int = 10
    max_hash_slot_num: int = 5_000_000
    max_index_num: int = 20_000_000
    message_index_enable: bool = True
    check_crc_on_recover: bool = True
    max_transfer_bytes_on_message_in_memory: int = 256 * 1024
    max_transfer_count_on_message_in_memory: int = 32
    message_delay_level: str = DEFAULT_DELAY_LEVELS
    clock: Callable[[], int] = _now_ms
    disk_usage: Optional[Callable[[str], float]] = None   # path -> used percent (0..100)
    warm_mapped_pages: bool = True     # pre-fault pages ahead of the writers (PageWarmer)
    access_message_in_memory_max_ratio: int = 40   # % of RAM behind the CommitLog head that counts as hot

    @property
    def commitlog_dir(self) -> str:
        return os.path.join(self.store_root_dir, "commitlog")

    @property
    def consume_queue_dir(self) -> str:
        return os.path.join(self.store_root_dir, "consumequeue")

    @property
    def compaction_dir(self) -> str:
        """Reserved for per-(topic, queue) compaction logs (5.x compaction topics)."""
        return os.path.join(self.store_root_dir, "compaction")

    @property
    def index_dir(self) -> str:
        return os.path.join(self.store_root_dir, "index")

    @property
    def config_dir(self) -> str:
        return os.path.join(self.store_root_dir, "config")


class PutMessageStatus(enum.Enum):
    PUT_OK = 0
    FLUSH_DISK_TIMEOUT = 1
    FLUSH_SLAVE_TIMEOUT = 2
    SLAVE_NOT_AVAILABLE = 3
    SERVICE_NOT_AVAILABLE = 4
    CREATE_MAPEDFILE_FAILED = 5
    MESSAGE_ILLEGAL = 6
    PROPERTIES_SIZE_EXCEEDED = 7
    OS_PAGECACHE_BUSY = 8
    UNKNOWN_ERROR = 9


_sp.init_status(PutMessageStatus)


class GetMessageStatus(enum.Enum):
    FOUND = 0
    NO_MATCHED_MESSAGE = 1
    MESSAGE_WAS_REMOVING = 2
    OFFSET_FOUND_NULL = 3
    OFFSET_OVERFLOW_BADLY = 4
    OFFSET_OVERFLOW_ONE = 5
    OFFSET_TOO_SMALL = 6
    NO_MATCHED_LOGIC_QUEUE = 7
    NO_MESSAGE_IN_QUEUE = 8


@dataclass
class GetMessageResult:
    status: GetMessageStatus
    next_begin_offset: int
    min_offset: int
    max_offset: int
    buffers: list = field(default_factory=list)
    queue_offsets: list = field(default_factory=list)
    buffer_total_size: int = 0
    message_count_hint: int = -1      # messages in ``buffers`` when one buffer holds several

    @property
    def message_count(self) -> int:
        return self.message_count_hint if self.message_count_hint >= 0 else len(self.buffers)

    def body(self) -> bytes:
        """Concatenated records, i.e. a PULL response body."""
        return b"".join(self.buffers)

    def release(self) -> None:
        """Release the zero-copy views early (optional; GC does it otherwise)."""
        for b in self.buffers:
            if isinstance(b, memoryview):
                b.release()
        self.buffers = []


@dataclass
class QueryResult:
    messages: list
    index_last_update_timestamp: int
    index_last_update_phyoffset: int


@dataclass
class StoreStats:
    put_message_times_total: int = 0
    put_message_size_total: int = 0
    put_message_failed_times: int = 0
    put_latency_max_ms: float = 0.0
    put_distribution: list = field(default_factory=lambda: [0] * 13)   # PutEngine.put_distribution()
    get_latency_max_ms: float = 0.0
    get_message_times_total: int = 0
    get_message_found_total: int = 0
    get_message_transferred_total: int = 0
    dispatch_behind_bytes: int = 0
    commitlog_disk_ratio: float = 0.0
    consume_queue_disk_ratio: float = 0.0
    commitlog_min_offset: int = 0
    commitlog_max_offset: int = 0
    commitlog_flushed_offset: int = 0
    start_time_ms: int = 0


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
        self.config = config
        self._clock = config.clock
        seg = config.mapped_file_size_commitlog
        self.max_record_size = min(seg - 8, config.max_message_size + 64 * 1024 + 512)
        self.commitlog = CommitLog(config.commitlog_dir, seg, self.max_record_size)
        self.index = IndexService(config.index_dir, config.max_hash_slot_num, config.max_index_num,
                                  self._clock)
        self._cqs: dict[tuple[str, int], ConsumeQueue] = {}
        self._cq_lock = threading.Lock()
        self._put_lock = threading.Lock()
        self._listeners: list[Callable[[DispatchRequest], None]] = []
        self._delay_levels = parse_delay_levels(config.message_delay_level)
        self._engine = _sp.PutEngine(self, self.commitlog, self.index, self._put_lock,
                                     None if config.clock is _now_ms else config.clock,
                                     self._tags_code, pack_host, self._fail, self._listeners,
                                     config.max_message_size, self.max_record_size)
        self._shutdown_done = False
        self._unreadable_paths: set[str] = set()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._group_commit: Optional[_GroupCommit] = None
        self._warmer: Optional[PageWarmer] = None
        self._stats = StoreStats()
        self._stats_lock = threading.Lock()
        self._checkpoint: Optional[StoreCheckpoint] = None
        self._lock_fd = -1
        self._last_thorough_flush = 0.0
        self.hot_data_limit = int(_physical_memory() * config.access_message_in_memory_max_ratio / 100)
        self._manual_delete_times = 0
        # The compaction store (rmqd.store.compaction), set by rmqd.store.layers.build_store: reads
        # of COMPACTION topics go there, like Java's DefaultMessageStore -> CompactionStore.
        self.compaction = None
        # The tiered store (rmqd.store.tier), set by build_store when messageStorePlugIn asks for
        # it: it copies queues to a second tier, and ``tier.reads`` decides which reads go there.
        self.tier = None

    @property
    def clock(self) -> Callable[[], int]:
        """Milliseconds clock for store timestamps (tests may replace it at run time)."""
        return self._clock

    @clock.setter
    def clock(self, fn: Callable[[], int]) -> None:
        self._clock = fn
        self._engine.clock = None if fn is _now_ms else fn

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
                 self.commitlog.min_offset(), self.commitlog.max_offset(), len(self._cqs))
        fd = os.open(self.abort_file, os.O_WRONLY | os.O_CREAT, 0o644)
        os.fsync(fd)
        os.close(fd)
        self._stats.start_time_ms = self.clock()
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
        if self.compaction is not None:
            self.compaction.start()
        if self.tier is not None:
            self.tier.start()

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
        if self.compaction is not None:
            self.compaction.shutdown()
        if self.tier is not None:
            self.tier.shutdown()
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
        with self._cq_lock:
            for cq in self._cqs.values():
                cq.close()
        self.index.close()
        self._checkpoint.close()
        os.unlink(self.abort_file)
        os.close(self._lock_fd)
        self._lock_fd = -1

    # ------------------------------------------------------------------ recovery
    def _load_consume_queues(self) -> None:
        root = self.config.consume_queue_dir
        topics = [t for t in os.listdir(root) if os.path.isdir(os.path.join(root, t))]
        with progress.phase("loading consume queues", len(topics), "topics") as p:
            for topic in topics:
                tdir = os.path.join(root, topic)
                for q in os.listdir(tdir):
                    if not q.lstrip("-").isdigit():
                        continue
                    cq = ConsumeQueue(root, topic, int(q), self.config.mapped_file_size_consume_queue)
                    cq.load()
                    self._cqs[(topic, int(q))] = cq
                p.advance()

    def _recover(self, abnormal: bool) -> None:
        cl = self.commitlog
        ck = self._checkpoint
        cl.mfq.load()
        self._load_consume_queues()
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
        for cq in self._cqs.values():
            cq.truncate_dirty(valid_end)
        dispatch_from = max(dispatch_from, cl.min_offset())
        redo = repair_consume_queues(list(self._cqs.values()), cl, valid_end, self.max_record_size)
        if redo is not None and max(redo, cl.min_offset()) < dispatch_from:   # rebuild damaged CQs
            dispatch_from = max(redo, cl.min_offset())
            cl.recover(dispatch_from, True)
        self._redispatch(dispatch_from, valid_end)
        cl_min = cl.min_offset()
        for cq in self._cqs.values():
            cq.correct_min_offset(cl_min)
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
        with self._stats_lock:
            self._stats.put_message_failed_times += 1
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
    def _find_cq(self, topic: str, queue_id: int, create: bool = False) -> Optional[ConsumeQueue]:
        cq = self._cqs.get((topic, queue_id))
        if cq is None and create:
            with self._cq_lock:
                cq = self._cqs.get((topic, queue_id))
                if cq is None:
                    cq = ConsumeQueue(self.config.consume_queue_dir, topic, queue_id,
                                      self.config.mapped_file_size_consume_queue)
                    self._cqs = {**self._cqs, (topic, queue_id): cq}
        return cq

    def _compacted(self, topic: str):
        c = self.compaction
        return c if c is not None and topic in c.topics else None

    def get_max_offset(self, topic: str, queue_id: int) -> int:
        c = self._compacted(topic)
        if c is not None:
            return c.max_offset(topic, queue_id)
        cq = self._find_cq(topic, queue_id)
        return cq.max_offset if cq else 0

    def get_min_offset(self, topic: str, queue_id: int) -> int:
        c = self._compacted(topic)
        if c is not None:
            return c.min_offset(topic, queue_id)
        cq = self._find_cq(topic, queue_id)
        local = cq.min_offset if cq else 0
        return local if self.tier is None else self.tier.reads.min_offset(topic, queue_id, local)

    def _local_max_offset(self, topic: str, queue_id: int) -> int:
        cq = self._find_cq(topic, queue_id)
        return cq.max_offset if cq else 0

    def _local_min_offset(self, topic: str, queue_id: int) -> int:
        cq = self._find_cq(topic, queue_id)
        return cq.min_offset if cq else 0

    def check_in_disk_by_consume_offset(self, topic: str, queue_id: int, consume_offset: int) -> bool:
        """Java's ``checkInDiskByConsumeOffset``: is the message at ``consume_offset`` further behind
        the CommitLog head than ``access_message_in_memory_max_ratio`` % of RAM ("cold")?
        False when the queue or the entry does not exist."""
        cq = self._find_cq(topic, queue_id)
        e = cq.get_entry(consume_offset) if cq is not None else None
        if e is None:
            return False
        return self.commitlog.max_offset() - e[0] > self.hot_data_limit

    def _store_time_of(self, phys: int, size: int) -> int:
        v = self.commitlog.get(phys, min(size, 64))
        if v is None or len(v) < 64:
            return -1
        sys_flag = _I32.unpack_from(v, 36)[0]
        return _I64.unpack_from(v, 48 + (20 if sys_flag & BORNHOST_V6_FLAG else 8))[0]

    def get_message_store_timestamp(self, topic: str, queue_id: int, queue_offset: int) -> int:
        """Store time of the message at ``queue_offset`` or -1."""
        c = self._compacted(topic)
        if c is not None:
            return c.store_time(topic, queue_id, queue_offset)
        return self._local_store_time(topic, queue_id, queue_offset)

    def _local_store_time(self, topic: str, queue_id: int, queue_offset: int) -> int:
        cq = self._find_cq(topic, queue_id)
        e = cq.get_entry(queue_offset) if cq and queue_offset >= cq.min_offset else None
        if e is None or e[1] == BLANK_ENTRY[1]:
            return -1
        return self._store_time_of(e[0], e[1])

    def get_earliest_message_time(self, topic: str, queue_id: int) -> int:
        c = self._compacted(topic)
        if c is not None:
            return c.earliest_time(topic, queue_id)
        cq = self._find_cq(topic, queue_id)
        local = -1 if cq is None else self._local_store_time(topic, queue_id, cq.min_offset)
        return local if self.tier is None else self.tier.reads.earliest_time(topic, queue_id, local)

    def get_offset_by_time(self, topic: str, queue_id: int, timestamp: int) -> int:
        c = self._compacted(topic)
        if c is not None:
            return c.offset_by_time(topic, queue_id, timestamp)
        if self.tier is not None:
            return self.tier.reads.offset_by_time(topic, queue_id, timestamp,
                                                  lambda ts: self._local_offset_by_time(topic, queue_id, ts))
        return self._local_offset_by_time(topic, queue_id, timestamp)

    def _local_offset_by_time(self, topic: str, queue_id: int, timestamp: int) -> int:
        cq = self._find_cq(topic, queue_id)
        if cq is None:
            return 0
        return cq.offset_by_time(timestamp, self._store_time_of)

    def delete_topic(self, topic: str) -> int:
        """Drop every consume queue of ``topic``; returns how many were removed."""
        with self._put_lock, self._cq_lock:
            gone = [k for k in self._cqs if k[0] == topic]
            new = dict(self._cqs)
            for k in gone:
                new.pop(k).destroy()
            self._cqs = new
            self._engine.drop_topic(topic)
        tdir = os.path.join(self.config.consume_queue_dir, topic)
        if os.path.isdir(tdir):
            import shutil          # imports bz2/lzma: only when needed
            shutil.rmtree(tdir)
        if self.compaction is not None and topic in self.compaction.topics:
            self.compaction.delete_topic(topic)
        if self.tier is not None and self.tier.started:
            self.tier.delete_topic(topic)
        return len(gone)

    def clean_expired_consume_queues(self) -> list[tuple[str, int]]:
        """Java's ``cleanExpiredConsumerQueue`` (mqadmin cleanExpiredCQ): drop every consume queue whose last
        message ends below the CommitLog's min offset (retention removed all of its messages); its queue
        offsets restart at 0, as Java's do. SCHEDULE_TOPIC_XXXX is kept as in Java, and so are queues whose
        records another layer still serves (compaction topics, the tiered store's). Returns what went."""
        cl_min = self.commitlog_min_offset()
        dropped: list[tuple[str, int]] = []
        with self._put_lock, self._cq_lock:
            new = dict(self._cqs)
            for key, cq in self._cqs.items():
                topic, qid = key
                if topic == SCHEDULE_TOPIC or self._compacted(topic) is not None:
                    continue
                n = cq.max_offset
                last = cq.get_entry(n - 1) if n > 0 else None
                if last is None or last[1] == BLANK_ENTRY[1]:
                    continue                 # Java: "maybe ConsumeQueue was created just now"
                if last[0] + last[1] >= cl_min:
                    continue
                if self.tier is not None and self.tier.started and self.tier.reads.min_offset(topic, qid, n) < n:
                    continue                 # the tiered store still serves its messages
                log.info("cleanExpiredConsumerQueue: %s %d consume queue destroyed, minCommitLogOffset: %d "
                         "maxCLOffsetInConsumeQueue: %d", topic, qid, cl_min, last[0] + last[1])
                new.pop(key).destroy()
                self._engine.states.pop(key, None)
                dropped.append(key)
            self._cqs = new
        for topic in {t for t, _q in dropped}:
            tdir = os.path.join(self.config.consume_queue_dir, topic)
            if os.path.isdir(tdir) and not os.listdir(tdir):
                os.rmdir(tdir)
                log.info("cleanExpiredConsumerQueue: %s, topic destroyed", topic)
        return dropped

    def topics(self) -> set[str]:
        return {k[0] for k in self._cqs}

    def topic_put_totals(self) -> dict[str, tuple[int, int]]:
        """Messages and record bytes stored per topic since start (counted in the put engine)."""
        return {topic: (c.nums, c.size) for topic, c in list(self._engine.topic_counters.items())}

    # ------------------------------------------------------------------ get
    def get_messages(self, topic: str, queue_id: int, offset: int, max_nums: int,
                     max_total_bytes: Optional[int] = None, message_filter=None) -> GetMessageResult:
        """Read up to ``max_nums`` messages from logical ``offset`` (status table of README §3.3)."""
        t0 = time.perf_counter()
        try:
            c = self._compacted(topic)
            if c is not None:
                cfg = self.config
                limit = cfg.max_transfer_bytes_on_message_in_memory
                if max_total_bytes is not None:
                    limit = min(limit, max_total_bytes)
                return c.get_messages(topic, queue_id, offset,
                                      min(max_nums, cfg.max_transfer_count_on_message_in_memory), limit,
                                      message_filter)
            if self.tier is not None:
                cfg = self.config
                limit = cfg.max_transfer_bytes_on_message_in_memory
                if max_total_bytes is not None:
                    limit = min(limit, max_total_bytes)
                return self.tier.reads.get_messages(
                    topic, queue_id, offset, min(max_nums, cfg.max_transfer_count_on_message_in_memory), limit,
                    message_filter,
                    lambda: self._get_messages(topic, queue_id, offset, max_nums, max_total_bytes, message_filter))
            return self._get_messages(topic, queue_id, offset, max_nums, max_total_bytes, message_filter)
        finally:
            elapsed = (time.perf_counter() - t0) * 1000
            with self._stats_lock:
                self._stats.get_message_times_total += 1
                if elapsed > self._stats.get_latency_max_ms:
                    self._stats.get_latency_max_ms = elapsed

    def _get_local(self, topic: str, queue_id: int, offset: int, max_nums: int,
                   max_total_bytes: Optional[int], message_filter) -> GetMessageResult:
        """The local consume queue's answer, whatever the topic (the compaction store's tail)."""
        return self._get_messages(topic, queue_id, offset, max_nums, max_total_bytes, message_filter)

    def _get_messages(self, topic: str, queue_id: int, offset: int, max_nums: int,
                      max_total_bytes: Optional[int], message_filter) -> GetMessageResult:
        S = GetMessageStatus
        cq = self._find_cq(topic, queue_id)
        if cq is None:
            return GetMessageResult(S.NO_MATCHED_LOGIC_QUEUE, 0, 0, 0)
        mn, mx = cq.min_offset, cq.max_offset
        if mx == 0:
            return GetMessageResult(S.NO_MESSAGE_IN_QUEUE, 0, mn, mx)
        if offset < mn:
            return GetMessageResult(S.OFFSET_TOO_SMALL, mn, mn, mx)
        if offset == mx:
            return GetMessageResult(S.OFFSET_OVERFLOW_ONE, offset, mn, mx)
        if offset > mx:
            return GetMessageResult(S.OFFSET_OVERFLOW_BADLY, mx, mn, mx)
        cfg = self.config
        limit_bytes = cfg.max_transfer_bytes_on_message_in_memory
        if max_total_bytes is not None:
            limit_bytes = min(limit_bytes, max_total_bytes)
        limit_count = min(max_nums, cfg.max_transfer_count_on_message_in_memory)
        entries = cq.iter_from(offset, max(16000, max_nums * CQ_UNIT))
        if entries is None:
            return GetMessageResult(S.OFFSET_FOUND_NULL, cq.roll_next_file(offset), mn, mx)
        res = GetMessageResult(S.NO_MATCHED_MESSAGE, offset, mn, mx)
        cl = self.commitlog
        next_phy_file_start = -1
        scanned = 0
        total = 0
        for phys, size, tags in entries:
            if res.buffers and (len(res.buffers) >= limit_count or total + size > limit_bytes):
                break
            scanned += 1
            if phys < next_phy_file_start:
                continue
            if message_filter is not None and not message_filter.is_matched_by_consume_queue(tags):
                if not res.buffers:
                    res.status = S.NO_MATCHED_MESSAGE
                continue
            view = cl.get(phys, size) if size != BLANK_ENTRY[1] else None
            if view is None:
                if not res.buffers:
                    res.status = S.MESSAGE_WAS_REMOVING
                next_phy_file_start = cl.roll_next_file(phys)
                continue
            if message_filter is not None and not message_filter.is_matched_by_commit_log(
                    view, _LazyProps(view)):
                view.release()
                if not res.buffers:
                    res.status = S.NO_MATCHED_MESSAGE
                continue
            res.buffers.append(view)
            res.queue_offsets.append(offset + scanned - 1)
            total += size
            res.status = S.FOUND
            next_phy_file_start = -1
        res.next_begin_offset = offset + scanned
        res.buffer_total_size = total
        if res.buffers:
            with self._stats_lock:
                self._stats.get_message_found_total += 1
                self._stats.get_message_transferred_total += len(res.buffers)
        return res

    def get_messages_resident(self, topic: str, queue_id: int, offset: int, max_nums: int,
                              tag_codes: Optional[Sequence[int]]) -> Optional[GetMessageResult]:
        """The event-loop fast path of :meth:`get_messages`: FOUND or NO_MATCHED_MESSAGE for a pull
        whose ConsumeQueue and CommitLog pages are all resident (no page fault can block the
        caller), with the records in one ``bytes`` (``buffers == [body]``). None when it cannot
        serve the pull; then :meth:`get_messages` must (in a thread that may block).

        ``tag_codes`` None matches every tag; otherwise the tag hash codes to keep. Store layers
        (compaction, tier) that route a queue elsewhere must answer None for it."""
        cq = self._cqs.get((topic, queue_id))
        if cq is None or self._compacted(topic) is not None:
            return None
        tier = self.tier
        if tier is not None and tier.reads.serves_pull(topic, queue_id, offset):
            return None
        cfg = self.config
        t0 = time.perf_counter()
        got = _sg.read_resident(cq, self.commitlog, offset,
                                min(max_nums, cfg.max_transfer_count_on_message_in_memory),
                                cfg.max_transfer_bytes_on_message_in_memory, tag_codes, self.hot_data_limit)
        if got is None:
            return None
        status, next_begin, count, body = got
        res = GetMessageResult(GetMessageStatus.FOUND if status == _sg.FOUND else GetMessageStatus.NO_MATCHED_MESSAGE,
                               next_begin, cq.min_offset, cq.max_offset)
        if tier is not None:
            res.min_offset = tier.reads.min_offset(topic, queue_id, cq.min_offset)
        if count:
            res.buffers = [body]
            res.buffer_total_size = len(body)
            res.message_count_hint = count
        elapsed = (time.perf_counter() - t0) * 1000
        with self._stats_lock:
            st = self._stats
            st.get_message_times_total += 1
            if elapsed > st.get_latency_max_ms:
                st.get_latency_max_ms = elapsed
            if count:
                st.get_message_found_total += 1
                st.get_message_transferred_total += count
        return res

    def read_message(self, phys_offset: int) -> Optional[bytes]:
        """One whole record at ``phys_offset`` (copy), or None if gone or not a valid record."""
        v = self.commitlog.read_record(phys_offset)
        if v is None and self.tier is not None:
            return self.tier.reads.read_message(phys_offset)
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
        if self.tier is not None:
            msgs.extend(self.tier.reads.query(topic, key, max_num, begin_ts, end_ts, msgs))
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
        for cq in list(self._cqs.values()):
            cq.flush()
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
        self._stats.commitlog_disk_ratio = ratio
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
        if self.compaction is not None:
            self.compaction.catch_up_all()    # compaction logs first: retention must not lose them
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
            # the tier first: a file goes only once everything in it is committed there
            tier_limit = self.tier.before_retention() if self.tier is not None else 1 << 62
            for mf in self.commitlog.mfq.files[:-1]:
                if mf.end_offset > tier_limit:
                    log.info("retention: keeping %s and later until the tier has them (tier at %d)",
                             mf.path, tier_limit)
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
        for cq in list(self._cqs.values()):
            cq.delete_expired_files(cl_min)
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
        with self._stats_lock:
            s = StoreStats(**self._stats.__dict__)
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


class _LazyProps:
    """Callable returning the properties dict of a record, decoded on first call."""

    __slots__ = ("_view", "_props")

    def __init__(self, view: memoryview):
        self._view = view
        self._props = None

    def __call__(self) -> dict:
        if self._props is None:
            f = _codec.decode_record(self._view, 0)
            self._props = decode_properties(f[17].decode("utf-8", errors="replace"))
        return self._props
