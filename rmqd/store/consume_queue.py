"""ConsumeQueue: per topic/queue index of 20-byte entries ``phys int64 | size int32 | tags int64``.

Files hold ``entries_per_file`` entries and are named by their starting *byte* offset.
Writes happen under the store's put lock; reads are lock-free on a snapshot of the file list.
"""
from __future__ import annotations

import logging
import os
import struct
from typing import Callable, Optional

from rmqd.common.constants import CQ_BLANK_SIZE, CQ_STORE_UNIT_SIZE
from rmqd.cython_ext.store_commitlog import msync_range
from rmqd.store.mapped_file import MappedFileQueue

log = logging.getLogger(__name__)

CQ_UNIT = CQ_STORE_UNIT_SIZE
_ENTRY = struct.Struct(">qiq")
BLANK_ENTRY = (0, CQ_BLANK_SIZE, 0)


class ConsumeQueue:
    def __init__(self, root: str, topic: str, queue_id: int, file_size: int):
        if file_size % CQ_UNIT:
            raise ValueError("consume queue file size must be a multiple of 20")
        self.topic = topic
        self.queue_id = queue_id
        self.file_size = file_size
        self.dir = os.path.join(root, topic, str(queue_id))
        self.mfq = MappedFileQueue(self.dir, file_size)
        self.min_logic_offset = 0      # logical
        self.max_phys_offset = 0       # phys offset + size of the last entry

    # ---- bounds -------------------------------------------------------------------------
    @property
    def max_offset(self) -> int:
        """Next logical offset to write (entries ever written)."""
        return self.mfq.max_offset() // CQ_UNIT

    @property
    def min_offset(self) -> int:
        return max(self.min_logic_offset, self.mfq.min_offset() // CQ_UNIT)

    # ---- load / recovery -----------------------------------------------------------------
    def load(self) -> None:
        """Map files and find the write position of the last one (first all-zero entry)."""
        self.mfq.load(pad_short=True)   # damaged entries are found and rebuilt by cq_check
        files = self.mfq.files
        if not files:
            return
        last = files[-1]
        lo, hi = 0, self.file_size // CQ_UNIT   # first index whose size field is zero
        buf = last.buf
        while lo < hi:
            mid = (lo + hi) // 2
            if _ENTRY.unpack_from(buf, mid * CQ_UNIT)[1] != 0:
                lo = mid + 1
            else:
                hi = mid
        last.wrote_pos = last.flushed_pos = lo * CQ_UNIT
        self.max_phys_offset = 0
        e = self.get_entry(self.max_offset - 1) if self.max_offset else None
        if e and e[1] != BLANK_ENTRY[1]:
            self.max_phys_offset = e[0] + e[1]

    def truncate_dirty(self, phys_end: int) -> None:
        """Drop trailing entries whose message extends beyond commit-log offset ``phys_end``."""
        n = self.max_offset
        new_n = n
        while new_n > self.min_offset:
            e = self.get_entry(new_n - 1)
            if e is None:
                break
            if e[1] != BLANK_ENTRY[1] and e[0] + e[1] > phys_end:
                new_n -= 1
                continue
            if e[1] == BLANK_ENTRY[1]:   # trailing blanks are harmless but do not carry data
                new_n -= 1
                continue
            break
        if new_n == n:
            return
        log.warning("consume queue %s/%d: truncating %d dirty entries (%d -> %d)",
                    self.topic, self.queue_id, n - new_n, n, new_n)
        self.truncate_to(new_n)

    def truncate_to(self, new_n: int) -> None:
        """Keep entries [.., new_n) and zero the rest (recovery: dirty or damaged entries)."""
        byte_end = new_n * CQ_UNIT
        fs = self.file_size
        self.mfq.truncate_from(byte_end if byte_end % fs == 0 else self._file_start(byte_end) + fs)
        last = self.mfq.last()
        if last is not None:
            pos = byte_end - last.file_from_offset
            if 0 <= pos < last.wrote_pos:
                old = last.wrote_pos
                last.buf[pos:old] = bytes(old - pos)
                msync_range(last.mm, pos, old)
                last.wrote_pos = last.flushed_pos = pos
        e = self.get_entry(new_n - 1) if new_n > 0 else None
        self.max_phys_offset = e[0] + e[1] if e and e[1] != BLANK_ENTRY[1] else 0

    def _file_start(self, byte_off: int) -> int:
        return byte_off - byte_off % self.file_size

    # ---- write -------------------------------------------------------------------------
    def put(self, queue_offset: int, phys_offset: int, size: int, tags_code: int) -> bool:
        """Write the entry for ``queue_offset``; blanks fill gaps; existing entries are kept."""
        if phys_offset + size <= self.max_phys_offset:
            return True    # already dispatched (recovery re-dispatch)
        cur = self.max_offset
        if queue_offset < cur:
            e = self.get_entry(queue_offset)
            if e is not None and e[0] == phys_offset:
                return True
            log.error("consume queue %s/%d: entry %d already holds %s, refusing %d/%d",
                      self.topic, self.queue_id, queue_offset, e, phys_offset, size)
            return False
        if cur == 0 and self.mfq.last() is None and queue_offset > 0:
            # first file starts at the file boundary of the target offset; earlier ones are gone
            start = self._file_start(queue_offset * CQ_UNIT)
            self.mfq.create_file(start)
            self.min_logic_offset = queue_offset
            cur = start // CQ_UNIT
        while cur < queue_offset:
            self._append(*BLANK_ENTRY)
            cur += 1
        self._append(phys_offset, size, tags_code)
        self.max_phys_offset = phys_offset + size
        return True

    def _append(self, phys: int, size: int, tags: int) -> None:
        mf = self.mfq.last()
        if mf is None or mf.is_full():
            start = mf.end_offset if mf else 0
            mf = self.mfq.create_file(start)
        _ENTRY.pack_into(mf.buf, mf.wrote_pos, phys, size, tags)
        mf.wrote_pos += CQ_UNIT

    # ---- read --------------------------------------------------------------------------
    def get_entry(self, logical: int) -> Optional[tuple[int, int, int]]:
        """``(phys, size, tags)`` of entry ``logical`` or None if not present."""
        byte_off = logical * CQ_UNIT
        mf = self.mfq.find(byte_off)
        if mf is None:
            return None
        pos = byte_off - mf.file_from_offset
        if pos + CQ_UNIT > mf.wrote_pos:
            return None
        return _ENTRY.unpack_from(mf.buf, pos)

    def iter_from(self, logical: int, max_bytes: int) -> Optional[list[tuple[int, int, int]]]:
        """Yield entries from ``logical`` to the end of its file, at most ``max_bytes`` of them.

        Returns None (not a generator) when the slot's file is missing.
        """
        byte_off = logical * CQ_UNIT
        mf = self.mfq.find(byte_off)
        if mf is None:
            return None
        pos = byte_off - mf.file_from_offset
        end = min(mf.wrote_pos, pos + max_bytes)
        if pos >= end:
            return None
        return [_ENTRY.unpack_from(mf.buf, p) for p in range(pos, end, CQ_UNIT)]

    def roll_next_file(self, logical: int) -> int:
        """Logical offset of the first entry of the file after the one holding ``logical``."""
        per = self.file_size // CQ_UNIT
        return logical + per - logical % per

    def offset_by_time(self, ts: int, store_time_of: Callable[[int, int], int]) -> int:
        """4.9 SEARCH_OFFSET_BY_TIMESTAMP: exact hit, else the closest neighbour (ties: earlier)."""
        lo, hi = self.min_offset, self.max_offset - 1
        if hi < lo:
            return 0

        def t(i: int) -> int:
            e = self.get_entry(i)
            if e is None or e[1] == BLANK_ENTRY[1]:
                return -1
            return store_time_of(e[0], e[1])

        left, right = -1, -1
        while lo <= hi:
            mid = (lo + hi) // 2
            v = t(mid)
            if v < 0:     # unreadable (removed) entry: search to the right
                lo = mid + 1
                continue
            if v == ts:
                while mid - 1 >= self.min_offset and t(mid - 1) == ts:
                    mid -= 1
                return mid
            if v < ts:
                left = mid
                lo = mid + 1
            else:
                right = mid
                hi = mid - 1
        if left == -1:
            return right if right != -1 else 0
        if right == -1:
            return left
        return right if abs(ts - t(left)) > abs(ts - t(right)) else left

    # ---- retention -----------------------------------------------------------------------
    def correct_min_offset(self, commitlog_min: int) -> None:
        """Advance the minimum logical offset past entries whose message was deleted."""
        lo, hi = self.min_offset, self.max_offset
        while lo < hi:   # first entry with phys >= commitlog_min (entries are phys-ordered)
            mid = (lo + hi) // 2
            e = self.get_entry(mid)
            if e is None or (e[1] != BLANK_ENTRY[1] and e[0] < commitlog_min) or \
                    (e[1] == BLANK_ENTRY[1] and self._blank_before(mid, commitlog_min)):
                lo = mid + 1
            else:
                hi = mid
        if lo > self.min_logic_offset:
            self.min_logic_offset = lo

    def _blank_before(self, idx: int, commitlog_min: int) -> bool:
        j = idx + 1
        while j < self.max_offset:
            e = self.get_entry(j)
            if e is None:
                return True
            if e[1] != BLANK_ENTRY[1]:
                return e[0] < commitlog_min
            j += 1
        return False

    def delete_expired_files(self, commitlog_min: int) -> int:
        """Destroy leading files whose every message lies below ``commitlog_min`` (never the last)."""
        files = self.mfq.files
        n = 0
        for mf in files[:-1]:
            e = _ENTRY.unpack_from(mf.buf, mf.file_size - CQ_UNIT)
            if e[1] != BLANK_ENTRY[1] and e[0] + e[1] <= commitlog_min:
                n += 1
            else:
                break
        if n:
            self.mfq.remove_first(n)
        self.correct_min_offset(commitlog_min)
        return n

    def flush(self) -> None:
        self.mfq.flush()

    def close(self) -> None:
        self.mfq.close()

    def destroy(self) -> None:
        self.mfq.close()
        import shutil          # imports bz2/lzma: only when needed
        shutil.rmtree(self.dir, ignore_errors=False)
