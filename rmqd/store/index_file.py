"""IndexFile (protocol README section 5.3) and the service managing a list of them.

Layout: 40-byte header, ``slots`` int32 hash slots, ``max_index`` 20-byte items
``keyHash int32 | phyOffset int64 | timeDiff int32 | prevIndex int32`` chained newest-first.
"""
from __future__ import annotations

import logging
import os
import struct
import threading
import time
from dataclasses import dataclass
from typing import Callable, Optional, Protocol

from rmqd.cython_ext import store_put as _sp
from rmqd.store.mapped_file import MappedFile
from rmqd.store.message import java_string_hash

log = logging.getLogger(__name__)

HEADER_SIZE = 40
SLOT_SIZE = 4
ITEM_SIZE = 20
_ITEM = struct.Struct(">iqii")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


def key_hash(key: str) -> int:
    """abs(String.hashCode) with Integer.MIN_VALUE mapped to 0."""
    h = abs(java_string_hash(key))
    return 0 if h > 0x7FFFFFFF else h


def index_file_name(ts_ms: int) -> str:
    """``yyyyMMddHHmmssSSS`` in local time."""
    return time.strftime("%Y%m%d%H%M%S", time.localtime(ts_ms / 1000)) + f"{ts_ms % 1000:03d}"


class _HeaderField(Protocol):
    def __get__(self, obj: "IndexFile", owner: Optional[type] = None) -> int: ...


def _header_field(fmt: struct.Struct, pos: int, doc: str) -> _HeaderField:
    return property(lambda self: fmt.unpack_from(self.mf.buf, pos)[0], doc=doc)


class IndexFile:
    """One index file; the header fields live only in the mapping (the C put path updates them)."""

    def __init__(self, path: str, slots: int, max_index: int, create: bool):
        self.slots = slots
        self.max_index = max_index
        size = HEADER_SIZE + slots * SLOT_SIZE + max_index * ITEM_SIZE
        self.mf = MappedFile(path, 0, size, create=create)
        if self.index_count == 0:
            _I32.pack_into(self.mf.buf, 36, 1)
        self.mf.wrote_pos = size

    begin_timestamp = _header_field(_I64, 0, "store time of the first item")
    end_timestamp = _header_field(_I64, 8, "store time of the last item")
    begin_phy_offset = _header_field(_I64, 16, "commit-log offset of the first item")
    end_phy_offset = _header_field(_I64, 24, "commit-log offset of the last item")
    hash_slot_count = _header_field(_I32, 32, "slots in use")
    index_count = _header_field(_I32, 36, "next item number (items start at 1)")

    @property
    def path(self) -> str:
        return self.mf.path

    def is_full(self) -> bool:
        return self.index_count >= self.max_index

    def put_key(self, key: str, phy_offset: int, store_ts: int) -> bool:
        """Add one key; False when the file is full."""
        return _sp.index_put_key(self.mf.ptr, self.slots, self.max_index, key_hash(key),
                                 phy_offset, store_ts)

    def is_time_matched(self, begin: int, end: int) -> bool:
        return ((begin < self.begin_timestamp and end > self.end_timestamp)
                or self.begin_timestamp <= begin <= self.end_timestamp
                or self.begin_timestamp <= end <= self.end_timestamp)

    def select(self, out: list[int], key: str, max_num: int, begin: int, end: int) -> None:
        """Append to ``out`` the offsets of items matching ``key`` in [begin, end], newest first."""
        h = key_hash(key)
        buf = self.mf.buf
        cur: int = _I32.unpack_from(buf, HEADER_SIZE + (h % self.slots) * SLOT_SIZE)[0]
        if cur <= 0 or cur > self.index_count:
            return
        base = HEADER_SIZE + self.slots * SLOT_SIZE
        seen = 0
        while len(out) < max_num and seen <= self.index_count:
            seen += 1
            kh, phy, tdiff, prev = _ITEM.unpack_from(buf, base + cur * ITEM_SIZE)
            t = self.begin_timestamp + tdiff * 1000
            if kh == h and begin <= t <= end:
                out.append(phy)
            if prev <= 0 or prev > self.index_count or prev == cur or t < begin:
                break
            cur = prev

    def flush(self) -> None:
        self.mf.wrote_pos = self.mf.file_size
        self.mf.flushed_pos = 0
        self.mf.flush()

    def close(self) -> None:
        self.mf.close()

    def destroy(self) -> None:
        self.mf.destroy()


@dataclass
class IndexQueryResult:
    phy_offsets: list[int]
    index_last_update_timestamp: int
    index_last_update_phyoffset: int


class IndexService:
    """Maintains index files under ``<root>/index``; writes happen under the store's put lock."""

    def __init__(self, directory: str, slots: int, max_index: int, clock: Callable[[], int]):
        self.dir = directory
        self.slots = slots
        self.max_index = max_index
        self.clock = clock
        self.files: list[IndexFile] = []
        self._lock = threading.Lock()

    def load(self) -> None:
        os.makedirs(self.dir, exist_ok=True)
        files = []
        for name in sorted(os.listdir(self.dir)):
            if len(name) != 17 or not name.isdigit():
                continue
            files.append(IndexFile(os.path.join(self.dir, name), self.slots, self.max_index, False))
        self.files = files

    def _writable(self) -> IndexFile:
        files = self.files
        if files and not files[-1].is_full():
            return files[-1]
        if files:
            files[-1].flush()
        ts = self.clock()
        name = index_file_name(ts)
        while any(os.path.basename(f.path) == name for f in files):
            ts += 1
            name = index_file_name(ts)
        f = IndexFile(os.path.join(self.dir, name), self.slots, self.max_index, True)
        with self._lock:
            self.files = files + [f]
        return f

    def last_end_phy_offset(self) -> int:
        files = self.files
        return files[-1].end_phy_offset if files else 0

    def build(self, topic: str, keys: Optional[str], uniq_key: Optional[str], phy_offset: int,
              store_ts: int) -> None:
        """Index UNIQ_KEY and each space-separated KEYS token of one message."""
        if self.files and phy_offset < self.files[-1].end_phy_offset:
            return   # already indexed (recovery re-dispatch)
        todo = []
        if uniq_key:
            todo.append(uniq_key)
        if keys:
            todo.extend(k for k in keys.split(" ") if k)
        for k in todo:
            full = f"{topic}#{k}"
            f = self._writable()
            if not f.put_key(full, phy_offset, store_ts):
                f = self._writable()
                if not f.put_key(full, phy_offset, store_ts):
                    log.error("index: cannot add key %r at %d", full, phy_offset)

    def query(self, topic: str, key: str, max_num: int, begin: int, end: int) -> IndexQueryResult:
        out: list[int] = []
        last_ts = last_phy = 0
        files = self.files
        full = f"{topic}#{key}"
        for i in range(len(files) - 1, -1, -1):
            f = files[i]
            if i == len(files) - 1:
                last_ts, last_phy = f.end_timestamp, f.end_phy_offset
            if f.is_time_matched(begin, end):
                f.select(out, full, max_num, begin, end)
            if f.begin_timestamp < begin or len(out) >= max_num:
                break
        return IndexQueryResult(out, last_ts, last_phy)

    def destroy_after(self, phy_offset: int) -> int:
        """Destroy files holding items at or beyond ``phy_offset``; returns the lowest
        beginPhyOffset among them (the re-dispatch start), or ``phy_offset`` if none."""
        start = phy_offset
        with self._lock:
            keep: list[IndexFile] = []
            gone: list[IndexFile] = []
            for f in self.files:
                (gone if f.end_phy_offset >= phy_offset else keep).append(f)
            self.files = keep
        for f in gone:
            log.warning("recovery: dropping index file %s (end offset %d >= %d)",
                        f.path, f.end_phy_offset, phy_offset)
            if f.index_count > 1:
                start = min(start, f.begin_phy_offset)
            f.destroy()
        return start

    def delete_expired(self, commitlog_min: int) -> int:
        """Destroy leading files whose items all point below ``commitlog_min`` (never the last)."""
        with self._lock:
            files = self.files
            n = 0
            for f in files[:-1]:
                if f.end_phy_offset < commitlog_min:
                    n += 1
                else:
                    break
            gone, self.files = files[:n], files[n:]
        for f in gone:
            f.destroy()
        return n

    def flush(self) -> None:
        for f in self.files:
            f.flush()

    def close(self) -> None:
        for f in self.files:
            f.close()
