"""The compaction store: the layer that serves COMPACTION topics (RocketMQ 5.x ``CompactionStore``).

:class:`CompactionStore` wraps the local :class:`~rmqd.store.message_store.MessageStore` (a
:class:`~rmqd.store.layer.StoreLayer`): it answers every read of a compaction topic and passes every
other call down. Records reach the per-queue compaction logs by a copier that follows the local
consume queue (keyless records are left out, as in Java); a read below the copied point is served
from the compaction log, a read above it from the local queue, so the live tail is visible at once
and the compacted table outlives CommitLog retention. Min/max offsets, search by time and the
earliest store time come from here too (apache/rocketmq#7540 done right). Before local retention
deletes CommitLog files it copies what is pending (:meth:`CompactionStore.before_delete`).

Compaction runs per queue on a schedule (``compactionScheduleInternal`` + jitter) in a pool of
``compactionThreadNum`` threads, and on demand (``compact``). Nothing here runs on the event loop.
"""
from __future__ import annotations

import json
import logging
import os
import random
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Optional, Sequence, TypedDict

from rmqd.common.backup_read import read_with_backup
from rmqd.common.service_thread import ServiceThread
from rmqd.store.compaction.config import PIPELINE_DIR, CompactionConfig
from rmqd.store.layer import StoreLayer
from rmqd.store.results import GetMessageResult, GetMessageStatus as S, collect_records, transfer_limits

if TYPE_CHECKING:
    from concurrent.futures import Future

    from rmqd.store.api import LocalStoreAPI, MessageFilter
    from rmqd.store.compaction.adopt import AdoptResult
    from rmqd.store.layer import StoreChain
    from rmqd.store.compaction.compactor import RunResult
    from rmqd.store.compaction.queue_log import QueueCompactionLog
    from rmqd.store.local_queue import LocalQueue

# The compaction logs, the compactor, adoption and the compiled helpers load with the first compaction topic or
# job output (:meth:`CompactionStore._log`, :meth:`CompactionStore.adopt`): a broker without them, every
# ``rmqd serve`` at first, does not import them at start.

log = logging.getLogger(__name__)

COPY_BATCH = 256


@dataclass
class QueueStats:
    """What ``rmqd admin compactionStatus`` and the runtime info show per queue."""
    last_compacted_offset: int = -1
    last_run_ms: int = 0
    last_duration_ms: float = 0.0
    last_rounds: int = 0
    last_bytes_before: int = 0
    last_bytes_after: int = 0
    last_records_before: int = 0
    last_records_after: int = 0
    runs: int = 0
    failures: int = 0
    last_error: str = ""


class QueueStatus(TypedDict):
    """One queue in :meth:`CompactionStore.status` (``rmqd admin compactionStatus``, the console): the
    queue's figures, then its :class:`QueueStats` (under the field names)."""
    topic: str
    queueId: int
    minOffset: int
    copiedOffset: int
    files: int
    records: int
    liveKeys: int
    bytes: int
    last_compacted_offset: int
    last_run_ms: int
    last_duration_ms: float
    last_rounds: int
    last_bytes_before: int
    last_bytes_after: int
    last_records_before: int
    last_records_after: int
    runs: int
    failures: int
    last_error: str


def _parse_checkpoint(raw: bytes) -> dict[str, int]:
    """The ``queueOffsetMap`` of a position checkpoint file."""
    return {k: int(v) for k, v in json.loads(raw).get("queueOffsetMap", {}).items()}


class PositionCheckpoint:
    """``compaction/position-checkpoint``: {"queueOffsetMap": {"<topic>_<qid>": lastCompactedOffset}},
    rewritten atomically (tmp + fsync + rename)."""

    def __init__(self, path: str):
        self.path = path
        self.offsets: dict[str, int] = {}
        self._lock = threading.Lock()

    def load(self) -> None:
        found = read_with_backup(self.path, _parse_checkpoint, (ValueError, OSError), "compaction checkpoint")
        if found is not None:
            self.offsets = found[1]

    def get(self, topic: str, qid: int) -> int:
        return self.offsets.get(f"{topic}_{qid}", -1)

    def set(self, topic: str, qid: int, offset: int) -> None:
        with self._lock:
            self.offsets[f"{topic}_{qid}"] = offset
            self._persist()

    def drop_topic(self, topic: str) -> None:
        with self._lock:
            self.offsets = {k: v for k, v in self.offsets.items() if k.rsplit("_", 1)[0] != topic}
            self._persist()

    def _persist(self) -> None:
        tmp = self.path + ".tmp"
        with open(tmp, "w") as f:
            json.dump({"queueOffsetMap": self.offsets}, f)
            f.flush()
            os.fsync(f.fileno())
        if os.path.exists(self.path):
            os.replace(self.path, self.path + ".bak")
        os.replace(tmp, self.path)


class CompactionStore(StoreLayer):
    """Per-queue compaction logs of the COMPACTION topics over the next store; see the module docstring."""

    def __init__(self, inner: "StoreChain", local: "LocalStoreAPI", config: CompactionConfig,
                 is_compaction_topic: Optional[Callable[[str], bool]] = None) -> None:
        super().__init__(inner)
        self.local_store = local        # the local store's queues and CommitLog this layer compacts from
        self.compaction_config = config
        self.root = self.local_store.config.compaction_dir
        self.compaction_topics: set[str] = set()
        self._is_compaction = is_compaction_topic
        self.logs: dict[tuple[str, int], "QueueCompactionLog"] = {}
        self.queue_stats: dict[tuple[str, int], QueueStats] = {}
        self.checkpoint = PositionCheckpoint(os.path.join(self.root, "position-checkpoint"))
        self.pipeline_dir = os.path.join(self.root, PIPELINE_DIR)     # `rmqd pipeline compact` output
        self._logs_lock = threading.Lock()
        self._queue_locks: dict[tuple[str, int], threading.Lock] = {}
        self._next_run: dict[tuple[str, int], float] = {}
        self._scheduler = ServiceThread("rmqd-compaction-schedule", config.copy_interval_ms / 1000.0,
                                        self._schedule_round)
        self._running_runs: dict[tuple[str, int], "Future[None]"] = {}
        self._first_round = True
        self._pool: Optional[ThreadPoolExecutor] = None
        self.step_hook: Optional[Callable[[str], None]] = None   # fault injection in tests
        self.local_store.add_retention_guard(self)

    @property
    def compaction(self) -> "CompactionStore":
        return self

    def routes(self, topic: str) -> bool:
        """Reads of ``topic`` are this layer's (a COMPACTION topic)."""
        return topic in self.compaction_topics

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> None:
        """Start the store below, then load the compaction logs, adopt pending job outputs and start
        the scheduler."""
        self.inner.start()
        os.makedirs(self.root, exist_ok=True)
        self.checkpoint.load()
        ldir = os.path.join(self.root, "compactionLog")
        if os.path.isdir(ldir):
            for topic in sorted(os.listdir(ldir)):
                for q in sorted(os.listdir(os.path.join(ldir, topic))):
                    if q.isdigit():
                        self._log(topic, int(q))
                self.compaction_topics.add(topic)
        self.adopt_pending()                 # before the scheduler and before anything is served
        self._pool = ThreadPoolExecutor(self.compaction_config.threads, thread_name_prefix="rmqd-compaction")
        self._scheduler.start()

    def shutdown(self) -> None:
        """Stop the scheduler and close the logs, then shut the store below down (a second call only
        passes down)."""
        if self._pool is not None:
            self._scheduler.shutdown()
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None
            with self._logs_lock:
                for qlog in self.logs.values():
                    try:
                        qlog.flush()
                    except OSError:
                        log.exception("flushing compaction log %s-%d", qlog.topic, qlog.queue_id)
                    qlog.close()
        self.inner.shutdown()

    def set_topic_policy_source(self, fn: Callable[[str], bool]) -> None:
        self._is_compaction = fn

    def is_compaction_topic(self, topic: str) -> bool:
        return self.routes(topic)

    def on_topic_config(self, topic: str, compaction: bool) -> None:
        """The broker tells the store a topic's cleanup.policy (at load and on every change)."""
        if compaction:
            self.compaction_topics.add(topic)

    def _log(self, topic: str, qid: int) -> "QueueCompactionLog":
        key = (topic, qid)
        qlog = self.logs.get(key)
        if qlog is None:
            from rmqd.store.compaction.queue_log import QueueCompactionLog
            with self._logs_lock:
                qlog = self.logs.get(key)
                if qlog is None:
                    qlog = QueueCompactionLog(self.root, topic, qid, self.compaction_config.log_file_size,
                                              self.compaction_config.cq_file_size)
                    qlog.load()
                    self._queue_locks[key] = threading.Lock()
                    self.queue_stats[key] = QueueStats(last_compacted_offset=self.checkpoint.get(topic, qid))
                    self.logs = {**self.logs, key: qlog}
        return qlog

    def queue_ids(self, topic: str) -> list[int]:
        ids = {q for (t, q) in self.local_store.queue_keys() if t == topic} | {q for (t, q) in self.logs if t == topic}
        return sorted(ids)

    # ------------------------------------------------------------------ copier
    def catch_up(self, topic: str, qid: int) -> int:
        """Copy the keyed records of the local consume queue past the log's end; returns how many."""
        qlog = self._log(topic, qid)
        cq = self.local_store.local_queue(topic, qid)
        if cq is None:
            return 0
        from rmqd.cython_ext import compaction as _cx
        nxt = max(qlog.next_offset(), cq.min_offset)
        copied = 0
        while nxt < cq.max_offset:
            entries = cq.iter_from(nxt, COPY_BATCH * 20)
            if entries is None:
                nxt = cq.roll_next_file(nxt)
                continue
            batch = []
            missing = 0
            for i, (phys, size, tags) in enumerate(entries):
                view = self.local_store.commitlog.get(phys, size)
                if view is None:              # its CommitLog file is gone (retention): nothing to copy
                    missing += 1
                    continue
                rec = bytes(view)
                view.release()
                key, _body_len, ts = _cx.record_info(rec)
                if key is not None:
                    batch.append((rec, nxt + i, tags, ts))
            if missing:
                log.warning("compaction copy of %s/%d: %d record(s) from offset %d are no longer in the CommitLog "
                            "(removed by retention before they were copied); left out", topic, qid, missing, nxt)
            nxt += len(entries)
            if batch:
                qlog.append(batch)
                copied += len(batch)
        if copied:
            qlog.flush()
        return copied

    def catch_up_all(self) -> int:
        n = 0
        for topic in list(self.compaction_topics):
            for qid in self.queue_ids(topic):
                try:
                    n += self.catch_up(topic, qid)
                except Exception:
                    log.exception("copying %s-%d into its compaction log failed", topic, qid)
        return n

    # ------------------------------------------------------------------ compaction
    def compact(self, topic: str, qid: Optional[int] = None) -> list[tuple[int, "RunResult"]]:
        """Copy and compact now (``rmqd admin compactTopic``); blocking, in the caller's thread."""
        out = []
        for q in ([qid] if qid is not None else self.queue_ids(topic)):
            out.append((q, self._run(topic, q)))
        return out

    def _run(self, topic: str, qid: int) -> "RunResult":
        from rmqd.store.compaction.compactor import compact_queue
        key = (topic, qid)
        self.catch_up(topic, qid)
        qlog = self._log(topic, qid)
        st = self.queue_stats[key]
        with self._queue_locks[key]:
            before_bytes, before_recs = qlog.byte_size(), qlog.record_count()
            t0 = time.time()
            try:
                res = compact_queue(qlog, self.compaction_config.map_bytes_per_run, self.checkpoint.get(topic, qid),
                                    lambda off: self.checkpoint.set(topic, qid, off), self.step_hook)
            except Exception as exc:
                st.failures += 1
                st.last_error = f"{type(exc).__name__}: {exc}"
                log.exception("compaction of %s-%d failed", topic, qid)
                raise
            st.runs += 1
            st.last_compacted_offset = res.checkpoint
            st.last_run_ms = int(t0 * 1000)
            st.last_duration_ms = round(res.duration_s * 1000, 3)
            st.last_rounds = res.rounds
            st.last_bytes_before, st.last_bytes_after = before_bytes, qlog.byte_size()
            st.last_records_before, st.last_records_after = before_recs, qlog.record_count()
            st.last_error = ""
            if res.segments_rewritten:
                log.info("compacted %s-%d: %d -> %d records, %d -> %d bytes, %d round(s) in %.1f ms",
                         topic, qid, before_recs, st.last_records_after, before_bytes,
                         st.last_bytes_after, res.rounds, st.last_duration_ms)
            return res

    def _schedule_round(self) -> None:
        """Every ``copy_interval_ms`` (the first time one interval after start): copy what is new, then
        submit the queues whose compaction is due (``compactionScheduleInternal`` + jitter)."""
        if self._first_round:
            self._first_round = False
            return
        pool = self._pool
        if not self.compaction_config.enabled or pool is None:
            return
        interval = self.compaction_config.schedule_interval_ms / 1000.0
        self.catch_up_all()
        now = time.monotonic()
        running = self._running_runs
        for topic in list(self.compaction_topics):
            for qid in self.queue_ids(topic):
                key = (topic, qid)
                due = self._next_run.setdefault(key, now + interval + random.uniform(1, max(1, interval)))
                fut = running.get(key)
                if now < due or (fut is not None and not fut.done()):
                    continue
                self._next_run[key] = now + interval + random.uniform(1, max(1, interval))
                try:
                    running[key] = pool.submit(self._run_logged, topic, qid)
                except RuntimeError:       # pool shut down
                    return

    def _run_logged(self, topic: str, qid: int) -> None:
        try:
            self._run(topic, qid)
        except Exception:   # noqa: S110 -- logged with its context in _run (log.exception); retried next period
            pass

    # ------------------------------------------------------------------ adoption (rmqd pipeline compact)
    def adopt_pending(self, topic: Optional[str] = None, root: Optional[str] = None) -> list["AdoptResult"]:
        """Adopt every complete job output under ``root`` (default ``compaction/pipeline``), oldest
        first; a stale one is set aside as ``<dir>.stale``. Returns one result per output."""
        results: list["AdoptResult"] = []
        if not os.path.exists(root or self.pipeline_dir):     # no job output (pending_outputs would say [])
            return results
        from rmqd.store.compaction import adopt as _adopt
        for path in _adopt.pending_outputs(root or self.pipeline_dir, topic):
            try:
                results.append(self.adopt(path))
            except _adopt.StaleOutput as exc:
                _adopt.set_aside(path, str(exc))
                results.append({"output": path, "adopted": False, "error": f"stale: {exc}"})
            except Exception as exc:
                log.exception("adopting compaction output %s failed", path)
                results.append({"output": path, "adopted": False, "error": f"{type(exc).__name__}: {exc}"})
        return results

    def adopt(self, path: str) -> "AdoptResult":
        """Swap in one job output atomically per queue (see :mod:`rmqd.store.compaction.adopt`)."""
        from rmqd.store.compaction import adopt as _adopt
        staged = _adopt.read_manifest(path)
        topic = staged.topic
        plans = sorted(staged.queues, key=lambda q: q.queue_id)
        qlogs = {q.queue_id: self._log(topic, q.queue_id) for q in plans}
        locks = [self._queue_locks[(topic, q.queue_id)] for q in plans]
        for lk in locks:
            lk.acquire()
        step = self.step_hook or (lambda _s: None)
        try:
            resuming = _adopt.is_adopting(path)
            if not resuming:
                for q in plans:
                    _adopt.check_current(qlogs[q.queue_id], q)
                _adopt.mark_adopting(path)
            step("adopt-marked")
            replaced = dropped = 0
            for q in plans:
                if os.path.exists(_adopt.queue_done_marker(path, q.queue_id)):
                    continue
                r, d = _adopt.adopt_queue(qlogs[q.queue_id], q, path, self.step_hook)
                replaced, dropped = replaced + r, dropped + d
                if q.checkpoint > self.checkpoint.get(topic, q.queue_id):
                    self.checkpoint.set(topic, q.queue_id, q.checkpoint)
                st = self.queue_stats[(topic, q.queue_id)]
                st.last_compacted_offset = max(st.last_compacted_offset, q.checkpoint)
                _adopt.mark_queue_done(path, q.queue_id)
                step("adopt-queue")
            _adopt.remove_output(path)
        finally:
            for lk in reversed(locks):
                lk.release()
        self.compaction_topics.add(topic)
        log.info("adopted compaction output %s (job %s)%s: %d segment(s) replaced, %d dropped, %d -> %d records",
                 path, staged.job, " (rolled forward)" if resuming else "", replaced, dropped,
                 sum(q.records_in() for q in plans), sum(q.records_out() for q in plans))
        return {"output": path, "adopted": True, "topic": topic, "job": staged.job, "resumed": resuming,
                "segmentsReplaced": replaced, "segmentsDropped": dropped,
                "recordsBefore": sum(q.records_in() for q in plans),
                "recordsAfter": sum(q.records_out() for q in plans)}

    # ------------------------------------------------------------------ retention (RetentionGuard)
    def before_delete(self) -> int:
        """Copy every compaction topic's pending records before local retention deletes CommitLog files."""
        self.catch_up_all()
        return 1 << 62

    def keeps_queue(self, topic: str, queue_id: int, max_offset: int) -> bool:
        """A compaction topic's local queue stays when retention empties it (its table is here)."""
        return self.routes(topic)

    # ------------------------------------------------------------------ reads (MessageStoreAPI)
    def get_max_offset(self, topic: str, queue_id: int) -> int:
        if not self.routes(topic):
            return self.inner.get_max_offset(topic, queue_id)
        qlog = self.logs.get((topic, queue_id))
        nxt = qlog.next_offset() if qlog is not None else 0
        q = self.local_store.local_queue(topic, queue_id)
        return max(nxt, q.max_offset if q is not None else 0)

    def get_min_offset(self, topic: str, queue_id: int) -> int:
        if not self.routes(topic):
            return self.inner.get_min_offset(topic, queue_id)
        return self._log_or_local(topic, queue_id, lambda qlog: qlog.min_offset(), lambda q: q.min_offset, 0)

    def _log_or_local(self, topic: str, qid: int, from_log: Callable[["QueueCompactionLog"], int],
                      from_local: Callable[["LocalQueue"], int], missing: int) -> int:
        """The compaction log's answer when it has one (>= 0), else the local queue's (``missing`` without a
        local queue)."""
        qlog = self.logs.get((topic, qid))
        got = from_log(qlog) if qlog is not None else -1
        if got >= 0:
            return got
        q = self.local_store.local_queue(topic, qid)
        return from_local(q) if q is not None else missing

    def get_messages(self, topic: str, queue_id: int, offset: int, max_nums: int,
                     max_total_bytes: Optional[int] = None,
                     message_filter: Optional["MessageFilter"] = None) -> GetMessageResult:
        if not self.routes(topic):
            return self.inner.get_messages(topic, queue_id, offset, max_nums, max_total_bytes, message_filter)
        t0 = time.perf_counter()
        try:
            count, limit = transfer_limits(self.config, max_nums, max_total_bytes)
            return self._read(topic, queue_id, offset, count, limit, message_filter)
        finally:
            self.local_store.record_get_time(t0)

    def _read(self, topic: str, qid: int, offset: int, max_nums: int, max_bytes: int,
              message_filter: Optional["MessageFilter"]) -> GetMessageResult:
        """Below the copied point from the compaction log, above it from the local queue."""
        qlog = self.logs.get((topic, qid))
        copied = qlog.next_offset() if qlog is not None else 0
        mn, mx = self.get_min_offset(topic, qid), self.get_max_offset(topic, qid)
        if offset >= copied or qlog is None:          # (None: nothing copied yet, a negative offset)
            q = self.local_store.local_queue(topic, qid)
            if q is None:
                res = GetMessageResult(S.NO_MATCHED_LOGIC_QUEUE, 0, 0, 0)
            else:
                res = q.get_messages(offset, max_nums, max_bytes, message_filter)
            res.min_offset, res.max_offset = mn, mx
            if res.status is S.OFFSET_TOO_SMALL and copied > 0:
                res.next_begin_offset = max(res.next_begin_offset, copied)
            return res
        if mx == 0:
            return GetMessageResult(S.NO_MESSAGE_IN_QUEUE, 0, mn, mx)
        got = qlog.read_from(offset, max_nums, max_bytes)
        res = collect_records(GetMessageResult(S.NO_MATCHED_MESSAGE, offset, mn, mx), got, message_filter)
        if not got:
            res.next_begin_offset = copied
        return res

    def get_messages_resident(self, topic: str, queue_id: int, offset: int, max_nums: int,
                              tag_codes: Optional[Sequence[int]]) -> Optional[GetMessageResult]:
        if self.routes(topic):
            return None
        return self.inner.get_messages_resident(topic, queue_id, offset, max_nums, tag_codes)

    def get_message_store_timestamp(self, topic: str, queue_id: int, queue_offset: int) -> int:
        if not self.routes(topic):
            return self.inner.get_message_store_timestamp(topic, queue_id, queue_offset)
        qlog = self.logs.get((topic, queue_id))
        if qlog is not None and queue_offset < qlog.next_offset():
            return qlog.store_time_at(queue_offset)
        q = self.local_store.local_queue(topic, queue_id)
        return q.store_time(queue_offset) if q is not None else -1

    def get_earliest_message_time(self, topic: str, queue_id: int) -> int:
        if not self.routes(topic):
            return self.inner.get_earliest_message_time(topic, queue_id)
        return self._log_or_local(topic, queue_id, lambda qlog: qlog.earliest_store_time(),
                                  lambda q: q.earliest_time(), -1)

    def get_offset_by_time(self, topic: str, queue_id: int, timestamp: int) -> int:
        if not self.routes(topic):
            return self.inner.get_offset_by_time(topic, queue_id, timestamp)
        qlog = self.logs.get((topic, queue_id))
        if qlog is not None and not qlog.is_empty():
            off = qlog.offset_by_time(timestamp)
            if off is not None:
                return off
            return max(self._local_offset_by_time(topic, queue_id, timestamp), qlog.next_offset())
        return self._local_offset_by_time(topic, queue_id, timestamp)

    def _local_offset_by_time(self, topic: str, qid: int, timestamp: int) -> int:
        q = self.local_store.local_queue(topic, qid)
        return q.offset_by_time(timestamp) if q is not None else 0

    def delete_topic(self, topic: str) -> int:
        n = self.inner.delete_topic(topic)
        if self.routes(topic):
            self.drop_topic(topic)
        return n

    # ------------------------------------------------------------------ admin
    def drop_topic(self, topic: str) -> None:
        """Destroy the topic's compaction logs and checkpoint entries."""
        with self._logs_lock:
            gone = [k for k in self.logs if k[0] == topic]
            logs = dict(self.logs)
            for k in gone:
                logs.pop(k).destroy()
                self.queue_stats.pop(k, None)
            self.logs = logs
        self.compaction_topics.discard(topic)
        self.checkpoint.drop_topic(topic)

    def status(self, topic: Optional[str] = None) -> list[QueueStatus]:
        """Per queue: offsets, files, records, live keys (``liveKeys``: keys in the compacted files, see
        QueueCompactionLog.compacted_keys), bytes, and the last run's figures."""
        out: list[QueueStatus] = []
        for (t, q), qlog in sorted(self.logs.items()):
            if topic is not None and t != topic:
                continue
            st = self.queue_stats.get((t, q)) or QueueStats()
            out.append({"topic": t, "queueId": q, "minOffset": qlog.min_offset(),
                        "copiedOffset": qlog.next_offset(), "files": len(qlog.segments),
                        "records": qlog.record_count(), "liveKeys": qlog.compacted_keys(self.checkpoint.get(t, q)),
                        "bytes": qlog.byte_size(), "last_compacted_offset": st.last_compacted_offset,
                        "last_run_ms": st.last_run_ms, "last_duration_ms": st.last_duration_ms,
                        "last_rounds": st.last_rounds, "last_bytes_before": st.last_bytes_before,
                        "last_bytes_after": st.last_bytes_after, "last_records_before": st.last_records_before,
                        "last_records_after": st.last_records_after, "runs": st.runs, "failures": st.failures,
                        "last_error": st.last_error})
        return out

    def runtime_info(self) -> dict[str, str]:
        info = {}
        for row in self.status():
            info[f"compaction_{row['topic']}_{row['queueId']}"] = (
                f"lastCompactedOffset={row['last_compacted_offset']},files={row['files']},"
                f"records={row['records']},liveKeys={row['liveKeys']},bytes={row['bytes']},"
                f"bytesBefore={row['last_bytes_before']},"
                f"bytesAfter={row['last_bytes_after']},lastRunMs={row['last_run_ms']},"
                f"lastDurationMs={row['last_duration_ms']}")
        return info
