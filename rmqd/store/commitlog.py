"""CommitLog: append-only mapped segments of section 4.1 records, flush services, recovery scan."""
from __future__ import annotations

import logging
import mmap
import os
import struct
import threading
from typing import TYPE_CHECKING, Callable, Optional

from rmqd.common import progress
from rmqd.common.constants import BORNHOST_V6_FLAG
from rmqd.cython_ext import message_codec as _codec
from rmqd.cython_ext import store_commitlog as _cl
from rmqd.common.service_thread import ServiceThread
from rmqd.store.mapped_file import MappedFile, MappedFileQueue, offset_to_file_name

if TYPE_CHECKING:
    from _typeshed import ReadableBuffer

log = logging.getLogger(__name__)

PAGE = 4096
END_FILE_MIN_BLANK = 8
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


class AllocateService(ServiceThread):
    """Creates the next segment in the background so roll-over does not block the put path
    (Java ``AllocateMappedFileService``)."""

    def __init__(self, mfq: MappedFileQueue):
        super().__init__("rmqd-store-allocate", interval=60.0, join_timeout=2.0)
        self.mfq = mfq
        self._cv = threading.Condition()
        self._want: Optional[int] = None
        self._ready: Optional[MappedFile] = None
        self._creating: Optional[int] = None

    def request(self, start: int) -> None:
        with self._cv:
            if (self._ready is None or self._ready.file_from_offset != start) and self._want != start:
                self._want = start
                self.wakeup()

    def ready_file(self) -> Optional[MappedFile]:
        """The preallocated next segment, if any (read without locking; for the page warmer)."""
        return self._ready

    def take(self, start: int) -> Optional[MappedFile]:
        """The preallocated file for ``start`` (waiting if it is being created right now), or
        None — then the caller creates it and no background creation of it is pending."""
        with self._cv:
            if self._want == start:
                self._want = None
            while self._creating == start:
                self._cv.wait(1.0)
            mf = self._ready
            if mf is not None and mf.file_from_offset == start:
                self._ready = None
                return mf
            return None

    def run_once(self) -> None:
        with self._cv:
            if self._want is None or self.stopped:
                return
            start = self._want
            self._want = None
            old = self._ready
            self._ready = None
            self._creating = start
        if old is not None:
            log.warning("discarding unused preallocated segment %s", old.path)
            old.destroy()
        mf = None
        try:
            path = os.path.join(self.mfq.directory, offset_to_file_name(start))
            mf = MappedFile(path, start, self.mfq.file_size)
        except Exception:
            log.exception("preallocating commit log segment %d failed", start)
        with self._cv:
            self._creating = None
            self._cv.notify_all()
            if mf is None:
                return
            if self.stopped:
                mf.destroy()
                return
            self._ready = mf

    def on_shutdown(self) -> None:
        with self._cv:
            mf, self._ready = self._ready, None
        if mf is not None:
            mf.destroy()


class CommitLog:
    """Segments under ``<root>/commitlog``.  Appends happen under the store's put lock."""

    def __init__(self, directory: str, file_size: int, max_record_size: int):
        self.mfq = MappedFileQueue(directory, file_size)
        self.file_size = file_size
        self.max_record_size = max_record_size
        self.allocator = AllocateService(self.mfq)
        self.flushed_where = 0
        self._flush_lock = threading.Lock()
        self.read_ahead = True          # 5.x dataReadAheadEnable: segments keep the kernel's read-ahead

    # ---- read-ahead (5.x SET_COMMITLOG_READ_MODE) ------------------------------------------
    def set_read_ahead(self, enabled: bool) -> int:
        """Java's ``CommitLog.scanFileAndSetReadMode``: advise every mapped segment MADV_NORMAL (the kernel's
        read-ahead) or MADV_RANDOM (none: a read of an old message faults in only its own pages, which saves
        page cache when consumers read far behind); segments made later get the same advice. Returns how many
        segments took the advice."""
        self.read_ahead = enabled
        advice = mmap.MADV_NORMAL if enabled else mmap.MADV_RANDOM
        done = sum(mf.advise(advice) for mf in self.mfq.files)
        log.info("commit log read-ahead %s: %d segment(s) advised", "on" if enabled else "off", done)
        return done

    def _new_segment(self, mf: MappedFile) -> MappedFile:
        if not self.read_ahead:
            mf.advise(mmap.MADV_RANDOM)
        return mf

    # ---- bounds ------------------------------------------------------------------------
    def min_offset(self) -> int:
        return self.mfq.min_offset()

    def max_offset(self) -> int:
        return self.mfq.max_offset()

    # ---- write -------------------------------------------------------------------------
    def reserve(self, total: int) -> tuple[MappedFile, int]:
        """Position for a record of ``total`` bytes, writing a BLANK marker and rolling to a new
        segment if it does not fit.  Caller holds the put lock and then calls :meth:`commit`."""
        mf = self.mfq.last()
        if mf is None:
            mf = self._new_segment(self.mfq.create_file(0))
            self.allocator.request(mf.end_offset)
        elif mf.remaining < total + END_FILE_MIN_BLANK:
            if mf.remaining >= END_FILE_MIN_BLANK:
                _cl.write_blank(mf.mm, mf.wrote_pos, mf.remaining)
            mf.wrote_pos = mf.file_size
            nxt = mf.end_offset
            mf = self._new_segment(self.mfq.create_file(nxt, self.allocator.take(nxt)))
            self.allocator.request(mf.end_offset)
        return mf, mf.wrote_pos

    @staticmethod
    def commit(mf: MappedFile, total: int) -> None:
        mf.wrote_pos += total

    def append_raw(self, offset: int, data: "ReadableBuffer") -> int:
        """A slave's append (Java ``CommitLog.appendData``): write ``data``, bytes of the master's
        CommitLog, at exactly ``offset``, which must be where this CommitLog ends; returns the new end.

        Bytes land at the same absolute offsets as on the master, so the segments end up byte for byte
        the same, the BLANK marker the master wrote at a segment's end included (the bytes after it
        count as written, as on the master). A full segment rolls to the next one (the preallocated file
        when there is one); an empty CommitLog starts with the segment holding ``offset``, which must
        be a segment start (a slave joins at the start of one of the master's segments). Raises
        ValueError for any other offset and writes nothing then. Caller holds the put lock and then
        dispatches the range (:meth:`rmqd.cython_ext.store_put.PutEngine.dispatch_range`)."""
        view = memoryview(data).cast("B")
        mf = self.mfq.last()
        if mf is None:
            if offset % self.file_size:
                raise ValueError(f"an empty commit log starts at a segment start, not at {offset}")
            mf = self._new_segment(self.mfq.create_file(offset, self.allocator.take(offset)))
            self.allocator.request(mf.end_offset)
        elif offset != mf.file_from_offset + mf.wrote_pos:
            raise ValueError(f"append at {offset}, but the commit log ends at "
                             f"{mf.file_from_offset + mf.wrote_pos}")
        done, n = 0, len(view)
        while done < n:
            if mf.wrote_pos >= mf.file_size:
                nxt = mf.end_offset
                mf = self._new_segment(self.mfq.create_file(nxt, self.allocator.take(nxt)))
                self.allocator.request(mf.end_offset)
            k = min(n - done, mf.file_size - mf.wrote_pos)
            _cl.copy_in(mf.mm, mf.wrote_pos, view[done:done + k])
            mf.wrote_pos += k
            done += k
        return offset + n

    def first_record_at(self, offset: int) -> int:
        """The offset of the first record (or BLANK marker, or the end of the data) at or after
        ``offset``, found by walking record sizes from the start of its segment."""
        mf = self.mfq.find(offset)
        if mf is None:
            return offset
        pos = offset - mf.file_from_offset
        return mf.file_from_offset + _cl.record_boundary(mf.mm, pos, mf.wrote_pos, self.max_record_size)

    # ---- read --------------------------------------------------------------------------
    def get(self, phys: int, size: int) -> Optional[memoryview]:
        """Zero-copy view of ``size`` bytes at ``phys`` if wholly written and still present."""
        mf = self.mfq.find(phys)
        if mf is None:
            return None
        pos = phys - mf.file_from_offset
        if pos + size > mf.wrote_pos or size <= 0:
            return None
        return mf.view(pos, size)

    def read_record(self, phys: int) -> Optional[memoryview]:
        """Whole record at ``phys`` if a valid, fully written record starts there."""
        mf = self.mfq.find(phys)
        if mf is None:
            return None
        pos = phys - mf.file_from_offset
        total, magic = _cl.read_header(mf.mm, pos)
        if magic != _codec.MESSAGE_MAGIC_CODE or total <= 0 or pos + total > mf.wrote_pos:
            return None
        end, code, _ = _cl.scan_records(mf.mm, pos, pos + total, False, self.max_record_size)
        if code != _cl.SCAN_LIMIT or end != pos + total:
            return None
        return mf.view(pos, total)

    def pickup_store_timestamp(self, phys: int, size: int = 64) -> int:
        """Store time of the record at ``phys`` (Java ``CommitLog.pickupStoreTimestamp``), -1 if it is gone."""
        v = self.get(phys, min(size, 64))
        if v is None or len(v) < 64:
            return -1
        sys_flag = _I32.unpack_from(v, 36)[0]
        ts: int = _I64.unpack_from(v, 48 + (20 if sys_flag & BORNHOST_V6_FLAG else 8))[0]
        return ts

    def roll_next_file(self, phys: int) -> int:
        return phys + self.file_size - phys % self.file_size

    # ---- flush -------------------------------------------------------------------------
    def dirty_bytes(self) -> int:
        return self.max_offset() - self.flushed_where

    def flush(self) -> int:
        """msync everything written so far; returns the flushed offset."""
        with self._flush_lock:
            target = self.max_offset()
            for mf in self.mfq.files:
                if mf.end_offset <= self.flushed_where:
                    continue
                mf.flush()
            self.flushed_where = max(self.flushed_where, target)
            return self.flushed_where

    # ---- recovery ----------------------------------------------------------------------
    def recover(self, start_offset: int, check_crc: bool,
                on_record: Optional[Callable[[MappedFile, int, int], None]] = None,
                dispatch_from: int = 0) -> int:
        """Verify records from the segment containing ``start_offset`` to the end.

        Sets write positions, zeroes the torn tail, removes later segments and returns the valid
        end offset.  ``on_record(mf, pos, size)`` is called for valid records at or past
        ``dispatch_from``.
        """
        files = self.mfq.files
        if not files:
            return 0
        idx = 0
        for i, mf in enumerate(files):
            if mf.file_from_offset <= start_offset:
                idx = i
        valid_end = files[idx].file_from_offset
        verify = progress.phase("verifying commit log", sum(f.file_size for f in files[idx:]), "B")
        for i in range(idx, len(files)):
            mf = files[i]
            verify.advance(files[i - 1].file_size if i > idx else 0)     # the files verified so far
            mf.wrote_pos = 0
            want = on_record is not None and mf.end_offset > dispatch_from
            end, code, recs = _cl.scan_records(mf.mm, 0, mf.file_size, check_crc,
                                               self.max_record_size, want)
            if recs and on_record is not None:
                for pos, size in recs:
                    if mf.file_from_offset + pos >= dispatch_from:
                        on_record(mf, pos, size)
            mf.wrote_pos = mf.flushed_pos = end
            valid_end = mf.file_from_offset + end
            if code == _cl.SCAN_BLANK:
                mf.wrote_pos = mf.flushed_pos = mf.file_size
                valid_end = mf.end_offset
                continue
            if code == _cl.SCAN_LIMIT and end == mf.file_size:
                continue
            if code == _cl.SCAN_CORRUPT:
                log.warning("commit log recovery: damaged record at offset %d; truncating there",
                            valid_end)
            cleared = _cl.zero_tail(mf.mm, end, self.max_record_size + 65536)
            if cleared > end:
                _cl.msync_range(mf.mm, end, cleared)
            break
        verify.__exit__(None, None, None)
        if valid_end % self.file_size == 0 and valid_end > files[idx].file_from_offset:
            self.mfq.truncate_from(valid_end)
        else:
            self.mfq.truncate_from(valid_end - valid_end % self.file_size + self.file_size)
        self.flushed_where = valid_end
        return valid_end

    def start(self) -> None:
        self.allocator.start()

    def shutdown(self) -> None:
        self.allocator.shutdown()
        self.flush()
        self.mfq.close()
