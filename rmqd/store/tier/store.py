"""The tiered store: the layer that keeps each queue's history in a second tier (RocketMQ 5.x
``TieredMessageStore``, RIP-57/65, seed 003).

:class:`TieredStore` wraps the next store (a :class:`~rmqd.store.layer.StoreLayer`; the local store
below stays the only writer). It copies every queue of a user topic into the tier (:mod:`.dispatcher`),
indexes the keys (:mod:`.index`), and answers the reads the local store can no longer answer (the
rules are in one place, :mod:`.fallthrough`); everything else passes down. Local retention asks
:meth:`TieredStore.before_delete` before deleting a CommitLog file, so a file goes only once
everything in it is committed here. System topics stay local, as in Java; compaction topics keep
their history in the compaction store. Two background threads (the copier and the index service) do
all the work, never the event loop.
"""
from __future__ import annotations

import logging
import threading
import time
from typing import TYPE_CHECKING, Callable, Optional, Sequence, TypedDict

from rmqd.common import constants as C
from rmqd.common.service_thread import ServiceThread
from rmqd.store.consume_queues import without_topic
from rmqd.store.layer import StoreLayer
from rmqd.store.tier.backend import TierBackend, make_backend, md5_prefix
from rmqd.store.tier.config import TierConfig
from rmqd.store.tier.dispatcher import TierDispatcher
from rmqd.store.tier.fallthrough import TierReads
from rmqd.store.tier.index.service import IndexStoreService
from rmqd.store.tier.metadata import TierMetadata
from rmqd.store.tier.queue import BLANK_SIZE, TieredQueue
from rmqd.store.results import transfer_limits

if TYPE_CHECKING:
    from rmqd.store.api import LocalStoreAPI, MessageFilter
    from rmqd.store.layer import StoreChain
    from rmqd.store.results import GetMessageResult, QueryResult
    from rmqd.store.tier.index.adopt import AdoptResult
    from rmqd.store.tier.index.service import IndexFileStatus
    from rmqd.store.tier.metadata import QueueDoc, SegmentDoc

log = logging.getLogger(__name__)

# Java TopicValidator.SYSTEM_TOPIC_SET (+ the rmq_sys_ prefix): these stay local
SYSTEM_TOPICS = frozenset({
    C.AUTO_CREATE_TOPIC_KEY_TOPIC, C.SCHEDULE_TOPIC, C.BENCHMARK_TOPIC, C.TRANS_HALF_TOPIC, C.TRACE_TOPIC,
    C.TRANS_OP_HALF_TOPIC, C.TRANS_CHECK_MAX_TIME_TOPIC, C.SELF_TEST_TOPIC, C.OFFSET_MOVED_EVENT,
    "rmq_sys_wheel_timer", "RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC",
})


BACKLOG_ROUNDS = 1000          # rounds per wake-up of the copier while it is behind
BACKLOG_DUTY = 0.25            # ... each followed by a pause of 3x its duration
BACKLOG_PAUSE_S = 0.005        # (at least this)


class TierQueueStatus(TypedDict):
    """One queue in :meth:`TieredStore.status`."""
    topic: str
    queueId: int
    minOffset: int
    maxOffset: int
    committedOffset: int
    commitLogBytes: int
    consumeQueueBytes: int
    bytes: int
    segments: int


class TierStatus(TypedDict):
    """:meth:`TieredStore.status`: the body of GET_TIER_STATUS and the console's tier page."""
    backend: str
    level: str
    queues: list[TierQueueStatus]
    indexFiles: list["IndexFileStatus"]
    copied: int
    lastError: str
    backendStats: dict[str, int]


class CommitResult(TypedDict):
    """:meth:`TieredStore.commit_now` (``rmqd admin commitTier``)."""
    copied: int
    indexSteps: int


def is_system_topic(topic: str) -> bool:
    return topic in SYSTEM_TOPICS or topic.startswith("rmq_sys_")


class TieredStore(StoreLayer):
    """The tier over the next store; see the module docstring."""

    def __init__(self, inner: "StoreChain", local: "LocalStoreAPI", config: TierConfig,
                 backend: Optional[TierBackend] = None) -> None:
        super().__init__(inner)
        self.local_store = local        # the local store's queues and CommitLog the tier copies from
        self.tier_config = config
        self.backend = backend
        self.metadata = TierMetadata(self.local_store.config.config_dir)
        self.queues: dict[tuple[str, int], TieredQueue] = {}
        self.committed_max: dict[tuple[str, int], int] = {}   # what the metadata holds (retention gate)
        self.index: Optional[IndexStoreService] = None
        self.dispatcher = TierDispatcher(self, local)
        self.reads = TierReads(self, local)
        self.step_hook: Optional[Callable[[str], None]] = None
        self._queues_lock = threading.Lock()
        self._stop = threading.Event()
        self._threads: list[ServiceThread] = []
        self.last_error = ""
        self.started = False
        self.local_store.add_retention_guard(self)

    @property
    def tier(self) -> "TieredStore":
        return self

    def started_backend(self) -> TierBackend:
        """The backend (given, or made by :meth:`start`)."""
        if self.backend is None:
            raise RuntimeError("tier: not started (no backend yet)")
        return self.backend

    def started_index(self) -> IndexStoreService:
        """The index service (made by :meth:`start`)."""
        if self.index is None:
            raise RuntimeError("tier: not started (no index service yet)")
        return self.index

    # ---- lifecycle ------------------------------------------------------------------------------
    def start(self) -> None:
        """Start the store below, then recover the tier and start the copier and the index service."""
        self.inner.start()
        cfg = self.tier_config
        if self.backend is None:
            self.backend = make_backend(cfg.provider, cfg.file_path, cfg.endpoint, cfg.bucket, cfg.access_key,
                                        cfg.secret_key, cfg.region)
        backend = self.backend
        md = self.metadata
        had = md.load()
        if had and (not backend.persistent or (md.backend and md.backend != backend.describe())):
            log.warning("tier: backend is now %s (was %s); starting an empty tier", backend.describe(),
                        md.backend or "?")
            md.reset()
        md.backend = backend.describe()
        md.cluster, md.broker = cfg.cluster, cfg.broker
        md.index_config = {"slots": cfg.index_slots, "maxItems": cfg.index_max_items,
                           "enabled": cfg.message_index_enable}
        for doc in md.queues.values():
            tq = TieredQueue(backend, cfg, doc["topic"], int(doc["queueId"]))
            tq.load_json(doc)
            tq.recover()
            self.queues[(tq.topic, tq.queue_id)] = tq
        self._sweep_orphans()
        backend.abort_partial_uploads(self._broker_prefix())
        index = self.index = IndexStoreService(self.local_store.config.store_root_dir, backend, md, cfg.cluster, cfg.broker,
                                               cfg.index_slots, cfg.index_max_items, cfg.file_reserved_hours,
                                               cfg.rolling_interval_hours, clock=self.local_store.clock)
        index.step_hook = self.step
        index.recover()
        md.persist()
        self.mark_committed()
        self.adopt_index_outputs()          # `rmqd pipeline index` outputs, before anything is served
        self.started = True
        log.info("tier: %s, %d queue(s), %d index file(s), level %s", backend.describe(), len(self.queues),
                 len(index.files), cfg.storage_level.name)
        self._spawn("rmqd-tier-dispatch", self._dispatch_loop, cfg.dispatch_interval_ms)
        self._spawn("rmqd-tier-index", self._index_loop, cfg.index_service_interval_ms)

    def _sweep_orphans(self) -> None:
        """Delete queue segments the metadata does not list (rolled after the last commit)."""
        known: set[str] = set()
        for tq in self.queues.values():
            known |= tq.commitlog.paths() | tq.consume_queue.paths()
        backend = self.started_backend()
        for path in backend.list(self._broker_prefix()):
            if "/rmq_sys_INDEX/" in path or path in known:
                continue
            log.warning("tier: deleting orphan segment %s", path)
            backend.delete(path)

    def _broker_prefix(self) -> str:
        """Where this broker's segments live in the backend."""
        cfg = self.tier_config
        return f"{md5_prefix(cfg.cluster)}_{cfg.cluster}/{cfg.broker}/"

    def _spawn(self, name: str, fn: Callable[[], None], interval_ms: int) -> None:
        """A service running ``fn`` every ``interval_ms`` (the first time one interval after start);
        a failing round is logged, kept in ``last_error`` and retried next time."""
        first = [True]

        def round_() -> None:
            if first[0]:
                first[0] = False
                return
            try:
                fn()
                self.last_error = ""
            except Exception as exc:
                self.last_error = f"{type(exc).__name__}: {exc}"
                log.exception("tier: %s failed; retrying", name)
        svc = ServiceThread(name, interval_ms / 1000, round_, join_timeout=30.0)
        svc.start()
        self._threads.append(svc)

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
            if self._stop.is_set() or not self.started_index().run_once():
                return

    def shutdown(self) -> None:
        """Stop the threads and commit what is in flight, then shut the store below down."""
        self._stop.set()
        for svc in self._threads:
            svc.shutdown()
        self._threads = []
        if self.started:
            try:
                self.dispatcher.run_once()     # commit what is in flight
            except Exception:
                log.exception("tier: final copy round failed")
            self.started_index().close()
            self.started_backend().close()
            self.started = False
        self.inner.shutdown()

    def step(self, name: str) -> None:
        """Fault-injection point (tests set ``step_hook``)."""
        if self.step_hook is not None:
            self.step_hook(name)

    # ---- queues ---------------------------------------------------------------------------------
    def eligible(self, topic: str) -> bool:
        """Queues of ``topic`` are copied here (not a system topic, not a compaction topic)."""
        if is_system_topic(topic):
            return False
        comp = self.inner.compaction
        return comp is None or not comp.routes(topic)

    def queue(self, topic: str, qid: int, create: bool = False, init_offset: int = 0) -> Optional[TieredQueue]:
        """The tier's queue of (topic, qid); None when there is none and not ``create``."""
        tq = self.queues.get((topic, qid))
        if tq is None and create:
            tq = self.created_queue(topic, qid, init_offset)
        return tq

    def created_queue(self, topic: str, qid: int, init_offset: int = 0) -> TieredQueue:
        """The tier's queue of (topic, qid), made (its first offset ``init_offset``) when there is none."""
        tq = self.queues.get((topic, qid))
        if tq is None:
            with self._queues_lock:
                tq = self.queues.get((topic, qid))
                if tq is None:
                    tq = TieredQueue(self.started_backend(), self.tier_config, topic, qid)
                    tq.init(init_offset)
                    self.queues = {**self.queues, (topic, qid): tq}
        return tq

    def rollback_uncommitted(self) -> None:
        """After a failed copy round: every queue and the writable index file go back to what the
        metadata holds (as a restart would), so the next round copies the same messages again."""
        md = self.metadata
        with self._queues_lock:
            kept: dict[tuple[str, int], TieredQueue] = {}
            for key, tq in self.queues.items():
                doc = md.queues.get(tq.key)
                live = tq.commitlog.paths() | tq.consume_queue.paths()
                if doc is None:
                    tq.destroy()
                    continue
                tq.load_json(doc)
                tq.recover()
                for path in live - (tq.commitlog.paths() | tq.consume_queue.paths()):
                    self.started_backend().delete(path)
                kept[key] = tq
            self.queues = kept
        self.started_index().rollback()
        log.warning("tier: rolled back to the last committed state")

    def mark_committed(self) -> None:
        self.committed_max = {(d["topic"], int(d["queueId"])): _cq_end(d) for d in self.metadata.queues.values()}

    def drop_topic(self, topic: str) -> None:
        """Destroy the topic's queues in the tier and forget them in the metadata."""
        with self.dispatcher.lock:
            with self._queues_lock:
                self.queues = without_topic(self.queues, topic)[0]
            self.metadata.drop_topic(topic)
            self.metadata.persist()
            self.mark_committed()

    # ---- retention (RetentionGuard) -----------------------------------------------------------------
    def before_delete(self) -> int:
        return self.before_retention()

    def keeps_queue(self, topic: str, queue_id: int, max_offset: int) -> bool:
        """The tier still serves the records of a local queue retention emptied."""
        return self.started and self.reads.min_offset(topic, queue_id, max_offset) < max_offset

    def retention_limit(self) -> int:
        """CommitLog offset below which every record of a tiered queue is committed in the tier:
        local files that end at or below it may be deleted."""
        local = self.local_store
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

    # ---- reads (MessageStoreAPI): the tier's answer where fallthrough.TierReads says so ------------------
    def _passes(self, topic: str) -> bool:
        """Calls for ``topic`` go straight down (a compaction topic: its history is the compaction log)."""
        comp = self.inner.compaction
        return comp is not None and comp.routes(topic)

    def get_min_offset(self, topic: str, queue_id: int) -> int:
        local = self.inner.get_min_offset(topic, queue_id)
        return local if self._passes(topic) else self.reads.min_offset(topic, queue_id, local)

    def get_earliest_message_time(self, topic: str, queue_id: int) -> int:
        local = self.inner.get_earliest_message_time(topic, queue_id)
        return local if self._passes(topic) else self.reads.earliest_time(topic, queue_id, local)

    def get_offset_by_time(self, topic: str, queue_id: int, timestamp: int) -> int:
        if self._passes(topic):
            return self.inner.get_offset_by_time(topic, queue_id, timestamp)
        return self.reads.offset_by_time(topic, queue_id, timestamp,
                                         lambda ts: self.inner.get_offset_by_time(topic, queue_id, ts))

    def get_messages(self, topic: str, queue_id: int, offset: int, max_nums: int,
                     max_total_bytes: Optional[int] = None,
                     message_filter: Optional["MessageFilter"] = None) -> "GetMessageResult":
        if self._passes(topic):
            return self.inner.get_messages(topic, queue_id, offset, max_nums, max_total_bytes, message_filter)
        t0 = time.perf_counter()
        asked_inner = False

        def inner() -> "GetMessageResult":
            nonlocal asked_inner
            asked_inner = True           # the store below counts this read
            return self.inner.get_messages(topic, queue_id, offset, max_nums, max_total_bytes, message_filter)
        count, limit = transfer_limits(self.config, max_nums, max_total_bytes)
        try:
            return self.reads.get_messages(topic, queue_id, offset, count, limit, message_filter, inner)
        finally:
            if not asked_inner:
                self.local_store.record_get_time(t0)

    def get_messages_resident(self, topic: str, queue_id: int, offset: int, max_nums: int,
                              tag_codes: Optional[Sequence[int]]) -> Optional["GetMessageResult"]:
        if not self._passes(topic) and self.reads.serves_pull(topic, queue_id, offset):
            return None
        res = self.inner.get_messages_resident(topic, queue_id, offset, max_nums, tag_codes)
        if res is not None and not self._passes(topic):
            res.min_offset = self.reads.min_offset(topic, queue_id, res.min_offset)
        return res

    def read_message(self, phys_offset: int) -> Optional[bytes]:
        rec = self.inner.read_message(phys_offset)
        return rec if rec is not None else self.reads.read_message(phys_offset)

    def query_message(self, topic: str, key: str, max_num: int, begin_ts: int = 0,
                      end_ts: int = 2 ** 62) -> "QueryResult":
        res = self.inner.query_message(topic, key, max_num, begin_ts, end_ts)
        res.messages.extend(self.reads.query(topic, key, max_num, begin_ts, end_ts, res.messages))
        return res

    def delete_topic(self, topic: str) -> int:
        n = self.inner.delete_topic(topic)
        if self.started:
            self.drop_topic(topic)
        return n

    # ---- admin ----------------------------------------------------------------------------------
    def adopt_index_outputs(self, root: Optional[str] = None) -> list["AdoptResult"]:
        """Adopt the complete outputs of ``rmqd pipeline index`` (:mod:`.index.adopt`); one result each."""
        from rmqd.store.tier.index.adopt import adopt_all
        return adopt_all(self, root, self.step)

    def commit_now(self, upload: bool = True, timeout_s: float = 60.0) -> CommitResult:
        """``rmqd admin commitTier``: copy everything pending, seal the writable index file, and
        (with ``upload``) compact and upload every sealed file now."""
        copied = 0
        for _ in range(1024):
            n = self.dispatcher.run_once(force=True)
            copied += n
            if not n:
                break
        index = self.started_index()
        index.seal_requested = True
        self.dispatcher.run_once(force=True)
        steps = 0
        deadline = time.monotonic() + timeout_s
        if upload:
            while time.monotonic() < deadline and index.run_once():
                steps += 1
        return {"copied": copied, "indexSteps": steps}

    def status(self) -> TierStatus:
        queues: list[TierQueueStatus] = []
        for (topic, qid), tq in sorted(self.queues.items()):
            queues.append({"topic": topic, "queueId": qid, "minOffset": tq.min_offset, "maxOffset": tq.max_offset,
                           "committedOffset": self.committed_max.get((topic, qid), -1),
                           "commitLogBytes": tq.commitlog.total_size, "consumeQueueBytes": tq.consume_queue.total_size,
                           "bytes": tq.byte_size, "segments": len(tq.commitlog.segments)})
        return {"backend": self.backend.describe() if self.backend else "", "level": self.tier_config.storage_level.name,
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


def _cq_end(doc: "QueueDoc") -> int:
    segs: list["SegmentDoc"] = doc.get("consumeQueue") or []
    return (segs[-1]["base"] + segs[-1]["size"]) // 20 if segs else -1
