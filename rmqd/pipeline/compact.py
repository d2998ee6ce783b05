"""``rmqd pipeline compact``: a compaction topic compacted as a Spark job, for the broker to adopt.

Same input and rule as the broker's own compaction (:mod:`rmqd.store.compaction.compactor`): every
sealed segment of each queue's compaction log; a keyed record survives unless its key's newest offset
is newer or it is that newest record with an empty body (``compaction.pyx``: ``OffsetMap`` and the rule
``_superseded``); keyless and malformed records always survive. The broker does it in rounds of one
bounded map; here the map is sharded by key digest, so each shard's map is small and the shards run
in parallel:

1. check: the CQ's units fit the log (``queue_log.scan_units``);
2. scan: queue offset, MD5 of the key, body length per record (``key_digests``) (tasks of a few segments);
3. shard (``groupBy(queueId, shard)``): one ``OffsetMap`` per shard, filled in offset order (``put_all``),
   then the rule (``survivors``) gives the surviving offsets;
4. write (``groupBy(queueId, segment)``): the surviving records of a segment copied with the broker's
   writer (``copy_units`` + ``CompactingWriter``): same name, same format, PHYSICALOFFSET rewritten.

The files go to ``<out>/<topic>-<job>.tmp/``; with the manifest written, the directory is renamed to
``<topic>-<job>/`` (the job's commit), which ``rmqd admin adoptCompaction`` or the broker's next start
adopts (:mod:`rmqd.store.compaction.adopt`). A killed job leaves a ``.tmp`` directory, never adopted and
removed by the next run.
"""
from __future__ import annotations

import logging
import math
import os
import shutil
import struct
import time
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Iterator, Optional, TypedDict, cast

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from rmqd.common.fileutil import drop_tree, makedirs_below
from rmqd.pipeline.errors import CorruptSegment, PipelineError, in_task
from rmqd.pipeline.runner import (JobSummary, SparkProgress, held_for_tests, hold_for_tests, spark_errors,
                                  task_groups)
from rmqd.pipeline.segments import check_store_dir
from rmqd.store.compaction import adopt as _adopt

if TYPE_CHECKING:
    from _typeshed import ReadableBuffer
    from pyspark.sql import SparkSession

    from rmqd.store.compaction.queue_log import Segment

log = logging.getLogger(__name__)

UNIT = 46
_UNIT = struct.Struct(">qiqqqhii")
_BLANK = struct.Struct(">ii")
BLANK_MAGIC = -875286124
CHECK_TASK_BYTES = 64 << 20               # of CQ files per check task
DEFAULT_ROWS_PER_SHARD = 4_000_000        # ~500 MB per shard task: its rows, their sort, the OffsetMap

SCAN_SCHEMA = "queueId int, shard int, offset bigint, digest binary, bodyLen int, keyed tinyint"
SURVIVOR_SCHEMA = "queueId int, segment bigint, offset bigint"
WRITTEN_SCHEMA = "queueId int, segment bigint, unitsIn bigint, unitsOut bigint, logSize bigint, unchanged boolean"


@dataclass(frozen=True)
class SegmentDesc:
    """One sealed compaction-log segment as planned on the driver (picklable)."""
    queue_id: int
    base: int
    log_path: str
    cq_path: str
    log_ino: int
    cq_ino: int
    cq_bytes: int
    last: bool                       # the queue's last segment (kept even when emptied, as the broker does)


class SegmentCheck(TypedDict):
    """Step 1's finding for one segment (what the driver plans the rest with)."""
    queueId: int
    base: int
    units: int
    logSize: int
    first: int
    last: int
    sealed: bool
    fileSize: int
    corrupt: Optional[str]
    blank: Optional[int]


def _c_buffer(a: npt.NDArray[np.int64] | npt.NDArray[np.int32] | npt.NDArray[np.uint8]) -> ReadableBuffer:
    """An ndarray for a Cython function's buffer argument. numpy's stubs declare ``ndarray.__buffer__`` only
    for Python 3.12+ and the checker targets 3.11: an ndarray is a buffer either way."""
    return cast("ReadableBuffer", a)


# ---------------------------------------------------------------------------------------------- tasks
def _open_checked(d: SegmentDesc) -> Segment:
    """The segment, read-only, refusing one that is not the file the driver planned."""
    from rmqd.store.compaction.queue_log import open_readonly
    try:
        seg = open_readonly(d.log_path, d.cq_path, d.base)
    except FileNotFoundError:
        _check_visible(d)
        raise PipelineError(f"{d.log_path} disappeared while the job ran (compacted by the broker?); "
                            "run the job again") from None
    if os.fstat(seg.log_fd).st_ino != d.log_ino or os.fstat(seg.cq_fd).st_ino != d.cq_ino:
        seg.close()
        raise PipelineError(f"{d.log_path} was replaced while the job ran (compacted by the broker?); "
                            "run the job again")
    return seg


def _check_visible(d: SegmentDesc) -> None:
    """A task that cannot see the store at all (not the file: its queue's directory) says so, naming the
    store and the host."""
    if not os.path.isdir(os.path.dirname(d.log_path)):
        from rmqd.spark.executor import not_visible
        store = d.log_path
        for _ in range(5):                    # <store>/compaction/compactionLog/<topic>/<qid>/<file>
            store = os.path.dirname(store)
        raise PipelineError(not_visible("--store", store))


def check_segment(d: SegmentDesc) -> SegmentCheck:
    """Step 1: units, offsets and log size of one segment, or where its CQ stops making sense."""
    seg = _open_checked(d)
    try:
        units = len(seg.qoffs)
        out: SegmentCheck = {
            "queueId": d.queue_id, "base": d.base, "units": units, "logSize": seg.log_size,
            "first": seg.qoffs[0] if units else -1, "last": seg.qoffs[-1] if units else -1,
            "sealed": seg.sealed or not d.last, "fileSize": os.fstat(seg.log_fd).st_size, "corrupt": None,
            "blank": None}
        if units * UNIT != d.cq_bytes:
            phys = _UNIT.unpack(os.pread(seg.cq_fd, UNIT, units * UNIT))[0] if d.cq_bytes >= (units + 1) * UNIT \
                else None
            if phys != -1:                  # not an end marker: a unit that does not fit the log
                out["corrupt"] = (f"{d.cq_path} unit {units} (byte {units * UNIT}) points outside "
                                  f"{d.log_path} or goes backwards")
        if units and any(b <= a for a, b in zip(seg.qoffs, seg.qoffs[1:])):
            out["corrupt"] = f"{d.cq_path}: queue offsets do not increase"
        tail = os.pread(seg.log_fd, 8, seg.log_size)
        out["blank"] = _BLANK.unpack(tail)[0] if len(tail) == 8 and _BLANK.unpack(tail)[1] == BLANK_MAGIC else None
        return out
    finally:
        seg.close()


def _digest_binary(digests: bytes, n: int) -> pa.Array:
    offsets = np.arange(0, 16 * (n + 1), 16, dtype=np.int32)
    return pa.Array.from_buffers(pa.binary(), n, [None, pa.py_buffer(offsets), pa.py_buffer(digests)])


def scan_segment(d: SegmentDesc, shards: int) -> Iterator[pa.RecordBatch]:
    """Step 2: per record (queueId, shard, offset, MD5 of the key, body length, keyed)."""
    from rmqd.cython_ext import compaction as _cx
    from rmqd.store.compaction.compactor import record_windows
    seg = _open_checked(d)
    try:
        cq = seg.read_cq()
        for base, data, units in record_windows(seg, cq):
            offs, digs, lens, keyed = _cx.key_digests(data, base, units)
            n = len(units) // UNIT
            first8 = np.frombuffer(digs, dtype="<u8")[::2]
            shard = (first8 % np.uint64(shards)).astype(np.int32)
            yield pa.RecordBatch.from_arrays([
                pa.array(np.full(n, d.queue_id, dtype=np.int32)), pa.array(shard),
                pa.array(np.frombuffer(offs, dtype=np.int64)), _digest_binary(bytes(digs), n),
                pa.array(np.frombuffer(lens, dtype=np.int32)), pa.array(np.frombuffer(keyed, dtype=np.int8))],
                names=["queueId", "shard", "offset", "digest", "bodyLen", "keyed"])
    finally:
        seg.close()


def shard_survivors(table: pa.Table, firsts: dict[int, tuple[list[int], list[int]]]) -> pa.Table:
    """Step 3: the broker's OffsetMap over one shard's rows (in offset order), then its rule."""
    from rmqd.cython_ext import compaction as _cx
    if table.num_rows == 0:
        return pa.table({"queueId": pa.array([], pa.int32()), "segment": pa.array([], pa.int64()),
                         "offset": pa.array([], pa.int64())})
    table = table.sort_by("offset")
    n = table.num_rows
    qid = table["queueId"][0].as_py()
    offs = np.ascontiguousarray(table["offset"].to_numpy(), dtype=np.int64)
    fixed = pc.cast(table["digest"].combine_chunks(), pa.binary(16))
    digs = fixed.buffers()[1].to_pybytes()[fixed.offset * 16:(fixed.offset + n) * 16]
    lens = np.ascontiguousarray(table["bodyLen"].to_numpy(), dtype=np.int32)
    keyed = np.ascontiguousarray(table["keyed"].to_numpy(), dtype=np.uint8)
    m = _cx.OffsetMap((n * 4 // 3 + 256) * _cx.OFFSET_MAP_ENTRY_SIZE)
    if not _cx.put_all(m, digs, _c_buffer(offs), _c_buffer(keyed)):
        raise RuntimeError(f"queue {qid}: a shard's OffsetMap filled up ({m.size} keys)")
    alive = _cx.survivors(m, digs, _c_buffer(offs), _c_buffer(lens), _c_buffer(keyed))
    keep = np.frombuffer(alive, dtype=np.uint8).astype(bool)
    kept = offs[keep]
    seg_firsts, seg_bases = firsts[qid]
    which = np.searchsorted(np.asarray(seg_firsts, dtype=np.int64), kept, side="right") - 1
    return pa.table({"queueId": pa.array(np.full(len(kept), qid, dtype=np.int32)),
                     "segment": pa.array(np.asarray(seg_bases, dtype=np.int64)[which]),
                     "offset": pa.array(kept)})


def write_segment(table: pa.Table, descs: dict[tuple[int, int], SegmentDesc],
                  checks: dict[tuple[int, int], SegmentCheck], out_dir: str) -> pa.Table:
    """Step 4: the surviving records of one segment, copied into its compacted (log, CQ) pair."""
    from rmqd.cython_ext import compaction as _cx
    from rmqd.store.compaction.compactor import record_windows
    from rmqd.store.compaction.queue_log import CompactingWriter
    qid, base = table["queueId"][0].as_py(), table["segment"][0].as_py()
    d, chk = descs[(qid, base)], checks[(qid, base)]
    kept = np.sort(table["offset"].to_numpy())

    def row(units_out: int, size: int, unchanged: bool) -> pa.Table:
        return pa.table({"queueId": pa.array([qid], pa.int32()), "segment": pa.array([base], pa.int64()),
                         "unitsIn": pa.array([chk["units"]], pa.int64()), "unitsOut": pa.array([units_out], pa.int64()),
                         "logSize": pa.array([size], pa.int64()), "unchanged": pa.array([unchanged])})
    if len(kept) == chk["units"]:                    # nothing to drop: the broker keeps such a file as it is
        return row(chk["units"], chk["logSize"], True)
    seg = _open_checked(d)
    log_path, cq_path = _adopt.output_paths(out_dir, qid, base)
    try:
        makedirs_below(out_dir, os.path.dirname(log_path))   # a dropped job's orphan task fails here
        makedirs_below(out_dir, os.path.dirname(cq_path))
    except FileNotFoundError:
        seg.close()
        if not os.path.isdir(os.path.dirname(out_dir)):    # not dropped: the output is not on this host
            from rmqd.spark.executor import not_visible
            raise PipelineError(not_visible("--out", os.path.dirname(out_dir))) from None
        raise
    writer = CompactingWriter(log_path, cq_path, None, base, _file_size(chk))
    try:
        cq = seg.read_cq()
        for wbase, data, units in record_windows(seg, cq):
            q = np.ndarray(len(units) // UNIT, dtype=">i8", buffer=units, offset=28, strides=(UNIT,))
            mask = np.isin(q, kept).astype(np.uint8)
            out_log, out_cq = bytearray(), bytearray()
            _cx.copy_units(data, wbase, units, _c_buffer(mask), out_log, out_cq, writer.next_phys)
            writer.write(out_log, out_cq)
        writer.finish()
    except BaseException:
        writer.abort()
        raise
    finally:
        seg.close()
    if held_for_tests():                     # tests: hold the task, its output written, to kill an executor
        hold_for_tests()
    return row(writer.units, writer.written, False)


def _file_size(chk: SegmentCheck) -> int:
    """The log file size the broker sealed it with (records + the blank's maxBlank)."""
    blank = chk.get("blank")
    return chk["logSize"] + blank if blank else max(chk["fileSize"], chk["logSize"] + 8)


# ---------------------------------------------------------------------------------------------- driver
class Compact:
    """One compaction job over a topic's compaction logs; see the module docstring."""

    def __init__(self, store: str, topic: str, out: Optional[str] = None,
                 rows_per_shard: int = DEFAULT_ROWS_PER_SHARD, on_corrupt: str = "fail",
                 hook: Optional[Callable[[str], None]] = None) -> None:
        if on_corrupt not in ("fail", "skip"):
            raise PipelineError(f"--on-corrupt {on_corrupt!r}: fail or skip")
        if rows_per_shard < 1:
            raise PipelineError(f"--rows-per-shard {rows_per_shard}: must be at least 1")
        self.root = check_store_dir(store)
        self.topic, self.on_corrupt, self.rows_per_shard = topic, on_corrupt, rows_per_shard
        self.hook = hook or (lambda _step: None)
        self.log_dir = os.path.join(self.root, "compaction", "compactionLog", topic)
        self.cq_dir = os.path.join(self.root, "compaction", "compactionCq", topic)
        if not os.path.isdir(self.cq_dir) or not os.path.isdir(self.log_dir):
            raise PipelineError(f"--topic {topic}: no compaction log in {store} (compaction/compactionLog/{topic}): "
                                "only COMPACTION topics have one, made by the broker as it copies their records")
        self.out_root = os.path.abspath(os.path.expanduser(out)) if out else \
            os.path.join(self.root, "compaction", _adopt.PIPELINE_DIR)
        if "://" in self.out_root:
            raise PipelineError("--out: the broker adopts from its own file system; give a directory path")

    def plan(self) -> list[SegmentDesc]:
        """Every segment but each queue's active one (the broker's notion of sealed is checked in step 1)."""
        descs: list[SegmentDesc] = []
        for q in sorted((int(n) for n in os.listdir(self.cq_dir) if n.isdigit())):
            d = os.path.join(self.cq_dir, str(q))
            names = sorted(n for n in os.listdir(d) if n.isdigit())
            for i, name in enumerate(names):
                lp, cp = os.path.join(self.log_dir, str(q), name), os.path.join(d, name)
                try:
                    ls, cs = os.stat(lp), os.stat(cp)
                except FileNotFoundError:
                    continue                                    # the broker drops a CQ without its log
                descs.append(SegmentDesc(q, int(name), lp, cp, ls.st_ino, cs.st_ino, cs.st_size,
                                         i == len(names) - 1))
        return descs

    def _clean_old_staging(self) -> None:
        if not os.path.isdir(self.out_root):
            return
        for n in os.listdir(self.out_root):
            if n.lstrip(".").startswith(self.topic + "-") and n.endswith(_adopt.STAGING_SUFFIX):
                log.info("removing %s, left by an interrupted compaction job", n)
                drop_tree(os.path.join(self.out_root, n), _adopt.STAGING_SUFFIX)

    def run(self, spark: SparkSession) -> JobSummary:
        t0 = time.perf_counter()
        descs = self.plan()
        self._clean_old_staging()
        job = f"{int(time.time() * 1000):013d}-{uuid.uuid4().hex[:8]}"
        tmp = os.path.join(self.out_root, f"{self.topic}-{job}{_adopt.STAGING_SUFFIX}")
        os.makedirs(tmp)
        try:
            staged, written, skipped = self._spark(spark, descs, tmp, job)
            if not staged.queues:                     # no sealed segment yet: nothing for the broker to adopt
                shutil.rmtree(tmp)
                return JobSummary("compact", seconds=time.perf_counter() - t0, details={
                    "topic": self.topic, "segments": 0, "skippedCorrupt": skipped,
                    "note": "nothing to compact: no sealed compaction-log segment"})
            _adopt.write_manifest(tmp, staged)
            self.hook("manifest")
            final = _adopt.publish(tmp)
        except BaseException as exc:
            if isinstance(exc, Exception):            # orphan tasks may still write: renamed aside first
                drop_tree(tmp, _adopt.STAGING_SUFFIX)
            raise
        recs_in = sum(q.records_in() for q in staged.queues)
        recs_out = sum(q.records_out() for q in staged.queues)
        bytes_in = sum(s.log_size for q in staged.queues for s in q.inputs)
        bytes_out = sum(o.log_size for q in staged.queues for o in q.outputs.values())
        return JobSummary("compact", rows=recs_in, bytes=bytes_in, seconds=time.perf_counter() - t0,
                          outputs=[final], details={
                              "topic": self.topic, "queues": len(staged.queues),
                              "segments": sum(len(q.inputs) for q in staged.queues),
                              "segmentsRewritten": written, "recordsAfter": recs_out, "bytesAfter": bytes_out,
                              "skippedCorrupt": skipped,
                              "adopt": f"rmqd admin adoptCompaction -n <namesrv> -t {self.topic} "
                                       "(or restart the broker)"})

    @spark_errors("compact")
    def _spark(self, spark: SparkSession, descs: list[SegmentDesc], tmp: str,
               job: str) -> tuple[_adopt.StagedCompaction, int, list[str]]:
        sc = spark.sparkContext
        total = sum(os.path.getsize(d.log_path) for d in descs)
        rows_acc, bytes_acc = sc.accumulator(0), sc.accumulator(0)
        checks: dict[tuple[int, int], SegmentCheck] = {}
        if descs:
            check = in_task(lambda group: [check_segment(d) for d in group])
            groups = task_groups(descs, lambda d: d.cq_bytes, sc.defaultParallelism, CHECK_TASK_BYTES)
            got = SparkProgress(sc, f"compact {self.topic}: check", 0).run(
                "rmqd pipeline compact: check", sc.parallelize(groups, len(groups)).flatMap(check).collect)
            checks = {(c["queueId"], c["base"]): c for c in got}
        inputs, skipped = self._choose(descs, checks)
        per_queue: dict[int, list[SegmentDesc]] = {}
        for d in inputs:
            per_queue.setdefault(d.queue_id, []).append(d)
        plans = {q: _adopt.QueuePlan(q, max(checks[(q, d.base)]["last"] for d in ds)) for q, ds in per_queue.items()}
        for q, ds in per_queue.items():
            for d in ds:
                c = checks[(q, d.base)]
                plans[q].inputs.append(_adopt.SegmentInput(d.base, c["logSize"], c["units"], c["first"], c["last"]))
        rows: list[dict[str, int]] = []
        if inputs:
            shards = {q: max(1, math.ceil(sum(checks[(q, d.base)]["units"] for d in ds) / self.rows_per_shard))
                      for q, ds in per_queue.items()}
            firsts = {q: ([checks[(q, d.base)]["first"] for d in ds], [d.base for d in ds])
                      for q, ds in per_queue.items()}
            descs_by = {(d.queue_id, d.base): d for d in inputs}

            def scan(it: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
                for b in it:
                    for i in range(b.num_rows):
                        d = descs_by[(b.column(0)[i].as_py(), b.column(1)[i].as_py())]
                        n = 0
                        for out in in_task(lambda: list(scan_segment(d, shards[d.queue_id])))():
                            n += out.num_rows
                            yield out
                        rows_acc.add(n)
                        bytes_acc.add(checks[(d.queue_id, d.base)]["logSize"])

            groups = task_groups(inputs, lambda d: checks[(d.queue_id, d.base)]["logSize"], sc.defaultParallelism)
            keys = sc.parallelize(groups, len(groups)).flatMap(lambda g: [(d.queue_id, d.base) for d in g])
            df = spark.createDataFrame(keys, "queueId int, base bigint").mapInArrow(scan, SCAN_SCHEMA)
            survivors = df.groupBy("queueId", "shard").applyInArrow(
                lambda t: shard_survivors(t, firsts), SURVIVOR_SCHEMA)
            written = survivors.groupBy("queueId", "segment").applyInArrow(
                lambda t: in_task(write_segment)(t, descs_by, checks, tmp), WRITTEN_SCHEMA)
            prog = SparkProgress(sc, f"compact {self.topic}", total, rows_acc, bytes_acc)
            rows = [r.asDict() for r in prog.run(f"rmqd pipeline compact {self.topic}", written.collect)]
        n_written = 0
        for r in rows:
            q, base = r["queueId"], r["segment"]
            if r["unchanged"]:
                plans[q].outputs[base] = _adopt.SegmentOutput(r["unitsOut"], r["logSize"], unchanged=True)
            else:
                plans[q].outputs[base] = _adopt.SegmentOutput(r["unitsOut"], r["logSize"])
                n_written += 1
        for d in inputs:                          # an emptied last segment stays, empty (as the broker keeps it)
            if d.last and d.base not in plans[d.queue_id].outputs:
                self._write_empty(tmp, d, checks[(d.queue_id, d.base)])
                plans[d.queue_id].outputs[d.base] = _adopt.SegmentOutput(0, 0)
                n_written += 1
        staged = _adopt.StagedCompaction(self.topic, job, int(time.time() * 1000),
                                         [plans[q] for q in sorted(plans)])
        return staged, n_written, skipped

    def _choose(self, descs: list[SegmentDesc],
                checks: dict[tuple[int, int], SegmentCheck]) -> tuple[list[SegmentDesc], list[str]]:
        """The sealed segments to compact: with --on-corrupt skip, a queue stops before its first damaged
        segment (compacting a prefix is safe; leaving out a middle one could resurrect deleted keys)."""
        inputs: list[SegmentDesc] = []
        skipped: list[str] = []
        stopped: set[int] = set()
        for d in descs:
            c = checks[(d.queue_id, d.base)]
            if d.queue_id in stopped or not c["sealed"] or not c["units"]:
                continue
            if c["corrupt"]:
                if self.on_corrupt == "fail":
                    raise CorruptSegment(f"{c['corrupt']} (use --on-corrupt skip to compact the segments "
                                         "before it)")
                skipped.append(c["corrupt"])
                log.warning("compaction of %s queue %d stops before %s: %s", self.topic, d.queue_id,
                            d.log_path, c["corrupt"])
                stopped.add(d.queue_id)
                continue
            inputs.append(d)
        return inputs, skipped

    @staticmethod
    def _write_empty(tmp: str, d: SegmentDesc, chk: SegmentCheck) -> None:
        from rmqd.store.compaction.queue_log import CompactingWriter
        log_path, cq_path = _adopt.output_paths(tmp, d.queue_id, d.base)
        os.makedirs(os.path.dirname(log_path), exist_ok=True)
        os.makedirs(os.path.dirname(cq_path), exist_ok=True)
        CompactingWriter(log_path, cq_path, None, d.base, _file_size(chk)).finish()

