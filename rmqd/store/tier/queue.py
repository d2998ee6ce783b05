"""One queue in the tier (Java ``FlatMessageFile``): a flat CommitLog plus a ConsumeQueue.

The flat CommitLog holds the queue's records back to back, byte for byte as the local CommitLog
stored them (so offsets, msgIds and CRCs are unchanged; Java rewrites PHYSICALOFFSET and so changes
the offset msgId). The ConsumeQueue holds 20-byte units ``phys i64 | size i32 | tagsCode i64``
with ``phys`` the position in the flat CommitLog, named by byte offset = queueOffset * 20, so unit
``i`` is queue offset ``i``. A blank unit (size 0x7FFFFFFF) mirrors a blank local entry.

``indexed`` lists the queue-offset ranges ``[lo, hi)`` whose keys are in index files: the copier's
(when ``messageIndexEnable``) and those adopted from ``rmqd pipeline index``, which indexes the rest.
"""
from __future__ import annotations

import struct
import time
from typing import TYPE_CHECKING, Iterable, Optional, Sequence

from rmqd.common.constants import CQ_BLANK_SIZE, CQ_STORE_UNIT_SIZE
from rmqd.store.tier.backend import COMMIT_LOG, CONSUME_QUEUE, TierBackend, segment_path
from rmqd.store.tier.config import TierConfig
from rmqd.store.tier.flatfile import FlatFile

if TYPE_CHECKING:
    from _typeshed import ReadableBuffer

    from rmqd.store.tier.metadata import QueueDoc

# (record bytes, None for a blank entry; tagsCode; storeTime; original CommitLog offset): one entry to append
Record = tuple[Optional[bytes], int, int, int]

CQ_UNIT = CQ_STORE_UNIT_SIZE
BLANK_SIZE = CQ_BLANK_SIZE
_UNIT = struct.Struct(">qiq")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
BORNHOST_V6_FLAG = 0x10
PHYS_POS = 28


def record_store_time(rec: "ReadableBuffer") -> int:
    """STORETIMESTAMP of a CommitLog-format record (its first 64+ bytes suffice)."""
    sys_flag: int = _I32.unpack_from(rec, 36)[0]
    ts: int = _I64.unpack_from(rec, 48 + (20 if sys_flag & BORNHOST_V6_FLAG else 8))[0]
    return ts


class TieredQueue:
    def __init__(self, backend: TierBackend, config: TierConfig, topic: str, queue_id: int) -> None:
        self.topic = topic
        self.queue_id = queue_id
        self.key = f"{topic}/{queue_id}"           # its name in the metadata's queue table
        self.config = config
        c, b = config.cluster, config.broker
        self.commitlog = FlatFile(backend, lambda base: segment_path(c, b, topic, queue_id, COMMIT_LOG, base))
        self.consume_queue = FlatFile(backend, lambda base: segment_path(c, b, topic, queue_id, CONSUME_QUEUE, base))
        self.indexed: list[list[int]] = []       # merged [lo, hi) queue-offset ranges covered by index files

    # ---- bounds ---------------------------------------------------------------------------
    @property
    def min_offset(self) -> int:
        m = self.consume_queue.min_offset
        return m // CQ_UNIT if m >= 0 else -1

    @property
    def max_offset(self) -> int:
        """The next queue offset to copy (Java's consume queue commit offset)."""
        m = self.consume_queue.commit_offset
        return m // CQ_UNIT if m >= 0 else -1

    def is_empty(self) -> bool:
        return self.consume_queue.is_empty()

    @property
    def byte_size(self) -> int:
        return self.commitlog.total_size + self.consume_queue.total_size

    def init(self, queue_offset: int) -> None:
        self.indexed = []
        self.commitlog.init(0)
        self.consume_queue.init(queue_offset * CQ_UNIT)

    # ---- write ----------------------------------------------------------------------------
    def _roll_commitlog(self, incoming: int) -> bool:
        segs = self.commitlog.segments
        if not segs or segs[-1].size == 0:
            return False
        last, cfg = segs[-1], self.config
        if last.size + incoming > cfg.commitlog_max_size:
            return True
        age_ms = time.time() * 1000 - last.created_ms
        return age_ms >= cfg.rolling_interval_hours * 3_600_000 and last.size >= cfg.rolling_min_size

    def append(self, records: Sequence[Record]) -> list[Optional[int]]:
        """Append ``(record bytes or None for a blank entry, tagsCode, storeTime, originalPhys)``
        in queue-offset order: the records to the flat CommitLog, then their units. Returns each
        record's position in the flat CommitLog (None for blanks)."""
        data = []
        units = bytearray(CQ_UNIT * len(records))
        size = 0
        min_ts, max_ts, first_phys, last_phys = -1, -1, -1, -1
        cl_end = self.commitlog.commit_offset
        total = sum(len(r[0]) for r in records if r[0] is not None)
        roll = self._roll_commitlog(total)
        base = cl_end                                # a roll starts the new segment at the same offset
        positions: list[Optional[int]] = []
        for i, (rec, tags, ts, phys) in enumerate(records):
            if rec is None:
                _UNIT.pack_into(units, i * CQ_UNIT, 0, BLANK_SIZE, 0)
                positions.append(None)
                continue
            _UNIT.pack_into(units, i * CQ_UNIT, base + size, len(rec), tags)
            positions.append(base + size)
            data.append(rec)
            size += len(rec)
            if min_ts < 0 or ts < min_ts:
                min_ts = ts
            max_ts = max(max_ts, ts)
            if first_phys < 0:
                first_phys = phys
            last_phys = phys
        if data:
            pos = self.commitlog.append(b"".join(data), min_ts, max_ts, roll)
            assert pos == base, (pos, base)
        cq_segs = self.consume_queue.segments
        roll_cq = bool(cq_segs) and cq_segs[-1].size > 0 and \
            cq_segs[-1].size + len(units) > self.config.consume_queue_file_size
        self.consume_queue.append(bytes(units), min_ts, max_ts, roll_cq, first_phys, last_phys)
        return positions

    def append_raw(self, body: bytes, units: bytes, min_ts: int, max_ts: int, first_phys: int,
                   last_phys: int) -> None:
        """Append a group commit prepared in C: ``body`` (records back to back, the first at the
        flat CommitLog's end) and its ConsumeQueue ``units``."""
        roll = self._roll_commitlog(len(body))
        self.commitlog.append(body, min_ts, max_ts, roll)
        cq_segs = self.consume_queue.segments
        roll_cq = bool(cq_segs) and cq_segs[-1].size > 0 and \
            cq_segs[-1].size + len(units) > self.config.consume_queue_file_size
        self.consume_queue.append(units, min_ts, max_ts, roll_cq, first_phys, last_phys)

    # ---- read -----------------------------------------------------------------------------
    def units(self, offset: int, count: int) -> list[tuple[int, int, int]]:
        """ConsumeQueue units from ``offset`` (at most ``count``, clipped to what is stored)."""
        mn, mx = self.min_offset, self.max_offset
        if offset < mn or offset >= mx or count <= 0:
            return []
        count = min(count, mx - offset)
        raw = self.consume_queue.read(offset * CQ_UNIT, count * CQ_UNIT)
        return [_UNIT.unpack_from(raw, p) for p in range(0, len(raw) - len(raw) % CQ_UNIT, CQ_UNIT)]

    def read_messages(self, offset: int, max_nums: int, max_bytes: int) -> list[tuple[int, bytes, int]]:
        """``(queueOffset, record, tagsCode)`` from ``offset``: at most ``max_nums`` records and
        ``max_bytes`` bytes (at least one record), read from the flat CommitLog in one range."""
        units = self.units(offset, max_nums)
        picked: list[tuple[int, Optional[bool], int, int, int]] = []    # (queueOffset, None: blank, tags, phys, size)
        lo = hi = -1
        for i, (phys, size, tags) in enumerate(units):
            if size == BLANK_SIZE:
                picked.append((offset + i, None, tags, phys, size))
                continue
            if lo >= 0 and (phys + size - lo > max_bytes or phys != hi):
                break
            if lo < 0:
                lo = phys
            hi = phys + size
            picked.append((offset + i, True, tags, phys, size))
        if lo < 0:
            return [(q, b"", t) for q, _, t, _, _ in picked]
        data = self.commitlog.read(lo, hi - lo)
        out: list[tuple[int, bytes, int]] = []
        for q, rec, tags, phys, size in picked:
            if rec is None:
                out.append((q, b"", tags))           # blank: skipped by the reader, offset counted
            elif phys - lo + size <= len(data):
                out.append((q, data[phys - lo:phys - lo + size], tags))
        return out

    def record_at(self, offset: int) -> Optional[bytes]:
        u = self.units(offset, 1)
        if not u or u[0][1] == BLANK_SIZE:
            return None
        return self.commitlog.read(u[0][0], u[0][1])

    def store_time(self, offset: int) -> int:
        """Store time of the message at ``offset`` or -1."""
        u = self.units(offset, 1)
        if not u or u[0][1] == BLANK_SIZE:
            return -1
        head = self.commitlog.read(u[0][0], min(u[0][1], 72))
        return record_store_time(head) if len(head) >= 64 else -1

    def original_phys(self, offset: int) -> int:
        """The local CommitLog offset the message at ``offset`` had (its offset msgId)."""
        u = self.units(offset, 1)
        if not u or u[0][1] == BLANK_SIZE:
            return -1
        raw = self.commitlog.read(u[0][0] + PHYS_POS, 8)
        if len(raw) != 8:
            return -1
        phys: int = _I64.unpack(raw)[0]
        return phys

    def find_by_commitlog_offset(self, phys: int) -> Optional[bytes]:
        """The record whose original CommitLog offset is ``phys`` (offset msgId look-up): the
        consume queue segment whose range covers it, then a binary search on the records."""
        for seg in self.consume_queue.segments:
            if not (seg.first_phys <= phys <= seg.last_phys):
                continue
            lo = seg.base // CQ_UNIT
            hi = seg.end // CQ_UNIT - 1
            while lo <= hi:
                mid = (lo + hi) // 2
                probe = mid
                p = self.original_phys(probe)
                while p < 0 and probe < hi:              # blank units: step right
                    probe += 1
                    p = self.original_phys(probe)
                if p == phys:
                    return self.record_at(probe)
                if p < 0 or p > phys:
                    hi = mid - 1
                else:
                    lo = probe + 1
        return None

    # ---- retention ----------------------------------------------------------------------------
    def delete_expired(self, expire_before_ms: int) -> int:
        """Drop sealed segments whose newest message is older than ``expire_before_ms``: the
        ConsumeQueue first (the min offset moves), then CommitLog segments nothing points into."""
        cq = self.consume_queue
        n = 0
        while len(cq.segments) > 1 and cq.segments[0].sealed and 0 <= cq.segments[0].max_ts < expire_before_ms:
            cq.delete_head(cq.segments[0].end)
            n += 1
        if n:
            first = self.units(self.min_offset, 1)
            keep = first[0][0] if first and first[0][1] != BLANK_SIZE else self.commitlog.commit_offset
            self.commitlog.delete_head(keep)
        return n

    # ---- index coverage -------------------------------------------------------------------------
    def mark_indexed(self, lo: int, hi: int) -> None:
        """Record that the keys of queue offsets [lo, hi) are in index files."""
        if hi > lo:
            self.indexed = merge_ranges(self.indexed + [[lo, hi]])

    def unindexed(self, lo: int, hi: int) -> list[tuple[int, int]]:
        """The parts of [lo, hi) no index file covers, in order."""
        return subtract_ranges([(lo, hi)], self.indexed)

    def to_json(self) -> "QueueDoc":
        return {"topic": self.topic, "queueId": self.queue_id, "commitLog": self.commitlog.to_json(),
                "consumeQueue": self.consume_queue.to_json(), "indexed": [list(r) for r in self.indexed]}

    def load_json(self, doc: "QueueDoc") -> None:
        self.commitlog.load_json(doc.get("commitLog", []))
        self.consume_queue.load_json(doc.get("consumeQueue", []))
        if "indexed" in doc:
            self.indexed = [list(map(int, r)) for r in doc["indexed"]]
        else:          # metadata from before coverage was recorded: the copier indexed what it copied, if on
            mn, mx = self.min_offset, self.max_offset
            self.indexed = [[mn, mx]] if self.config.message_index_enable and 0 <= mn < mx else []

    def recover(self) -> None:
        self.commitlog.recover()
        self.consume_queue.recover()

    def destroy(self) -> None:
        self.indexed = []
        self.commitlog.destroy()
        self.consume_queue.destroy()


def merge_ranges(ranges: Iterable[Sequence[int]]) -> list[list[int]]:
    """Sorted, merged ``[lo, hi)`` ranges (touching ranges join)."""
    out: list[list[int]] = []
    for lo, hi in sorted((int(a), int(b)) for a, b in ranges if b > a):
        if out and lo <= out[-1][1]:
            out[-1][1] = max(out[-1][1], hi)
        else:
            out.append([lo, hi])
    return out


def subtract_ranges(ranges: Iterable[Sequence[int]], minus: Iterable[Sequence[int]]) -> list[tuple[int, int]]:
    """``ranges`` without ``minus`` (both ``[lo, hi)`` lists), in order."""
    cut = merge_ranges(minus)
    out: list[tuple[int, int]] = []
    for lo, hi in merge_ranges(ranges):
        cur = lo
        for a, b in cut:
            if b <= cur or a >= hi:
                continue
            if a > cur:
                out.append((cur, a))
            cur = max(cur, b)
        if cur < hi:
            out.append((cur, hi))
    return out
