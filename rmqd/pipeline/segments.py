"""Sealed CommitLog segments: where the pipeline's jobs read records from.

A *segment source* lists sealed (immutable) segments of CommitLog-format records and opens them on an
executor. :class:`LocalCommitLog` is the store directory's ``commitlog/``; :class:`rmqd.pipeline.tier.TierCommitLog`
rebuilds the CommitLog files local retention deleted from the tier's per-queue flat CommitLogs (their
records are byte for byte the local ones). Either way a segment is one CommitLog file, known in a job's
manifest by its name (``local:<20-digit base>``), so each message is archived exactly once, from the
local file while it exists, else from the tier.

Records are verified with the store's own recovery scanner (``store_commitlog.scan_records``: sizes,
magic, lengths and body CRC) and decoded into the connector's Arrow columns by its Cython decoder
(:func:`rmqd.spark.arrow.decode_batch`), so a row here is exactly what ``format("rocketmq")`` returns.
"""
from __future__ import annotations

import hashlib
import logging
import mmap
import os
from dataclasses import dataclass, field
from typing import Iterator, Optional, Protocol, TypedDict

import pyarrow as pa
import pyarrow.compute as pc

from rmqd.pipeline.errors import CorruptSegment, PipelineError

log = logging.getLogger(__name__)

MAGIC_V1 = (-626843481).to_bytes(4, "big", signed=True)
BLANK_MAGIC = (-875286124).to_bytes(4, "big", signed=True)
DECODE_WINDOW = 8 << 20                   # bytes of records decoded into one Arrow batch
TRANSACTION_TYPE_MASK = 0xC
PREPARED, ROLLBACK = 0x4, 0xC             # kept out of the ConsumeQueue, so out of the rows too


@dataclass(frozen=True)
class SegmentRef:
    """One sealed segment, picklable (it travels to the executors)."""
    source: str            # SOURCES key: "local" or "tier"
    name: str              # the CommitLog file's name (20-digit first offset)
    base: int              # physical offset of its first byte
    size: int              # file size
    path: str              # where an executor opens it (for the tier: a description)
    fingerprint: str       # hash of its first record's header (tier: of the tier's identity): tells stores apart
    extra: object = field(default=None, compare=False, hash=False)   # what the source needs to open it

    @property
    def key(self) -> str:
        """The segment's identity in a manifest: the CommitLog file, whichever source it is read from."""
        return f"local:{self.name}"


class SegmentSource(Protocol):
    kind: str

    def sealed_segments(self) -> list[SegmentRef]:
        """Sealed segments, oldest first."""

    @staticmethod
    def open(ref: SegmentRef) -> mmap.mmap:
        """The segment's bytes (read-only), on an executor."""


def _fingerprint(head: bytes) -> str:
    return hashlib.sha1(head).hexdigest()[:16]


def check_store_dir(store_dir: str) -> str:
    """The absolute store directory, or a PipelineError saying what is wrong with it."""
    path = os.path.abspath(os.path.expanduser(store_dir))
    if not os.path.exists(path):
        raise PipelineError(f"--store {store_dir}: no such directory")
    if not os.path.isdir(path):
        raise PipelineError(f"--store {store_dir}: not a directory")
    if not os.path.isdir(os.path.join(path, "commitlog")):
        raise PipelineError(f"--store {store_dir}: not a RocketMQ store directory (no commitlog/ in it; "
                            "it is the broker's storePathRootDir, e.g. ~/.rmqd/store)")
    return path


class LocalCommitLog:
    """``<store>/commitlog/<20-digit offset>`` files. A file is sealed when a later file holds data (the
    broker writes one file at a time; the newest may be a preallocated empty one)."""
    kind = "local"

    def __init__(self, store_dir: str) -> None:
        self.root = check_store_dir(store_dir)
        self.dir = os.path.join(self.root, "commitlog")

    def sealed_segments(self) -> list[SegmentRef]:
        names = sorted(n for n in os.listdir(self.dir) if n.isdigit() and len(n) == 20)
        heads: list[tuple[str, int, bytes]] = []
        for n in names:
            path = os.path.join(self.dir, n)
            with open(path, "rb") as f:
                head = f.read(64)
                size = os.fstat(f.fileno()).st_size
            heads.append((n, size, head))
        last_with_data = -1
        for i, (_n, _s, head) in enumerate(heads):
            if len(head) >= 8 and head[4:8] == MAGIC_V1:
                last_with_data = i
        out: list[SegmentRef] = []
        for n, size, head in heads[:max(last_with_data, 0)]:
            out.append(SegmentRef(self.kind, n, int(n), size, os.path.join(self.dir, n), _fingerprint(head)))
        return out

    @staticmethod
    def open(ref: SegmentRef) -> mmap.mmap:
        with open(ref.path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            if size == 0:
                raise PipelineError(f"segment {ref.path} is empty")
            return mmap.mmap(f.fileno(), size, access=mmap.ACCESS_READ)


SOURCES: dict[str, type[SegmentSource]] = {LocalCommitLog.kind: LocalCommitLog}
_LAZY_SOURCES = {"tier": "rmqd.pipeline.tier"}      # imported on first use (they register themselves)


def open_segment(ref: SegmentRef) -> mmap.mmap:
    if ref.source not in SOURCES and ref.source in _LAZY_SOURCES:
        import importlib
        importlib.import_module(_LAZY_SOURCES[ref.source])
    try:
        return SOURCES[ref.source].open(ref)
    except FileNotFoundError:
        if ref.source == LocalCommitLog.kind:
            store = os.path.dirname(os.path.dirname(ref.path))
            if not os.path.isdir(os.path.dirname(ref.path)):       # not the file: the store is not here
                from rmqd.spark.executor import not_visible
                raise PipelineError(not_visible("--store", store)) from None
        raise PipelineError(f"segment {ref.path} was deleted while the job ran (CommitLog retention?); "
                            "run the job again") from None


class CorruptRange(TypedDict):
    """A damaged range of a segment that was skipped (``--on-corrupt skip``), as the job reports it."""
    file: str
    offset: int
    physicalOffset: int
    skippedBytes: int


@dataclass
class SegmentReport:
    """What reading one segment found: rows, record bytes, and the damaged ranges skipped."""
    rows: int = 0
    record_bytes: int = 0
    skipped_transactions: int = 0
    corrupt: list[CorruptRange] = field(default_factory=list)


def _max_record(size: int) -> int:
    return max(size - 8, 1024)


def _resync(buf: mmap.mmap, start: int, limit: int) -> Optional[int]:
    """The next position >= start where a whole, CRC-valid record begins (None: none left)."""
    from rmqd.cython_ext import store_commitlog as _cl
    q = start
    while True:
        hit = buf.find(MAGIC_V1, q + 4, limit)
        if hit < 0:
            return None
        cand = hit - 4
        total, _magic = _cl.read_header(buf, cand)
        if 0 < total and cand + total <= limit:
            end, code, _ = _cl.scan_records(buf, cand, cand + total, True, _max_record(limit))
            if code == _cl.SCAN_LIMIT and end == cand + total:
                return cand
        q = cand + 1


def record_ranges(ref: SegmentRef, buf: mmap.mmap, on_corrupt: str,
                  report: SegmentReport) -> Iterator[tuple[int, int]]:
    """``(start, end)`` byte ranges of verified records, in order (the last may end with the blank
    end-of-file marker). A damaged record raises
    CorruptSegment (``on_corrupt='fail'``) or is skipped up to the next valid record ('skip')."""
    from rmqd.cython_ext import store_commitlog as _cl
    n = len(buf)
    pos = 0
    while pos < n:
        end, code, _ = _cl.scan_records(buf, pos, n, True, _max_record(n))
        if end > pos:
            yield pos, end
            pos = end
        if code in (_cl.SCAN_LIMIT, _cl.SCAN_BLANK):
            return
        if code == _cl.SCAN_END:
            if pos + 8 <= n and any(buf[pos:min(n, pos + 4096)]):
                code = _cl.SCAN_CORRUPT                   # not zeros: a damaged header
            else:
                return
        where = f"{ref.path} at offset {pos} (physical offset {ref.base + pos})"
        if on_corrupt == "fail":
            raise CorruptSegment(f"corrupt record in {where}: bad size, magic or body CRC "
                                 "(use --on-corrupt skip to archive around it)")
        nxt = _resync(buf, pos + 1, n)
        skipped = (nxt if nxt is not None else n) - pos
        report.corrupt.append({"file": ref.path, "offset": pos, "physicalOffset": ref.base + pos,
                               "skippedBytes": skipped})
        log.warning("corrupt record in %s: skipped %d bytes", where, skipped)
        if nxt is None:
            return
        pos = nxt


def segment_batches(ref: SegmentRef, broker_name: str, on_corrupt: str = "fail",
                    report: Optional[SegmentReport] = None) -> Iterator[pa.RecordBatch]:
    """The segment's messages as the connector's Arrow batches (prepared and rolled-back transaction
    records left out, as the ConsumeQueue leaves them out; compressed bodies inflated)."""
    from rmqd.spark.arrow import decode_batch, decompress_values
    import numpy as np
    report = report if report is not None else SegmentReport()
    buf = open_segment(ref)
    try:
        mv = memoryview(buf)
        try:
            for start, end in record_ranges(ref, buf, on_corrupt, report):
                p = start
                while p < end:
                    stop = min(end, p + DECODE_WINDOW)
                    batch, rows, used, sys_flags = decode_batch(mv[p:stop], broker_name)
                    if used == 0 and bytes(mv[p + 4:p + 8]) == BLANK_MAGIC:
                        break                                     # the end-of-file marker
                    if used == 0:                                 # one record bigger than the window
                        total = int.from_bytes(mv[p:p + 4], "big")
                        batch, rows, used, sys_flags = decode_batch(mv[p:p + total], broker_name)
                        if used == 0:
                            raise CorruptSegment(f"undecodable record in {ref.path} at offset {p}")
                    report.record_bytes += used
                    p += used
                    flags = np.frombuffer(sys_flags, dtype=np.int32, count=rows)
                    tran = flags & TRANSACTION_TYPE_MASK
                    hidden = (tran == PREPARED) | (tran == ROLLBACK)
                    if hidden.any():
                        report.skipped_transactions += int(hidden.sum())
                        keep = pa.array(~hidden)
                        batch = batch.filter(keep)
                        sys_flags = flags[~hidden].tobytes()
                    if batch.num_rows:
                        batch = decompress_values(batch, sys_flags)
                        report.rows += batch.num_rows
                        yield batch
                    del batch
        finally:
            mv.release()
    finally:
        buf.close()


def day_of(timestamps: pa.Array) -> pa.Array:
    """UTC day (date32) of Arrow microsecond timestamps."""
    us = pc.cast(timestamps, pa.int64())
    return pc.cast(pc.divide(us, 86_400_000_000), pa.int32()).cast(pa.date32())
