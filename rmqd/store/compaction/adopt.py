"""Compactions computed outside the broker (``rmqd pipeline compact``) and their adoption.

A job writes its output next to the store (default ``<store>/compaction/pipeline/``):

    <topic>-<job>.tmp/                    while the job runs: never adopted
    <topic>-<job>/manifest.json           complete (renamed from .tmp): what it read and what it wrote
    <topic>-<job>/<qid>/compactionLog/<name>, <qid>/compactionCq/<name>   the broker's formats, one pair per
                                          input segment that kept records (the same 20-digit names)

The manifest records, per queue, the sealed segments the job read (name, record bytes, unit count,
first/last queue offset) and, for each, the compacted pair, "unchanged", or nothing (no record kept).

Adoption (``CompactionStore.adopt``, from ``rmqd admin adoptCompaction`` or at broker start) holds the
topic's compaction locks, checks that every input segment is still the one the job read (else the output
is stale: the broker compacted or the topic changed meanwhile, and nothing is touched), writes the
``ADOPTING`` marker, then swaps each queue's segments oldest first with the broker's own crash-safe swap
(``QueueCompactionLog.adopt``/``drop``), marks the queue ``<qid>.adopted``, moves its checkpoint, and
removes the directory. A crash after the marker is rolled forward at the next start (a swap already done
is recognised by the segment in place no longer matching its input); before it, nothing changed. Oldest first means a
half-adopted queue is a correct, less compacted table, and the roll-forward completes it before the
broker serves anything.
"""
from __future__ import annotations

import json
import logging
import os
import shutil
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, NotRequired, Optional, TypedDict

from rmqd.common.fileutil import atomic_write, fsync_path
from rmqd.store.compaction.config import PIPELINE_DIR  # noqa: F401 (this module's API too)
from rmqd.store.compaction.queue_log import QueueCompactionLog

if TYPE_CHECKING:
    from rmqd.store.compaction.queue_log import Segment

log = logging.getLogger(__name__)

FORMAT = "rmqd-compaction-output"
VERSION = 1
MANIFEST = "manifest.json"
ADOPTING = "ADOPTING"
STAGING_SUFFIX = ".tmp"
STALE_SUFFIX = ".stale"


class StaleOutput(Exception):
    """The output no longer matches the compaction log it was computed from."""


class AdoptResult(TypedDict):
    """What adopting one output did (``rmqd admin adoptCompaction``)."""
    output: str
    adopted: bool
    error: NotRequired[str]
    topic: NotRequired[str]
    job: NotRequired[str]
    resumed: NotRequired[bool]
    segmentsReplaced: NotRequired[int]
    segmentsDropped: NotRequired[int]
    recordsBefore: NotRequired[int]
    recordsAfter: NotRequired[int]


class SegmentInputDoc(TypedDict):
    base: int
    log_size: int
    units: int
    first_offset: int
    last_offset: int


class SegmentOutputDoc(TypedDict):
    units: int
    log_size: int
    unchanged: bool


class QueuePlanDoc(TypedDict):
    queueId: int
    checkpoint: int
    inputs: list[SegmentInputDoc]
    outputs: dict[str, SegmentOutputDoc]      # by segment base


class ManifestDoc(TypedDict):
    """``manifest.json`` of a compaction output."""
    format: str
    version: int
    topic: str
    job: str
    createdMs: int
    queues: list[QueuePlanDoc]


@dataclass
class SegmentInput:
    """A sealed segment as the job read it. A compaction only ever removes records, so these figures
    tell whether the segment in place is still this one (copies of the store keep them too)."""
    base: int
    log_size: int           # bytes of records (the blank after them not counted)
    units: int
    first_offset: int
    last_offset: int

    def to_json(self) -> SegmentInputDoc:
        return {"base": self.base, "log_size": self.log_size, "units": self.units, "first_offset": self.first_offset,
                "last_offset": self.last_offset}

    def matches(self, seg: Optional["Segment"]) -> bool:
        return (seg is not None and seg.sealed and seg.log_size == self.log_size and len(seg.qoffs) == self.units
                and seg.qoffs[0] == self.first_offset and seg.qoffs[-1] == self.last_offset)


@dataclass
class SegmentOutput:
    units: int
    log_size: int
    unchanged: bool = False          # nothing to drop: the segment stays as it is (no files written)

    def to_json(self) -> SegmentOutputDoc:
        return {"units": self.units, "log_size": self.log_size, "unchanged": self.unchanged}


@dataclass
class QueuePlan:
    queue_id: int
    checkpoint: int                              # last queue offset of the compacted (sealed) range
    inputs: list[SegmentInput] = field(default_factory=list)
    outputs: dict[int, SegmentOutput] = field(default_factory=dict)    # base -> pair written

    def records_in(self) -> int:
        return sum(s.units for s in self.inputs)

    def records_out(self) -> int:
        return sum(o.units for o in self.outputs.values())

    def segments_rewritten(self) -> int:
        return sum(1 for o in self.outputs.values() if not o.unchanged)


@dataclass
class StagedCompaction:
    topic: str
    job: str
    created_ms: int
    queues: list[QueuePlan]

    def to_json(self) -> ManifestDoc:
        return {"format": FORMAT, "version": VERSION, "topic": self.topic, "job": self.job,
                "createdMs": self.created_ms,
                "queues": [{"queueId": q.queue_id, "checkpoint": q.checkpoint,
                            "inputs": [s.to_json() for s in q.inputs],
                            "outputs": {str(b): o.to_json() for b, o in sorted(q.outputs.items())}}
                           for q in self.queues]}

    @classmethod
    def from_json(cls, d: ManifestDoc) -> "StagedCompaction":
        if d.get("format") != FORMAT or d.get("version") != VERSION:
            raise ValueError(f"not a {FORMAT} v{VERSION} manifest")
        queues = [QueuePlan(int(q["queueId"]), int(q["checkpoint"]),
                            [SegmentInput(**s) for s in q["inputs"]],
                            {int(b): SegmentOutput(**o) for b, o in q["outputs"].items()})
                  for q in d["queues"]]
        return cls(d["topic"], d["job"], int(d["createdMs"]), queues)


def segment_name(base: int) -> str:
    return f"{base:020d}"


def output_paths(out_dir: str, queue_id: int, base: int) -> tuple[str, str]:
    """Where a job writes the compacted (log, CQ) pair of one input segment."""
    return (os.path.join(out_dir, str(queue_id), "compactionLog", segment_name(base)),
            os.path.join(out_dir, str(queue_id), "compactionCq", segment_name(base)))


def write_manifest(out_dir: str, staged: StagedCompaction) -> None:
    atomic_write(os.path.join(out_dir, MANIFEST), json.dumps(staged.to_json(), indent=1).encode(),
                 keep_backup=False)


def read_manifest(out_dir: str) -> StagedCompaction:
    path = os.path.join(out_dir, MANIFEST)
    try:
        with open(path, "rb") as f:
            return StagedCompaction.from_json(json.load(f))
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"{path}: unreadable compaction output manifest ({exc})") from None


def publish(tmp_dir: str) -> str:
    """The job's commit: ``<topic>-<job>.tmp`` -> ``<topic>-<job>`` once the manifest is in it."""
    assert tmp_dir.endswith(STAGING_SUFFIX)
    final = tmp_dir[:-len(STAGING_SUFFIX)]
    os.rename(tmp_dir, final)
    fsync_path(os.path.dirname(final))
    return final


def pending_outputs(root: str, topic: Optional[str] = None) -> list[str]:
    """Complete, not yet adopted outputs under ``root`` (oldest job first)."""
    try:
        names = sorted(os.listdir(root))
    except FileNotFoundError:
        return []
    out: list[str] = []
    for n in names:
        path = os.path.join(root, n)
        if n.endswith((STAGING_SUFFIX, STALE_SUFFIX)) or not os.path.isfile(os.path.join(path, MANIFEST)):
            continue
        if topic is not None:
            try:
                if read_manifest(path).topic != topic:
                    continue
            except ValueError:
                continue
        out.append(path)
    return sorted(out, key=lambda p: (os.path.getmtime(os.path.join(p, MANIFEST)), p))


def check_current(qlog: QueueCompactionLog, plan: QueuePlan) -> None:
    """Raise StaleOutput unless every input segment is still in place, sealed and unchanged."""
    for s in plan.inputs:
        seg = qlog.segment_at(s.base)
        where = f"{qlog.topic}-{qlog.queue_id} segment {segment_name(s.base)}"
        if seg is None:
            raise StaleOutput(f"{where} is gone")
        if not s.matches(seg):
            raise StaleOutput(f"{where} changed since the job read it (compacted by the broker?)")


def adopt_queue(qlog: QueueCompactionLog, plan: QueuePlan, out_dir: str,
                hook: Optional[Callable[[str], None]] = None) -> tuple[int, int]:
    """Swap one queue's segments oldest first; idempotent (a roll-forward redoes only what is left).
    Returns (segments replaced, segments dropped). ``hook(step)``: fault injection in tests."""
    step = hook or (lambda _s: None)
    replaced = dropped = 0
    for s in sorted(plan.inputs, key=lambda s: s.base):
        seg = qlog.segment_at(s.base)
        out = plan.outputs.get(s.base)
        if out is not None and out.unchanged:
            continue
        if out is not None:
            if not s.matches(seg):
                continue                                  # swapped before a crash (the roll-forward)
            log_src, cq_src = output_paths(out_dir, plan.queue_id, s.base)
            if not (os.path.exists(log_src) and os.path.exists(cq_src)):
                raise FileNotFoundError(f"{log_src} / {cq_src} missing from the compaction output")
            qlog.adopt(s.base, log_src, cq_src, hook)
            replaced += 1
            step("adopt-segment")
        elif s.matches(seg):
            qlog.drop(s.base)
            dropped += 1
            step("adopt-segment")
    return replaced, dropped


def queue_done_marker(out_dir: str, queue_id: int) -> str:
    return os.path.join(out_dir, f"{queue_id}.adopted")


def mark_adopting(out_dir: str) -> None:
    atomic_write(os.path.join(out_dir, ADOPTING), b"", keep_backup=False)


def is_adopting(out_dir: str) -> bool:
    return os.path.exists(os.path.join(out_dir, ADOPTING))


def mark_queue_done(out_dir: str, queue_id: int) -> None:
    atomic_write(queue_done_marker(out_dir, queue_id), b"", keep_backup=False)


def remove_output(out_dir: str) -> None:
    shutil.rmtree(out_dir)


def set_aside(out_dir: str, why: str) -> str:
    """A stale output is renamed ``<dir>.stale`` (kept for inspection, never adopted)."""
    dest = out_dir + STALE_SUFFIX
    os.rename(out_dir, dest)
    log.error("compaction output %s not adopted: %s; moved to %s", out_dir, why, dest)
    return dest
