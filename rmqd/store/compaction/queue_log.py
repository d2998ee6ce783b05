"""One queue's compaction log: paired log/CQ segment files, appends, reads, and crash-safe swaps.

Layout (Java's): ``compaction/compactionLog/<topic>/<qid>/<20-digit position>`` holds CommitLog-format
records whose PHYSICALOFFSET is their position in this log; ``compaction/compactionCq/<topic>/<qid>/``
holds the paired 46-byte units under the same name. A sealed log file ends with a blank record
(``maxBlank`` i32, BLANK_MAGIC i32). The CQ is the source of truth: on load, log bytes not covered
by a unit are cut off.

Swapping a compacted segment in (``install``): the new files are written and fsynced under
``compacting/``, then ``compacting/<name>.done`` marks them complete; the old files are renamed to
``<name>.delete``, the new ones moved into place, the ``.delete`` files and the marker removed.
Loading rolls a marked swap forward and throws an unmarked ``compacting/`` away, so a kill at any
step leaves either the old or the new segment, never a mix.
"""
from __future__ import annotations

import bisect
import logging
import os
import struct
import threading
from array import array
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Iterator, Optional, TypedDict

from rmqd.cython_ext import compaction as _cx
from rmqd.common.fileutil import copy_sparse, fsync_path

log = logging.getLogger(__name__)

if TYPE_CHECKING:
    from rmqd.store.message import StoredMessage

UNIT = _cx.CQ_UNIT_SIZE
# (phys, size, tags code, store time, queue offset) of one compaction CQ unit
Unit = tuple[int, int, int, int, int]
_UNIT = struct.Struct(">qiqqqhii")
_BLANK = struct.Struct(">ii")
BLANK_MAGIC = _cx.BLANK_MAGIC
COMPACTING = "compacting"


def _name(pos: int) -> str:
    return f"{pos:020d}"


def _place(src: str, dst: str) -> None:
    """``dst`` becomes a durable copy of ``src``: a hard link on the same file system, else a copy."""
    if os.path.exists(dst):
        os.unlink(dst)
    try:
        os.link(src, dst)
    except OSError:
        copy_sparse(src, dst)
        fsync_path(dst)


def _write_file(path: str, data: bytes) -> None:
    with open(path, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())


@dataclass
class Segment:
    """One log/CQ file pair; ``qoffs`` holds the queue offset of each unit (for binary search)."""
    base: int
    log_path: str
    cq_path: str
    log_fd: int
    cq_fd: int
    qoffs: array[int] = field(default_factory=lambda: array("q"))
    log_size: int = 0
    sealed: bool = False
    first_store_ts: int = -1

    @property
    def name(self) -> str:
        return _name(self.base)

    def close(self) -> None:
        for fd in (self.log_fd, self.cq_fd):
            try:
                os.close(fd)
            except OSError as exc:
                log.warning("closing compaction segment %s: %s", self.log_path, exc)

    def read_cq(self) -> bytes:
        return os.pread(self.cq_fd, len(self.qoffs) * UNIT, 0)

    def read_log(self) -> bytes:
        return os.pread(self.log_fd, self.log_size, 0)

    def unit(self, i: int) -> Unit:
        """``(phys, size, tags_code, store_ts, queue_offset)`` of unit ``i``."""
        u: Unit = _UNIT.unpack(os.pread(self.cq_fd, UNIT, i * UNIT))[:5]
        return u


def scan_units(seg: Segment, cq: bytes, log_len: int) -> tuple[int, int]:
    """Fill ``seg`` (qoffs, first_store_ts, log_size, sealed) from its CQ bytes and log length: units are
    taken up to the first end marker (phys < 0) or the first that does not fit the log; the log is sealed
    when a blank record follows the last one. Returns ``(good units, log bytes they cover)``."""
    good, end, first_ts, qoffs = _cx.scan_cq(cq, seg.base, log_len)
    seg.qoffs.frombytes(qoffs)
    if seg.first_store_ts < 0:
        seg.first_store_ts = first_ts
    seg.log_size = end
    tail = os.pread(seg.log_fd, 8, end) if log_len >= end + 8 else b""
    seg.sealed = len(tail) == 8 and _BLANK.unpack(tail)[1] == BLANK_MAGIC
    return good, end


def open_readonly(log_path: str, cq_path: str, base: int) -> Segment:
    """A segment opened read-only (nothing is cut back): what a job reading the broker's files uses."""
    seg = Segment(base, log_path, cq_path, os.open(log_path, os.O_RDONLY), os.open(cq_path, os.O_RDONLY))
    try:
        cq = os.pread(seg.cq_fd, os.fstat(seg.cq_fd).st_size, 0)
        scan_units(seg, cq, os.fstat(seg.log_fd).st_size)
    except BaseException:
        seg.close()
        raise
    return seg


class QueueCompactionLog:
    """The compaction log of one (topic, queue): thread-safe; readers and the compactor share
    ``lock``, held only for short list/IO operations (a swap replaces one Segment object)."""

    def __init__(self, root: str, topic: str, queue_id: int, log_file_size: int, cq_file_size: int):
        self.topic, self.queue_id = topic, queue_id
        self.log_dir = os.path.join(root, "compactionLog", topic, str(queue_id))
        self.cq_dir = os.path.join(root, "compactionCq", topic, str(queue_id))
        self.log_file_size = max(log_file_size, 4096)
        self.max_units = max(cq_file_size // UNIT, 16)
        self.segments: list[Segment] = []
        self.lock = threading.RLock()

    # ------------------------------------------------------------------ load / recovery
    def load(self) -> None:
        for d in (self.log_dir, self.cq_dir):
            os.makedirs(os.path.join(d, COMPACTING), exist_ok=True)
        self._finish_or_drop_swaps()
        names = sorted(n for n in os.listdir(self.cq_dir) if n.isdigit())
        segs = []
        for n in names:
            seg = self._open(int(n))
            if seg is not None:
                segs.append(seg)
        for seg in segs[:-1]:
            seg.sealed = True
        self.segments = segs

    def _finish_or_drop_swaps(self) -> None:
        cdir, ldir = os.path.join(self.cq_dir, COMPACTING), os.path.join(self.log_dir, COMPACTING)
        done = {n[:-5] for n in os.listdir(cdir) if n.endswith(".done")}
        for name in sorted(done):
            log.info("compaction log %s-%d: finishing the interrupted swap of %s", self.topic,
                     self.queue_id, name)
            self._move_into_place(name)
        for d in (cdir, ldir):
            for n in os.listdir(d):
                log.info("compaction log %s-%d: removing unfinished %s", self.topic, self.queue_id, n)
                os.unlink(os.path.join(d, n))
        for d in (self.cq_dir, self.log_dir):
            for n in os.listdir(d):
                if n.endswith(".delete"):
                    base = n[:-7]
                    if os.path.exists(os.path.join(d, base)):
                        os.unlink(os.path.join(d, n))
                    else:           # a swap that never reached its marker cannot leave this; be safe
                        os.rename(os.path.join(d, n), os.path.join(d, base))

    def _move_into_place(self, name: str, hook: Optional[Callable[[str], None]] = None) -> None:
        """Steps 2-4 of a swap (idempotent): old -> .delete, compacting -> place, drop .delete + marker."""
        for d in (self.log_dir, self.cq_dir):
            if hook and d == self.cq_dir:
                hook("moved-log")
            new = os.path.join(d, COMPACTING, name)
            cur = os.path.join(d, name)
            if os.path.exists(new):
                if os.path.exists(cur):
                    os.replace(cur, cur + ".delete")
                os.replace(new, cur)
            fsync_path(d)
        for d in (self.log_dir, self.cq_dir):
            dele = os.path.join(d, name + ".delete")
            if os.path.exists(dele):
                os.unlink(dele)
        os.unlink(os.path.join(self.cq_dir, COMPACTING, name + ".done"))

    def _open(self, base: int) -> Optional[Segment]:
        name = _name(base)
        lp, cp = os.path.join(self.log_dir, name), os.path.join(self.cq_dir, name)
        if not os.path.exists(lp):
            log.error("compaction log %s-%d: log file %s missing for its CQ; dropping the CQ",
                      self.topic, self.queue_id, lp)
            os.unlink(cp)
            return None
        seg = Segment(base, lp, cp, os.open(lp, os.O_RDWR), os.open(cp, os.O_RDWR))
        cq = os.pread(seg.cq_fd, os.fstat(seg.cq_fd).st_size, 0)
        log_len = os.fstat(seg.log_fd).st_size
        good, end = scan_units(seg, cq, log_len)
        if good * UNIT != len(cq):
            log.warning("compaction log %s-%d: cutting %s back to %d units", self.topic, self.queue_id,
                        cp, good)
            os.ftruncate(seg.cq_fd, good * UNIT)
        if not seg.sealed and log_len != end:
            os.ftruncate(seg.log_fd, end)
        return seg

    def close(self) -> None:
        with self.lock:
            for seg in self.segments:
                seg.close()
            self.segments = []

    def destroy(self) -> None:
        import shutil
        self.close()
        for d in (self.log_dir, self.cq_dir):
            shutil.rmtree(d, ignore_errors=True)

    # ------------------------------------------------------------------ state
    def is_empty(self) -> bool:
        return not any(len(s.qoffs) for s in self.segments)

    def min_offset(self) -> int:
        """Queue offset of the first record, -1 when empty."""
        for s in self.segments:
            if s.qoffs:
                return s.qoffs[0]
        return -1

    def next_offset(self) -> int:
        """One past the last record's queue offset, 0 when empty."""
        for s in reversed(self.segments):
            if s.qoffs:
                return s.qoffs[-1] + 1
        return 0

    def record_count(self) -> int:
        return sum(len(s.qoffs) for s in self.segments)

    def byte_size(self) -> int:
        return sum(s.log_size for s in self.segments)

    def compacted_keys(self, checkpoint: int) -> int:
        """Distinct keys in the compacted files (sealed, wholly at or below ``checkpoint``): a run leaves each
        key there once, tombstones dropped, so their records count the keys; 0 before the first run."""
        with self.lock:
            return sum(len(s.qoffs) for s in self.segments if s.sealed and s.qoffs and s.qoffs[-1] <= checkpoint)

    def sealed_segments(self) -> list[Segment]:
        with self.lock:
            return [s for s in self.segments if s.sealed]

    def earliest_store_time(self) -> int:
        for s in self.segments:
            if s.qoffs:
                return s.unit(0)[3]
        return -1

    # ------------------------------------------------------------------ append (copier)
    def append(self, records: list[tuple[bytes, int, int, int]]) -> None:
        """Append ``(record, queue_offset, tags_code, store_ts)`` tuples in offset order; records
        at or below the current max are skipped (Java's duplicate check). Caller fsyncs (``flush``)."""
        with self.lock:
            nxt = self.next_offset()
            for rec, qoff, tags, ts in records:
                if qoff < nxt:
                    continue
                seg = self._writable(len(rec))
                pos = seg.base + seg.log_size
                buf = bytearray(rec)
                _cx.set_phys_offset(buf, pos)
                os.pwrite(seg.log_fd, buf, seg.log_size)
                os.pwrite(seg.cq_fd, _cx.pack_unit(pos, len(rec), tags, ts, qoff), len(seg.qoffs) * UNIT)
                seg.log_size += len(rec)
                seg.qoffs.append(qoff)
                if seg.first_store_ts < 0:
                    seg.first_store_ts = ts
                nxt = qoff + 1

    def _writable(self, size: int) -> Segment:
        seg = self.segments[-1] if self.segments else None
        if seg is not None and not seg.sealed and seg.log_size + size + 8 <= self.log_file_size \
                and len(seg.qoffs) < self.max_units:
            return seg
        if seg is not None and not seg.sealed:
            self._seal(seg)
        base = seg.base + self.log_file_size if seg is not None else 0
        while seg is not None and base < seg.base + seg.log_size + 8:
            base += self.log_file_size
        name = _name(base)
        lp, cp = os.path.join(self.log_dir, name), os.path.join(self.cq_dir, name)
        new = Segment(base, lp, cp, os.open(lp, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644),
                      os.open(cp, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644))
        fsync_path(self.log_dir)
        fsync_path(self.cq_dir)
        self.segments = self.segments + [new]
        return new

    def _seal(self, seg: Segment) -> None:
        """Close a full segment with the blank record (maxBlank = bytes left in the file)."""
        os.pwrite(seg.log_fd, _BLANK.pack(self.log_file_size - seg.log_size, BLANK_MAGIC), seg.log_size)
        os.fsync(seg.log_fd)
        os.fsync(seg.cq_fd)
        seg.sealed = True

    def flush(self) -> None:
        with self.lock:
            for seg in self.segments[-2:]:
                os.fsync(seg.log_fd)
                os.fsync(seg.cq_fd)

    # ------------------------------------------------------------------ read
    def find(self, offset: int) -> Optional[tuple[Segment, int]]:
        """The segment and unit index of the first record at or after ``offset``."""
        for seg in self.segments:
            if seg.qoffs and seg.qoffs[-1] >= offset:
                return seg, bisect.bisect_left(seg.qoffs, offset)
        return None

    def read_from(self, offset: int, max_count: int, max_bytes: int) -> list[tuple[int, bytes, int]]:
        """Up to ``max_count`` records (and ``max_bytes``, at least one) at or after ``offset``, as
        ``(queue_offset, record bytes, tags_code)``, from one segment."""
        with self.lock:
            hit = self.find(offset)
            if hit is None:
                return []
            seg, i = hit
            n = min(max_count, len(seg.qoffs) - i)
            raw = os.pread(seg.cq_fd, n * UNIT, i * UNIT)
            units = [_UNIT.unpack_from(raw, k * UNIT)[:5] for k in range(n)]
            total, take = 0, 0
            for phys, size, *_ in units:
                if take and total + size > max_bytes:
                    break
                total += size
                take += 1
            units = units[:take]
            first = units[0][0]
            data = os.pread(seg.log_fd, total, first - seg.base)
        out = []
        for phys, size, tags, _ts, qoff in units:
            rel = phys - first
            out.append((qoff, data[rel:rel + size], tags))
        return out

    def store_time_at(self, offset: int) -> int:
        with self.lock:
            hit = self.find(offset)
            if hit is None:
                return -1
            seg, i = hit
            return seg.unit(i)[3] if seg.qoffs[i] == offset else -1

    def offset_by_time(self, timestamp: int) -> Optional[int]:
        """Queue offset of the first record stored at or after ``timestamp`` (None: after all)."""
        with self.lock:
            for seg in self.segments:
                if not seg.qoffs:
                    continue
                last = seg.unit(len(seg.qoffs) - 1)
                if last[3] < timestamp:
                    continue
                lo, hi = 0, len(seg.qoffs) - 1
                while lo < hi:
                    mid = (lo + hi) // 2
                    if seg.unit(mid)[3] >= timestamp:
                        hi = mid
                    else:
                        lo = mid + 1
                return seg.qoffs[lo]
        return None

    # ------------------------------------------------------------------ swap (compactor)
    def compacting_paths(self, seg: Segment) -> tuple[str, str]:
        return (os.path.join(self.log_dir, COMPACTING, seg.name),
                os.path.join(self.cq_dir, COMPACTING, seg.name))

    def open_compacting(self, seg: Segment) -> "CompactingWriter":
        """Step 1 of a swap: a writer for the compacted files of ``seg`` under ``compacting/``."""
        self.drop_unfinished(seg)
        lp, cp = self.compacting_paths(seg)
        return CompactingWriter(lp, cp, os.path.join(self.cq_dir, COMPACTING, seg.name + ".done"),
                                seg.base, self.log_file_size)

    def install(self, seg: Segment, hook: Optional[Callable[[str], None]] = None) -> None:
        """Steps 2-4: move the marked compacted files into place and swap the Segment object."""
        with self.lock:
            if hook:
                hook("rename")
            self._move_into_place(seg.name, hook)
            new = self._open(seg.base)
            if new is None:
                raise RuntimeError(f"compaction log {self.topic}-{self.queue_id}: segment {seg.name} missing after "
                                   "its swap")
            new.sealed = True
            seg.close()
            if not new.qoffs and self.segments[-1] is not seg:    # nothing left: drop the pair
                new.close()
                for p in (new.log_path, new.cq_path):
                    os.unlink(p)
                self.segments = [s for s in self.segments if s is not seg]
            else:
                self.segments = [new if s is seg else s for s in self.segments]

    def segment_at(self, base: int) -> Optional[Segment]:
        with self.lock:
            return next((s for s in self.segments if s.base == base), None)

    def adopt(self, base: int, log_src: str, cq_src: str, hook: Optional[Callable[[str], None]] = None) -> None:
        """Swap in compacted files made elsewhere (``rmqd pipeline compact``) for the segment at ``base``,
        by the same steps as the broker's own swap: placed under ``compacting/`` (hard link, or a copy
        across file systems), marked ``.done``, then moved into place (``install``)."""
        with self.lock:
            seg = self.segment_at(base)
            if seg is None:
                raise ValueError(f"compaction log {self.topic}-{self.queue_id} has no segment {_name(base)}")
            self.drop_unfinished(seg)
            lp, cp = self.compacting_paths(seg)
            _place(log_src, lp)
            _place(cq_src, cp)
            fsync_path(os.path.dirname(lp))
            if hook:
                hook("adopt-placed")
            _write_file(os.path.join(self.cq_dir, COMPACTING, seg.name + ".done"), b"")
            fsync_path(os.path.dirname(cp))
            self.install(seg, hook)

    def drop(self, base: int) -> None:
        """Remove the sealed segment at ``base`` (a compaction elsewhere kept none of its records)."""
        with self.lock:
            seg = self.segment_at(base)
            if seg is None:
                return
            self.segments = [s for s in self.segments if s is not seg]
            seg.close()
            for p in (seg.log_path, seg.cq_path):      # the log first: a CQ without its log is dropped on load
                os.unlink(p)
            fsync_path(self.log_dir)
            fsync_path(self.cq_dir)

    def drop_unfinished(self, seg: Segment) -> None:
        for p in self.compacting_paths(seg) + (os.path.join(self.cq_dir, COMPACTING, seg.name + ".done"),):
            if os.path.exists(p):
                os.unlink(p)


class CompactingWriter:
    """Streams one compacted segment to ``compacting/``; ``finish`` seals, fsyncs, and writes the
    ``.done`` marker that makes the swap roll forward after a crash. A job staging its output for
    adoption passes no marker (its own manifest commits the files)."""

    def __init__(self, log_path: str, cq_path: str, marker: Optional[str], base: int, file_size: int):
        self.log_path, self.cq_path, self.marker = log_path, cq_path, marker
        self.base, self.file_size = base, file_size
        self.written = 0
        self.units = 0
        self._log = open(log_path, "wb")
        self._cq = open(cq_path, "wb")

    @property
    def next_phys(self) -> int:
        return self.base + self.written

    def write(self, log_chunk: bytes | bytearray, cq_chunk: bytes | bytearray) -> None:
        self._log.write(log_chunk)
        self._cq.write(cq_chunk)
        self.written += len(log_chunk)
        self.units += len(cq_chunk) // UNIT

    def finish(self) -> None:
        self._log.write(_BLANK.pack(self.file_size - self.written, BLANK_MAGIC))
        for f in (self._log, self._cq):
            f.flush()
            os.fsync(f.fileno())
            f.close()
        fsync_path(os.path.dirname(self.log_path))
        if self.marker is not None:
            _write_file(self.marker, b"")
        fsync_path(os.path.dirname(self.cq_path))

    def abort(self) -> None:
        for f in (self._log, self._cq):
            f.close()
        for p in (self.log_path, self.cq_path):
            if os.path.exists(p):
                os.unlink(p)


def iter_units(cq: bytes) -> Iterator[Unit]:
    for i in range(len(cq) // UNIT):
        u: Unit = _UNIT.unpack_from(cq, i * UNIT)[:5]
        yield u


class DumpedRecord(TypedDict):
    """One record of a compaction log file, as ``rmqd admin dumpCompactionLog`` prints it."""
    position: int
    size: int
    message: "StoredMessage"


def decode_log_file(path: str) -> Iterator[DumpedRecord]:
    """Records of one compaction log file (``rmqd admin dumpCompactionLog``)."""
    from rmqd.store.message import decode_message
    with open(path, "rb") as f:
        data = f.read()
    pos = 0
    while pos + 8 <= len(data):
        total, magic = _BLANK.unpack_from(data, pos)
        if magic == BLANK_MAGIC or total <= 0:
            break
        m = decode_message(data, pos)
        yield {"position": pos, "size": total, "message": m}
        pos += total
