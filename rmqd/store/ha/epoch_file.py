"""EpochFileCache: which master epoch wrote which part of this broker's CommitLog (5.x ``EpochFileCache``).

An entry is ``(epoch, startOffset)``; an epoch's data runs to the next entry's start (the last one to the
CommitLog's max offset). The file is 5.x's ``epochFileCheckpoint`` text: the entry count, the CRC32 of the entry
lines (``& 0x7FFFFFFF``), then one ``epoch-startOffset`` line per entry. Unlike Java (which rewrites the file in
place without fsync, controller-5x.md §9) every write is a temp file, fsync, rename and a directory fsync
(:func:`rmqd.common.fileutil.atomic_write`), so a crash leaves the old or the new file, never half of one; the previous
content stays as ``.bak`` and is read when the main file is damaged.

Appending follows 5.x (the epoch must grow, the start must not go back), with one change: an epoch starting at the
same offset as the last one (that epoch wrote nothing) *replaces* it instead of being dropped silently, so the
current epoch is always the last entry.

:func:`consistent_point` is the truncation rule of 5.x's ``AutoSwitchHAClient``: walk the local epochs newest to
oldest; the first one the master has with the same start offset gives ``min(local end, master end)``.
"""
from __future__ import annotations

import logging
import os
import threading
import zlib
from typing import Callable, Optional

from rmqd.common.backup_read import read_with_backup
from rmqd.common.fileutil import atomic_write

log = logging.getLogger(__name__)

LONG_MAX = 2**63 - 1
Entry = tuple[int, int]                      # (epoch, startOffset)


class EpochFileError(ValueError):
    """The epoch file is unreadable (both it and its backup)."""


def encode(entries: list[Entry]) -> str:
    lines = "".join(f"{e}-{s}\n" for e, s in entries)
    crc = zlib.crc32(lines.encode()) & 0x7FFFFFFF
    return f"{len(entries)}\n{crc}\n{lines}"


def decode(text: str) -> list[Entry]:
    parts = text.split("\n")
    if len(parts) < 2:
        raise EpochFileError("too short")
    try:
        count, crc = int(parts[0]), int(parts[1])
    except ValueError as exc:
        raise EpochFileError(f"bad header: {exc}") from None
    body = parts[2:2 + count]
    if len(body) != count:
        raise EpochFileError(f"{count} entries announced, {len(body)} present")
    lines = "".join(f"{line}\n" for line in body)
    if crc and zlib.crc32(lines.encode()) & 0x7FFFFFFF != crc:
        raise EpochFileError("CRC mismatch")
    out = []
    for line in body:
        epoch, _, start = line.partition("-")
        try:
            out.append((int(epoch), int(start)))
        except ValueError:
            raise EpochFileError(f"bad entry {line!r}") from None
    return out


class EpochFileCache:
    """The epoch entries of one store, kept in memory and in ``path`` (see the module docstring)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._lock = threading.Lock()
        self.entries: list[Entry] = []
        self._load()

    def _load(self) -> None:
        found = read_with_backup(self.path, lambda raw: decode(raw.decode("utf-8")),
                                 (OSError, EpochFileError, UnicodeDecodeError), "epoch file")
        self.entries = [] if found is None else found[1]

    def _persist(self) -> None:
        os.makedirs(os.path.dirname(os.path.abspath(self.path)), exist_ok=True)
        atomic_write(self.path, encode(self.entries))

    # ------------------------------------------------------------------ reads
    def last_epoch(self) -> int:
        """The newest epoch, -1 when there is none (what BROKER_HEARTBEAT reports)."""
        with self._lock:
            return self.entries[-1][0] if self.entries else -1

    def last_entry(self) -> Optional[Entry]:
        with self._lock:
            return self.entries[-1] if self.entries else None

    def snapshot(self) -> list[Entry]:
        with self._lock:
            return list(self.entries)

    def with_ends(self, max_offset: int) -> list[tuple[int, int, int]]:
        """``(epoch, start, end)``; the last entry ends at ``max_offset`` (the CommitLog's max)."""
        entries = self.snapshot()
        return [(e, s, entries[i + 1][1] if i + 1 < len(entries) else max_offset) for i, (e, s) in enumerate(entries)]

    # ------------------------------------------------------------------ writes
    def append(self, epoch: int, start: int) -> bool:
        """Record that ``epoch`` starts at ``start``; False (nothing written) when it is older than the last."""
        with self._lock:
            if self.entries:
                last_epoch, last_start = self.entries[-1]
                if epoch == last_epoch and start == last_start:
                    return True
                if epoch <= last_epoch or start < last_start:
                    log.error("epoch entry (%d, %d) refused: the last is (%d, %d)", epoch, start, last_epoch,
                              last_start)
                    return False
                if start == last_start:
                    self.entries.pop()           # that epoch wrote nothing: the new one takes its place
            self.entries.append((epoch, start))
            self._persist()
            return True

    def truncate_suffix(self, offset: int) -> None:
        """Drop the entries that start at or after ``offset`` (the CommitLog was cut there)."""
        self._keep(lambda entry: entry[1] < offset)

    def drop_from_epoch(self, epoch: int) -> None:
        """Drop the entries of ``epoch`` and later (before becoming master at ``epoch``)."""
        self._keep(lambda entry: entry[0] < epoch)

    def _keep(self, wanted: Callable[[Entry], bool]) -> None:
        """Keep only the ``wanted`` entries (persisted when that drops any)."""
        with self._lock:
            keep = [entry for entry in self.entries if wanted(entry)]
            if keep != self.entries:
                self.entries = keep
                self._persist()

    def replace(self, entries: list[Entry]) -> None:
        """Take a master's entries (a slave after the handshake: its CommitLog is a prefix of the master's)."""
        with self._lock:
            entries = [(int(e), int(s)) for e, s in entries]
            if entries != self.entries:
                self.entries = entries
                self._persist()


def consistent_point(local: list[Entry], local_max: int, master: list[Entry], master_max: int) -> int:
    """Where this slave's CommitLog stops agreeing with the master's; -1 when no epoch matches.

    Local entries that start at or past ``local_max`` hold no local data and are ignored. An empty local list
    (or an empty CommitLog) needs no truncation: the CommitLog's max offset is returned, as 5.x does.
    """
    local = [(e, s) for e, s in local if s < local_max]
    if not local or local_max == 0:
        return local_max
    master_ends = {e: (s, master[i + 1][1] if i + 1 < len(master) else master_max) for i, (e, s) in enumerate(master)}
    for i in range(len(local) - 1, -1, -1):
        epoch, start = local[i]
        local_end = local[i + 1][1] if i + 1 < len(local) else local_max
        found = master_ends.get(epoch)
        if found is not None and found[0] == start:
            return min(local_end, found[1])
    return -1
