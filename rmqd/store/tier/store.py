"""The tiered store: the layer that keeps each queue's history in a second tier (RocketMQ 5.x
``TieredMessageStore``, RIP-57/65, seed 003).

The local :class:`~rmqd.store.message_store.MessageStore` stays the only writer; this layer
(``store.tier``) copies every queue of a user topic into the tier (:mod:`.dispatcher`), indexes
the keys (:mod:`.index`), and answers the reads the local store can no longer answer (the rules
are in one place, :mod:`.fallthrough`). Local retention asks :meth:`TieredStore.retention_limit`
before deleting a CommitLog file, so a file goes only once everything in it is committed here.
System topics stay local, as in Java; compaction topics keep their history in the compaction
store. Two background threads (the copier and the index service) do all the work, never the
event loop.
"""
from __future__ import annotations

import logging
import threading
import time
from typing import TYPE_CHECKING, Callable, Optional

from rmqd.store.tier.backend import TierBackend, make_backend, md5_prefix
from rmqd.store.tier.config import TierConfig
from rmqd.store.tier.dispatcher import TierDispatcher
from rmqd.store.tier.fallthrough import TierReads
from rmqd.store.tier.index.service import IndexStoreService
from rmqd.store.tier.metadata import TierMetadata
from rmqd.store.tier.queue import BLANK_SIZE, TieredQueue

if TYPE_CHECKING:
    from rmqd.store.message_store import MessageStore

log = logging.getLogger(__name__)

# Java TopicValidator.SYSTEM_TOPIC_SET (+ the rmq_sys_ prefix): these stay local
SYSTEM_TOPICS = frozenset({
    "TBW102", "SCHEDULE_TOPIC_XXXX", "BenchmarkTest", "RMQ_SYS_TRANS_HALF_TOPIC", "RMQ_SYS_TRACE_TOPIC",
    "RMQ_SYS_TRANS_OP_HALF_TOPIC", "TRANS_CHECK_MAX_TIME_TOPIC", "SELF_TEST_TOPIC", "OFFSET_MOVED_EVENT",
    "rmq_sys_wheel_timer", "RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC",
})


BACKLOG_ROUNDS = 1000          # rounds per wake-up of the copier while it is behind
BACKLOG_DUTY = 0.25            # ... each followed by a pause of 3x its duration
BACKLOG_PAUSE_S = 0.005        # (at least this)


def is_system_topic(topic: str) -> bool:
    return topic in SYSTEM_TOPICS or topic.startswith("rmq_sys_")


class TieredStore:
    def __init__(self, local: "MessageStore", config: TierConfig, backend: Optional[TierBackend] = None) -> None:
        self.local = local
        self.config = config
        self.backend = backend
        self.metadata = TierMetadata(local.config.config_dir)
        self.queues: dict[tuple[str, int], TieredQueue] = {}
        self.committed_max: dict[tuple[str, int], int] = {}   # what the metadata holds (retention gate)
        self.index: Optional[IndexStoreService] = None
        self.dispatcher = TierDispatcher(self)
        self.reads = TierReads(self)
        self.step_hook: Optional[Callable[[str], None]] = None
        self._queues_lock = threading.Lock()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._wake = threading.Event()
        self.last_error = ""
        self.started = False

    # ---- lifecycle ------------------------------------------------------------------------------
    def start(self) -> None:
        cfg = self.config
        if self.backend is None:
            self.backend = make_backend(cfg.provider, cfg.file_path, cfg.endpoint, cfg.bucket, cfg.access_key,
                                        cfg.secret_key, cfg.region)
        md = self.metadata
        had = md.load()
        if had and (not self.backend.persistent or (md.backend and md.backend != self.backend.describe())):
            log.warning("tier: backend is now %s (was %s); starting an empty tier", self.backend.describe(),
                        md.backend or "?")
            md.reset()
        md.backend = self.backend.describe()
        md.cluster, md.broker = cfg.cluster, cfg.broker
        md.index_config = {"slots": cfg.index_slots, "maxItems": cfg.index_max_items,
                           "enabled": cfg.message_index_enable}
        for doc in md.queues.values():
            tq = TieredQueue(self.backend, cfg, doc["topic"], int(doc["queueId"]))
            tq.load_json(doc)
            tq.recover()
            self.queues[(tq.topic, tq.queue_id)] = tq
        self._sweep_orphans()
        self.backend.abort_partial_uploads(self._broker_prefix())
        self.index = IndexStoreService(self.local.config.store_root_dir, self.backend, md, cfg.cluster, cfg.broker,
                                       cfg.index_slots, cfg.index_max_items, cfg.file_reserved_hours,
                                       cfg.rolling_interval_hours, clock=self.local.clock)
        self.index.step_hook = self.step
        self.index.recover()
        md.persist()
        self.mark_committed()
        self.adopt_index_outputs()          # `rmqd pipeline index` outputs, before anything is served
        self.started = True
        log.info("tier: %s, %d queue(s), %d index file(s), level %s", self.backend.describe(), len(self.queues),
                 len(self.index.files), cfg.storage_level.name)
        self._spawn("rmqd-tier-dispatch", self._dispatch_loop, cfg.dispatch_interval_ms)
        self._spawn("rmqd-tier-index", self._index_loop, cfg.index_service_interval_ms)

    def _sweep_orphans(self) -> None:
        """Delete queue segments the metadata does not list (rolled after the last commit)."""
        known = set()
        for tq in self.queues.values():
            known |= tq.commitlog.paths() | tq.consume_queue.paths()
        for path in self.backend.list(self._broker_prefix()):
            if "/rmq_sys_INDEX/" in path or path in known:
                continue
            log.warning("tier: deleting orphan segment %s", path)
            self.backend.delete(path)

    def _broker_prefix(self) -> str:
        """Where this broker's segments live in the backend."""
        cfg = self.config
        return f"{md5_prefix(cfg.cluster)}_{cfg.cluster}/{cfg.broker}/"

    def _spawn(self, name: str, fn: Callable[[], None], interval_ms: int) -> None:
        def loop() -> None:
            while not self._stop.wait(interval_ms / 1000):
                try:
                    fn()
                    self.last_error = ""
                except Exception as exc:
                    self.last_error = f"{type(exc).__name__}: {exc}"
                    log.exception("tier: %s failed; retrying", name)
        t = threading.Thread(target=loop, name=name, daemon=True)
        t.start()
        self._threads.append(t)

    def _dispatch_loop(self) -> None:
        """A round per wake-up; while a round leaves a backlog (a queue hit its per-round cap)
        more rounds follow, so the tier keeps up with a hot queue, paced to a duty cycle of
        :data:`BACKLOG_DUTY` so that catching up leaves sends and pulls their share of the CPU."""
        for _ in range(BACKLOG_ROUNDS):
            t0 = time.monotonic()
            self.dispatcher.run_once()
            if not self.dispatcher.backlog:
                return
            pause = max(BACKLOG_PAUSE_S, (time.monotonic() - t0) * (1 / BACKLOG_DUTY - 1))
            if self._stop.wait(pause):
                return

    def _index_loop(self) -> None:
        for _ in range(16):                      # bounded work per wake-up
            if self._stop.is_set() or not self.index.run_once():
                return

    def shutdown(self) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(30)
        self._threads = []
        if self.started:
            try:
                self.dispatcher.run_once()     # commit what is in flight
            except Exception:
                log.exception("tier: final copy round failed")
            self.index.close()
            self.backend.close()
            self.started = False

    def step(self, name: str) -> None:
        """Fault-injection point (tests set ``step_hook``)."""
        if self.step_hook is not None:
            self.step_hook(name)

    # ---- queues ---------------------------------------------------------------------------------
    def eligible(self, topic: str) -> bool:
        if is_system_topic(topic):
            return False
        comp = self.local.compaction
        return comp is None or topic not in comp.topics

    def queue(self, topic: str, qid: int, create: bool = False, init_offset: int = 0) -> Optional[TieredQueue]:
        tq = self.queues.get((topic, qid))
        if tq is None and create:
            with self._queues_lock:
                tq = self.queues.get((topic, qid))
                if tq is None:
                    tq = TieredQueue(self.backend, self.config, topic, qid)
                    tq.init(init_offset)
                    self.queues = {**self.queues, (topic, qid): tq}
        return tq

    def rollback_uncommitted(self) -> None:
        """After a failed copy round: every queue and the writable index file go back to what the
        metadata holds (as a restart would), so the next round copies the same messages again."""
        md = self.metadata
        with self._queues_lock:
            kept = {}
            for key, tq in self.queues.items():
                doc = md.queues.get(tq.key)
                live = tq.commitlog.paths() | tq.consume_queue.paths()
                if doc is None:
                    tq.destroy()
                    continue
                tq.load_json(doc)
                tq.recover()
                for path in live - (tq.commitlog.paths() | tq.consume_queue.paths()):
                    self.backend.delete(path)
                kept[key] = tq
            self.queues = kept
        self.index.rollback()
        log.warning("tier: rolled back to the last committed state")

    def mark_committed(self) -> None:
        self.committed_max = {(d["topic"], int(d["queueId"])): _cq_end(d) for d in self.metadata.queues.values()}

    def delete_topic(self, topic: str) -> None:
        with self.dispatcher.lock:
            with self._queues_lock:
                gone = [k for k in self.queues if k[0] == topic]
                queues = dict(self.queues)
                for k in gone:
                    queues.pop(k).destroy()
                self.queues = queues
            self.metadata.drop_topic(topic)
            self.metadata.persist()
            self.mark_committed()

    # ---- retention --------------------------------------------------------------------------------
    def retention_limit(self) -> int:
        """CommitLog offset below which every record of a tiered queue is committed in the tier:
        local files that end at or below it may be deleted."""
        local = self.local
        limit = 1 << 62
        for cq in local.local_queues():
            topic, qid = cq.topic, cq.queue_id
            if not self.eligible(topic):
                continue
            done = self.committed_max.get((topic, qid), -1)
            start = max(done, cq.min_offset)
            if start >= cq.max_offset:
                continue
            for off in range(start, min(start + 64, cq.max_offset)):
                e = cq.get_entry(off)
                if e is not None and e[1] != BLANK_SIZE:
                    limit = min(limit, e[0])
                    break
        return limit

    def before_retention(self) -> int:
        """Copy and commit everything pending now (retention runs, DELETE_EXPIRED_COMMITLOG), then
        answer :meth:`retention_limit`. When the tier cannot be written (backend down) the limit
        is what was committed before: files the tier already has may go, the others are held."""
        if self.started:
            try:
                for _ in range(64):
                    if not self.dispatcher.run_once(force=True):
                        break
            except Exception as exc:
                self.last_error = f"{type(exc).__name__}: {exc}"
                log.exception("tier: copying before retention failed; local CommitLog files the tier does not "
                              "have yet are kept")
        return self.retention_limit()

    # ---- admin ----------------------------------------------------------------------------------
    def adopt_index_outputs(self, root: Optional[str] = None) -> list[dict]:
        """Adopt the complete outputs of ``rmqd pipeline index`` (:mod:`.index.adopt`); one result each."""
        from rmqd.store.tier.index.adopt import adopt_all
        return adopt_all(self, root, self.step)

    def commit_now(self, upload: bool = True, timeout_s: float = 60.0) -> dict:
        """``rmqd admin commitTier``: copy everything pending, seal the writable index file, and
        (with ``upload``) compact and upload every sealed file now."""
        copied = 0
        for _ in range(1024):
            n = self.dispatcher.run_once(force=True)
            copied += n
            if not n:
                break
        self.index.seal_requested = True
        self.dispatcher.run_once(force=True)
        steps = 0
        deadline = time.monotonic() + timeout_s
        if upload:
            while time.monotonic() < deadline and self.index.run_once():
                steps += 1
        return {"copied": copied, "indexSteps": steps}

    def status(self) -> dict:
        queues = []
        for (topic, qid), tq in sorted(self.queues.items()):
            queues.append({"topic": topic, "queueId": qid, "minOffset": tq.min_offset, "maxOffset": tq.max_offset,
                           "committedOffset": self.committed_max.get((topic, qid), -1),
                           "commitLogBytes": tq.commitlog.total_size, "consumeQueueBytes": tq.consume_queue.total_size,
                           "bytes": tq.byte_size, "segments": len(tq.commitlog.segments)})
        return {"backend": self.backend.describe() if self.backend else "", "level": self.config.storage_level.name,
                "queues": queues, "indexFiles": self.index.status() if self.index else [],
                "copied": self.dispatcher.copied_total, "lastError": self.last_error,
                "backendStats": dict(vars(self.backend.stats)) if self.backend else {}}

    def runtime_info(self) -> dict[str, str]:
        st = self.status()
        info = {"tierBackend": st["backend"], "tierStorageLevel": st["level"]}
        for q in st["queues"]:
            info[f"tier_{q['topic']}_{q['queueId']}"] = (
                f"minOffset={q['minOffset']},maxOffset={q['maxOffset']},bytes={q['bytes']}")
        for f in st["indexFiles"]:
            info[f"tierIndex_{f['beginTs']}"] = (
                f"state={f['state']},items={f['items']},beginTime={f['beginTime']},endTime={f['endTime']}")
        return info


def _cq_end(doc: dict) -> int:
    segs = doc.get("consumeQueue") or []
    return (segs[-1]["base"] + segs[-1]["size"]) // 20 if segs else -1
