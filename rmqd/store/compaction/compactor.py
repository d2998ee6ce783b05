"""One compaction run over one queue's sealed segments, in bounded memory.

Java builds one OffsetMap from the files above the checkpoint and fails when it is full. Here a run
goes in rounds (seeds 000/001): build the map from the records above the checkpoint until it is
full or the sealed segments end, rewrite every sealed segment holding records inside the map's
range (oldest first), move the checkpoint to the map's last offset, and continue with the rest.
So any number of keys compacts with ``maxOffsetMapSize`` of map memory plus two ~8 MB windows.

Crash safety: segments are swapped oldest first, so a tombstone or a newest value is only dropped
after every older version of its key is gone; a run killed before its checkpoint is redone from
the old checkpoint and reaches the same result. ``hook(step)`` lets tests kill or fail the run at
each step: build, writing, write, rename, moved-log, installed, checkpoint.
"""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Callable, Iterator, Optional

from rmqd.cython_ext import compaction as _cx
from rmqd.store.compaction.queue_log import UNIT, QueueCompactionLog, Segment

log = logging.getLogger(__name__)

WINDOW = 8 << 20


@dataclass
class RunResult:
    checkpoint: int
    rounds: int = 0
    records_in: int = 0
    records_out: int = 0
    bytes_in: int = 0
    bytes_out: int = 0
    segments_rewritten: int = 0
    duration_s: float = 0.0


def record_windows(seg: Segment, cq: bytes) -> Iterator[tuple[int, bytes, bytes]]:
    """Yield ``(log_base, log bytes, cq bytes)`` windows of about WINDOW bytes of records."""
    for i, j, first_phys, end in _cx.window_bounds(cq, WINDOW):
        yield first_phys, seg_pread(seg, first_phys, end), cq[i * UNIT:j * UNIT]


def seg_pread(seg: Segment, start: int, end: int) -> bytes:
    import os
    data = os.pread(seg.log_fd, end - start, start - seg.base)
    if len(data) != end - start:
        raise IOError(f"short read of {seg.log_path} at {start - seg.base}")
    return data


def compact_queue(qlog: QueueCompactionLog, map_bytes: int, checkpoint: int,
                  save_checkpoint: Callable[[int], None],
                  hook: Optional[Callable[[str], None]] = None) -> RunResult:
    """Compact the sealed segments of ``qlog`` above ``checkpoint``; see the module docstring."""
    t0 = time.perf_counter()
    res = RunResult(checkpoint)
    step = hook or (lambda _s: None)
    after = checkpoint
    while True:
        sealed = qlog.sealed_segments()
        todo = [s for s in sealed if s.qoffs and s.qoffs[-1] > after]
        if not todo:
            break
        m = _cx.OffsetMap(map_bytes)
        full = False
        for seg in todo:
            cq = seg.read_cq()
            for base, data, units in record_windows(seg, cq):
                _done, full = _cx.build_map(m, data, base, units, after)
                if full:
                    break
            if full:
                break
        res.rounds += 1
        step("build")
        upto = m.last_offset if full else max(s.qoffs[-1] for s in todo)
        if full and m.size == 0:
            raise RuntimeError("maxOffsetMapSize holds no key")
        for seg in sealed:
            if not seg.qoffs:
                continue
            if seg.qoffs[0] > upto:
                break
            _rewrite_segment(qlog, seg, m, upto, res, step)
        step("checkpoint")
        save_checkpoint(upto)
        res.checkpoint = after = upto
        if not full:
            break
    res.duration_s = time.perf_counter() - t0
    return res


def _rewrite_segment(qlog: QueueCompactionLog, seg: Segment, m: _cx.OffsetMap, upto: int, res: RunResult,
                     step: Callable[[str], None]) -> None:
    cq = seg.read_cq()
    n_in = len(cq) // UNIT
    writer = qlog.open_compacting(seg)
    try:
        out_log, out_cq = bytearray(), bytearray()
        kept_total = 0
        for base, data, units in record_windows(seg, cq):
            out_log.clear()
            out_cq.clear()
            kept_total += _cx.rewrite(m, data, base, units, upto, out_log, out_cq, writer.next_phys)
            writer.write(out_log, out_cq)
            step("writing")
        res.records_in += n_in
        res.bytes_in += seg.log_size
        if kept_total == n_in:            # nothing to drop: keep the file as it is
            writer.abort()
            res.records_out += n_in
            res.bytes_out += seg.log_size
            return
        writer.finish()
    except BaseException:
        writer.abort()
        raise
    res.records_out += kept_total
    res.bytes_out += writer.written
    step("write")
    qlog.install(seg, step)
    res.segments_rewritten += 1
    step("installed")
