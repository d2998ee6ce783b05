"""Delay levels: divert delayed messages to SCHEDULE_TOPIC_XXXX and deliver them on time (README §6.7).

Java: ``HookUtils.transformDelayLevelMessage`` (the divert) and ``ScheduleMessageService`` (delivery).

* :func:`divert_delay_level` rewrites a NOT_TYPE/COMMIT message whose ``DELAY`` property is > 0:
  level clamped to the table size, ``REAL_TOPIC``/``REAL_QID`` added, topic/queue swapped to
  ``SCHEDULE_TOPIC_XXXX``/``level-1``.  The store then writes the consume-queue tagsCode as the
  deliver time (store time + level delay).
* :class:`ScheduleMessageService` runs one thread that keeps, per level, the next consume-queue
  offset to deliver (``DelayOffsetManager``, ``delayOffset.json``) and the due time of that
  queue's head entry.  It sleeps exactly until the earliest head is due (a dispatch listener wakes
  it when a level queue gets a new head), delivers every due entry as a new message on
  ``REAL_TOPIC``/``REAL_QID`` (properties as stored, ``DELAY`` included, as Java's records show; tagsCode
  from ``TAGS``, born info, reconsume times and ``UNIQ_KEY`` unchanged) and advances the level's offset.  Each level
  queue is FIFO with a constant delay, so only its head needs watching.

Delivery is at-least-once: offsets are persisted every ``flushDelayOffsetInterval`` and on shutdown,
so a crash re-delivers what was delivered since the last persist.
"""
from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING, Optional

from rmqd.common.constants import NAME_VALUE_SEPARATOR, PROPERTY_SEPARATOR, SCHEDULE_TOPIC
from rmqd.common.service_thread import ServiceThread
from rmqd.store.message import (TRANSACTION_COMMIT_TYPE, TRANSACTION_NOT_TYPE, MessageToStore,
                                decode_message, find_property, tags_code_of)
from rmqd.store.message_store import GetMessageStatus, parse_delay_levels
from rmqd.store.config import wall_clock_ms as now_ms

if TYPE_CHECKING:
    from rmqd.broker.handles import SendHookContext
    from rmqd.store.message import Host, StoredMessage
    from rmqd.store.api import MessageStoreAPI
    from rmqd.store.message_store import DispatchRequest
    from rmqd.store.metadata import DelayOffsetManager

log = logging.getLogger(__name__)

PROPERTY_DELAY = "DELAY"
PROPERTY_REAL_TOPIC = "REAL_TOPIC"
PROPERTY_REAL_QID = "REAL_QID"
PROPERTY_WAIT = "WAIT"
PROP_SEP = PROPERTY_SEPARATOR
NV_SEP = NAME_VALUE_SEPARATOR

_BATCH = 32                # consume-queue entries read per store call
_RETRY_AFTER_FAILURE_S = 0.1
_NEVER = float("inf")
_IDLE_WAIT_S = 60.0        # nothing due: a dispatch listener wakes the thread, this only bounds the wait


# ------------------------------------------------------------------------------ properties helpers
def split_properties(props: str) -> list[tuple[str, str]]:
    """Encoded properties → ordered (name, value) pairs (empty items and trailing 0x02 dropped)."""
    out = []
    for item in props.split(PROP_SEP):
        if item:
            name, _, value = item.partition(NV_SEP)
            out.append((name, value))
    return out


def join_pairs(pairs: list[tuple[str, str]]) -> str:
    return PROP_SEP.join(f"{k}{NV_SEP}{v}" for k, v in pairs)


def edit_properties(props: str, remove: tuple[str, ...] = (), put: Optional[dict[str, str]] = None) -> str:
    """Remove ``remove`` names, then set ``put`` values (replacing in place, else appended)."""
    put = dict(put or {})
    out = []
    for k, v in split_properties(props):
        if k in remove:
            continue
        if k in put:
            v = put.pop(k)
        out.append((k, v))
    out.extend(put.items())
    return join_pairs(out)


def real_queue_of(props: str) -> Optional[tuple[str, int]]:
    """``REAL_TOPIC`` and ``REAL_QID`` of a diverted message; None when either is missing or not a number."""
    topic = find_property(props, PROPERTY_REAL_TOPIC)
    qid = find_property(props, PROPERTY_REAL_QID)
    if not topic or qid is None or not qid.lstrip("-").isdigit():
        return None
    return topic, int(qid)


def requeued(msg: "StoredMessage", topic: str, queue_id: int, props: str, store_host: "Host",
             reconsume_times: int) -> MessageToStore:
    """``msg`` to be written again on ``topic``/``queue_id`` with ``props``: its body, flags and born time and host
    kept; the tags code, ``KEYS`` and ``UNIQ_KEY`` read from ``props``."""
    return MessageToStore(topic, queue_id, msg.body, props, msg.flag, msg.sys_flag, msg.born_timestamp,
                          msg.born_host, store_host, reconsume_times, 0, tags_code_of(props),
                          find_property(props, "KEYS"), find_property(props, "UNIQ_KEY"))


def delay_level_of(props: str) -> int:
    """``DELAY`` property as an int (0 when absent or not a number)."""
    value = find_property(props, PROPERTY_DELAY) if props else None
    if not value:
        return 0
    try:
        return int(value)
    except ValueError:
        return 0


# ------------------------------------------------------------------------------ divert on store
def divert_delay_level(msg: MessageToStore, max_level: int) -> bool:
    """Rewrite ``msg`` in place to its SCHEDULE_TOPIC_XXXX queue when it carries a delay level.

    Only NOT_TYPE/COMMIT messages are delayed (half/rollback messages are not).  Returns True when
    the message was diverted."""
    if (msg.sys_flag & 0xC) not in (TRANSACTION_NOT_TYPE, TRANSACTION_COMMIT_TYPE):
        return False
    level = delay_level_of(msg.properties)
    if level <= 0 or max_level <= 0:
        return False
    put = {PROPERTY_REAL_TOPIC: msg.topic, PROPERTY_REAL_QID: str(msg.queue_id)}
    if level > max_level:
        level = max_level
        put[PROPERTY_DELAY] = str(level)
    msg.properties = edit_properties(msg.properties, put=put)
    msg.topic = SCHEDULE_TOPIC
    msg.queue_id = level - 1
    return True


# ------------------------------------------------------------------------------ delivery
class ScheduleMessageService(ServiceThread):
    """Delivers SCHEDULE_TOPIC_XXXX entries when due (one thread, exact wake-ups).

    Its :meth:`before_store` is the send hook that diverts delayed messages (markers :data:`MARKERS`)."""

    MARKERS = (PROPERTY_DELAY,)

    master_only = True     # a slave does not run it (rmqd.replicas.wiring)

    def __init__(self, store: "MessageStoreAPI", offsets: "DelayOffsetManager", delay_levels: str,
                 flush_interval_ms: int = 10000) -> None:
        super().__init__("rmqd-schedule", _IDLE_WAIT_S)
        self.store = store
        self.offsets = offsets
        self.levels_ms = parse_delay_levels(delay_levels)
        self.flush_interval_ms = flush_interval_ms
        self._due_lock = threading.Lock()
        self._due: dict[int, float] = {}           # level -> ms when its head is due (inf = idle)
        self.delivered = 0

    @property
    def max_level(self) -> int:
        return len(self.levels_ms)

    def delay_ms(self, level: int) -> int:
        return self.levels_ms[min(max(level, 1), self.max_level) - 1]

    # -- the send hook
    def before_store(self, ctx: "SendHookContext", msgs: list[MessageToStore]) -> None:
        """Divert each message carrying a delay level to its SCHEDULE_TOPIC_XXXX queue (not batches)."""
        if ctx.batch:
            return None
        for m in msgs:
            if PROPERTY_DELAY in (m.properties or ""):
                divert_delay_level(m, self.max_level)
        return None

    # -- lifecycle
    def start(self) -> None:
        """Start after the store and delayOffset.json are loaded."""
        if self.alive:
            return
        for level in range(1, self.max_level + 1):
            mx = self.store.get_max_offset(SCHEDULE_TOPIC, level - 1)
            if self.offsets.get(level) > mx:
                log.warning("delay level %d offset %d beyond queue max %d; correcting", level,
                            self.offsets.get(level), mx)
                self.offsets.update(level, mx)
            self._due[level] = 0          # scan every level once at start
        self.store.add_dispatch_listener(self._on_dispatch, SCHEDULE_TOPIC)
        self.offsets.interval_s = max(0.1, self.flush_interval_ms / 1000.0)
        self.offsets.start()
        super().start()

    # shutdown(): ServiceThread's (the offsets are persisted by DelayOffsetManager.shutdown)

    # -- wake-ups
    def _on_dispatch(self, req: "DispatchRequest") -> None:
        if req.topic != SCHEDULE_TOPIC:
            return
        level = req.queue_id + 1
        with self._due_lock:
            earlier = req.tags_code < self._due.get(level, _NEVER)
            if earlier:
                self._due[level] = req.tags_code
        if earlier:
            self.wakeup()

    def run_once(self) -> None:
        """Deliver every level whose head is due, then sleep until the next head is (or a dispatch wakes us)."""
        now = now_ms()
        with self._due_lock:
            due_levels = [lv for lv, t in self._due.items() if t <= now]
            for lv in due_levels:
                self._due[lv] = _NEVER    # a dispatch during delivery may lower it again
        for lv in due_levels:
            try:
                nxt = self.deliver_level(lv)
            except Exception:
                log.exception("delivering delay level %d failed; retrying", lv)
                nxt = now_ms() + _RETRY_AFTER_FAILURE_S * 1000
            with self._due_lock:
                if nxt < self._due[lv]:
                    self._due[lv] = nxt
        with self._due_lock:
            nxt = min(self._due.values(), default=_NEVER)
        self.interval = _IDLE_WAIT_S if nxt == _NEVER else min(_IDLE_WAIT_S, max(0.0, (nxt - now_ms()) / 1000.0))

    def deliver_level(self, level: int) -> float:
        """Deliver every due entry of ``level``; return when its head is due next (inf = empty)."""
        qid = level - 1
        delay = self.delay_ms(level)
        offset = self.offsets.get(level)
        S = GetMessageStatus
        while not self.stopped:
            res = self.store.get_messages(SCHEDULE_TOPIC, qid, offset, _BATCH)
            try:
                if res.status in (S.NO_MESSAGE_IN_QUEUE, S.OFFSET_OVERFLOW_ONE, S.NO_MATCHED_LOGIC_QUEUE):
                    return _NEVER
                if res.status is S.OFFSET_OVERFLOW_BADLY:
                    log.warning("delay level %d offset %d beyond max %d; resetting", level, offset,
                                res.max_offset)
                    offset = res.max_offset
                    self.offsets.update(level, offset)
                    continue
                if not res.buffers:
                    # OFFSET_TOO_SMALL / FOUND_NULL / WAS_REMOVING: skip what the store skipped
                    if res.next_begin_offset <= offset:
                        return now_ms() + _RETRY_AFTER_FAILURE_S * 1000
                    log.warning("delay level %d: %s at offset %d, moving to %d", level, res.status.name,
                                offset, res.next_begin_offset)
                    offset = res.next_begin_offset
                    self.offsets.update(level, offset)
                    continue
                for view, qoff in zip(res.buffers, res.queue_offsets):
                    msg = decode_message(view)
                    deliver_at = msg.store_timestamp + delay
                    now = now_ms()
                    if deliver_at > now + delay:         # clock moved back: cap like Java
                        deliver_at = now + delay
                    if deliver_at > now:
                        return deliver_at
                    if not self._deliver(msg, level):
                        return now_ms() + _RETRY_AFTER_FAILURE_S * 1000
                    offset = qoff + 1
                    self.offsets.update(level, offset)
                if res.next_begin_offset > offset:
                    offset = res.next_begin_offset
                    self.offsets.update(level, offset)
            finally:
                res.release()
        return _NEVER

    def _deliver(self, msg: "StoredMessage", level: int) -> bool:
        """Write the real message; False when the store refused it (retried later)."""
        props = msg.properties_str
        real = real_queue_of(props)
        if real is None:
            log.error("scheduled message at %d (level %d) has no REAL_TOPIC/REAL_QID; dropped",
                      msg.commit_log_offset, level)
            return True
        topic, qid = real
        # Java's messageTimeup copies the properties string before it clears DELAY and sets WAIT=false on the
        # map only: the delivered record keeps DELAY (and REAL_TOPIC/REAL_QID) and gains no WAIT (4.9.8 and 5.5)
        inner = requeued(msg, topic, qid, props, msg.store_host, msg.reconsume_times)
        result = self.store.put_message(inner)
        if not result.ok:
            log.warning("delivering scheduled message %d (level %d) to %s/%s failed: %s %s",
                        msg.commit_log_offset, level, topic, qid, result.status.name, result.remark)
            return False
        self.delivered += 1
        return True
