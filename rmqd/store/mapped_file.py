"""Fixed-size memory-mapped files and ordered queues of them (commit log, consume queues).

Lifetime rule for zero-copy reads: slices handed out by :meth:`MappedFile.view` keep the mmap
object alive (Python refuses to close an mmap with exported buffers).  Deleting a file unlinks it
and closes the map only when no view is outstanding; otherwise the mapping is released when the
last view is garbage-collected.  The bytes a view covers are never rewritten while the store
runs (files are append-only; recovery happens before anything is served), so views stay valid.
"""
from __future__ import annotations

import logging
import mmap
import os
import threading
from typing import Optional

from rmqd.cython_ext import store_commitlog as _cl
from rmqd.cython_ext.store_put import MapPtr

log = logging.getLogger(__name__)


def offset_to_file_name(offset: int) -> str:
    """20-digit zero-padded file name for a starting offset."""
    return f"{offset:020d}"


class MappedFile:
    """One fixed-size file mapped read/write.  ``wrote_pos``/``flushed_pos`` are file-relative."""

    __slots__ = ("path", "file_from_offset", "file_size", "fd", "mm", "buf", "ptr", "wrote_pos",
                 "flushed_pos", "_closed")

    def __init__(self, path: str, file_from_offset: int, file_size: int, create: bool = True):
        self.path = path
        self.file_from_offset = file_from_offset
        self.file_size = file_size
        flags = os.O_RDWR | (os.O_CREAT if create else 0)
        self.fd = os.open(path, flags, 0o644)
        try:
            if os.fstat(self.fd).st_size != file_size:
                os.ftruncate(self.fd, file_size)
            self.mm = mmap.mmap(self.fd, file_size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        except Exception:
            os.close(self.fd)
            raise
        self.buf = memoryview(self.mm)
        self.ptr = MapPtr(self.mm)     # raw address for the C put path; released on close
        self.wrote_pos = 0
        self.flushed_pos = 0
        self._closed = False

    @property
    def closed(self) -> bool:
        """The mapping was released (close/destroy)."""
        return self._closed

    @property
    def end_offset(self) -> int:
        return self.file_from_offset + self.file_size

    @property
    def remaining(self) -> int:
        return self.file_size - self.wrote_pos

    def is_full(self) -> bool:
        return self.wrote_pos >= self.file_size

    def view(self, pos: int, size: int) -> memoryview:
        """Zero-copy slice of the file contents (see module docstring for lifetime rules)."""
        return self.buf[pos:pos + size]

    def flush(self, upto: Optional[int] = None) -> int:
        """msync dirty bytes [flushed_pos, upto or wrote_pos); returns the new flushed_pos."""
        end = self.wrote_pos if upto is None else min(upto, self.wrote_pos)
        if end > self.flushed_pos and not self._closed:
            _cl.msync_range(self.mm, self.flushed_pos, end)
            self.flushed_pos = end
        return self.flushed_pos

    def advise(self, advice: int) -> bool:
        """madvise the whole mapping (``mmap.MADV_*``); False (logged) when the kernel refuses or the file
        was closed meanwhile."""
        if self._closed:
            return False
        try:
            self.mm.madvise(advice)
            return True
        except (OSError, ValueError) as exc:
            log.error("madvise(%d) of %s failed: %s", advice, self.path, exc)
            return False

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self.ptr.release()
        try:
            self.buf.release()
        except BufferError:
            log.debug("base view of %s is exported; leaving it to the GC", self.path)
        try:
            self.mm.close()
        except BufferError:
            log.debug("mmap %s still has outstanding views; it will be unmapped when they go", self.path)
        os.close(self.fd)

    def destroy(self) -> None:
        """Close and unlink the file."""
        self.close()
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            log.warning("mapped file %s already gone", self.path)


class MappedFileQueue:
    """Ordered list of same-sized mapped files named by their starting offset.

    The list is replaced copy-on-write so readers can iterate a snapshot without locking.
    """

    def __init__(self, directory: str, file_size: int):
        self.directory = directory
        self.file_size = file_size
        self.files: list[MappedFile] = []
        self._lock = threading.Lock()
        self.padded = False   # load() zero-filled a truncated file

    def load(self, pad_short: bool = False) -> None:
        """Map every existing file (sorted by offset); files of the wrong size are rejected,
        except that a short last file (or any short file with ``pad_short``) is zero-filled."""
        os.makedirs(self.directory, exist_ok=True)
        files = []
        names = [n for n in sorted(os.listdir(self.directory)) if len(n) == 20 and n.isdigit()]
        for name in names:
            path = os.path.join(self.directory, name)
            size = os.path.getsize(path)
            if size < self.file_size and (pad_short or name == names[-1]):
                # a torn/truncated file: zero-fill to full size; recovery then drops the damage
                log.error("recovery: %s is truncated (%d of %d bytes); zero-filling it", path, size,
                          self.file_size)
                os.truncate(path, self.file_size)
                size = self.file_size
                self.padded = True
            if size != self.file_size:
                raise RuntimeError(f"{path}: size {size} != configured {self.file_size}; "
                                   "refusing to load (file size config changed?)")
            mf = MappedFile(path, int(name), self.file_size, create=False)
            mf.wrote_pos = mf.flushed_pos = self.file_size
            files.append(mf)
        self.files = files

    def last(self) -> Optional[MappedFile]:
        files = self.files
        return files[-1] if files else None

    def first(self) -> Optional[MappedFile]:
        files = self.files
        return files[0] if files else None

    def create_file(self, start_offset: int, prepared: Optional[MappedFile] = None) -> MappedFile:
        """Append a new file starting at ``start_offset`` (using ``prepared`` if it matches)."""
        if prepared is not None and prepared.file_from_offset == start_offset:
            mf = prepared
        else:
            if prepared is not None:
                prepared.destroy()
            os.makedirs(self.directory, exist_ok=True)
            mf = MappedFile(os.path.join(self.directory, offset_to_file_name(start_offset)),
                            start_offset, self.file_size)
        with self._lock:
            self.files = self.files + [mf]
        return mf

    def find(self, offset: int) -> Optional[MappedFile]:
        """File containing absolute ``offset`` or None."""
        files = self.files
        if not files:
            return None
        first = files[0].file_from_offset
        idx = (offset - first) // self.file_size
        if 0 <= idx < len(files):
            mf = files[idx]
            if mf.file_from_offset <= offset < mf.end_offset:
                return mf
        for mf in files:  # tolerate holes
            if mf.file_from_offset <= offset < mf.end_offset:
                return mf
        return None

    def min_offset(self) -> int:
        f = self.first()
        return f.file_from_offset if f else 0

    def max_offset(self) -> int:
        f = self.last()
        return f.file_from_offset + f.wrote_pos if f else 0

    def remove_first(self, n: int) -> list[MappedFile]:
        """Detach the first ``n`` files from the list and destroy them."""
        with self._lock:
            gone, self.files = self.files[:n], self.files[n:]
        for mf in gone:
            mf.destroy()
        return gone

    def truncate_from(self, offset: int) -> None:
        """Drop files starting at or after ``offset`` (used by recovery)."""
        with self._lock:
            keep = [f for f in self.files if f.file_from_offset < offset]
            gone = [f for f in self.files if f not in keep]
            self.files = keep
        for mf in gone:
            log.warning("recovery: removing file %s beyond offset %d", mf.path, offset)
            mf.destroy()

    def flush(self) -> None:
        for mf in self.files:
            if mf.flushed_pos < mf.wrote_pos:
                mf.flush()

    def close(self) -> None:
        for mf in self.files:
            mf.close()
