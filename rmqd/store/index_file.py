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
from typing import Callable, Optional

from rmqd.store.mapped_file import MappedFile
from rmqd.store.message import java_string_hash

log = logging.getLogger(__name__)

HEADER_SIZE = 40
SLOT_SIZE = 4
ITEM_SIZE = 20
_HEADER = struct.Struct(">qqqqii")
_ITEM = struct.Struct(">iqii")
_I32 = struct.Struct(">i")


def key_hash(key: str) -> int:
    """abs(String.hashCode) with Integer.MIN_VALUE mapped to 0."""
    h = abs(java_string_hash(key))
    return 0 if h > 0x7FFFFFFF else h


def index_file_name(ts_ms: int) -> str:
    """``yyyyMMddHHmmssSSS`` in local time."""
    return time.strftime("%Y%m%d%H%M%S", time.localtime(ts_ms / 1000)) + f"{ts_ms % 1000:03d}"


class IndexFile:
    def __init__(self, path: str, slots: int, max_index: int, create: bool):
        self.slots = slots
        self.max_index = max_index
        size = HEADER_SIZE + slots * SLOT_SIZE + max_index * ITEM_SIZE
        self.mf = MappedFile(path, 0, size, create=create)
        (self.begin_timestamp, self.end_timestamp, self.begin_phy_offset, self.end_phy_offset,
         self.hash_slot_count, self.index_count) = _HEADER.unpack_from(self.mf.buf, 0)
        if self.index_count == 0:
            self.index_count = 1
            self._write_header()
        self.mf.wrote_pos = size

    @property
    def path(self) -> str:
        return self.mf.path

    def is_full(self) -> bool:
        return self.index_count >= self.max_index

    def _write_header(self) -> None:
        _HEADER.pack_into(self.mf.buf, 0, self.begin_timestamp, self.end_timestamp,
                          self.begin_phy_offset, self.end_phy_offset, self.hash_slot_count,
                          self.index_count)

    def put_key(self, key: str, phy_offset: int, store_ts: int) -> bool:
        """Add one key; False when the file is full."""
        if self.is_full():
            return False
        h = key_hash(key)
        slot_pos = HEADER_SIZE + (h % self.slots) * SLOT_SIZE
        buf = self.mf.buf
        slot_value = _I32.unpack_from(buf, slot_pos)[0]
        if slot_value <= 0 or slot_value > self.index_count:
            slot_value = 0
        if self.begin_timestamp <= 0:
            time_diff = 0
        else:
            time_diff = (store_ts - self.begin_timestamp) // 1000
            time_diff = max(0, min(time_diff, 0x7FFFFFFF))
        item_pos = HEADER_SIZE + self.slots * SLOT_SIZE + self.index_count * ITEM_SIZE
        _ITEM.pack_into(buf, item_pos, h, phy_offset, time_diff, slot_value)
        _I32.pack_into(buf, slot_pos, self.index_count)
        if self.index_count <= 1:
            self.begin_phy_offset = phy_offset
            self.begin_timestamp = store_ts
        if slot_value == 0:
            self.hash_slot_count += 1
        self.index_count += 1
        self.end_phy_offset = phy_offset
        self.end_timestamp = store_ts
        self._write_header()
        return True

    def is_time_matched(self, begin: int, end: int) -> bool:
        return ((begin < self.begin_timestamp and end > self.end_timestamp)
                or self.begin_timestamp <= begin <= self.end_timestamp
                or self.begin_timestamp <= end <= self.end_timestamp)

    def select(self, out: list, key: str, max_num: int, begin: int, end: int) -> None:
        """Append to ``out`` the offsets of items matching ``key`` in [begin, end], newest first."""
        h = key_hash(key)
        buf = self.mf.buf
        cur = _I32.unpack_from(buf, HEADER_SIZE + (h % self.slots) * SLOT_SIZE)[0]
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
    phy_offsets: list
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
            keep, gone = [], []
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
