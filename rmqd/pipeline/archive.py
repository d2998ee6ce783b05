"""``rmqd pipeline archive``: sealed CommitLog segments -> zstd Parquet, plus a key index for lookups.

Output (``--out``, a path or any pyarrow file-system URI)::

    messages/topic=<t>/queueId=<q>/day=<yyyy-mm-dd>/part-<segment>-<n>.zstd.parquet
        the connector's columns (``topic`` and the partition values come from the directories)
    keyindex/topic=<t>/part-<segment>-<n>.zstd.parquet
        key, uniqueKey, queueId, offset, storeTimestamp: one row per KEYS token (the IndexFile's keys,
        split on spaces), one with a null key for a keyless message; sorted by key in each row group,
        Bloom filters on key and uniqueKey
    _rmqd/archive.json          format, version, schemas (a different one is refused)
    _rmqd/commits/<run>.json    the manifest: each committed run's segments, rows and files
    _rmqd/staging/<run>/        a run in flight

The driver creates the run's staging directory (with a ``RUN.json`` marker) before any task starts;
Spark tasks (a few segments each, see ``runner.task_groups``) write their files below it, each as a
hidden ``.<name>.inprogress`` renamed when complete, and never create the run directory itself: a task
whose run was dropped meanwhile (a killed job's orphan Python worker waking up after the next run threw
the run away) fails instead of re-creating it. When every task is done the driver writes ``staging/<run>/COMMITTING.json`` (the commit point), moves the files into
place, writes ``commits/<run>.json`` last and removes the staging directory. The next run first
finishes a run that reached its commit point and throws away one that did not, so a killed run leaves
no uncommitted row visible and a re-run gives the same rows as an uninterrupted one. Segments already
in a commit are skipped: a re-run only adds new segments.
"""
from __future__ import annotations

import contextlib
import datetime as dt
import logging
import os
import posixpath
import time
import uuid
from typing import TYPE_CHECKING, Callable, Iterator, Optional, TypedDict, cast

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from rmqd.pipeline.errors import PipelineError, exclusive_lock, in_task
from rmqd.pipeline.fs import OutputFS
from rmqd.pipeline.parquet_out import PartitionedWriter, WrittenFile, escape_value, split_rows, split_runs
from rmqd.pipeline.runner import (JobSummary, SparkProgress, held_for_tests, hold_for_tests, spark_errors,
                                  task_groups)
from rmqd.pipeline.segments import (CorruptRange, LocalCommitLog, SegmentRef, SegmentReport, SegmentSource, day_of,
                                    segment_batches)
from rmqd.spark.arrow import DDL as CONNECTOR_DDL
from rmqd.spark.arrow import SCHEMA as CONNECTOR_SCHEMA
from rmqd.spark.arrow import TS

if TYPE_CHECKING:
    from pyspark import Accumulator
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

FORMAT, VERSION = "rmqd-archive", 1
MESSAGES, KEYINDEX = "messages", "keyindex"
META_DIR = "_rmqd"
META = f"{META_DIR}/archive.json"
COMMITS = f"{META_DIR}/commits"
STAGING = f"{META_DIR}/staging"
INTENT = "COMMITTING.json"
RUN_MARKER = "RUN.json"        # written by the driver: the run's staging directory exists
LOCK = f"{META_DIR}/lock"

MESSAGE_FILE_SCHEMA = pa.schema([f for f in CONNECTOR_SCHEMA if f.name != "topic"])
KEYINDEX_FILE_SCHEMA = pa.schema([
    pa.field("key", pa.string()), pa.field("uniqueKey", pa.string()), pa.field("queueId", pa.int32()),
    pa.field("offset", pa.int64()), pa.field("storeTimestamp", TS)])
# what spark.read.schema(...).parquet(<out>/messages) and (<out>/keyindex) should be given: explicit types
# for the partition columns (a topic named "007" would otherwise be read back as the number 7)
MESSAGES_DDL = CONNECTOR_DDL + ", queueId int, day date"
KEYINDEX_DDL = "key string, uniqueKey string, queueId int, offset bigint, storeTimestamp timestamp, topic string"
PARTITIONING = {MESSAGES: ["topic", "queueId", "day"], KEYINDEX: ["topic"]}
# Parquet dictionaries where values repeat, statistics where readers prune (not on bodies: 1 KB min/max)
MESSAGE_DICTIONARY = ("partition", "timestampType", "brokerName", "tags", "reconsumeTimes", "headers.list.element.key")
MESSAGE_STATISTICS = ("partition", "offset", "timestamp", "commitLogOffset", "bornTimestamp", "tags", "msgId", "key")
_EPOCH = dt.date(1970, 1, 1)


class ArchiveMeta(TypedDict):
    """``_rmqd/archive.json``: what the archive is, its partitioning and its tables' schemas."""
    format: str
    version: int
    partitioning: dict[str, list[str]]
    schemas: dict[str, str]


class WriterLimits(TypedDict, total=False):
    """File-size limits of a run's Parquet writers (tests make them small)."""
    row_group_bytes: int
    max_buffered_bytes: int
    max_open_files: int


class SegmentRecord(TypedDict):
    """One archived segment in a run's commit record."""
    segment: str
    source: str
    name: str
    base: int
    size: int
    fingerprint: str
    rows: int
    recordBytes: int
    skippedTransactions: int
    corrupt: list[CorruptRange]


class CommittedSegment(SegmentRecord):
    """A segment of the manifest: its record and the run that archived it."""
    run: str


class TaskResult(TypedDict):
    """What one archive task returns to the driver."""
    segments: list[SegmentRecord]
    files: list[WrittenFile]


class RunIntent(TypedDict):
    """A run's commit record (``COMMITTING.json`` while its files move, then ``commits/<run>.json``)."""
    run: str
    createdMs: int
    brokerName: str
    segments: list[SegmentRecord]
    files: list[WrittenFile]


def read_intent(fs: OutputFS, rel: str) -> RunIntent:
    # a commit record this module wrote (JSON): its shape is RunIntent
    return cast(RunIntent, fs.read_json(rel))


def archive_meta() -> ArchiveMeta:
    return {"format": FORMAT, "version": VERSION, "partitioning": PARTITIONING,
            "schemas": {MESSAGES: MESSAGES_DDL, KEYINDEX: KEYINDEX_DDL}}


# ---------------------------------------------------------------------------------------------- rows
def _utf8(arr: pa.Array) -> pa.Array:
    """binary -> string; values that are not UTF-8 are decoded with replacement characters."""
    try:
        return pc.cast(arr, pa.string())
    except pa.ArrowInvalid:
        return pa.array([None if v is None else v.decode("utf-8", "replace") for v in arr.to_pylist()],
                        pa.string())


def key_rows(table: pa.Table) -> pa.Table:
    """The key-index rows of decoded messages: topic, key, uniqueKey, queueId, offset, storeTimestamp."""
    n = table.num_rows
    keys = _utf8(table["key"].combine_chunks())
    tokens = pc.split_pattern(keys, " ")
    flat = pc.list_flatten(tokens)
    parents = np.asarray(pc.list_parent_indices(tokens))
    valid = np.asarray(pc.fill_null(pc.not_equal(flat, ""), False), dtype=bool)
    parents, flat = parents[valid], pc.filter(flat, pa.array(valid))
    keyless = np.nonzero(np.bincount(parents, minlength=n) == 0)[0]
    idx = np.concatenate([parents, keyless]).astype(np.int64)
    key = pa.concat_arrays([flat, pa.nulls(len(keyless), pa.string())])
    base = table.select(["topic", "msgId", "partition", "offset", "timestamp"]).take(pa.array(idx))
    return pa.table({"topic": base["topic"], "key": key, "uniqueKey": base["msgId"], "queueId": base["partition"],
                     "offset": base["offset"], "storeTimestamp": base["timestamp"]})


def _write_batch(msgs: PartitionedWriter, keys: PartitionedWriter, ref: SegmentRef, batch: pa.RecordBatch) -> None:
    table = pa.Table.from_batches([batch])
    topics = pc.dictionary_encode(batch.column("topic"))
    names = topics.dictionary.to_pylist()
    qids = np.asarray(batch.column("partition"), dtype=np.int64)
    days = np.asarray(pc.cast(day_of(batch.column("timestamp")), pa.int32()), dtype=np.int64)
    if qids.min() < 0 or qids.max() >= 1 << 20 or days.min() < 0 or days.max() >= 1 << 20:
        raise PipelineError(f"{ref.path}: a queue id or store time out of range")
    key = (np.asarray(topics.indices, dtype=np.int64) << 40) | (qids << 20) | days
    for k, rows in split_runs(table, key):
        day = _EPOCH + dt.timedelta(days=k & 0xFFFFF)
        msgs.write(f"topic={escape_value(names[k >> 40])}/queueId={(k >> 20) & 0xFFFFF}/day={day.isoformat()}", rows)
    for (topic,), rows in split_rows(key_rows(table), ["topic"]):
        keys.write(f"topic={escape_value(topic)}", rows)


def archive_segments(refs: list[SegmentRef], out_uri: str, run_id: str, broker_name: str, on_corrupt: str,
                     attempt: int = 0, limits: Optional[WriterLimits] = None,
                     progress: Optional[Callable[[SegmentRef, int], None]] = None) -> TaskResult:
    """One Spark task: the messages and key-index rows of some segments into the run's staging directory
    (one file per partition and task). Returns the segments' reports and the files written."""
    fs = OutputFS(out_uri)
    stage = f"{STAGING}/{run_id}"
    prefix = f"part-{refs[0].name}-a{attempt}"
    limits = limits or {}
    guard = (stage, RUN_MARKER)
    msgs = PartitionedWriter(fs, f"{stage}/{MESSAGES}", MESSAGE_FILE_SCHEMA, prefix, guard=guard,
                             dictionary_columns=MESSAGE_DICTIONARY, statistics_columns=MESSAGE_STATISTICS, **limits)
    keys = PartitionedWriter(fs, f"{stage}/{KEYINDEX}", KEYINDEX_FILE_SCHEMA, prefix, sort_by="key", guard=guard,
                             bloom_columns=("key", "uniqueKey"), dictionary_columns=("queueId",), **limits)
    hold = held_for_tests()
    segments: list[SegmentRecord] = []
    try:
        for ref in refs:
            report = SegmentReport()
            for batch in segment_batches(ref, broker_name, on_corrupt, report):
                _write_batch(msgs, keys, ref, batch)
                if hold:                                # tests: hold a task mid-write to kill the job
                    msgs.close()
                    hold_for_tests()
                    hold = False
            segments.append({"segment": ref.key, "source": ref.source, "name": ref.name, "base": ref.base,
                             "size": ref.size, "fingerprint": ref.fingerprint, "rows": report.rows,
                             "recordBytes": report.record_bytes, "skippedTransactions": report.skipped_transactions,
                             "corrupt": report.corrupt})
            if progress:
                progress(ref, report.rows)
        files = msgs.close() + keys.close()
    except FileNotFoundError as exc:                 # the run's staging directory is gone: the run was dropped
        msgs.abort()
        keys.abort()
        if fs.local and not os.path.isdir(fs.root):  # ... or the output is not on this host at all
            from rmqd.spark.executor import not_visible
            raise PipelineError(not_visible("--out", fs.root)) from None
        raise PipelineError(f"archive run {run_id}: its staging directory was removed (the run was dropped "
                            f"by a later run or failed); this task stops ({exc})") from None
    except BaseException:
        msgs.abort()
        keys.abort()
        raise
    for f in files:                                  # paths relative to the output root
        f["file"] = posixpath.relpath(f["file"], stage)
    return {"segments": segments, "files": files}


def _task(out_uri: str, run_id: str, broker_name: str, on_corrupt: str, rows_acc: Accumulator[int],
          bytes_acc: Accumulator[int], limits: Optional[WriterLimits]) -> Callable[[list[SegmentRef]], TaskResult]:
    def run(refs: list[SegmentRef]) -> TaskResult:
        from pyspark import TaskContext
        ctx = TaskContext.get()

        def done(ref: SegmentRef, rows: int) -> None:
            rows_acc.add(rows)
            bytes_acc.add(ref.size)
        return in_task(archive_segments)(refs, out_uri, run_id, broker_name, on_corrupt,
                                         ctx.attemptNumber() if ctx else 0, limits, done)
    return run


# ---------------------------------------------------------------------------------------------- driver
def _tier_sources(store: str, broker_conf: Optional[str], tier_dir: Optional[str]) -> list[SegmentSource]:
    """The tier source when the store has a tier whose data outlives the broker (posix, s3)."""
    from rmqd.pipeline.segments import check_store_dir
    from rmqd.store.tier.metadata import FILE_NAME, TierMetadata
    md = TierMetadata(os.path.join(check_store_dir(store), "config"))
    if not os.path.exists(md.path) and not os.path.exists(md.path + ".bak"):
        return []
    md.load()
    if md.backend.startswith("memory") and not (broker_conf or tier_dir):
        log.info("archive: the store's tier is in memory (gone with the broker): local segments only")
        return []
    if md.backend.startswith("s3:") and not (broker_conf or tier_dir):
        raise PipelineError(f"--store {store}: its tier ({FILE_NAME}) is in S3 ({md.backend}); give --broker-conf "
                            "with the broker's objectStore* settings, or --no-tier to archive local segments only")
    from rmqd.pipeline.tier import TierCommitLog
    return [TierCommitLog(store, broker_conf, tier_dir)]


class Archive:
    """One archive run over a store directory into an output; see the module docstring."""

    def __init__(self, store: str, out: str, broker_name: str = "broker-a", on_corrupt: str = "fail",
                 hook: Optional[Callable[[str], None]] = None, limits: Optional[WriterLimits] = None,
                 sources: Optional[list[SegmentSource]] = None, tier: bool = True,
                 broker_conf: Optional[str] = None, tier_dir: Optional[str] = None) -> None:
        """``sources``: where sealed segments come from (default: the store's local CommitLog, and with
        ``tier`` the files retention deleted, rebuilt from the store's tier if it has one); a segment is
        known in the manifest by the CommitLog file it is (``local:<name>``), whichever source it came from.
        ``broker_conf`` / ``tier_dir``: where the tier is (see :mod:`rmqd.pipeline.tier`)."""
        if on_corrupt not in ("fail", "skip"):
            raise PipelineError(f"--on-corrupt {on_corrupt!r}: fail or skip")
        self.sources = sources if sources is not None else \
            [LocalCommitLog(store)] + (_tier_sources(store, broker_conf, tier_dir) if tier else [])
        self.fs = OutputFS(out)
        self.broker_name, self.on_corrupt = broker_name, on_corrupt
        self.hook = hook or (lambda _step: None)
        self.limits = limits
        self._check_output()

    # ---------------------------------------------------------------- output checks
    def _check_output(self) -> None:
        fs = self.fs
        if fs.exists("") and not fs.is_dir(""):
            raise PipelineError(f"--out {fs.uri}: exists and is not a directory")
        if fs.exists(META):
            try:
                meta = fs.read_json(META)
            except (OSError, ValueError) as exc:
                raise PipelineError(f"--out {fs.uri}: unreadable {META} ({exc})") from None
            want = archive_meta()
            if not isinstance(meta, dict) or meta.get("format") != FORMAT:
                raise PipelineError(f"--out {fs.uri}: {META} is not an rmqd archive's")
            if meta.get("version") != VERSION or meta.get("schemas") != want["schemas"] \
                    or meta.get("partitioning") != want["partitioning"]:
                raise PipelineError(f"--out {fs.uri}: the archive there has a different schema (version "
                                    f"{meta.get('version')}, {meta.get('schemas')}); archive into a new "
                                    f"location (this one writes version {VERSION}: {want['schemas']})")
            return
        others = [n for n in fs.listdir("") if n != META_DIR]
        if others:
            raise PipelineError(f"--out {fs.uri}: not empty and not an rmqd archive (found {', '.join(others[:5])}"
                                f"{' ...' if len(others) > 5 else ''}); choose an empty or new location")

    # ---------------------------------------------------------------- manifest
    def committed(self) -> dict[str, CommittedSegment]:
        """segment key -> its record in the commits (the manifest of archived segments), including runs
        past their commit point whose files are still being moved."""
        records = [f"{COMMITS}/{n}" for n in self.fs.listdir(COMMITS) if n.endswith(".json")]
        records += [f"{STAGING}/{r}/{INTENT}" for r in self.fs.listdir(STAGING)
                    if self.fs.exists(f"{STAGING}/{r}/{INTENT}")]
        out: dict[str, CommittedSegment] = {}
        for path in records:
            rec = read_intent(self.fs, path)
            for seg in rec["segments"]:
                out[seg["segment"]] = {**seg, "run": rec["run"]}
        return out

    def pending(self) -> list[SegmentRef]:
        """Sealed segments not archived yet (refusing an output made from another store)."""
        done = self.committed()
        todo: list[SegmentRef] = []
        for ref in (r for src in self.sources for r in src.sealed_segments()):
            rec = done.get(ref.key)
            if rec is None:
                todo.append(ref)
            elif rec.get("source", ref.source) == ref.source and rec["fingerprint"] != ref.fingerprint:
                raise PipelineError(f"--out {self.fs.uri}: segment {ref.name} there was archived from a different "
                                    f"store (its first record differs); archive this store into a new location")
        return todo

    # ---------------------------------------------------------------- recovery / commit
    def recover(self) -> list[str]:
        """Finish runs that reached their commit point; throw away the others. Returns what it did."""
        done: list[str] = []
        for run in self.fs.listdir(STAGING):
            intent = f"{STAGING}/{run}/{INTENT}"
            if self.fs.exists(intent):
                log.info("archive %s: finishing run %s (interrupted after its commit point)", self.fs.uri, run)
                self._finish(run, read_intent(self.fs, intent))
                done.append(f"finished {run}")
            else:
                log.info("archive %s: removing run %s (interrupted before its commit point)", self.fs.uri, run)
                self.fs.drop_dir(f"{STAGING}/{run}")
                done.append(f"dropped {run}")
        return done

    def _finish(self, run: str, intent: RunIntent) -> None:
        stage = f"{STAGING}/{run}"
        for f in intent["files"]:
            src, dst = f"{stage}/{f['file']}", f["file"]
            if self.fs.exists(src):
                self.fs.move(src, dst)
                self.hook("moved")
            elif not self.fs.exists(dst):
                raise PipelineError(f"archive {self.fs.uri}: {src} of committed run {run} is missing")
        self.hook("moved-all")
        self.fs.write_json(f"{COMMITS}/{run}.json", intent)
        self.hook("committed")
        self.fs.delete_dir(stage)

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        """One run at a time per output (a lock file for local outputs)."""
        if not self.fs.local:
            yield
            return
        self.fs.mkdirs(META_DIR)
        with exclusive_lock(self.fs.path(LOCK), f"--out {self.fs.uri}: another archive run is writing there"):
            yield

    # ---------------------------------------------------------------- run
    def has_work(self) -> bool:
        """Whether a run would archive anything (else it needs no SparkSession)."""
        return bool(self.pending())

    def run(self, spark: Optional[SparkSession]) -> JobSummary:
        t0 = time.perf_counter()
        with self._locked():
            if not self.fs.exists(META):
                self.fs.write_json(META, archive_meta())
            recovered = self.recover()
            todo = self.pending()
            summary = JobSummary("archive", outputs=[self.fs.url(MESSAGES), self.fs.url(KEYINDEX)],
                                 details={"segments": len(todo), "recovered": recovered})
            if todo:
                if spark is None:
                    raise PipelineError("archive: new segments appeared; run again")
                intent = self._spark(spark, todo)
                segs, files = intent["segments"], intent["files"]
                summary.rows = sum(r["rows"] for r in segs)
                summary.bytes = sum(r["size"] for r in segs)
                summary.details.update({
                    "recordBytes": sum(r["recordBytes"] for r in segs), "files": len(files),
                    "parquetBytes": sum(f["bytes"] for f in files),
                    "skippedTransactions": sum(r["skippedTransactions"] for r in segs),
                    "corrupt": [c for r in segs for c in r["corrupt"]]})
            summary.details["archivedSegments"] = len(self.committed())
        summary.seconds = time.perf_counter() - t0
        return summary

    @spark_errors("archive")
    def _spark(self, spark: SparkSession, todo: list[SegmentRef]) -> RunIntent:
        sc = spark.sparkContext
        run = f"{int(time.time() * 1000):013d}-{uuid.uuid4().hex[:8]}"
        rows_acc, bytes_acc = sc.accumulator(0), sc.accumulator(0)
        self.fs.write_json(f"{STAGING}/{run}/{RUN_MARKER}", {"run": run, "createdMs": int(time.time() * 1000)})
        fn = _task(self.fs.uri, run, self.broker_name, self.on_corrupt, rows_acc, bytes_acc, self.limits)
        groups = task_groups(todo, lambda r: r.size, sc.defaultParallelism)
        rdd = sc.parallelize(groups, len(groups)).map(fn)
        prog = SparkProgress(sc, f"archive {len(todo)} segment(s)", sum(r.size for r in todo), rows_acc, bytes_acc)
        try:
            results = prog.run(f"rmqd pipeline archive -> {self.fs.uri}", rdd.collect)
        except Exception:
            self.fs.drop_dir(f"{STAGING}/{run}")         # nothing of it was committed: no trace left
            raise
        intent: RunIntent = {"run": run, "createdMs": int(time.time() * 1000), "brokerName": self.broker_name,
                  "segments": sorted((s for r in results for s in r["segments"]), key=lambda s: (s["source"], s["base"])),
                  "files": sorted((f for r in results for f in r["files"]), key=lambda f: f["file"])}
        self.hook("staged")
        self.fs.write_json(f"{STAGING}/{run}/{INTENT}", intent)
        self.hook("committing")
        self._finish(run, intent)
        return intent
