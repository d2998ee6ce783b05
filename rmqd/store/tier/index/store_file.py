"""One index file of the tier through its states (seed 003): writing -> compacted -> uploaded.

* **writing** (Java UNSEALED, then SEALED when full or rolled): ``tiered_index_file/<beginTs>``, a
  sparse preallocated file mapped read/write; puts go through :mod:`rmqd.cython_ext.tier_index`.
* **compacted**: ``tiered_index_file/compacted/<beginTs>``, the slot-grouped form, complete and
  fsync'ed (it is built in ``tiered_index_file/compacting/`` and renamed).
* **uploaded**: a segment of the index flat file in the backend (``rmq_sys_INDEX/0/INDEX/...``);
  a query costs two range reads (the 8-byte slot, then the slot's run).

A per-file lock keeps queries off a local file while its state changes. Every use of the mapped
writable file (put, undo, compaction piece, query, flush) holds that lock and passes the mmap to
Cython, which holds a buffer export for the call (``mmap.close`` refuses while it is held); closing
the file under the same lock sets ``_mm`` to None, and every user checks for that under the lock
and raises :class:`IndexClosedError` (a None buffer reaching the C code would be a NULL read).
"""
from __future__ import annotations

import logging
import mmap
import os
import threading
from typing import TYPE_CHECKING, Callable, Optional, Sequence

from rmqd.cython_ext import store_commitlog as _cl
from rmqd.cython_ext import tier_index as _ix
from rmqd.common.fileutil import fsync_path
from rmqd.store.tier.backend import TierBackend
from rmqd.store.tier.index import layout as L

if TYPE_CHECKING:
    from rmqd.store.tier.metadata import IndexFileDoc

# (hashes, topicId, queueId, offset in the flat CommitLog, size, storeTime): one message to index
IndexMessage = tuple[Sequence[int], int, int, int, int, int]
# (topicId, queueId, offset, size, timeDiff): one item a query found
IndexItem = tuple[int, int, int, int, int]

log = logging.getLogger(__name__)

WRITING = "writing"
COMPACTED = "compacted"
UPLOADED = "uploaded"
READ_CHUNK_ITEMS = L.JAVA_COMPACT_READ_ITEMS      # the second read takes up to 1024 items (Java's cap)
COMPACT_PIECES = 8                                # compaction runs in this many pieces of slots


class IndexClosedError(RuntimeError):
    """The index file (or the whole index service) was closed while work on it was under way."""


class IndexStoreFile:
    def __init__(self, directory: str, begin_ts: int, slots: int, max_items: int, state: str = WRITING) -> None:
        self.dir = directory
        self.begin_ts = begin_ts
        self.slots = slots
        self.max_items = max_items
        self.state = state
        self.sealed = False
        self.items = 0
        self.end_ts = 0
        self.used_slots = 0
        self.min_ts = -1                  # store times of the items inside (exact)
        self.max_ts = -1
        self.seg_base = -1                # uploaded: where in the index flat file
        self.seg_size = 0
        self.upload_base = -1             # an upload started at this base (resumed after a crash)
        self.origin = ""                  # the `rmqd pipeline index` job that built it ("": this broker)
        self.committed_items = -1         # what the metadata holds (set by the copier's commit)
        self.committed_sealed = False
        self.lock = threading.RLock()
        self._fd = -1
        self._mm: Optional[mmap.mmap] = None
        self._cfd = -1

    # ---- paths ------------------------------------------------------------------------------
    @property
    def writable_path(self) -> str:
        return os.path.join(self.dir, str(self.begin_ts))

    @property
    def compacted_path(self) -> str:
        return os.path.join(self.dir, "compacted", str(self.begin_ts))

    @property
    def scratch_path(self) -> str:
        return os.path.join(self.dir, "compacting", str(self.begin_ts))

    # ---- metadata -----------------------------------------------------------------------------
    def to_json(self) -> "IndexFileDoc":
        doc: "IndexFileDoc" = {
            "beginTs": self.begin_ts, "state": self.state, "sealed": self.sealed, "items": self.items,
            "endTs": self.end_ts, "usedSlots": self.used_slots, "minTs": self.min_ts, "maxTs": self.max_ts,
            "slots": self.slots, "maxItems": self.max_items, "segBase": self.seg_base,
            "segSize": self.seg_size, "uploadBase": self.upload_base}
        if self.origin:
            doc["origin"] = self.origin
        return doc

    @classmethod
    def from_json(cls, directory: str, d: "IndexFileDoc") -> "IndexStoreFile":
        f = cls(directory, int(d["beginTs"]), int(d["slots"]), int(d["maxItems"]), d.get("state", WRITING))
        f.sealed = bool(d.get("sealed"))
        f.items = int(d.get("items", 0))
        f.end_ts = int(d.get("endTs", 0))
        f.used_slots = int(d.get("usedSlots", 0))
        f.min_ts = int(d.get("minTs", -1))
        f.max_ts = int(d.get("maxTs", -1))
        f.seg_base = int(d.get("segBase", -1))
        f.seg_size = int(d.get("segSize", 0))
        f.upload_base = int(d.get("uploadBase", -1))
        f.origin = str(d.get("origin", ""))
        f.committed_items, f.committed_sealed = f.items, f.sealed
        return f

    def overlaps(self, begin: int, end: int) -> bool:
        return self.items > 0 and self.min_ts <= end and self.max_ts >= begin

    # ---- writing --------------------------------------------------------------------------------
    def open_writable(self, create: bool) -> None:
        size = L.writable_size(self.slots, self.max_items)
        fd = os.open(self.writable_path, os.O_RDWR | (os.O_CREAT if create else 0), 0o644)
        try:
            if os.fstat(fd).st_size != size:
                os.ftruncate(fd, size)             # sparse: untouched slots and items cost no disk
            mm = mmap.mmap(fd, size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        except Exception:
            os.close(fd)
            raise
        self._fd, self._mm = fd, mm
        if create:
            _ix.init_header(mm, self.begin_ts, self.max_items)

    def put(self, messages: list[IndexMessage]) -> int:
        """Put ``(hashes, topicId, queueId, offset, size, storeTime)`` messages; returns how many
        fitted (fewer: the file is full and now sealed)."""
        with self.lock:
            if self.sealed or self._mm is None:
                return 0
            n = _ix.put_batch(self._mm, self.slots, self.max_items, self.begin_ts, messages)
            h = L.parse_header(self._mm)
            self.items, self.end_ts, self.used_slots = h.index_item_count, h.end_timestamp, h.hash_slot_count
            for m in messages[:n]:
                if m[0]:
                    ts = m[5]
                    if self.min_ts < 0 or ts < self.min_ts:
                        self.min_ts = ts
                    if ts > self.max_ts:
                        self.max_ts = ts
            if n < len(messages):
                self.sealed = True
            return n

    def undo_to(self, items: int, end_ts: int, used_slots: int) -> int:
        """Crash recovery: drop items past the committed ``items``."""
        with self.lock:
            if self._mm is None:
                raise IndexClosedError(f"index file {self.begin_ts} is closed")
            dropped = _ix.undo_after(self._mm, self.slots, self.max_items, items, end_ts, used_slots)
            self.items, self.end_ts, self.used_slots = items, end_ts, used_slots
            return dropped

    def flush(self) -> None:
        """msync the writable file (the GIL is released: ``mmap.flush`` would hold it for the
        whole write-back)."""
        with self.lock:
            if self._mm is not None:
                _cl.msync_range(self._mm, 0, len(self._mm))

    def writable_bytes(self) -> bytes:
        """The writable file's bytes (tests and tools)."""
        with self.lock:
            return bytes(self._mm) if self._mm is not None else b""

    # ---- compaction ------------------------------------------------------------------------------
    def compact(self, progress: Optional[Callable[[], None]] = None) -> str:
        """Write the compacted form to the scratch directory, fsync it and rename it into
        ``compacted/``; returns its path. The writable file stays until :meth:`became_compacted`.
        It is written in :data:`COMPACT_PIECES` pieces of slots; ``progress`` is called after each
        piece but the last (the scratch file is then partly written). Each piece checks, under
        the file's lock, that the writable file is still open: a close between pieces (shutdown)
        makes the next piece raise :class:`IndexClosedError`, never read an unmapped file."""
        os.makedirs(os.path.dirname(self.scratch_path), exist_ok=True)
        os.makedirs(os.path.dirname(self.compacted_path), exist_ok=True)
        size = L.compacted_size(self.slots, self.items)
        step = -(-self.slots // COMPACT_PIECES)
        fd = os.open(self.scratch_path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            os.ftruncate(fd, size)
            with mmap.mmap(fd, size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE) as dst:
                wpos = -1
                for lo in range(0, self.slots, step):
                    with self.lock:
                        if self._mm is None:
                            raise IndexClosedError(f"index file {self.begin_ts} closed during its compaction")
                        wpos = _ix.compact(self._mm, dst, self.slots, lo, min(lo + step, self.slots), wpos)
                    if progress is not None and lo + step < self.slots:
                        progress()
                if wpos != size:
                    raise RuntimeError(f"index file {self.begin_ts}: compacted {wpos} bytes, expected {size}")
                _cl.msync_range(dst, 0, size)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(self.scratch_path, self.compacted_path)
        fsync_path(os.path.dirname(self.compacted_path))
        return self.compacted_path

    def became_compacted(self) -> None:
        """Switch reads to the compacted file and delete the writable one."""
        with self.lock:
            self.state = COMPACTED
            self._close_writable()
            _unlink(self.writable_path)

    def became_uploaded(self, base: int, size: int) -> None:
        with self.lock:
            self.state = UPLOADED
            self.seg_base, self.seg_size, self.upload_base = base, size, -1
            self._close_compacted()
            self._close_writable()

    def _close_writable(self) -> None:
        if self._mm is not None:
            try:
                self._mm.close()
            except BufferError:
                log.debug("index file %s still has views; left to the GC", self.writable_path)
            self._mm = None
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def _close_compacted(self) -> None:
        if self._cfd >= 0:
            os.close(self._cfd)
            self._cfd = -1

    def close(self) -> None:
        with self.lock:
            if self._mm is not None:
                _cl.msync_range(self._mm, 0, len(self._mm))
            self._close_writable()
            self._close_compacted()

    def delete_local(self) -> None:
        with self.lock:
            self._close_writable()
            self._close_compacted()
            _unlink(self.writable_path)
            _unlink(self.compacted_path)

    # ---- query -----------------------------------------------------------------------------------
    def query(self, h: int, t_lo: int, t_hi: int, max_count: int, backend: Optional[TierBackend] = None,
              segment_path: Optional[str] = None) -> tuple[list[IndexItem], int]:
        """Items ``(topicId, queueId, offset, size, timeDiff)`` for hash ``h`` whose claimed time
        is in [t_lo, t_hi], newest first, and the number of range reads it took (0 for the
        mapped writable file)."""
        with self.lock:
            state = self.state
            if state == WRITING and self._mm is not None:
                items, _hops = _ix.query_chain(self._mm, self.slots, h, t_lo, t_hi, max_count)
                return items, 0
            if state == COMPACTED:
                if self._cfd < 0:
                    self._cfd = os.open(self.compacted_path, os.O_RDONLY)
                fd = self._cfd
                return self._query_compacted(lambda pos, n: os.pread(fd, n, pos), h, t_lo, t_hi, max_count)
        if state == UPLOADED and backend is not None and segment_path is not None:
            path = segment_path
            return self._query_compacted(lambda pos, n: backend.read(path, pos, n), h, t_lo, t_hi, max_count)
        return [], 0

    def _query_compacted(self, read: Callable[[int, int], bytes], h: int, t_lo: int, t_hi: int,
                         max_count: int) -> tuple[list[IndexItem], int]:
        slot = L.slot_of(h, self.slots)
        raw = read(L.slot_position(slot), L.HASH_SLOT_SIZE)
        reads = 1
        if len(raw) < L.HASH_SLOT_SIZE:
            log.error("index file %d: short slot read", self.begin_ts)
            return [], reads
        pos, length = L.parse_slot(raw, slot)
        out: list[IndexItem] = []
        done = 0
        while length > done and len(out) < max_count:
            n = min(length - done, READ_CHUNK_ITEMS * L.COMPACT_ITEM_SIZE)
            run = read(pos + done, n)
            reads += 1
            out.extend(_ix.filter_run(run, h, self.begin_ts, t_lo, t_hi, max_count - len(out)))
            if len(run) < n:
                break
            done += n
        return out, reads


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


