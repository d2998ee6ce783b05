"""What the store answers: statuses, GetMessageResult, QueryResult, StoreStats, and the one loop that turns
records read from any layer into a GetMessageResult (:func:`collect_records`)."""
from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Iterable, Optional, Union

from rmqd.cython_ext import message_codec as _codec
from rmqd.cython_ext.store_get import GetMessageStatus  # noqa: F401 (Java's statuses: IntEnums from the pxd)
from rmqd.cython_ext.store_put import PutMessageStatus  # noqa: F401
from rmqd.store.message import decode_properties

if TYPE_CHECKING:
    from rmqd.cython_ext.store_put import PutEngine
    from rmqd.store.api import MessageFilter
    from rmqd.store.commitlog import CommitLog
    from rmqd.store.config import StoreConfig

# One buffer of a read: a zero-copy view of the CommitLog, or a copy (several records back to back when
# ``message_count_hint`` says so).
RecordBuffer = Union[bytes, memoryview]


@dataclass
class GetMessageResult:
    status: GetMessageStatus
    next_begin_offset: int
    min_offset: int
    max_offset: int
    buffers: list[RecordBuffer] = field(default_factory=list)
    queue_offsets: list[int] = field(default_factory=list)
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


def out_of_range(offset: int, min_offset: int, max_offset: int) -> Optional[GetMessageResult]:
    """A queue read's answer when ``offset`` is not inside [min, max) (Java ``DefaultMessageStore.getMessage``'s
    status table: no message, too small, overflow by one or badly), None when it is."""
    S = GetMessageStatus
    if max_offset == 0:
        return GetMessageResult(S.NO_MESSAGE_IN_QUEUE, 0, min_offset, max_offset)
    if offset < min_offset:
        return GetMessageResult(S.OFFSET_TOO_SMALL, min_offset, min_offset, max_offset)
    if offset == max_offset:
        return GetMessageResult(S.OFFSET_OVERFLOW_ONE, offset, min_offset, max_offset)
    if offset > max_offset:
        return GetMessageResult(S.OFFSET_OVERFLOW_BADLY, max_offset, min_offset, max_offset)
    return None


@dataclass
class QueryResult:
    messages: list[bytes]
    index_last_update_timestamp: int
    index_last_update_phyoffset: int


@dataclass
class StoreStats:
    put_message_times_total: int = 0
    put_message_size_total: int = 0
    put_message_failed_times: int = 0
    put_latency_max_ms: float = 0.0
    put_distribution: list[int] = field(default_factory=lambda: [0] * 13)   # PutEngine.put_distribution()
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


class StoreCounters:
    """The local store's get/put counters behind :class:`StoreStats` (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._stats = StoreStats()

    def get_done(self, elapsed_ms: float) -> None:
        """One read answered (by any layer) in ``elapsed_ms``."""
        with self._lock:
            st = self._stats
            st.get_message_times_total += 1
            if elapsed_ms > st.get_latency_max_ms:
                st.get_latency_max_ms = elapsed_ms

    def found(self, messages: int) -> None:
        """A local read returned ``messages`` messages."""
        with self._lock:
            self._stats.get_message_found_total += 1
            self._stats.get_message_transferred_total += messages

    def received(self, records: int, nbytes: int) -> None:
        """A slave appended ``records`` whole records (``nbytes``) received from its master."""
        with self._lock:
            self._stats.put_message_times_total += records
            self._stats.put_message_size_total += nbytes

    def set(self, **values: float) -> None:
        with self._lock:
            for k, v in values.items():
                setattr(self._stats, k, v)

    def snapshot(self, engine: "PutEngine", commitlog: "CommitLog", consume_queue_disk_ratio: float) -> StoreStats:
        """The counters, with the put engine's and the CommitLog's figures."""
        with self._lock:
            s = StoreStats(**self._stats.__dict__)
        s.put_message_times_total += engine.put_times_total
        s.put_message_size_total += engine.put_size_total
        s.put_message_failed_times += engine.put_failed_total
        s.put_latency_max_ms = max(s.put_latency_max_ms, engine.put_latency_max_ms)
        s.put_distribution = engine.put_distribution()
        s.commitlog_min_offset = commitlog.min_offset()
        s.commitlog_max_offset = commitlog.max_offset()
        s.commitlog_flushed_offset = commitlog.flushed_where
        # ReputMessageService.behind(): the bytes appended but not yet in ConsumeQueue/index. rmqd dispatches
        # each record inside the append (a slave: whole records), so this is at most one record.
        dispatched = engine.dispatched_where
        s.dispatch_behind_bytes = max(0, s.commitlog_max_offset - dispatched) if dispatched >= 0 else 0
        s.consume_queue_disk_ratio = consume_queue_disk_ratio
        return s


class LazyProps:
    """Callable returning the properties dict of a record, decoded on first call (what a message
    filter's ``is_matched_by_commit_log`` gets)."""

    __slots__ = ("_view", "_props")

    def __init__(self, view: memoryview) -> None:
        self._view = view
        self._props: Optional[dict[str, str]] = None

    def __call__(self) -> dict[str, str]:
        if self._props is None:
            f = _codec.decode_record(self._view, 0)
            self._props = decode_properties(f[17].decode("utf-8", errors="replace"))
        return self._props


def transfer_limits(config: "StoreConfig", max_nums: int, max_total_bytes: Optional[int]) -> tuple[int, int]:
    """``(messages, bytes)`` one read may return: the caller's asks capped by Java's
    maxTransferCount/BytesOnMessageInMemory."""
    limit = config.max_transfer_bytes_on_message_in_memory
    if max_total_bytes is not None:
        limit = min(limit, max_total_bytes)
    return min(max_nums, config.max_transfer_count_on_message_in_memory), limit


def collect_records(res: GetMessageResult, got: Iterable[tuple[int, bytes, int]],
                    message_filter: Optional["MessageFilter"]) -> GetMessageResult:
    """Fill ``res`` from records ``(queue offset, record, tags code)`` a layer read (compaction log, tier):
    each passes the filter by tags code, then by the record itself; empty records (blank entries) are
    skipped. ``next_begin_offset`` follows the last record read, ``status`` becomes FOUND when any
    passed. The caller decides what an empty read means."""
    total = 0
    for qoff, rec, tags in got:
        res.next_begin_offset = qoff + 1
        if not rec:
            continue
        if message_filter is not None:
            if not message_filter.is_matched_by_consume_queue(tags):
                continue
            view = memoryview(rec)
            if not message_filter.is_matched_by_commit_log(view, LazyProps(view)):
                continue
        res.buffers.append(rec)
        res.queue_offsets.append(qoff)
        total += len(rec)
    if res.buffers:
        res.status = GetMessageStatus.FOUND
    res.buffer_total_size = total
    return res
