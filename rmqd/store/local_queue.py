"""LocalQueue: the public read view of one local consume queue (topic, queueId) over the CommitLog.

The local store hands these out (``MessageStore.local_queue``) to the layers above it (compaction, tier)
and to admin, so nobody reaches into the consume-queue table. A view reads; it never writes or
deletes (the put engine, recovery and retention do, under the store's rules).
"""
from __future__ import annotations

import time
from typing import TYPE_CHECKING, Optional, Sequence

from rmqd.cython_ext import store_get as _sg
from rmqd.store.consume_queue import BLANK_ENTRY, CQ_UNIT, ConsumeQueue
from rmqd.store.results import (GetMessageResult, GetMessageStatus, LazyProps, StoreCounters, out_of_range,
                                transfer_limits)

if TYPE_CHECKING:
    from rmqd.cython_ext.store_get import GetMessageStatus as Status
    from rmqd.store.api import MessageFilter
    from rmqd.store.commitlog import CommitLog
    from rmqd.store.config import StoreConfig

S = GetMessageStatus


class LocalQueue:
    """Read view of a :class:`~rmqd.store.consume_queue.ConsumeQueue` and the records it points to."""

    __slots__ = ("topic", "queue_id", "file_size", "_cq", "_cl", "_config", "_counters", "_hot_limit")

    def __init__(self, cq: ConsumeQueue, commitlog: "CommitLog", config: "StoreConfig", counters: StoreCounters,
                 hot_limit: int) -> None:
        self.topic: str = cq.topic
        self.queue_id: int = cq.queue_id
        self.file_size: int = cq.file_size          # bytes per consume-queue file (``file_size // 20`` entries)
        self._cq = cq
        self._cl = commitlog
        self._config = config
        self._counters = counters
        self._hot_limit = hot_limit

    # ---- bounds and entries
    @property
    def min_offset(self) -> int:
        return self._cq.min_offset

    @property
    def max_offset(self) -> int:
        return self._cq.max_offset

    def get_entry(self, offset: int) -> Optional[tuple[int, int, int]]:
        """``(commitlog offset, size, tags code)`` of entry ``offset``, None if not present."""
        return self._cq.get_entry(offset)

    def iter_from(self, offset: int, max_bytes: int) -> Optional[list[tuple[int, int, int]]]:
        """Entries from ``offset`` to the end of its file (at most ``max_bytes`` of them), None when
        that file is gone."""
        return self._cq.iter_from(offset, max_bytes)

    def roll_next_file(self, offset: int) -> int:
        return self._cq.roll_next_file(offset)

    def has(self, offset: int) -> bool:
        """The entry exists and its record is still in the local CommitLog (or it is a blank)."""
        if offset < self._cq.min_offset or offset >= self._cq.max_offset:
            return False
        e = self._cq.get_entry(offset)
        return e is not None and (e[1] == BLANK_ENTRY[1] or e[0] >= self._cl.min_offset())

    def is_cold(self, offset: int) -> bool:
        """Java's ``checkInDiskByConsumeOffset``: the message is further behind the CommitLog head than
        ``access_message_in_memory_max_ratio`` % of RAM. False when the entry does not exist."""
        e = self._cq.get_entry(offset)
        if e is None:
            return False
        return self._cl.max_offset() - e[0] > self._hot_limit

    # ---- times
    def store_time(self, offset: int) -> int:
        """Store time of the message at ``offset``, -1 if it is not here."""
        cq = self._cq
        e = cq.get_entry(offset) if offset >= cq.min_offset else None
        if e is None or e[1] == BLANK_ENTRY[1]:
            return -1
        return self._cl.pickup_store_timestamp(e[0], e[1])

    def earliest_time(self) -> int:
        return self.store_time(self._cq.min_offset)

    def offset_by_time(self, timestamp: int) -> int:
        """4.9 SEARCH_OFFSET_BY_TIMESTAMP over the local entries."""
        return self._cq.offset_by_time(timestamp, self._cl.pickup_store_timestamp)

    # ---- reads
    def get_messages(self, offset: int, max_nums: int, max_total_bytes: Optional[int] = None,
                     message_filter: Optional["MessageFilter"] = None) -> GetMessageResult:
        """The local answer for a pull from ``offset`` (status table of README §3.3); buffers are
        zero-copy views of the CommitLog."""
        cq = self._cq
        mn, mx = cq.min_offset, cq.max_offset
        outside = out_of_range(offset, mn, mx)
        if outside is not None:
            return outside
        limit_count, limit_bytes = transfer_limits(self._config, max_nums, max_total_bytes)
        entries = cq.iter_from(offset, max(16000, max_nums * CQ_UNIT))
        if entries is None:
            return GetMessageResult(S.OFFSET_FOUND_NULL, cq.roll_next_file(offset), mn, mx)
        res = GetMessageResult(S.NO_MATCHED_MESSAGE, offset, mn, mx)
        cl = self._cl
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
            if message_filter is not None and not message_filter.is_matched_by_commit_log(view, LazyProps(view)):
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
            self._counters.found(len(res.buffers))
        return res

    def get_messages_resident(self, offset: int, max_nums: int,
                              tag_codes: Optional[Sequence[int]]) -> Optional[GetMessageResult]:
        """The event-loop fast path (:func:`rmqd.cython_ext.store_get.read_resident`): FOUND or
        NO_MATCHED_MESSAGE with the records in one ``bytes``, or None when a page may fault."""
        t0 = time.perf_counter()
        count_limit, bytes_limit = transfer_limits(self._config, max_nums, None)
        got = _sg.read_resident(self._cq, self._cl, offset, count_limit, bytes_limit, tag_codes, self._hot_limit)
        if got is None:
            return None
        status, next_begin, count, body = got
        cq = self._cq
        res = GetMessageResult(status, next_begin,
                               cq.min_offset, cq.max_offset)
        if count:
            res.buffers = [body]
            res.buffer_total_size = len(body)
            res.message_count_hint = count
            self._counters.found(count)
        self._counters.get_done((time.perf_counter() - t0) * 1000)
        return res

    def read_resident(self, offset: int, max_count: int,
                      max_bytes: int) -> Optional[tuple["Status", int, int, bytes]]:
        """``(status, next offset, count, records)``: up to ``max_count`` whole records from ``offset``
        copied in one C call, or None when they are not all in memory (the tier's copier)."""
        return _sg.read_resident(self._cq, self._cl, offset, max_count, max_bytes, None, 1 << 62, max_count * CQ_UNIT)
