"""``rmqd pipeline index``: the tier's random-index files, bulk-built as a Spark job for the broker to adopt.

Input: every message the tier has committed (``config/tieredStoreMetadata.json``: each queue's flat
CommitLog and ConsumeQueue, immutable once committed) whose queue offsets no index file covers yet
(the queue's ``indexed`` ranges: what the copier indexed with ``messageIndexEnable=true``, and earlier
adopted outputs). So a broker run with ``messageIndexEnable=false`` copies fast and this job indexes
history of any size.

Output: the broker's own bytes. The put order is the copier's when it catches up in one round: queue
by queue in the metadata's order (the order the copier first copied them), each queue in offset order;
keys per message by the broker's rule (``tier_index.index_batch``: UNIQ_KEY and KEYS tokens in Java
HashSet order), put with the broker's ``put_batch`` into a writable file, which ``compact`` turns into
the compacted form. A file ends where the broker's would (``layout.is_full_for``: a message whose keys
would reach ``maxIndexNum`` starts the next file; one that does not fit an empty file is not indexed),
and file ``i`` begins at ``max(clock, previous + 1)`` as the broker names its files, with the clock read
once when the job plans. Given the same clock, the broker's index of the same messages is the same
files, byte for byte.

Steps (Spark tasks of ``--messages-per-task`` offsets of one queue):

1. scan: each task runs ``index_batch`` over its range and returns the key count of each keyed message;
2. plan (driver): the file boundaries and begin times from those counts;
3. build: one task per file re-reads its ranges, puts and compacts into ``<job>.tmp/<beginTs>``;
4. commit: ``manifest.json`` (files, and per queue the offsets covered with their first and last units),
   then ``<job>.tmp`` is renamed ``<job>`` in ``<store>/tiered_index_file/pipeline/``.

The broker adopts a complete output at its next start or on ``rmqd admin adoptTierIndex``
(:mod:`rmqd.store.tier.index.adopt`). A killed job leaves a ``.tmp`` directory, never adopted and
removed by the next run; ranges of complete outputs not adopted yet are not indexed again.
"""
from __future__ import annotations

import contextlib
import logging
import mmap
import os
import shutil
import time
import uuid
import zlib
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Iterator, Optional, Sequence, TypedDict

import numpy as np

from rmqd.common.fileutil import drop_tree
from rmqd.pipeline.errors import PipelineError, exclusive_lock, in_task
from rmqd.pipeline.runner import JobSummary, SparkProgress, held_for_tests, hold_for_tests, spark_errors
from rmqd.pipeline.tier import BackendSpec, QueueDoc, TierView, open_queue
from rmqd.store.tier.config import TierConfig
from rmqd.store.tier.index import adopt as _adopt
from rmqd.store.tier.index import layout as L
from rmqd.store.tier.queue import BLANK_SIZE, subtract_ranges

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from rmqd.store.tier.backend import TierBackend
    from rmqd.store.tier.index.adopt import Manifest, ManifestFile, ManifestQueue

log = logging.getLogger(__name__)

DEFAULT_MESSAGES_PER_TASK = 1 << 20
READ_WINDOW = 8 << 20                 # flat CommitLog bytes per index_batch call
UNITS_PER_READ = 1 << 16
# (key hashes, topicId, queueId, offset, size, storeTime): one keyed message for tier_index.put_batch
IndexMessage = tuple[Sequence[int], int, int, int, int, int]


class ChunkScan(TypedDict):
    """Step 1's result for one chunk: messages read, keyed ones, their keys, bytes, per-message key counts."""
    seq: int
    messages: int
    keyed: int
    keys: int
    bytes: int
    counts: bytes                 # zlib-compressed uint32 key count per keyed message


if TYPE_CHECKING:
    class BuiltFile(ManifestFile):
        """Step 3's result: one compacted index file and its size."""
        size: int


@dataclass(frozen=True)
class Chunk:
    """Queue offsets [lo, hi) of one tier queue: a scan task (picklable)."""
    seq: int
    queue: QueueDoc
    lo: int
    hi: int


@dataclass
class PlannedFile:
    begin_ts: int
    # (chunk seq, first message, end message) of keyed messages
    pieces: list[tuple[int, int, int]] = field(default_factory=list)
    items: int = 0


# ---------------------------------------------------------------------------------------------- tasks
def chunk_messages(chunk: Chunk, backend: TierBackend, config: TierConfig) -> tuple[list[IndexMessage], int, int]:
    """The copier's index messages ``(hashes, topicId, queueId, offset, size, storeTime)`` of a chunk's
    keyed messages in offset order, the messages read and the flat CommitLog bytes read."""
    from rmqd.cython_ext import tier_index as _ix
    tq = open_queue(chunk.queue, backend, config)
    q = chunk.queue
    out: list[IndexMessage] = []
    n_read = n_bytes = 0
    off = chunk.lo
    while off < chunk.hi:
        units = tq.units(off, min(chunk.hi - off, UNITS_PER_READ))
        if not units:
            raise PipelineError(f"tier queue {q.topic}-{q.queue_id}: offset {off} is not in the tier any more "
                                "(expired while the job ran?); run the job again")
        i = 0
        while i < len(units):
            start = end = -1
            j = i
            while j < len(units):
                phys, size, _tags = units[j]
                if size == BLANK_SIZE:
                    j += 1
                    continue
                if start < 0:
                    start = end = phys
                elif phys != end or phys + size - start > READ_WINDOW:
                    break
                end = phys + size
                j += 1
            if start >= 0:
                body = tq.commitlog.read(start, end - start)
                if len(body) != end - start:
                    raise PipelineError(f"tier queue {q.topic}-{q.queue_id}: short read of its flat CommitLog at "
                                        f"{start} ({len(body)} of {end - start} bytes)")
                msgs, _mn, _mx, _f, _l = _ix.index_batch(body, q.topic, q.topic_id, q.queue_id, start,
                                                         L.java_hashset_order, True)
                out.extend(msgs)
                n_bytes += len(body)
            i = j
        n_read += len(units)
        off += len(units)
    return out, n_read, n_bytes


def scan_chunk(chunk: Chunk, spec: BackendSpec, config: TierConfig) -> ChunkScan:
    """Step 1: each keyed message's key count (compressed), and what was read."""
    backend = spec.open()
    try:
        msgs, n_read, n_bytes = chunk_messages(chunk, backend, config)
    finally:
        backend.close()
    counts = np.fromiter((len(m[0]) for m in msgs), dtype=np.uint32, count=len(msgs))
    return {"seq": chunk.seq, "messages": n_read, "keyed": len(msgs), "keys": int(counts.sum()),
            "bytes": n_bytes, "counts": zlib.compress(counts.tobytes(), 1)}


def build_file(plan: PlannedFile, chunks: dict[int, Chunk], spec: BackendSpec, config: TierConfig, slots: int,
               max_items: int, out_dir: str) -> BuiltFile:
    """Step 3: one index file: the broker's put_batch into a fresh writable file, then its compact."""
    from rmqd.cython_ext import tier_index as _ix
    scratch = os.path.join(out_dir, f".scratch-{plan.begin_ts}")
    target = os.path.join(out_dir, str(plan.begin_ts))
    size = L.writable_size(slots, max_items)
    backend = spec.open()
    try:
        fd = os.open(scratch, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    except FileNotFoundError:
        backend.close()
        root = os.path.dirname(out_dir)               # <store>/tiered_index_file/pipeline
        if not os.path.isdir(root):
            from rmqd.spark.executor import not_visible
            raise PipelineError(not_visible("--store", os.path.dirname(os.path.dirname(root)))) from None
        raise
    min_ts = max_ts = -1
    try:
        os.ftruncate(fd, size)                   # sparse, as the broker's writable file
        with mmap.mmap(fd, size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE) as mm:
            _ix.init_header(mm, plan.begin_ts, max_items)
            cache: dict[int, list[IndexMessage]] = {}
            for seq, a, b in plan.pieces:
                if seq not in cache:
                    cache = {seq: chunk_messages(chunks[seq], backend, config)[0]}
                msgs = cache[seq][a:b]
                n = _ix.put_batch(mm, slots, max_items, plan.begin_ts, msgs)
                if n != len(msgs):
                    raise RuntimeError(f"index file {plan.begin_ts}: {n} of {len(msgs)} messages fitted; "
                                       "the plan and the put disagree")
                for m in msgs:
                    ts = m[5]
                    min_ts = ts if min_ts < 0 or ts < min_ts else min_ts
                    max_ts = ts if ts > max_ts else max_ts
            h = L.parse_header(mm)
            if h.index_item_count != plan.items:
                raise RuntimeError(f"index file {plan.begin_ts}: {h.index_item_count} items, planned {plan.items}")
            csize = L.compacted_size(slots, h.index_item_count)
            cfd = os.open(target, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
            try:
                os.ftruncate(cfd, csize)
                with mmap.mmap(cfd, csize, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE) as dst:
                    _ix.compact(mm, dst, slots)
                    dst.flush()
                os.fsync(cfd)
            finally:
                os.close(cfd)
    finally:
        os.close(fd)
        backend.close()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(scratch)
    if held_for_tests():                     # tests: hold the task, its file written, to kill an executor
        hold_for_tests()
    return {"beginTs": plan.begin_ts, "items": h.index_item_count, "endTs": h.end_timestamp,
            "usedSlots": h.hash_slot_count, "minTs": min_ts, "maxTs": max_ts, "size": csize}


def plan_files(scans: list[ChunkScan], max_items: int, first_ts: int) -> tuple[list[PlannedFile], int]:
    """Step 2: the broker's file boundaries over the key counts, in chunk order; and how many messages
    are not indexed (more keys than an empty file takes)."""
    files: list[PlannedFile] = []
    cur: Optional[PlannedFile] = None
    count = skipped = 0
    for s in sorted(scans, key=lambda s: s["seq"]):
        counts = np.frombuffer(zlib.decompress(s["counts"]), dtype=np.uint32).astype(np.int64)
        pos, n = 0, len(counts)
        while pos < n:
            if cur is None:
                cur = PlannedFile(max(first_ts, files[-1].begin_ts + 1) if files else first_ts)
                files.append(cur)
                count = 0
            cs = np.cumsum(counts[pos:]) + count
            k = int(np.searchsorted(cs, max_items, side="left"))     # counts[pos:pos+k] fit (is_full_for)
            if k:
                cur.pieces.append((s["seq"], pos, pos + k))
                cur.items += int(cs[k - 1]) - count
                count = int(cs[k - 1])
                pos += k
            if pos < n:
                if count == 0:               # does not fit an empty file: the broker logs it and skips it
                    skipped += 1
                    pos += 1
                else:
                    cur = None               # full: the next message starts a new file
    return [f for f in files if f.items], skipped


# ---------------------------------------------------------------------------------------------- driver
class Index:
    """One bulk index run over a store's tier; see the module docstring."""

    def __init__(self, store: str, broker_conf: Optional[str] = None, tier_dir: Optional[str] = None,
                 messages_per_task: int = DEFAULT_MESSAGES_PER_TASK, clock: Optional[Callable[[], int]] = None,
                 hook: Optional[Callable[[str], None]] = None) -> None:
        if messages_per_task < 1:
            raise PipelineError(f"--messages-per-task {messages_per_task}: must be at least 1")
        self.tier = TierView(store, broker_conf, tier_dir)
        self.messages_per_task = messages_per_task
        self.clock = clock or (lambda: int(time.time() * 1000))
        self.hook = hook or (lambda _step: None)
        self.out_root = _adopt.output_root(self.tier.root)

    # ---------------------------------------------------------------- planning
    def _pending_outputs(self) -> list[Manifest]:
        return [_adopt.read_manifest(d) for d in _adopt.complete_outputs(self.out_root)]

    def plan(self) -> tuple[list[Chunk], list[ManifestQueue]]:
        """Scan chunks in the broker's put order, and per queue range its record for the manifest."""
        pending: dict[tuple[str, int], list[Sequence[int]]] = {}
        for m in self._pending_outputs():
            for mq in m["queues"]:
                pending.setdefault((mq["topic"], int(mq["queueId"])), []).append((int(mq["lo"]), int(mq["hi"])))
        backend = None
        chunks: list[Chunk] = []
        ranges: list[ManifestQueue] = []
        try:
            for q in self.tier.queues():
                if backend is None:
                    backend = self.tier.open_backend()
                tq = self.tier.queue(q, backend)
                lo, hi = tq.min_offset, tq.max_offset
                if lo < 0 or hi <= lo:
                    continue
                gaps = subtract_ranges([(lo, hi)], [list(r) for r in tq.indexed] + pending.get((q.topic, q.queue_id), []))
                for a, b in gaps:
                    first, last = tq.units(a, 1), tq.units(b - 1, 1)
                    if not first or not last:
                        raise PipelineError(f"tier queue {q.topic}-{q.queue_id}: offsets {a}..{b - 1} are not readable")
                    ranges.append({"topic": q.topic, "queueId": q.queue_id, "topicId": q.topic_id, "lo": a, "hi": b,
                                   "first": list(first[0]), "last": list(last[0])})
                    for c in range(a, b, self.messages_per_task):
                        chunks.append(Chunk(len(chunks), q, c, min(b, c + self.messages_per_task)))
        finally:
            if backend is not None:
                backend.close()
        return chunks, ranges

    def has_work(self) -> bool:
        return bool(self.plan()[0])

    def first_begin_ts(self) -> int:
        """The broker's rule for a new file's name, ``max(clock, last + 1)``, over its files and the
        complete outputs not adopted yet."""
        last = max(self.tier.metadata.index_files, default=0)
        for m in self._pending_outputs():
            last = max([last] + [int(f["beginTs"]) for f in m["files"]])
        return max(self.clock(), last + 1)

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        os.makedirs(self.out_root, exist_ok=True)
        with exclusive_lock(os.path.join(self.out_root, ".lock"),
                            f"another `rmqd pipeline index` is running on {self.tier.root}"):
            yield

    def _clean_old_staging(self) -> None:
        for n in os.listdir(self.out_root):
            if n.endswith(_adopt.STAGING_SUFFIX):
                log.info("removing %s, left by an interrupted index job", n)
                drop_tree(os.path.join(self.out_root, n), _adopt.STAGING_SUFFIX)

    # ---------------------------------------------------------------- run
    def run(self, spark: Optional[SparkSession]) -> JobSummary:
        t0 = time.perf_counter()
        with self._locked():
            self._clean_old_staging()
            chunks, ranges = self.plan()
            summary = JobSummary("index", details={"queues": len({(r["topic"], r["queueId"]) for r in ranges}),
                                                   "ranges": len(ranges), "files": 0, "items": 0})
            if not chunks:
                summary.details["note"] = "nothing to index: every committed tier message is indexed or pending adoption"
                summary.seconds = time.perf_counter() - t0
                return summary
            if spark is None:
                raise PipelineError("index: the tier has messages to index; run again")
            job = f"{int(time.time() * 1000):013d}-{uuid.uuid4().hex[:8]}"
            tmp = os.path.join(self.out_root, job + _adopt.STAGING_SUFFIX)
            os.makedirs(tmp)
            try:
                files, scans, skipped = self._spark(spark, chunks, tmp)
                self.hook("built")
                if not files:
                    shutil.rmtree(tmp)
                    final = None
                else:
                    _adopt.write_manifest(tmp, {"job": job, "createdMs": int(time.time() * 1000),
                                                "slots": self.tier.slots, "maxItems": self.tier.max_items,
                                                "cluster": self.tier.cluster, "broker": self.tier.broker,
                                                "files": files, "queues": ranges})
                    self.hook("manifest")
                    final = _adopt.publish(tmp)
            except Exception:
                drop_tree(tmp, _adopt.STAGING_SUFFIX)   # orphan tasks may still write: renamed aside first
                raise
        summary.rows = sum(s["messages"] for s in scans)
        summary.bytes = sum(s["bytes"] for s in scans)
        summary.outputs = [final] if final else []
        summary.details.update({"files": len(files), "items": sum(f["items"] for f in files),
                                "indexFileBytes": sum(f["size"] for f in files), "keyedMessages":
                                sum(s["keyed"] for s in scans), "skippedMessages": skipped})
        if final:
            summary.details["adopt"] = "rmqd admin adoptTierIndex -n <namesrv> (or restart the broker)"
        else:
            summary.details["note"] = "no message in the range has keys: no index file"
        summary.seconds = time.perf_counter() - t0
        return summary

    @spark_errors("index")
    def _spark(self, spark: SparkSession, chunks: list[Chunk],
               tmp: str) -> tuple[list[BuiltFile], list[ChunkScan], int]:
        sc = spark.sparkContext
        spec, config = self.tier.spec, self.tier.config
        slots, max_items = self.tier.slots, self.tier.max_items
        rows_acc, bytes_acc = sc.accumulator(0), sc.accumulator(0)

        def scan(c: Chunk) -> ChunkScan:
            s = in_task(scan_chunk)(c, spec, config)
            rows_acc.add(s["messages"])
            bytes_acc.add(s["bytes"])
            return s
        total = sum(c.hi - c.lo for c in chunks)
        prog = SparkProgress(sc, f"index: scan {len(chunks)} range(s)", 0, rows_acc, bytes_acc)
        scans = prog.run("rmqd pipeline index: scan", sc.parallelize(chunks, len(chunks)).map(scan).collect)
        files, skipped = plan_files(scans, max_items, self.first_begin_ts())
        if skipped:
            log.warning("index: %d message(s) have more keys than an index file takes (maxIndexNum %d); not "
                        "indexed, as the broker skips them", skipped, max_items)
        log.info("index: %d messages in %d range(s) -> %d file(s)", total, len(chunks), len(files))
        if not files:
            return [], scans, skipped
        by_seq = {c.seq: c for c in chunks}
        build = in_task(lambda p: build_file(p, by_seq, spec, config, slots, max_items, tmp))
        prog = SparkProgress(sc, f"index: build {len(files)} file(s)", 0)
        built = prog.run("rmqd pipeline index: build", sc.parallelize(files, len(files)).map(build).collect)
        return sorted(built, key=lambda f: f["beginTs"]), scans, skipped
