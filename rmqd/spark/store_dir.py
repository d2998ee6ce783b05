"""Reading a store directory with no broker running (the ``path`` option).

The layout is RocketMQ's: ``consumequeue/<topic>/<qid>/<20-digit byte offset>`` files of 20-byte units
(phys i64, size i32, tagsCode i64) and ``commitlog/<20-digit start>`` files. A partition is one queue's
offset range; only the ConsumeQueue files overlapping it and the CommitLog files its records live in
are opened. Offset, queue, topic and store-time filters narrow the ranges first (time by binary
search over the units). Every file opened is appended to ``fileAccessLog`` when that option is set.
"""
from __future__ import annotations

import logging
import mmap
import os
import re
import struct
import threading
import time
from typing import TYPE_CHECKING, Optional

from rmqd.spark.remote import ConnectorError
from rmqd.store.config import StoreConfig

if TYPE_CHECKING:
    from rmqd.cython_ext.record_columns import Columns

CQ_UNIT = 20
_UNIT = struct.Struct(">qiq")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
BLANK_SIZE = 0x7FFFFFFF

log = logging.getLogger(__name__)


#: (device, inode, size, mtime) of a store file: a map is used only while the file is still this one
_FileIdentity = tuple[int, int, int, int]


class MapCache:
    """Read-only maps of store files kept between readers in one process. A Spark Python worker runs many
    tasks, and every queue's records are spread over the same CommitLog pages, so a later task (or query)
    finds the pages already mapped instead of taking the page faults again. A map is used only while the
    file on disk is the one mapped (same device, inode, size and mtime). When a reader closes, maps of
    files that changed or were deleted (retention) are dropped, and all of them ``idle_s`` seconds after
    the last close unless a reader used them since, so a worker never holds a deleted file's disk space
    for long."""

    def __init__(self, capacity: int = 64, idle_s: float = 30.0) -> None:
        self.capacity, self.idle_s = capacity, idle_s
        self._maps: dict[str, tuple[_FileIdentity, mmap.mmap]] = {}
        self._lock = threading.Lock()
        self._used = 0.0                              # monotonic time of the last get
        self._timer: Optional[threading.Timer] = None

    @staticmethod
    def _identity(path: str) -> Optional[_FileIdentity]:
        try:
            st = os.stat(path)
        except FileNotFoundError:
            return None
        return st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns

    def get(self, path: str) -> Optional[mmap.mmap]:
        """The file's map (None when it is missing or empty)."""
        ident = self._identity(path)
        with self._lock:
            self._used = time.monotonic()
            hit = self._maps.pop(path, None)
            if ident is None or ident[2] == 0:
                return None
            if hit is None or hit[0] != ident:
                try:
                    hit = (ident, self._open(path))
                except FileNotFoundError:            # deleted since the stat
                    return None
            self._maps[path] = hit                   # most recently used last
            while len(self._maps) > self.capacity:  # unmapped once no reader holds it any more
                self._maps.pop(next(iter(self._maps)))
            return hit[1]

    @staticmethod
    def _open(path: str) -> mmap.mmap:
        with open(path, "rb") as f:
            return mmap.mmap(f.fileno(), os.fstat(f.fileno()).st_size, access=mmap.ACCESS_READ)

    def release(self) -> None:
        """A reader is done: forget the maps of files that are gone or changed, and schedule ``expire``."""
        with self._lock:
            for path in [p for p, (ident, _m) in self._maps.items() if self._identity(p) != ident]:
                del self._maps[path]
            if self._maps and self._timer is None:
                self._schedule()

    def _schedule(self) -> None:
        """``expire`` in ``idle_s`` seconds (caller holds the lock)."""
        self._timer = threading.Timer(self.idle_s, self.expire)
        self._timer.daemon = True
        self._timer.start()

    def expire(self) -> None:
        """Drop every map when none was used for ``idle_s`` seconds, else look again later."""
        with self._lock:
            self._timer = None
            if time.monotonic() - self._used >= self.idle_s:
                self._maps.clear()
            elif self._maps:
                self._schedule()


MAPS = MapCache()


class FileAccess:
    """Opens files read-only (mmap, through the process's MapCache), remembers them, and logs each first
    open to ``log_path``."""

    def __init__(self, log_path: Optional[str] = None, maps: MapCache = MAPS) -> None:
        self.log_path = log_path
        self.maps = maps
        self._maps: dict[str, mmap.mmap] = {}

    def map(self, path: str) -> Optional[mmap.mmap]:
        m = self._maps.get(path)
        if m is None:
            m = self.maps.get(path)
            if m is None:
                return None
            self._maps[path] = m
            if self.log_path:
                with open(self.log_path, "a") as log:
                    log.write(path + "\n")
        return m

    def close(self) -> None:
        """Done with the files: the maps stay in the MapCache for the next reader."""
        self._maps.clear()
        self.maps.release()


def _numbered(d: str) -> list[int]:
    try:
        return sorted(int(n) for n in os.listdir(d) if n.isdigit())
    except FileNotFoundError:
        return []


class StoreLayout:
    """A store directory as the connector reads it: the store's own layout of its root (``StoreConfig``'s)."""

    def __init__(self, root: str) -> None:
        dirs = StoreConfig(store_root_dir=root)
        self.root = root
        self.cq_root = dirs.consume_queue_dir
        self.commitlog_dir = dirs.commitlog_dir

    def check(self) -> None:
        if not os.path.isdir(self.cq_root) or not os.path.isdir(self.commitlog_dir):
            raise ConnectorError(f"option 'path': {self.root!r} is not a RocketMQ store directory (no "
                                 "consumequeue/ and commitlog/)")

    def topics(self, topic: Optional[str], pattern: Optional[str]) -> list[str]:
        present = sorted(os.listdir(self.cq_root))
        if topic:
            wanted = [t.strip() for t in topic.split(",") if t.strip()]
            missing = [t for t in wanted if t not in present]
            if missing:
                raise ConnectorError(f"option 'topic': {', '.join(missing)} not in the store at {self.root!r}")
            return wanted
        if pattern:
            rx = re.compile(pattern)
            return [t for t in present if rx.fullmatch(t)]
        raise ConnectorError("set one of the options 'topic' (comma list) and 'topicPattern'")

    def queue_ids(self, topic: str) -> list[int]:
        d = os.path.join(self.cq_root, topic)
        return sorted(int(q) for q in os.listdir(d) if q.isdigit())

    def cq_files(self, topic: str, qid: int) -> tuple[str, list[int]]:
        d = os.path.join(self.cq_root, topic, str(qid))
        return d, _numbered(d)

    def commitlog_files(self) -> list[int]:
        return _numbered(self.commitlog_dir)


class QueueFiles:
    """One queue's ConsumeQueue files and the CommitLog files, opened on demand through FileAccess."""

    def __init__(self, layout: StoreLayout, topic: str, qid: int, access: FileAccess,
                 cq_file_size: Optional[int] = None, commitlog_size: Optional[int] = None) -> None:
        self.layout, self.access = layout, access
        self.cq_dir, self.cq_names = layout.cq_files(topic, qid)
        self.cl_names = layout.commitlog_files()
        self.cq_file_size = cq_file_size or self._size(self.cq_dir, self.cq_names)
        self.cl_size = commitlog_size or self._size(layout.commitlog_dir, self.cl_names)

    @staticmethod
    def _size(d: str, names: list[int]) -> int:
        """Files are preallocated to the configured size: the first one tells it (the last may be short)."""
        if not names:
            return 0
        return max(os.path.getsize(os.path.join(d, f"{n:020d}")) for n in names[:1])

    def bounds(self) -> tuple[int, int]:
        """[min, max) logical offsets present: first file's start .. the first zero unit of the last file."""
        if not self.cq_names or not self.cq_file_size:
            return 0, 0
        per = self.cq_file_size // CQ_UNIT
        lo = self.cq_names[0] // CQ_UNIT
        last = self.cq_names[-1]
        m = self.access.map(os.path.join(self.cq_dir, f"{last:020d}"))
        if m is None:
            return lo, last // CQ_UNIT
        a, b = 0, len(m) // CQ_UNIT
        while a < b:                                 # first unit whose size is 0
            mid = (a + b) // 2
            if _I32.unpack_from(m, mid * CQ_UNIT + 8)[0] != 0:
                a = mid + 1
            else:
                b = mid
        del per
        return lo, last // CQ_UNIT + a

    def unit(self, logical: int) -> Optional[tuple[int, int, int]]:
        byte = logical * CQ_UNIT
        start = byte - byte % self.cq_file_size
        m = self.access.map(os.path.join(self.cq_dir, f"{start:020d}"))
        pos = byte - start
        if m is None or pos + CQ_UNIT > len(m):
            return None
        return _UNIT.unpack_from(m, pos)

    def record(self, phys: int, size: int) -> Optional[memoryview]:
        if not self.cl_size:
            return None
        start = phys - phys % self.cl_size
        m = self.access.map(os.path.join(self.layout.commitlog_dir, f"{start:020d}"))
        pos = phys - start
        if m is None or pos + size > len(m):
            return None
        return memoryview(m)[pos:pos + size]

    def store_time(self, logical: int) -> int:
        u = self.unit(logical)
        if u is None or u[1] in (0, BLANK_SIZE):
            return -1
        rec = self.record(u[0], min(u[1], 96))
        if rec is None or len(rec) < 64:
            return -1
        sys_flag = _I32.unpack_from(rec, 36)[0]
        return int(_I64.unpack_from(rec, 48 + (20 if sys_flag & 0x10 else 8))[0])

    def offset_at_time(self, ts: int, lo: int, hi: int) -> int:
        """First logical offset in [lo, hi) stored at or after ``ts`` (hi when none)."""
        a, b = lo, hi
        while a < b:
            mid = (a + b) // 2
            t = self.store_time(mid)
            if t < 0 or t < ts:
                a = mid + 1
            else:
                b = mid
        return a

    def decode(self, start: int, end: int, max_bytes: int, cols: Columns) -> int:
        """Decode the records of [start, end) into ``cols`` (a ``record_columns.Columns``) until the next
        one would take it past ``max_bytes`` of records; returns the next offset. Each record is decoded in C straight out
        of its mapped CommitLog file (``record_columns.decode_units``), one CommitLog file at a time."""
        from rmqd.cython_ext import record_columns as _rc
        off = start
        per = self.cq_file_size // CQ_UNIT
        while off < end and cols.record_bytes < max_bytes:
            byte = off * CQ_UNIT
            fstart = byte - byte % self.cq_file_size
            m = self.access.map(os.path.join(self.cq_dir, f"{fstart:020d}"))
            if m is None:                               # this file is gone: skip to the next one
                off = (off // per + 1) * per
                continue
            pos = byte - fstart
            stop = min(len(m), (end - off) * CQ_UNIT + pos)
            if pos + CQ_UNIT > stop:
                off = max(off, fstart // CQ_UNIT + per) if stop >= len(m) else end
                continue
            phys, size, _tags = _UNIT.unpack_from(m, pos)
            if size == 0:
                return end
            cl_start = phys - phys % self.cl_size if self.cl_size else 0
            cl = self.access.map(os.path.join(self.layout.commitlog_dir, f"{cl_start:020d}")) if self.cl_size else None
            if cl is None:                              # its CommitLog file is gone: skip the unit
                off += 1
                continue
            new_pos, why, damaged = _rc.decode_units(m, pos, stop, cl_start, cl, cols, max_bytes)
            if damaged:
                log.warning("store directory %s: %d ConsumeQueue units of %s offsets [%d, %d) point at no "
                            "record of their size in CommitLog file %020d; skipped", self.layout.root, damaged,
                            self.cq_dir, off, off + (new_pos - pos) // CQ_UNIT, cl_start)
            off += (new_pos - pos) // CQ_UNIT
            if why == 3:
                return end
            if why == 2:                                # ``cols`` is full
                return off
            if why == 1 and new_pos == pos:             # record beyond the file's end: damaged, skip it
                off += 1
        return off
