"""The revive half of :class:`rmqd.pop.service.PopService`: the revive log and the revive thread.

- **Revive log**: every checkpoint (``ck``) and ack (``ack``/``bAck``) is a message of
  ``rmq_sys_REVIVE_LOG_<cluster>`` (queue = reviveQid) in the CommitLog, written before the state it
  records is used. On start the revive queues are replayed from the revive progress (the lowest live
  checkpoint record, kept as the offset of ``CID_RMQ_SYS_REVIVE_GROUP``), rebuilding every open checkpoint.
- **Revive thread**: when a checkpoint's invisible time has passed, each un-acked message is stored
  again in the POP retry topic ``%RETRY%<group>_<topic>`` with reconsumeTimes + 1 (same UNIQ_KEY, so the
  same message id), or in ``%DLQ%<group>`` past the group's ``retryMaxTimes``; a ``bAck`` record then
  marks them done. Orderly checkpoints are not revived (the next orderly pop hands them out again).

A mixin: it works on the state PopService keeps (``_cks``, ``_heap``, ``_order_cks``, ``_lock``/``_cond``,
``_writing``, ``store``, ``topics``, ``groups``, ``offsets``, ``revive_topic``, ``revive_queue_num``), declared
on the mixin for the type checker.
"""
from __future__ import annotations

import heapq
import itertools
import logging
import threading
import time
from typing import TYPE_CHECKING, Callable, Optional

from rmqd.pop.checkpoint import (ACK_TAG, BATCH_ACK_TAG, CK_TAG, CkKey, OrderKey, PopCheckPoint, ack_record,
                                 now_ms, parse_ack_record)
from rmqd.pop.codes import PopError
from rmqd.pop.extra_info import pop_retry_topic
from rmqd.remoting.codes import ResponseCode
from rmqd.store.message import (MessageToStore, StoredMessage, decode_message, decode_properties,
                                encode_properties, find_property, tags_code_of)
from rmqd.store.message_store import GetMessageStatus
from rmqd.store.metadata import PERM_READ, PERM_WRITE, TopicConfig, dlq_topic

if TYPE_CHECKING:
    from rmqd.pop.handles import PopGroups, PopOffsets, PopStore, PopTopics, ReviveRecorder
    from rmqd.pop.queue_selector import QueueSelector
    from rmqd.store.message import Host

log = logging.getLogger(__name__)

REVIVE_GROUP = "CID_RMQ_SYS_REVIVE_GROUP"
PROPERTY_RETRY_TOPIC = "RETRY_TOPIC"
PROPERTY_FIRST_POP_TIME = "1ST_POP_TIME"
_S = GetMessageStatus
_PROGRESS_INTERVAL_S = 1.0
_REVIVE_RETRY_MS = 1000


class ReviveMixin:
    # the state of PopService (set in its __init__) the revive works on
    broker_name: str
    store: PopStore
    topics: PopTopics
    groups: PopGroups
    offsets: PopOffsets
    store_host: Callable[[], Host]
    counters: Optional[ReviveRecorder]
    on_dlq: Optional[Callable[[str, str], None]]
    queue_selector: QueueSelector
    revive_topic: str
    revive_queue_num: int
    revived: int
    to_dlq: int
    _cks: dict[CkKey, PopCheckPoint]
    _order_cks: dict[OrderKey, list[PopCheckPoint]]
    _heap: list[tuple[int, int, CkKey]]
    _seq: itertools.count[int]
    _lock: threading.RLock
    _cond: threading.Condition
    _writing: dict[int, int]
    _running: bool
    # PopService: tell the orderly listeners (topic, group, queue id, deadline or None when the queue is free)
    _tell_orderly: Callable[[str, str, int, Optional[int]], None]

    def _append(self, tag: str, body: bytes, revive_qid: int, group: str, topic: str) -> int:
        """Append one record (of ``group``'s checkpoint on ``topic``) to the revive queue; returns its
        queue offset."""
        if self.topics.get(self.revive_topic) is None:
            self.topics.add_system_topic(TopicConfig(self.revive_topic, self.revive_queue_num,
                                                     self.revive_queue_num, PERM_READ | PERM_WRITE))
        props = encode_properties({"TAGS": tag, "WAIT": "false"})
        now = now_ms()
        host = self.store_host()
        msg = MessageToStore(self.revive_topic, revive_qid, body, props, 0, 0, now, host, host, 0, 0,
                             tags_code_of(props))
        result = self.store.put_message(msg)
        if self.counters is not None:
            self.counters.on_revive_put(group, topic, tag, result.status.name)
        if not result.ok:
            raise PopError(ResponseCode.SYSTEM_ERROR, f"writing the {tag} record failed: {result.status.name}")
        return result.queue_offset

    def _settled(self, ck: PopCheckPoint) -> None:
        """``ck`` was forgotten (acked, revived or handed out again): its records are done with."""
        if self.counters is not None:
            self.counters.on_settled(ck.group, ck.topic, ck.revive_qid, ck.ck_records, ck.ack_records)

    def _add_checkpoint(self, ck: PopCheckPoint) -> None:
        """Write the ``ck`` record, then make the checkpoint live (the revive progress stays below it meanwhile).
        A memory checkpoint (5.5 lite) writes no record."""
        if ck.memory:
            with self._cond:
                self._cks[ck.key] = ck
                self._order_cks.setdefault((ck.topic, ck.group, ck.queue_id), []).append(ck)
            self._tell_orderly(ck.topic, ck.group, ck.queue_id, ck.deadline)
            return
        with self._lock:
            self._writing[ck.revive_qid] = self._writing.get(ck.revive_qid, 0) + 1
        try:
            ck.revive_offset = self._append(CK_TAG, ck.ck_record(), ck.revive_qid, ck.group, ck.topic)
            with self._cond:
                self._cks[ck.key] = ck
                if ck.order:                     # handed out again by the next orderly pop, not revived
                    self._order_cks.setdefault((ck.topic, ck.group, ck.queue_id), []).append(ck)
            if ck.order:
                self._tell_orderly(ck.topic, ck.group, ck.queue_id, ck.deadline)
                return
            with self._cond:
                heapq.heappush(self._heap, (ck.deadline, next(self._seq), ck.key))
                if self._heap[0][2] == ck.key:
                    self._cond.notify()
        finally:
            with self._lock:
                n = self._writing[ck.revive_qid] - 1
                if n:
                    self._writing[ck.revive_qid] = n
                else:
                    del self._writing[ck.revive_qid]

    def _replay(self) -> None:
        """Rebuild the open checkpoints from the revive queues (start-up)."""
        count = 0
        for q in range(self.revive_queue_num):
            off = self.offsets.query_offset(REVIVE_GROUP, self.revive_topic, q)
            off = max(off, self.store.get_min_offset(self.revive_topic, q))
            while True:
                res = self.store.get_messages(self.revive_topic, q, off, 256)
                if not res.buffers:
                    if res.status in (_S.OFFSET_TOO_SMALL, _S.OFFSET_FOUND_NULL) and res.next_begin_offset > off:
                        off = res.next_begin_offset
                        continue
                    break
                try:
                    for buf, qoff in zip(res.buffers, res.queue_offsets):
                        self._replay_record(decode_message(buf), qoff)
                        count += 1
                finally:
                    res.release()
                off = res.next_begin_offset
        for ck in list(self._cks.values()):
            if ck.done():
                del self._cks[ck.key]
                self._settled(ck)
                continue
            if ck.order:
                self._order_cks.setdefault((ck.topic, ck.group, ck.queue_id), []).append(ck)
            else:
                heapq.heappush(self._heap, (ck.deadline, next(self._seq), ck.key))
            nxt = max(ck.offsets) + 1      # the pop offset may not have been persisted before a crash
            if self.offsets.query_offset(ck.group, ck.topic, ck.queue_id) < nxt:
                self.offsets.commit_offset("", ck.group, ck.topic, ck.queue_id, nxt)
        if count:
            log.info("POP: replayed %d revive records, %d checkpoints open", count, len(self._cks))

    def _replay_record(self, m: StoredMessage, queue_offset: int) -> None:
        tag = m.properties.get("TAGS")
        try:
            if tag == CK_TAG:
                ck = PopCheckPoint.from_ck_record(m.body, queue_offset)
                old = self._cks.get(ck.key)
                if old is None:
                    self._cks[ck.key] = ck
                else:                               # a renewal: the same checkpoint, invisible for longer
                    old.invisible_time = max(old.invisible_time, ck.invisible_time)
                    old.ck_records += 1
            elif tag in (ACK_TAG, BATCH_ACK_TAG):
                key, offs = parse_ack_record(m.body)
                acked = self._cks.get(key)
                if acked is not None:
                    acked.acked.update(offs)
                    acked.ack_records += 1
        except (ValueError, KeyError, TypeError) as exc:
            log.warning("POP: skipping revive record at %s/%d: %r", self.revive_topic, queue_offset, exc)

    def _persist_progress(self) -> None:
        """Commit, per revive queue, the offset below which every record is settled."""
        with self._lock:
            lowest: dict[int, int] = {}
            for ck in self._cks.values():
                if ck.revive_offset >= 0 and ck.revive_offset < lowest.get(ck.revive_qid, 1 << 62):
                    lowest[ck.revive_qid] = ck.revive_offset
            writing = set(self._writing)
            maxes = {q: self.store.get_max_offset(self.revive_topic, q) for q in range(self.revive_queue_num)}
        for q in range(self.revive_queue_num):
            if q in writing:
                continue
            progress = lowest.get(q, maxes[q])
            committed = self.offsets.query_offset(REVIVE_GROUP, self.revive_topic, q)
            if progress != committed and (progress > 0 or committed >= 0):    # nothing ever written: no entry
                self.offsets.commit_offset("", REVIVE_GROUP, self.revive_topic, q, progress)

    # ------------------------------------------------------------------ revive
    def _revive_loop(self) -> None:
        last_progress = time.monotonic()
        while True:
            due: list[PopCheckPoint] = []
            with self._cond:
                if not self._running:
                    return
                now = now_ms()
                while self._heap and self._heap[0][0] <= now:
                    _, _, key = heapq.heappop(self._heap)
                    ck = self._cks.get(key)
                    if ck is not None and ck.deadline <= now:
                        due.append(ck)
                if not due:
                    wait = (self._heap[0][0] - now) / 1000.0 if self._heap else _PROGRESS_INTERVAL_S
                    self._cond.wait(min(max(wait, 0.005), _PROGRESS_INTERVAL_S))
            for ck in due:
                try:
                    self._revive(ck)
                except Exception:
                    log.exception("POP: reviving %s failed; retrying in %d ms", ck.key, _REVIVE_RETRY_MS)
                    with self._cond:
                        if self._cks.get(ck.key) is ck:
                            heapq.heappush(self._heap, (now_ms() + _REVIVE_RETRY_MS, next(self._seq), ck.key))
            if time.monotonic() - last_progress >= _PROGRESS_INTERVAL_S:
                last_progress = time.monotonic()
                try:
                    self._persist_progress()
                except Exception:
                    log.exception("POP: persisting the revive progress failed")

    def _revive(self, ck: PopCheckPoint) -> None:
        with self._lock:
            pending = ck.unacked()
        done: list[int] = []
        for off in pending:
            res = self.store.get_messages(ck.topic, ck.queue_id, off, 1)
            try:
                if not res.buffers or res.queue_offsets[0] != off:
                    log.warning("POP: message %s/%d@%d to revive for %s is gone (%s)", ck.topic, ck.queue_id, off,
                                ck.group, res.status.name)
                    done.append(off)
                    continue
                self._revive_message(ck, decode_message(bytes(res.buffers[0])))
                done.append(off)
            finally:
                res.release()
        if done:
            tag, body = ack_record(ck.key, self.broker_name, done)
            self._append(tag, body, ck.revive_qid, ck.group, ck.topic)
        with self._lock:
            ck.acked.update(done)
            ck.ack_records += 1 if done else 0
            if ck.done() and self._cks.get(ck.key) is ck:
                del self._cks[ck.key]
                self._settled(ck)

    def _revive_message(self, ck: PopCheckPoint, m: StoredMessage) -> None:
        """Store an un-acked message again: POP retry topic, or the DLQ after the group's max attempts."""
        props = decode_properties(m.properties_str)
        real = props.get(PROPERTY_RETRY_TOPIC) or ck.topic
        sg = self.groups.find(ck.group)
        max_times = sg.retry_max_times if sg is not None else 16
        reconsume = m.reconsume_times + 1
        if reconsume > max_times:
            self._to_dlq(ck.group, real, m, reconsume, ck.pop_time)
            return
        target = ck.topic if ck.topic.startswith("%RETRY%") else pop_retry_topic(ck.group, ck.topic)
        queue_id = self._retry_queue(target, real, ck.queue_id)
        counters = self.counters
        counted = ((lambda status: counters.on_retry_put(ck.group, ck.topic, status))
                   if counters is not None else None)
        self._store_again(target, m, props, real, reconsume, ck.pop_time, counted, queue_id)
        self.revived += 1

    def _retry_queue(self, target: str, real: str, queue_id: int) -> int:
        """The POP retry topic's queue for a message revived from queue ``queue_id`` (creating the topic).

        Java's ``useSeparateRetryQueue`` (PopReviveService.addRetryTopicIfNotExist / getRetryQueueId): off, the
        retry topic has one queue and every retry goes to queue 0; on, it has as many queues as the original
        topic's write queues (re-created when that count changes) and a retry keeps its queue id, which on a
        PRIORITY topic is its priority: retries are then read by level like the topic itself."""
        separate = bool(getattr(getattr(self.queue_selector, "config", None), "useSeparateRetryQueue", False))
        tc = self.topics.get(target)
        if not separate:
            if tc is None:
                self.topics.create_topic_in_send_message_back_method(target, 1, PERM_READ | PERM_WRITE, 0)
            return 0
        origin = self.topics.get(real)
        n = max(1, origin.write_queue_nums if origin is not None else 1)
        if tc is None:
            tc = self.topics.create_topic_in_send_message_back_method(target, n, PERM_READ | PERM_WRITE, 0)
        if tc.write_queue_nums != n:                    # the original topic's queues changed: follow them
            self.topics.update(TopicConfig(target, n, n, PERM_READ | PERM_WRITE, "SINGLE_TAG", 0))
            log.info("POP: retry topic %s now has %d queues (useSeparateRetryQueue, as %s)", target, n, real)
        if queue_id > n - 1:
            log.warning("POP: retry of %s from queue %d beyond %s's %d queues: queue 0", real, queue_id, target, n)
            return 0
        return queue_id

    def _store_again(self, target: str, m: StoredMessage, props: dict[str, str], real: str, reconsume: int,
                     pop_time: int, on_status: Optional[Callable[[str], None]] = None, queue_id: int = 0,
                     delay_level: Optional[str] = None) -> None:
        props.setdefault(PROPERTY_RETRY_TOPIC, real)
        props.setdefault(PROPERTY_FIRST_POP_TIME, str(pop_time))
        props.pop("DELAY", None)
        if delay_level is not None:
            props["DELAY"] = delay_level
        encoded = encode_properties(props)
        msg = MessageToStore(target, queue_id, m.body, encoded, m.flag, m.sys_flag & ~0xC, m.born_timestamp, m.born_host,
                             self.store_host(), reconsume, 0, tags_code_of(encoded),
                             find_property(encoded, "KEYS"), find_property(encoded, "UNIQ_KEY"))
        result = self.store.put_message(msg)
        if on_status is not None:
            on_status(result.status.name)
        if not result.ok:
            raise RuntimeError(f"storing the message again in {target} failed: {result.status.name}")

    def _to_dlq(self, group: str, real: str, m: StoredMessage, reconsume: int, pop_time: Optional[int] = None) -> None:
        """``m`` reached the group's max attempts: store it in ``%DLQ%<group>`` as 5.x puts it there (its
        consumers send it back: ``consumerSendMsgBack`` counts one more attempt and sets delay level 0, so a 5.x
        client reading the DLQ sees a DELAY message one attempt further)."""
        target = dlq_topic(group)
        self.topics.create_topic_in_send_message_back_method(target, 1, PERM_READ | PERM_WRITE, 0)
        props = decode_properties(m.properties_str)
        real = props.get(PROPERTY_RETRY_TOPIC) or real
        self._store_again(target, m, props, real, reconsume + 1, pop_time or now_ms(), delay_level="0")
        self.to_dlq += 1
        if self.on_dlq is not None:
            self.on_dlq(group, real)
        log.info("POP: %s of %s reached %d attempts; moved to %s", props.get("UNIQ_KEY"), real, reconsume, target)

