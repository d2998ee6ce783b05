"""Tier backends: where segment files live (Java's ``FileSegmentProvider``).

A segment is addressed by a relative path (Java's scheme, :func:`segment_path`) and written only
by appending at its current end. Every backend answers the same calls, and one test suite runs
against all of them:

* ``write(path, position, data)`` — append ``data`` at ``position`` (the bytes committed so far);
  durable when it returns (Posix: written and fsync'ed, as Java's "rwd" channel + force).
* ``read(path, position, length)`` — one range read.
* ``size(path)``, ``truncate(path, size)`` (recovery drops what the metadata never committed),
  ``delete(path)``, ``list(prefix)`` (path -> size).

:class:`PosixBackend` keeps the files under ``tieredStoreFilePath``; :class:`MemoryBackend` keeps
them in this process (Java's MemoryFileSegment: tests, and lost at exit);
:class:`rmqd.store.tier.s3.S3Backend` keeps them in an S3-compatible bucket.
"""
from __future__ import annotations

import hashlib
import logging
import os
import threading
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Callable, Optional

from rmqd.store.tier.config import PROVIDERS, provider_name  # noqa: F401 (this module's API too)

log = logging.getLogger(__name__)

COMMIT_LOG = "COMMIT_LOG"
CONSUME_QUEUE = "CONSUME_QUEUE"
INDEX = "INDEX"
INDEX_TOPIC = "rmq_sys_INDEX"      # the pseudo queue rmq_sys_INDEX/0 holds the uploaded index


def md5_prefix(text: str) -> str:
    """First 8 hex digits of the MD5 of ``text`` (Java ``MessageStoreUtil.getHash``)."""
    return hashlib.md5(text.encode("utf-8")).hexdigest()[:8]


def offset_to_file_name(offset: int) -> str:
    """Java ``MessageStoreUtil.offset2FileName``: md5(offset)[:8] + the 20-digit offset."""
    return md5_prefix(str(offset)) + f"{offset:020d}"


def segment_path(cluster: str, broker: str, topic: str, queue_id: int, file_type: str, base: int) -> str:
    """``<md5(cluster)[:8]>_<cluster>/<broker>/<topic>/<queueId>/<TYPE>/<offset2FileName(base)>``."""
    return f"{md5_prefix(cluster)}_{cluster}/{broker}/{topic}/{queue_id}/{file_type}/{offset_to_file_name(base)}"


@dataclass
class BackendStats:
    reads: int = 0
    read_bytes: int = 0
    writes: int = 0
    write_bytes: int = 0


class TierBackend(ABC):
    """See the module docstring. Implementations are thread-safe."""

    name = "abstract"
    upload_part_size = 8 << 20        # bytes per part of :meth:`upload` (S3: at least 5 MiB but the last)

    def __init__(self) -> None:
        self.stats = BackendStats()
        self._stats_lock = threading.Lock()

    def _count_read(self, n: int) -> None:
        with self._stats_lock:
            self.stats.reads += 1
            self.stats.read_bytes += n

    def _count_write(self, n: int) -> None:
        with self._stats_lock:
            self.stats.writes += 1
            self.stats.write_bytes += n

    @abstractmethod
    def write(self, path: str, position: int, data: bytes) -> None: ...

    @abstractmethod
    def read(self, path: str, position: int, length: int) -> bytes: ...

    @abstractmethod
    def size(self, path: str) -> int: ...

    @abstractmethod
    def truncate(self, path: str, size: int) -> None: ...

    @abstractmethod
    def delete(self, path: str) -> None: ...

    @abstractmethod
    def list(self, prefix: str = "") -> dict[str, int]: ...

    def upload(self, path: str, local_file: str, progress: Optional[Callable[[], None]] = None) -> None:
        """Copy a whole local file into the (new, empty) segment ``path``, in parts of
        :attr:`upload_part_size`; ``progress`` is called after each part but the last (the
        segment is then partly written). A partial segment is never committed: recovery deletes
        it and uploads again."""
        pos = 0
        size = os.path.getsize(local_file)
        with open(local_file, "rb") as f:
            while True:
                data = f.read(self.upload_part_size)
                if not data:
                    break
                self.write(path, pos, data)
                pos += len(data)
                if progress is not None and pos < size:
                    progress()

    def abort_partial_uploads(self, prefix: str) -> int:
        """Remove what interrupted uploads left under ``prefix`` outside the segments (S3:
        multipart uploads never completed); returns how many. Called at start, before anything
        uploads."""
        return 0

    @property
    def persistent(self) -> bool:
        """Whether the data outlives this process."""
        return True

    def describe(self) -> str:
        return self.name

    def close(self) -> None:
        """Release handles (files, connections)."""


class PosixBackend(TierBackend):
    """Segment files under a local (or mounted) directory, Java's PosixFileSegment layout."""

    name = "posix"

    def __init__(self, root: str) -> None:
        super().__init__()
        if not root:
            raise ValueError("the posix tier backend needs tieredStoreFilePath (or rmqd serve --tier-dir)")
        self.root = os.path.abspath(os.path.expanduser(root))
        os.makedirs(self.root, exist_ok=True)
        self._fds: dict[str, int] = {}          # read handles, kept open (index queries reuse them)
        self._lock = threading.Lock()

    def _full(self, path: str) -> str:
        full = os.path.normpath(os.path.join(self.root, path))
        if not full.startswith(self.root + os.sep):
            raise ValueError(f"tier path escapes the tier directory: {path!r}")
        return full

    def describe(self) -> str:
        return f"posix:{self.root}"

    def write(self, path: str, position: int, data: bytes) -> None:
        full = self._full(path)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        fd = os.open(full, os.O_WRONLY | os.O_CREAT, 0o644)
        try:
            view = memoryview(data)
            done = 0
            while done < len(view):
                done += os.pwrite(fd, view[done:], position + done)
            os.fsync(fd)
        finally:
            os.close(fd)
        self._count_write(len(data))

    def upload(self, path: str, local_file: str, progress: Optional[Callable[[], None]] = None) -> None:
        """Kernel-side copy (sendfile(2), GIL released) part by part, then fsync."""
        full = self._full(path)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        self._forget(path)
        src = os.open(local_file, os.O_RDONLY)
        try:
            dst = os.open(full, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            try:
                size = os.fstat(src).st_size
                pos = 0
                while pos < size:
                    end = min(pos + self.upload_part_size, size)
                    while pos < end:
                        n = os.sendfile(dst, src, pos, end - pos)
                        if n <= 0:
                            raise OSError(f"tier upload of {local_file}: sendfile returned {n} at {pos}")
                        pos += n
                    if progress is not None and pos < size:
                        progress()
                os.fsync(dst)
            finally:
                os.close(dst)
        finally:
            os.close(src)
        self._count_write(size)

    def _read_fd(self, path: str) -> int:
        fd = self._fds.get(path)
        if fd is None:
            with self._lock:
                fd = self._fds.get(path)
                if fd is None:
                    fd = os.open(self._full(path), os.O_RDONLY)
                    if len(self._fds) >= 256:
                        for old in list(self._fds)[:64]:
                            os.close(self._fds.pop(old))
                    self._fds[path] = fd
        return fd

    def read(self, path: str, position: int, length: int) -> bytes:
        try:
            data = os.pread(self._read_fd(path), length, position)
        except OSError:
            self._forget(path)                   # closed by a concurrent eviction: once more
            data = os.pread(self._read_fd(path), length, position)
        self._count_read(len(data))
        return data

    def _forget(self, path: str) -> None:
        with self._lock:
            fd = self._fds.pop(path, None)
        if fd is not None:
            os.close(fd)

    def size(self, path: str) -> int:
        try:
            return os.path.getsize(self._full(path))
        except FileNotFoundError:
            return 0

    def truncate(self, path: str, size: int) -> None:
        full = self._full(path)
        if os.path.exists(full) and os.path.getsize(full) > size:
            log.warning("tier: truncating %s to %d bytes (written after the last metadata commit)", full, size)
            os.truncate(full, size)

    def delete(self, path: str) -> None:
        self._forget(path)
        try:
            os.unlink(self._full(path))
        except FileNotFoundError:
            pass

    def list(self, prefix: str = "") -> dict[str, int]:
        out = {}
        for d, _dirs, files in os.walk(self.root):
            for f in files:
                rel = os.path.relpath(os.path.join(d, f), self.root)
                if rel.startswith(prefix):
                    out[rel] = os.path.getsize(os.path.join(d, f))
        return out

    def close(self) -> None:
        with self._lock:
            fds, self._fds = self._fds, {}
        for fd in fds.values():
            os.close(fd)


class MemoryBackend(TierBackend):
    """Segments in this process's memory (Java's MemoryFileSegment): for tests; gone at exit."""

    name = "memory"

    def __init__(self) -> None:
        super().__init__()
        self._data: dict[str, bytearray] = {}
        self._lock = threading.Lock()

    @property
    def persistent(self) -> bool:
        return False

    def write(self, path: str, position: int, data: bytes) -> None:
        with self._lock:
            buf = self._data.setdefault(path, bytearray())
            if position != len(buf):
                del buf[position:]
                if position > len(buf):
                    buf.extend(bytes(position - len(buf)))
            buf.extend(data)
        self._count_write(len(data))

    def read(self, path: str, position: int, length: int) -> bytes:
        with self._lock:
            buf = self._data.get(path)
            data = bytes(buf[position:position + length]) if buf is not None else b""
        self._count_read(len(data))
        return data

    def size(self, path: str) -> int:
        with self._lock:
            buf = self._data.get(path)
            return len(buf) if buf is not None else 0

    def truncate(self, path: str, size: int) -> None:
        with self._lock:
            buf = self._data.get(path)
            if buf is not None:
                del buf[size:]

    def delete(self, path: str) -> None:
        with self._lock:
            self._data.pop(path, None)

    def list(self, prefix: str = "") -> dict[str, int]:
        with self._lock:
            return {p: len(b) for p, b in self._data.items() if p.startswith(prefix)}


def make_backend(provider: str, file_path: str = "", endpoint: str = "", bucket: str = "",
                 access_key: str = "", secret_key: str = "", region: str = "") -> TierBackend:
    """The backend a tieredBackendServiceProvider value names."""
    name = provider_name(provider)
    if name == "posix":
        return PosixBackend(file_path)
    if name == "memory":
        return MemoryBackend()
    from rmqd.store.tier.s3 import S3Backend
    return S3Backend(endpoint=endpoint, bucket=bucket, access_key=access_key, secret_key=secret_key,
                     region=region or None, prefix=s3_prefix(file_path))


def s3_prefix(file_path: str) -> Optional[str]:
    """tieredStoreFilePath doubles as a key prefix inside the bucket for the S3 backend."""
    p = (file_path or "").strip("/")
    return p or None
