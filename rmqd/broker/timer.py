"""5.x arbitrary-time delivery: ``TIMER_DELIVER_MS`` / ``TIMER_DELAY_SEC`` / ``TIMER_DELAY_MS``.

Java: ``HookUtils.transformTimerMessage`` (park) and ``TimerMessageStore`` (deliver).  rmqd keeps
the Java on-disk contract that matters to clients and tools — the parked message is an ordinary
message of the system topic ``rmq_sys_wheel_timer`` queue 0 carrying ``TIMER_OUT_MS``,
``REAL_TOPIC`` and ``REAL_QID`` — but replaces the timer wheel/timer log files with an in-memory
min-heap of ``(deliver ms, queue offset, commit-log offset)`` rebuilt on start from that queue.

Progress (``config/timerProgress.json``, persisted every ``flushDelayOffsetInterval`` and on
shutdown) is three numbers taken at one consistent point of the delivery thread:

* ``scanOffset`` S: entries below S had been read into the heap;
* ``watermark`` W: every entry below W was delivered (the smallest queue offset still pending);
* ``headDeliverMs``/``headOffset`` H: the heap head; every scanned entry ordered before H (by
  (deliver ms, queue offset)) was delivered, because the heap holds every scanned pending entry.

On start the queue is re-read from W; an entry below S that sorts before H is skipped as already
delivered, everything else is pending again.  So a clean restart neither loses nor repeats timers;
a crash repeats at most what was delivered since the last persist (at-least-once).

A delete marker (a timer message carrying ``TIMER_DEL_UNIQKEY``, stored by a recall: rmqd.processors.recall)
names a parked message by ``<real topic>+<UNIQ_KEY>``; the key is remembered when the marker is read and the
message it names is dropped when it comes due; the marker itself is never delivered. Markers are timer messages
like any other, so a restart re-reads them with what they delete.

Differences from Java: no precision rounding (Java rounds the deliver time down to
``timerPrecisionMs`` = 1 s); the delivered message keeps ``TIMER_OUT_MS`` (and ``TIMER_DELIVER_MS``)
and gains ``TIMER_ENQUEUE_MS``/``TIMER_DEQUEUE_MS`` like Java, keeps ``REAL_TOPIC``/``REAL_QID`` and gains no
``WAIT`` (as 5.5's delivered records), while ``TIMER_DELAY_SEC``/``TIMER_DELAY_MS`` are removed.
"""
from __future__ import annotations

import heapq
import json
import logging
import os
import threading
import time
from typing import TYPE_CHECKING, NamedTuple, Optional, TypedDict, cast

from rmqd.broker.schedule import (PROPERTY_DELAY, PROPERTY_REAL_QID, PROPERTY_REAL_TOPIC,
                                  delay_level_of, edit_properties, now_ms, real_queue_of, requeued)
from rmqd.remoting.codes import ResponseCode
from rmqd.remoting.command import RemotingCommand, error_response
from rmqd.common.service_thread import ServiceThread
from rmqd.store.message import (TRANSACTION_COMMIT_TYPE, TRANSACTION_NOT_TYPE, MessageToStore,
                                decode_message, find_property)
from rmqd.store.message_store import GetMessageStatus
from rmqd.store.metadata import TopicConfig, atomic_write, load_json_file

if TYPE_CHECKING:
    from rmqd.broker.handles import SendHookContext
    from rmqd.config import BrokerConfig
    from rmqd.metrics.recorders import TimerCounters
    from rmqd.store.api import MessageStoreAPI
    from rmqd.store.message_store import DispatchRequest
    from rmqd.store.metadata import TopicConfigManager

log = logging.getLogger(__name__)

TIMER_TOPIC = "rmq_sys_wheel_timer"
TIMER_DELIVER_MS = "TIMER_DELIVER_MS"
TIMER_DELAY_SEC = "TIMER_DELAY_SEC"
TIMER_DELAY_MS = "TIMER_DELAY_MS"
TIMER_OUT_MS = "TIMER_OUT_MS"
TIMER_ENQUEUE_MS = "TIMER_ENQUEUE_MS"
TIMER_DEQUEUE_MS = "TIMER_DEQUEUE_MS"
TIMER_DEL_UNIQKEY = "TIMER_DEL_UNIQKEY"      # a delete marker (recall): "<real topic>+<UNIQ_KEY>" of the message
TIMER_PROPERTIES = (TIMER_DELIVER_MS, TIMER_DELAY_SEC, TIMER_DELAY_MS)
DEFAULT_TIMER_MAX_DELAY_SEC = 3 * 24 * 3600

_SCAN_BATCH = 256
_RETRY_S = 0.1


def deliver_ms_of(props: str, now: int) -> Optional[int]:
    """Deliver time from the TIMER_* properties (DELAY_SEC > DELAY_MS > DELIVER_MS, like Java);
    raises ValueError when the value is not a number, None when no timer property is set."""
    sec = find_property(props, TIMER_DELAY_SEC)
    if sec is not None:
        return now + int(sec) * 1000
    ms = find_property(props, TIMER_DELAY_MS)
    if ms is not None:
        return now + int(ms)
    at = find_property(props, TIMER_DELIVER_MS)
    if at is not None:
        return int(at)
    return None


def is_timer_message(props: str) -> bool:
    return bool(props) and "TIMER_DEL" in props and any(
        find_property(props, p) is not None for p in TIMER_PROPERTIES)


class TimerProgressJson(TypedDict, total=False):
    """``config/timerProgress.json``."""

    scanOffset: int
    watermark: int
    headDeliverMs: int
    headOffset: int


class TimerProgress:
    """``config/timerProgress.json`` (see the module docstring)."""

    def __init__(self, config_dir: str) -> None:
        self.path = os.path.join(config_dir, "timerProgress.json")
        self.scan_offset = 0
        self.watermark = 0
        self.head: tuple[int, int] = (0, 0)

    def load(self) -> None:
        # the JSON boundary: the file this class writes (persist)
        data = cast("Optional[TimerProgressJson]", load_json_file(self.path))
        if not data:
            return
        self.scan_offset = int(data.get("scanOffset", 0))
        self.watermark = int(data.get("watermark", 0))
        self.head = (int(data.get("headDeliverMs", 0)), int(data.get("headOffset", 0)))

    def persist(self, scan_offset: int, watermark: int, head: tuple[int, int]) -> None:
        atomic_write(self.path, json.dumps({"scanOffset": scan_offset, "watermark": watermark,
                                            "headDeliverMs": head[0], "headOffset": head[1]},
                                           indent=4))


class TimerMessageService(ServiceThread):
    """Parks timer messages (:meth:`before_store`, the send hook; markers :data:`MARKERS`) and delivers them
    from a min-heap on one thread.  ``enabled`` (timerWheelEnable): a timer send is refused when off;
    ``max_delay_ms`` (timerMaxDelaySec): the longest delay a send may ask for.  The timer system topic is
    added to ``topics`` when missing."""

    MARKERS = ("TIMER_DEL",)
    master_only = True     # a slave does not run it (rmqd.replicas.wiring)

    def __init__(self, store: "MessageStoreAPI", topics: "TopicConfigManager", config_dir: str,
                 flush_interval_ms: int = 10000, enabled: bool = True,
                 max_delay_ms: int = DEFAULT_TIMER_MAX_DELAY_SEC * 1000,
                 counters: Optional["TimerCounters"] = None) -> None:
        """``counters``: where messages taken into the timer and delivered from it are counted (the metrics)."""
        self.flush_interval_s = max(0.1, flush_interval_ms / 1000.0)
        super().__init__("rmqd-timer", self.flush_interval_s)
        self.store = store
        self.enabled = enabled
        self.max_delay_ms = max_delay_ms
        self.progress = TimerProgress(config_dir)
        self._heap: list[tuple[int, int, int]] = []      # (deliver ms, queue offset, phys offset)
        self._timing: dict[int, str] = {}                 # queue offset -> real topic, of the heap's entries
        self._timing_topics: set[str] = set()             # every real topic seen (5.x keeps a 0 series for each)
        self.counters = counters
        self._scan_offset = 0
        self._skip_below: tuple[int, tuple[int, int], int] = (0, (0, 0), 0)   # (S, H, W) from the progress file
        self._heap_lock = threading.Lock()
        self._deleted: set[str] = set()        # keys of delete markers read (recall), until the marker is due
        self._new_data = True
        self._last_persist = time.monotonic()
        self.delivered = 0
        if topics.get(TIMER_TOPIC) is None:
            topics.table[TIMER_TOPIC] = TopicConfig(TIMER_TOPIC, 1, 1)
        topics.system_topics.add(TIMER_TOPIC)

    @classmethod
    def from_config(cls, store: "MessageStoreAPI", topics: "TopicConfigManager", config_dir: str,
                    c: "BrokerConfig", counters: Optional["TimerCounters"] = None) -> "TimerMessageService":
        """The service with its broker.conf settings (timerWheelEnable and timerMaxDelaySec are rmqd's
        unknown keys: read from ``extra``)."""
        enabled = str(c.extra.get("timerWheelEnable", "true")).strip().lower() == "true"
        max_delay_ms = int(c.extra.get("timerMaxDelaySec", DEFAULT_TIMER_MAX_DELAY_SEC)) * 1000
        return cls(store, topics, config_dir, int(c.flushDelayOffsetInterval), enabled, max_delay_ms, counters)

    def metrics_state(self, now: int, bounds_s: tuple[int, ...]) -> TimerState:
        """The timer's gauges at ``now`` (5.x's timer metrics): stored timer messages not yet taken in and the
        age of the oldest, due messages not yet delivered and how late the oldest is, messages in the timer
        per real topic, and how many are due within each of ``bounds_s`` (from the previous bound; 24 h at
        most); a topic seen once keeps its series at 0, as 5.x's TimerMetrics does. Walks the heap: run it off
        the event loop (the scrape does)."""
        with self._heap_lock:
            dues = [e[0] for e in self._heap]
            timing = list(self._timing.values())
            per_topic = dict.fromkeys(self._timing_topics, 0)
            scan = self._scan_offset
        behind = max(0, self.store.get_max_offset(TIMER_TOPIC, 0) - scan)
        stored = self.store.get_message_store_timestamp(TIMER_TOPIC, 0, scan) if behind else -1
        due = [d for d in dues if d <= now]
        edges = [now + b * 1000 for b in bounds_s]
        dist = [0] * len(bounds_s)
        for d in dues:
            for i, edge in enumerate(edges):
                if d < edge:
                    if d >= now:
                        dist[i] += 1
                    break
        for topic in timing:
            per_topic[topic] = per_topic.get(topic, 0) + 1
        return TimerState(behind, max(0, now - stored) if stored > 0 else 0, len(due),
                          max(0, now - min(due)) if due else 0, per_topic, dist)

    @property
    def pending(self) -> int:
        return len(self._heap)

    def runtime_info(self, now: int) -> dict[str, str]:
        """5.x's timer rows of GET_BROKER_RUNTIME_INFO (AdminBrokerProcessor.prepareRuntimeInfo): how many
        seconds delivery is behind (the oldest due message not yet delivered), timer messages stored but not
        taken in yet, messages waiting in the timer (Java: in its wheel), and the enqueue and dequeue TPS
        of the last minute; zeros while the timer is off (timerWheelEnable=false), as Java."""
        if not self.enabled:
            return {"timerReadBehind": "0", "timerOffsetBehind": "0", "timerCongestNum": "0",
                    "timerEnqueueTps": "0.0", "timerDequeueTps": "0.0"}
        with self._heap_lock:
            oldest_due = min(self._heap[0][0], now) if self._heap else now     # the heap's head is due first
            waiting = len(self._heap)
            scan = self._scan_offset
        enq, deq = self.counters.tps() if self.counters is not None else (0.0, 0.0)
        return {"timerReadBehind": str(max(0, now - oldest_due) // 1000),
                "timerOffsetBehind": str(max(0, self.store.get_max_offset(TIMER_TOPIC, 0) - scan)),
                "timerCongestNum": str(waiting), "timerEnqueueTps": repr(float(enq)),
                "timerDequeueTps": repr(float(deq))}

    # -- the send hook
    def before_store(self, ctx: "SendHookContext", msgs: list[MessageToStore]) -> Optional[RemotingCommand]:
        """Park each timer message on the timer topic (a delay level wins over a timer); batches are left."""
        if ctx.batch:
            return None
        for m in msgs:
            props = m.properties or ""
            if not is_timer_message(props):
                continue
            if (m.sys_flag & 0xC) not in (TRANSACTION_NOT_TYPE, TRANSACTION_COMMIT_TYPE):
                continue
            if PROPERTY_DELAY in props and delay_level_of(props) > 0:
                m.properties = edit_properties(props, remove=TIMER_PROPERTIES)   # delay level wins
                continue
            if not self.enabled:
                return error_response(ResponseCode.SYSTEM_ERROR,
                                      "accurate timer message is not enabled, timerWheelEnable is false")
            remark = park_timer_message(m, now_ms(), self.max_delay_ms)
            if remark is not None:
                return error_response(ResponseCode.MESSAGE_ILLEGAL, remark)
        return None

    # -- lifecycle
    def start(self) -> None:
        self.progress.load()
        p = self.progress
        self._scan_offset = min(p.watermark, self.store.get_max_offset(TIMER_TOPIC, 0))
        self._skip_below = (p.scan_offset, p.head, p.watermark)
        self.store.add_dispatch_listener(self._on_dispatch, TIMER_TOPIC)
        self._last_persist = time.monotonic()
        super().start()

    def on_shutdown(self) -> None:
        self._persist()

    def _on_dispatch(self, req: "DispatchRequest") -> None:
        if req.topic == TIMER_TOPIC:
            with self._heap_lock:
                self._new_data = True
            self.wakeup()

    # -- progress
    def _persist(self) -> None:
        with self._heap_lock:
            heap = self._heap
            head = (heap[0][0], heap[0][1]) if heap else (0, 0)
            watermark = min((e[1] for e in heap), default=self._scan_offset)
            scan = self._scan_offset
        try:
            self.progress.persist(scan, watermark, head)
        except OSError:
            log.exception("persisting timer progress to %s failed", self.progress.path)

    # -- delivery thread
    def run_once(self) -> None:
        """Scan new timer entries, deliver the due ones, persist the progress when its interval has passed,
        then sleep until the next head is due (or new data arrives)."""
        with self._heap_lock:
            scan, self._new_data = self._new_data, False
        if scan:
            try:
                self._scan()
            except Exception:
                log.exception("scanning %s from %d failed", TIMER_TOPIC, self._scan_offset)
                with self._heap_lock:
                    self._new_data = True
        retry = self._deliver_due()
        if time.monotonic() - self._last_persist >= self.flush_interval_s:
            self._persist()
            self._last_persist = time.monotonic()
        with self._heap_lock:
            if self._new_data:
                self.interval = 0.0
                return
            timeout = self.flush_interval_s - (time.monotonic() - self._last_persist)
            if retry:
                timeout = min(timeout, _RETRY_S)
            elif self._heap:
                timeout = min(timeout, (self._heap[0][0] - now_ms()) / 1000.0)
        self.interval = max(0.0, timeout)

    def _scan(self) -> None:
        """Read new entries of the timer queue into the heap."""
        S = GetMessageStatus
        skip_s, skip_head, skip_w = self._skip_below
        while not self.stopped:
            res = self.store.get_messages(TIMER_TOPIC, 0, self._scan_offset, _SCAN_BATCH)
            try:
                if not res.buffers:
                    if res.status in (S.OFFSET_TOO_SMALL, S.OFFSET_FOUND_NULL, S.MESSAGE_WAS_REMOVING) \
                            and res.next_begin_offset > self._scan_offset:
                        log.warning("timer queue: %s at %d, moving to %d", res.status.name,
                                    self._scan_offset, res.next_begin_offset)
                        self._scan_offset = res.next_begin_offset
                        continue
                    if res.status is S.OFFSET_OVERFLOW_BADLY:
                        self._scan_offset = res.max_offset
                    return
                entries, deleted = [], []
                for view, qoff in zip(res.buffers, res.queue_offsets):
                    msg = decode_message(view)
                    out = find_property(msg.properties_str, TIMER_OUT_MS)
                    try:
                        due: Optional[int] = int(out) if out is not None else None
                    except ValueError:
                        due = None
                    if due is None:
                        log.error("timer message at %d has no valid TIMER_OUT_MS (%r); delivering now",
                                  msg.commit_log_offset, out)
                        due = 0
                    if qoff < skip_w or (qoff < skip_s and (due, qoff) < skip_head):
                        continue          # delivered before the last persist
                    topic = find_property(msg.properties_str, PROPERTY_REAL_TOPIC) or ""
                    entries.append(((due, qoff, msg.commit_log_offset), topic, due - msg.store_timestamp))
                    key = find_property(msg.properties_str, TIMER_DEL_UNIQKEY)
                    if key:
                        deleted.append(key)
                with self._heap_lock:
                    self._deleted.update(deleted)
                    for e, topic, _ in entries:
                        heapq.heappush(self._heap, e)
                        self._timing[e[1]] = topic
                        self._timing_topics.add(topic)
                    self._scan_offset = max(self._scan_offset, res.next_begin_offset)
                if self.counters is not None:
                    for _, topic, delay_ms in entries:
                        self.counters.on_enqueue(topic, delay_ms)
            finally:
                res.release()

    def _deliver_due(self) -> bool:
        """Deliver every due entry; True when a store write failed (retry soon)."""
        while not self.stopped:
            with self._heap_lock:
                if not self._heap or self._heap[0][0] > now_ms():
                    return False
                entry = self._heap[0]
            if not self._deliver(entry):
                return True
            with self._heap_lock:
                heapq.heappop(self._heap)
                topic = self._timing.pop(entry[1], None)
            if self.counters is not None and topic is not None:
                self.counters.on_dequeue(topic)
        return False

    def _deliver(self, entry: tuple[int, int, int]) -> bool:
        due, qoff, phys = entry
        raw = self.store.read_message(phys)
        if raw is None:
            log.error("timer message %d (queue offset %d) is gone from the commit log; skipped", phys, qoff)
            return True
        msg = decode_message(raw)
        props = msg.properties_str
        real = real_queue_of(props)
        if real is None:
            log.error("timer message %d has no REAL_TOPIC/REAL_QID; dropped", phys)
            return True
        topic, qid = real
        if self._recalled(props, topic):
            return True
        # as 5.5's delivered records: REAL_TOPIC/REAL_QID kept, no WAIT added
        put = {TIMER_ENQUEUE_MS: str(msg.store_timestamp), TIMER_DEQUEUE_MS: str(now_ms())}
        new_props = edit_properties(props, remove=(TIMER_DELAY_SEC, TIMER_DELAY_MS), put=put)
        inner = requeued(msg, topic, qid, new_props, msg.store_host, msg.reconsume_times)
        result = self.store.put_message(inner)
        if not result.ok:
            log.warning("delivering timer message %d to %s/%s failed: %s %s", phys, topic, qid,
                        result.status.name, result.remark)
            return False
        self.delivered += 1
        return True


    def _recalled(self, props: str, topic: str) -> bool:
        """True for a delete marker (its time has come: forgotten) and for a message one deleted (dropped)."""
        marker = find_property(props, TIMER_DEL_UNIQKEY)
        with self._heap_lock:
            if marker is not None:
                self._deleted.discard(marker)
                return True
            key = f"{topic}+{find_property(props, 'UNIQ_KEY')}"
            if key not in self._deleted:
                return False
            self._deleted.discard(key)
        log.info("timer message %s recalled: not delivered", key)
        return True


class TimerState(NamedTuple):
    """The timer's gauges at one moment (:meth:`TimerMessageService.metrics_state`)."""

    enqueue_lag: int
    enqueue_latency_ms: int
    dequeue_lag: int
    dequeue_latency_ms: int
    timing: dict[str, int]
    distribution: list[int]


def park_timer_message(msg: MessageToStore, now: int, max_delay_ms: int) -> Optional[str]:
    """Rewrite ``msg`` in place to the timer topic when its deliver time is in the future.

    Returns an error remark (the send answers MESSAGE_ILLEGAL) or None."""
    props = msg.properties or ""
    try:
        deliver = deliver_ms_of(props, now)
    except ValueError:
        return "timer message illegal, the TIMER_* property is not a number"
    if deliver is not None and deliver <= now and find_property(props, TIMER_DEL_UNIQKEY) is not None:
        return "timer message illegal, a delete marker's time has passed"
    if deliver is None or deliver <= now:
        return None                      # due already: stored as a normal message
    if deliver - now > max_delay_ms:
        return (f"timer message illegal, the delay time should not be bigger than the max delay "
                f"{max_delay_ms}ms; or if set del msg, the delay time should be bigger than the "
                f"current time")
    msg.properties = edit_properties(props, put={TIMER_OUT_MS: str(deliver),
                                                 PROPERTY_REAL_TOPIC: msg.topic,
                                                 PROPERTY_REAL_QID: str(msg.queue_id)})
    msg.topic = TIMER_TOPIC
    msg.queue_id = 0
    return None
