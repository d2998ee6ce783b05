"""Start-up check of consume queues against the commit log (damaged entries -> rebuild).

A consume-queue entry is trusted only if it is well formed (size in range, commit-log offsets
increasing, inside the valid commit log) and the record it points to says the same thing
(record size, queue id, queue offset, physical offset).  The first bad entry of a queue and
everything after it are dropped; the store then re-dispatches the commit log from the end of
the last good entry, which rebuilds the queue exactly.  Every file is examined by default (about
1 us per entry at start-up); ``last_files`` bounds it like Java's ConsumeQueue recovery.
"""
from __future__ import annotations

import logging
import struct
from typing import TYPE_CHECKING, Iterable, Optional

from rmqd.store.consume_queue import BLANK_ENTRY, CQ_UNIT, ConsumeQueue

if TYPE_CHECKING:
    from rmqd.store.commitlog import CommitLog

log = logging.getLogger(__name__)

_HEAD = struct.Struct(">iiiiiqq")   # totalSize, magic, bodyCRC, queueId, flag, queueOffset, physOffset


def first_damaged_entry(cq: ConsumeQueue, commitlog: "CommitLog", valid_end: int, max_record_size: int,
                        last_files: int = 1 << 30) -> Optional[tuple[int, int]]:
    """``(logical offset of the first bad entry, commit-log offset to re-dispatch from)`` or None."""
    files = cq.mfq.files
    if not files:
        return None
    first = max(cq.min_offset, files[max(0, len(files) - last_files)].file_from_offset // CQ_UNIT)
    cl_min = commitlog.min_offset()
    prev = cq.get_entry(first - 1) if first > cq.min_offset else None
    prev_end = prev[0] + prev[1] if prev and prev[1] != BLANK_ENTRY[1] and prev[1] > 0 else 0
    good_end = max(prev_end, cl_min)   # where a rebuild starts if the first entry is bad
    for logical in range(first, cq.max_offset):
        entry = cq.get_entry(logical)
        if entry is None:
            return logical, good_end
        phys, size, _tags = entry
        if size == BLANK_ENTRY[1]:
            continue
        ok = 0 < size <= max_record_size and phys >= prev_end and phys + size <= valid_end
        if ok and phys >= cl_min:
            view = commitlog.get(phys, _HEAD.size)
            if view is None:
                ok = False
            else:
                try:
                    total, _magic, _crc, qid, _flag, qoff, p = _HEAD.unpack_from(view)
                finally:
                    view.release()
                ok = total == size and qid == cq.queue_id and qoff == logical and p == phys
        if not ok:
            return logical, good_end
        prev_end = good_end = phys + size
    if cq.mfq.padded:   # a truncated file was zero-filled: entries past the end may be lost
        return cq.max_offset, good_end
    return None


def repair_consume_queues(cqs: Iterable[ConsumeQueue], commitlog: "CommitLog", valid_end: int,
                          max_record_size: int) -> Optional[int]:
    """Truncate every consume queue at its first damaged entry; returns the lowest commit-log
    offset the store must re-dispatch from to rebuild them (None when all are intact)."""
    redo: Optional[int] = None
    for cq in cqs:
        damage = first_damaged_entry(cq, commitlog, valid_end, max_record_size)
        if damage is None:
            continue
        logical, from_phys = damage
        log.error("consume queue %s/%d: entry %d is damaged (%s); dropping entries %d..%d and "
                  "rebuilding them from commit log offset %d", cq.topic, cq.queue_id, logical,
                  cq.get_entry(logical), logical, cq.max_offset - 1, from_phys)
        cq.truncate_to(logical)
        redo = from_phys if redo is None else min(redo, from_phys)
    return redo
