"""Flat files: one logical append-only file made of segments in a backend (Java ``FlatAppendFile``).

A segment is named by its base offset (the logical offset of its first byte). Appends go to the
last segment; a new segment starts when the caller asks to roll. The segment list is the
metadata: ``size`` is what was written, and what the dispatcher commits to
``tieredStoreMetadata.json`` is the truth after a crash (see :meth:`FlatFile.recover`).
"""
from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Optional, Sequence

from rmqd.store.tier.backend import TierBackend

if TYPE_CHECKING:
    from rmqd.store.tier.metadata import SegmentDoc

log = logging.getLogger(__name__)


@dataclass
class Segment:
    base: int
    size: int = 0
    min_ts: int = -1              # store times of the messages (or index files) inside
    max_ts: int = -1
    created_ms: int = 0
    sealed: bool = False
    first_phys: int = -1          # consume queue segments: the original CommitLog offsets inside
    last_phys: int = -1

    @property
    def end(self) -> int:
        return self.base + self.size

    def to_json(self) -> "SegmentDoc":
        return {"base": self.base, "size": self.size, "min_ts": self.min_ts, "max_ts": self.max_ts,
                "created_ms": self.created_ms, "sealed": self.sealed, "first_phys": self.first_phys,
                "last_phys": self.last_phys}

    @classmethod
    def from_json(cls, d: "SegmentDoc") -> "Segment":
        """Fields ``d`` lacks (metadata written before they existed) keep their defaults; unknown keys are
        ignored."""
        seg = cls(d["base"])
        for k, v in d.items():
            if k in cls.__dataclass_fields__:
                setattr(seg, k, v)
        return seg


@dataclass
class FlatFile:
    """Segments of one file type of one queue (or the uploaded index) in ``backend``."""
    backend: TierBackend
    path_of: Callable[[int], str]
    segments: list[Segment] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    # ---- bounds ---------------------------------------------------------------------------
    @property
    def min_offset(self) -> int:
        segs = self.segments
        return segs[0].base if segs else -1

    @property
    def commit_offset(self) -> int:
        segs = self.segments
        return segs[-1].end if segs else -1

    @property
    def total_size(self) -> int:
        return sum(s.size for s in self.segments)

    def is_empty(self) -> bool:
        segs = self.segments
        return not segs or segs[-1].end == segs[0].base

    # ---- write ----------------------------------------------------------------------------
    def init(self, base: int) -> None:
        """Start an empty file whose first byte will be at ``base``."""
        with self._lock:
            if not self.segments:
                self._new_segment(base)

    def _new_segment(self, base: int) -> Segment:
        # (an orphan at this path from a crash or a rolled-back round was deleted by then)
        seg = Segment(base=base, created_ms=int(time.time() * 1000))
        self.segments = self.segments + [seg]
        return seg

    def append(self, data: bytes, min_ts: int, max_ts: int, roll: bool = False,
               first_phys: int = -1, last_phys: int = -1) -> int:
        """Append ``data`` (durable on return); returns its logical offset. ``roll`` starts a new
        segment first (when the last one is not empty)."""
        with self._lock:
            segs = self.segments
            if not segs:
                raise RuntimeError("flat file not initialised")
            seg = segs[-1]
            if roll and seg.size > 0:
                seg.sealed = True
                seg = self._new_segment(seg.end)
            self.backend.write(self.path_of(seg.base), seg.size, data)
            pos = seg.end
            seg.size += len(data)
            if min_ts >= 0 and (seg.min_ts < 0 or min_ts < seg.min_ts):
                seg.min_ts = min_ts
            if max_ts > seg.max_ts:
                seg.max_ts = max_ts
            if first_phys >= 0 and seg.first_phys < 0:
                seg.first_phys = first_phys
            if last_phys >= 0:
                seg.last_phys = last_phys
            return pos

    # ---- read -----------------------------------------------------------------------------
    def find(self, offset: int) -> Optional[Segment]:
        segs = self.segments
        lo, hi = 0, len(segs)
        while lo < hi:
            mid = (lo + hi) // 2
            if segs[mid].base <= offset:
                lo = mid + 1
            else:
                hi = mid
        if lo == 0:
            return None
        seg = segs[lo - 1]
        return seg if offset < seg.end else None

    def read(self, offset: int, length: int) -> bytes:
        """Bytes [offset, offset+length) clipped to what was written; spans segments."""
        parts: list[bytes] = []
        end = offset + length
        while offset < end:
            seg = self.find(offset)
            if seg is None:
                break
            n = min(end, seg.end) - offset
            data = self.backend.read(self.path_of(seg.base), offset - seg.base, n)
            parts.append(data)
            if len(data) < n:
                log.error("tier: short read of %s at %d (+%d): %d bytes", self.path_of(seg.base),
                          offset - seg.base, n, len(data))
                break
            offset += n
        return parts[0] if len(parts) == 1 else b"".join(parts)

    # ---- lifecycle ------------------------------------------------------------------------
    def recover(self) -> None:
        """Drop bytes written after the last metadata commit (the last segment only receives
        appends; a rolled segment the metadata never saw is deleted by the owner's sweep)."""
        segs = self.segments
        if segs:
            last = segs[-1]
            self.backend.truncate(self.path_of(last.base), last.size)

    def paths(self) -> set[str]:
        return {self.path_of(s.base) for s in self.segments}

    def delete_head(self, keep_from: int) -> list[Segment]:
        """Delete sealed segments that end at or before ``keep_from``; returns them."""
        with self._lock:
            segs = self.segments
            n = 0
            while n < len(segs) - 1 and segs[n].sealed and segs[n].end <= keep_from:
                n += 1
            gone, self.segments = segs[:n], segs[n:]
        for s in gone:
            self.backend.delete(self.path_of(s.base))
        return gone

    def destroy(self) -> None:
        with self._lock:
            gone, self.segments = self.segments, []
        for s in gone:
            self.backend.delete(self.path_of(s.base))

    def to_json(self) -> list["SegmentDoc"]:
        return [s.to_json() for s in self.segments]

    def load_json(self, items: Sequence["SegmentDoc"]) -> None:
        self.segments = [Segment.from_json(d) for d in items]
