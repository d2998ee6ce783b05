"""PopService: POP state (checkpoints, acks, invisible time, revive) under both front ends.

Java: ``PopMessageProcessor`` (pop), ``AckMessageProcessor`` (ack, batch ack),
``ChangeInvisibleTimeProcessor`` and ``PopReviveService``.  The remoting POP codes and the gRPC
endpoint call the same methods; they run in pool threads (they append to the store).

- **Pop** reads each queue from the group's offset (the same consumer offset table 4.x uses),
  writes a checkpoint record to the revive topic, then moves the offset past what it read.
- **Ack** writes an ``ack`` record and sets the checkpoint's bit; a checkpoint with every bit set
  is forgotten.  **Change invisible time** writes a new one-message checkpoint and acks the old.
- **Revive** (one thread): when a checkpoint's invisible time has passed, each un-acked message is
  stored again in the POP retry topic ``%RETRY%<group>_<topic>`` with reconsumeTimes + 1 (same
  UNIQ_KEY, so the same message id), or in ``%DLQ%<group>`` once reconsumeTimes would pass the
  group's ``retryMaxTimes``; then a ``bAck`` record marks them done.  Java leaves the DLQ decision to
  the proxy (gRPC) or the client (remoting); rmqd takes it here so both front ends follow one rule.
- **Crash safety**: every record is a message of ``rmq_sys_REVIVE_LOG_<cluster>`` (queue =
  reviveQid) in the CommitLog, written before the state it records is used.  On start the revive
  queues are replayed from the revive progress (the lowest live checkpoint record, kept as the
  offset of ``CID_RMQ_SYS_REVIVE_GROUP``), rebuilding every checkpoint still open; pop offsets are
  moved past every replayed checkpoint.  A kill -9 at any step loses no message; at worst a message
  acked or revived at the moment of the crash is delivered once more (at-least-once, as in Java).
"""
from __future__ import annotations

import heapq
import itertools
import logging
import random
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from rmqd.pop.checkpoint import (ACK_TAG, BATCH_ACK_TAG, CK_TAG, CkKey, PopCheckPoint, ack_record,
                                 parse_ack_record)
from rmqd.pop.extra_info import (ExtraInfo, msg_offset_info, pop_retry_topic, real_topic, retry_flag,
                                 start_offset_info)
from rmqd.pop.long_polling import PopLongPolling
from rmqd.remoting.codes import ResponseCode
from rmqd.store.message import (MessageToStore, decode_message, decode_properties, encode_properties,
                                find_property, tags_code_of)
from rmqd.store.message_store import GetMessageStatus
from rmqd.store.metadata import PERM_READ, PERM_WRITE, TopicConfig, dlq_topic

log = logging.getLogger(__name__)

REVIVE_GROUP = "CID_RMQ_SYS_REVIVE_GROUP"
INVALID_PARAMETER = 29
POLLING_FULL = 209
POLLING_TIMEOUT = 210
INIT_MODE_LAST, INIT_MODE_MIN = 0, 1
MAX_POP_NUMS = 32
FAQ_TOPIC = "\nSee https://rocketmq.apache.org/docs/bestPractice/06FAQ for further details."
FAQ_GROUP = "\nSee https://rocketmq.apache.org/docs/bestPractice/06FAQ for further details."
PROPERTY_RETRY_TOPIC = "RETRY_TOPIC"
PROPERTY_FIRST_POP_TIME = "1ST_POP_TIME"
_S = GetMessageStatus
_PROGRESS_INTERVAL_S = 1.0
_REVIVE_RETRY_MS = 1000


def now_ms() -> int:
    return int(time.time() * 1000)


class PopError(Exception):
    """A request the broker refuses: ``code`` and ``remark`` as the Java broker answers."""

    def __init__(self, code: int, remark: str) -> None:
        super().__init__(remark)
        self.code = int(code)
        self.remark = remark


@dataclass
class PoppedMessage:
    record: bytes            # the stored record (CommitLog bytes)
    topic: str               # the topic it was read from (a POP retry topic for redeliveries)
    queue_id: int
    queue_offset: int
    extra: ExtraInfo         # what the client sends back to ack it
    attempt: int = 0         # orderly redelivery: the delivery attempt (the record's reconsumeTimes + 1 otherwise)


@dataclass
class PopResult:
    pop_time: int
    invisible_time: int
    revive_qid: int
    rest_num: int = 0
    messages: list[PoppedMessage] = field(default_factory=list)
    start_infos: list = field(default_factory=list)
    msg_infos: list = field(default_factory=list)
    order_infos: list = field(default_factory=list)     # orderly pops: (flag, qid, redeliveries)

    @property
    def start_offset_info(self) -> str:
        return start_offset_info(self.start_infos)

    @property
    def msg_offset_info(self) -> str:
        return msg_offset_info(self.msg_infos)

    @property
    def order_count_info(self) -> str:
        """``flag qid count;…`` (Java ``orderCountInfo``): how often each queue's batch was handed out before."""
        return ";".join(f"{flag} {qid} {n}" for flag, qid, n in self.order_infos)

    def body(self) -> bytes:
        return b"".join(m.record for m in self.messages)


class PopService:
    """POP state of one broker.  ``start()``/``shutdown()`` are the broker's service hooks."""

    def __init__(self, broker_name: str, cluster: str, store: Any, topics: Any, groups: Any, offsets: Any,
                 store_host: Callable[[], tuple], revive_queue_num: int = 8,
                 on_dlq: Optional[Callable[[str, str], None]] = None) -> None:
        self.broker_name = broker_name
        self.store = store
        self.topics = topics
        self.groups = groups
        self.offsets = offsets
        self.store_host = store_host
        self.on_dlq = on_dlq
        self.revive_queue_num = max(1, int(revive_queue_num))
        self.revive_topic = f"rmq_sys_REVIVE_LOG_{cluster}"
        self.polling = PopLongPolling()
        self._cks: dict[CkKey, PopCheckPoint] = {}
        self._order_cks: dict[tuple, list[PopCheckPoint]] = {}     # (topic, group, qid) -> orderly checkpoints
        self._heap: list[tuple[int, int, CkKey]] = []
        self._seq = itertools.count()
        self._revive_counter = itertools.count()
        self._lock = threading.RLock()
        self._cond = threading.Condition(self._lock)
        self._queue_locks: dict[tuple, threading.Lock] = {}
        self._writing: dict[int, int] = {}        # reviveQid -> records being written (progress guard)
        self._running = False
        self._thread: Optional[threading.Thread] = None
        self.revived = 0
        self.to_dlq = 0

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> None:
        """Create the revive topic, replay the revive log, start the revive thread (blocking)."""
        if self.topics.get(self.revive_topic) is None:
            self.topics.add_system_topic(TopicConfig(self.revive_topic, self.revive_queue_num,
                                                     self.revive_queue_num, PERM_READ | PERM_WRITE))
        self._replay()
        self._running = True
        self._thread = threading.Thread(target=self._revive_loop, name="pop-revive", daemon=True)
        self._thread.start()

    def shutdown(self) -> None:
        with self._cond:
            self._running = False
            self._cond.notify_all()
        if self._thread is not None:
            self._thread.join(10)
            self._thread = None
        self._persist_progress()

    def attach(self, store_listener: Callable) -> None:
        """Register the long-polling wake-up as a store dispatch listener (``store.add_dispatch_listener``)."""
        store_listener(self.polling.on_dispatch, watch=self.polling.watched)

    @property
    def checkpoint_count(self) -> int:
        return len(self._cks)

    # ------------------------------------------------------------------ pop
    def check_pop(self, group: str, topic: str, queue_id: int, max_nums: int, broker_ip: str = "",
                  client: str = "") -> tuple[Any, Any]:
        """The Java broker's pop preconditions; returns (topic config, group config)."""
        if max_nums > MAX_POP_NUMS:
            raise PopError(INVALID_PARAMETER, f"the broker[{broker_ip}] pop message's num is greater than 32")
        tc = self.topics.get(topic)
        if tc is None:
            raise PopError(ResponseCode.TOPIC_NOT_EXIST, f"topic[{topic}] not exist, apply first please! {FAQ_TOPIC}")
        if not (tc.perm & PERM_READ):
            raise PopError(ResponseCode.NO_PERMISSION, f"the topic[{topic}] peeking message is forbidden")
        if queue_id >= tc.read_queue_nums:
            raise PopError(INVALID_PARAMETER, f"queueId[{queue_id}] is illegal, topic:[{topic}] "
                                              f"topicConfig.readQueueNums:[{tc.read_queue_nums}] consumer:[{client}]")
        sg = self.groups.find(group)
        if sg is None:
            raise PopError(ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
                           f"subscription group [{group}] does not exist, {FAQ_GROUP}")
        if not sg.consume_enable:
            raise PopError(ResponseCode.NO_PERMISSION, f"subscription group no permission, {group}")
        return tc, sg

    def pop(self, group: str, topic: str, queue_id: int, max_nums: int, invisible_ms: int,
            message_filter: Any = None, init_mode: int = INIT_MODE_LAST, client_host: str = "",
            order: bool = False) -> PopResult:
        """Hand out up to ``max_nums`` messages of ``topic`` (queue -1 = every queue) and its POP retry topic.

        ``order`` (a FIFO group): each queue hands out one batch at a time, in queue order; a batch not
        acked within its invisible time is handed out again from the same queue (no retry topic), up to
        the group's max attempts, then goes to the DLQ."""
        tc, sg = self.check_pop(group, topic, queue_id, max_nums, client=client_host)
        result = PopResult(now_ms(), int(invisible_ms), next(self._revive_counter) % self.revive_queue_num)
        if order:
            for qid in ([queue_id] if queue_id >= 0 else self._rotate(list(range(tc.read_queue_nums)))):
                need = max_nums - len(result.messages)
                if need <= 0:
                    result.rest_num += self._backlog(topic, group, qid)
                    continue
                result.rest_num += self._pop_queue_orderly(topic, qid, group, need, message_filter, init_mode,
                                                           client_host, result, sg.retry_max_times)
            return result
        retry = pop_retry_topic(group, topic)
        rtc = self.topics.get(retry)
        queues = ([queue_id] if queue_id >= 0 else
                  self._rotate(list(range(tc.read_queue_nums))))
        retry_first = rtc is not None and random.randrange(5) == 0
        if retry_first:
            self._pop_topic(retry, list(range(rtc.read_queue_nums)), group, max_nums, message_filter,
                            INIT_MODE_MIN, client_host, result)
        self._pop_topic(topic, queues, group, max_nums, message_filter, init_mode, client_host, result)
        if rtc is not None and not retry_first:
            self._pop_topic(retry, list(range(rtc.read_queue_nums)), group, max_nums, message_filter,
                            INIT_MODE_MIN, client_host, result)
        return result

    @staticmethod
    def _rotate(qids: list[int]) -> list[int]:
        if len(qids) > 1:
            k = random.randrange(len(qids))
            qids = qids[k:] + qids[:k]
        return qids

    def _pop_topic(self, topic: str, qids: list[int], group: str, max_nums: int, message_filter: Any,
                   init_mode: int, client_host: str, result: PopResult) -> None:
        for qid in qids:
            need = max_nums - len(result.messages)
            if need <= 0:
                result.rest_num += self._backlog(topic, group, qid)
                continue
            result.rest_num += self._pop_queue(topic, qid, group, need, message_filter, init_mode, client_host,
                                               result)

    def _queue_lock(self, key: tuple) -> threading.Lock:
        lock = self._queue_locks.get(key)
        if lock is None:
            with self._lock:
                lock = self._queue_locks.setdefault(key, threading.Lock())
        return lock

    def pop_offset(self, group: str, topic: str, queue_id: int, init_mode: int = INIT_MODE_LAST) -> int:
        """Where the next pop of the queue starts (Java ``getPopOffset``/``getInitOffset``)."""
        off = self.offsets.query_offset(group, topic, queue_id)
        if off >= 0:
            return off
        mn = self.store.get_min_offset(topic, queue_id)
        # LAST with the queue's first message still stored starts at it (initPopOffsetByCheckMsgInMem)
        if init_mode == INIT_MODE_MIN or mn <= 0:
            return max(mn, 0)
        return self.store.get_max_offset(topic, queue_id)

    def _backlog(self, topic: str, group: str, qid: int) -> int:
        return max(0, self.store.get_max_offset(topic, qid) - self.pop_offset(group, topic, qid))

    def _hand_out(self, topic: str, group: str, qid: int, start: int, records: list[bytes], offs: list[int],
                  result: PopResult, order: bool = False, attempt: int = 0) -> PopCheckPoint:
        """Checkpoint ``records`` (durably) and add them to ``result``."""
        ck = PopCheckPoint(topic, group, qid, start, result.pop_time, result.invisible_time, result.revive_qid,
                           self.broker_name, offs, order=order, attempt=attempt)
        self._add_checkpoint(ck)
        flag = retry_flag(topic)
        result.start_infos.append((flag, qid, start))
        result.msg_infos.append((flag, qid, offs))
        if order:
            result.order_infos.append((flag, qid, attempt))
        for rec, off in zip(records, offs):
            extra = ExtraInfo(start, result.pop_time, result.invisible_time, result.revive_qid, flag,
                              self.broker_name, qid, off)
            result.messages.append(PoppedMessage(rec, topic, qid, off, extra, attempt + 1 if order else 0))
        return ck

    def _open_orderly(self, key: tuple) -> list[PopCheckPoint]:
        """The queue's orderly checkpoints still open (caller holds the queue lock)."""
        with self._lock:
            live = [ck for ck in self._order_cks.get(key, ()) if self._cks.get(ck.key) is ck and not ck.done()]
            if live:
                self._order_cks[key] = list(live)      # a copy: checkpoints added later must not join ``live``
            else:
                self._order_cks.pop(key, None)
        return live

    def queue_locked(self, topic: str, group: str, qid: int, now: Optional[int] = None) -> bool:
        """An orderly queue whose last batch is still invisible and not yet acked."""
        now = now_ms() if now is None else now
        return any(ck.deadline > now for ck in self._open_orderly((topic, group, qid)))

    def _pop_queue_orderly(self, topic: str, qid: int, group: str, need: int, message_filter: Any,
                           init_mode: int, client_host: str, result: PopResult, max_times: int) -> int:
        key = (topic, group, qid)
        with self._queue_lock(key):
            open_ = self._open_orderly(key)
            if any(ck.deadline > result.pop_time for ck in open_):
                return self._backlog(topic, group, qid)          # the last batch is still out
            if open_:                                            # not acked in time: the same messages again
                pending = sorted({o for ck in open_ for o in ck.unacked()})[:need]
                attempt = max(ck.attempt for ck in open_) + 1
                records, offs = [], []
                for off in pending:
                    res = self.store.get_messages(topic, qid, off, 1)
                    try:
                        if res.buffers and res.queue_offsets[0] == off:
                            records.append(bytes(res.buffers[0]))
                            offs.append(off)
                    finally:
                        res.release()
                if attempt > max_times:                          # past the max attempts: DLQ, then go on
                    for rec in records:
                        self._to_dlq(group, topic, decode_message(rec), attempt)
                elif records:
                    self._hand_out(topic, group, qid, offs[0], records, offs, result, True, attempt)
                for ck in open_:                                 # the old checkpoints are settled
                    done = [o for o in ck.unacked() if o in pending]
                    if done:
                        self._settle(ck, done)
                if attempt <= max_times and records:
                    return self._backlog(topic, group, qid)
            return self._pop_queue(topic, qid, group, need, message_filter, init_mode, client_host, result,
                                   order=True, locked=True)

    def _settle(self, ck: PopCheckPoint, offsets: list[int]) -> None:
        """Record ``offsets`` of ``ck`` as done (a ``bAck``) and forget the checkpoint when nothing is left."""
        tag, body = ack_record(ck.key, self.broker_name, offsets)
        self._append(tag, body, ck.revive_qid)
        with self._lock:
            ck.acked.update(offsets)
            if ck.done() and self._cks.get(ck.key) is ck:
                del self._cks[ck.key]

    def _pop_queue(self, topic: str, qid: int, group: str, need: int, message_filter: Any, init_mode: int,
                   client_host: str, result: PopResult, order: bool = False, locked: bool = False) -> int:
        if not locked:
            with self._queue_lock((topic, group, qid)):
                return self._pop_queue(topic, qid, group, need, message_filter, init_mode, client_host, result,
                                       order, True)
        offset = self.pop_offset(group, topic, qid, init_mode)
        res = self.store.get_messages(topic, qid, offset, need, message_filter=message_filter)
        if res.status in (_S.OFFSET_TOO_SMALL, _S.OFFSET_OVERFLOW_BADLY, _S.OFFSET_FOUND_NULL):
            log.info("pop offset of %s@%s q%d corrected %d -> %d (%s)", topic, group, qid, offset,
                     res.next_begin_offset, res.status.name)
            offset = res.next_begin_offset
            res = self.store.get_messages(topic, qid, offset, need, message_filter=message_filter)
        try:
            if res.buffers:
                self._hand_out(topic, group, qid, offset, [bytes(b) for b in res.buffers],
                               list(res.queue_offsets), result, order)
        finally:
            res.release()
        nxt = res.next_begin_offset
        if nxt > offset and res.status in (_S.FOUND, _S.NO_MATCHED_MESSAGE, _S.MESSAGE_WAS_REMOVING):
            self.offsets.commit_offset(client_host, group, topic, qid, nxt)
        else:
            nxt = offset
        return max(0, res.max_offset - nxt)

    # ------------------------------------------------------------------ peek / notification
    def peek(self, group: str, topic: str, queue_id: int, max_nums: int) -> list[bytes]:
        """Records a pop would hand out next, without changing anything (PEEK_MESSAGE)."""
        tc, _ = self.check_pop(group, topic, queue_id, max_nums)
        out: list[bytes] = []
        for qid in ([queue_id] if queue_id >= 0 else range(tc.read_queue_nums)):
            if len(out) >= max_nums:
                break
            res = self.store.get_messages(topic, qid, self.pop_offset(group, topic, qid), max_nums - len(out))
            try:
                out.extend(bytes(b) for b in res.buffers)
            finally:
                res.release()
        return out

    def has_message(self, group: str, topic: str, queue_id: int, order: bool = False) -> bool:
        """Whether a pop would find something (NOTIFICATION's ``hasMsg``); for an orderly pop, only in queues
        whose last batch is settled or expired."""
        tc = self.topics.get(topic)
        if tc is None:
            return False
        qids = [queue_id] if queue_id >= 0 else list(range(tc.read_queue_nums))
        if order:
            now = now_ms()
            return any(not self.queue_locked(topic, group, q, now) and
                       (self._backlog(topic, group, q) > 0 or self._open_orderly((topic, group, q))) for q in qids)
        if any(self._backlog(topic, group, q) > 0 for q in qids):
            return True
        rtc = self.topics.get(pop_retry_topic(group, topic))
        return rtc is not None and any(self._backlog(rtc.topic_name, group, q) > 0
                                       for q in range(rtc.read_queue_nums))

    def wait_topics(self, group: str, topic: str, order: bool = False) -> list[tuple[str, int]]:
        """(topic, queue count) pairs a parked pop of ``topic`` wakes on (the topic and its POP retry topic)."""
        tc = self.topics.get(topic)
        if order:
            return [(topic, tc.read_queue_nums if tc else 1)]
        retry = pop_retry_topic(group, topic)
        rtc = self.topics.get(retry)
        return [(topic, tc.read_queue_nums if tc else 1), (retry, rtc.read_queue_nums if rtc else 1)]

    # ------------------------------------------------------------------ ack / change invisible time
    def check_ack(self, group: str, topic: str, extra: ExtraInfo, offset: int) -> str:
        """Java AckMessageProcessor's checks; returns the checkpoint's topic."""
        if self.topics.get(topic) is None:
            raise PopError(ResponseCode.TOPIC_NOT_EXIST, f"topic[{topic}] not exist, apply first please! {FAQ_TOPIC}")
        ck_topic = real_topic(topic, group, extra.retry)
        tc = self.topics.get(ck_topic)
        if tc is None or extra.queue_id >= tc.read_queue_nums or extra.queue_id < 0:
            raise PopError(ResponseCode.MESSAGE_ILLEGAL,
                           f"queueId[{extra.queue_id}] is illegal, topic:[{ck_topic}] topicConfig.readQueueNums:"
                           f"[{tc.read_queue_nums if tc else 0}] consumer:[]")
        mn = self.store.get_min_offset(ck_topic, extra.queue_id)
        mx = self.store.get_max_offset(ck_topic, extra.queue_id)
        if offset < mn or offset > mx:
            raise PopError(ResponseCode.NO_MESSAGE,
                           f"offset is illegal, key:{ck_topic}@{extra.queue_id}, commit:{offset}, store:{mn}~{mx}")
        return ck_topic

    def ack(self, group: str, topic: str, extra: ExtraInfo, offset: int) -> bool:
        """Ack one message; True if it was still invisible (False: already acked or revived, as Java, still OK)."""
        return self.batch_ack(group, topic, extra, [offset]) > 0

    def batch_ack(self, group: str, topic: str, extra: ExtraInfo, offsets: list[int]) -> int:
        """Ack messages of one checkpoint (BATCH_ACK_MESSAGE); returns how many were still invisible."""
        ck_topic = self.check_ack(group, topic, extra, offsets[0] if offsets else -1)
        key = (ck_topic, group, extra.queue_id, extra.ck_queue_offset, extra.pop_time)
        with self._lock:
            ck = self._cks.get(key)
            live = [o for o in offsets if ck is not None and o in ck.offsets and o not in ck.acked]
        if not live:
            return 0
        tag, body = ack_record(key, self.broker_name, live)
        self._append(tag, body, extra.revive_qid)
        unlocked = False
        with self._lock:
            ck = self._cks.get(key)
            if ck is not None:
                ck.acked.update(live)
                if ck.done():
                    del self._cks[key]
                    unlocked = ck.order
        if unlocked:                         # an orderly queue is free again: parked pops may go on
            self.polling.notify_threadsafe(ck_topic)
        return len(live)

    def change_invisible_time(self, group: str, topic: str, extra: ExtraInfo, offset: int,
                              invisible_ms: int) -> ExtraInfo:
        """A new one-message checkpoint (invisible from now for ``invisible_ms``), then ack of the old one."""
        ck_topic = self.check_ack(group, topic, extra, offset)
        pop_time = now_ms()
        with self._lock:
            while (ck_topic, group, extra.queue_id, offset, pop_time) in self._cks:
                pop_time += 1
        with self._lock:
            old = self._cks.get((ck_topic, group, extra.queue_id, extra.ck_queue_offset, extra.pop_time))
        ck = PopCheckPoint(ck_topic, group, extra.queue_id, offset, pop_time, int(invisible_ms), extra.revive_qid,
                           self.broker_name, [offset], order=bool(old and old.order),
                           attempt=old.attempt if old else 0)
        self._add_checkpoint(ck)
        self.batch_ack(group, topic, extra, [offset])
        return ExtraInfo(offset, pop_time, int(invisible_ms), extra.revive_qid, extra.retry, self.broker_name,
                         extra.queue_id, offset)

    # ------------------------------------------------------------------ revive log
    def _append(self, tag: str, body: bytes, revive_qid: int) -> int:
        """Append one record to the revive queue; returns its queue offset."""
        props = encode_properties({"TAGS": tag, "WAIT": "false"})
        now = now_ms()
        host = self.store_host()
        msg = MessageToStore(self.revive_topic, revive_qid, body, props, 0, 0, now, host, host, 0, 0,
                             tags_code_of(props))
        result = self.store.put_message(msg)
        if not result.ok:
            raise PopError(ResponseCode.SYSTEM_ERROR, f"writing the {tag} record failed: {result.status.name}")
        return result.queue_offset

    def _add_checkpoint(self, ck: PopCheckPoint) -> None:
        """Write the ``ck`` record, then make the checkpoint live (the revive progress stays below it meanwhile)."""
        with self._lock:
            self._writing[ck.revive_qid] = self._writing.get(ck.revive_qid, 0) + 1
        try:
            ck.revive_offset = self._append(CK_TAG, ck.ck_record(), ck.revive_qid)
            with self._cond:
                self._cks[ck.key] = ck
                if ck.order:                     # handed out again by the next orderly pop, not revived
                    self._order_cks.setdefault((ck.topic, ck.group, ck.queue_id), []).append(ck)
                    return
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

    def _replay_record(self, m: Any, queue_offset: int) -> None:
        tag = m.properties.get("TAGS")
        try:
            if tag == CK_TAG:
                ck = PopCheckPoint.from_ck_record(m.body, queue_offset)
                self._cks[ck.key] = ck
            elif tag in (ACK_TAG, BATCH_ACK_TAG):
                key, offs = parse_ack_record(m.body)
                ck = self._cks.get(key)
                if ck is not None:
                    ck.acked.update(offs)
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
            if progress != self.offsets.query_offset(REVIVE_GROUP, self.revive_topic, q):
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
            self._append(tag, body, ck.revive_qid)
        with self._lock:
            ck.acked.update(done)
            if ck.done() and self._cks.get(ck.key) is ck:
                del self._cks[ck.key]

    def _revive_message(self, ck: PopCheckPoint, m: Any) -> None:
        """Store an un-acked message again: POP retry topic, or the DLQ after the group's max attempts."""
        props = decode_properties(m.properties_str)
        real = props.get(PROPERTY_RETRY_TOPIC) or ck.topic
        sg = self.groups.find(ck.group)
        max_times = sg.retry_max_times if sg is not None else 16
        reconsume = m.reconsume_times + 1
        if reconsume > max_times:
            self._to_dlq(ck.group, real, m, reconsume, ck.pop_time)
            return
        else:
            target = ck.topic if ck.topic.startswith("%RETRY%") else pop_retry_topic(ck.group, ck.topic)
            if self.topics.get(target) is None:
                self.topics.create_topic_in_send_message_back_method(target, 1, PERM_READ | PERM_WRITE, 0)
        self._store_again(target, m, props, real, reconsume, ck.pop_time)
        self.revived += 1

    def _store_again(self, target: str, m: Any, props: dict, real: str, reconsume: int, pop_time: int) -> None:
        props.setdefault(PROPERTY_RETRY_TOPIC, real)
        props.setdefault(PROPERTY_FIRST_POP_TIME, str(pop_time))
        props.pop("DELAY", None)
        encoded = encode_properties(props)
        msg = MessageToStore(target, 0, m.body, encoded, m.flag, m.sys_flag & ~0xC, m.born_timestamp, m.born_host,
                             self.store_host(), reconsume, 0, tags_code_of(encoded),
                             find_property(encoded, "KEYS"), find_property(encoded, "UNIQ_KEY"))
        result = self.store.put_message(msg)
        if not result.ok:
            raise RuntimeError(f"storing the message again in {target} failed: {result.status.name}")

    def _to_dlq(self, group: str, real: str, m: Any, reconsume: int, pop_time: Optional[int] = None) -> None:
        """``m`` reached the group's max attempts: store it in ``%DLQ%<group>``."""
        target = dlq_topic(group)
        self.topics.create_topic_in_send_message_back_method(target, 1, PERM_READ | PERM_WRITE, 0)
        props = decode_properties(m.properties_str)
        real = props.get(PROPERTY_RETRY_TOPIC) or real
        self._store_again(target, m, props, real, reconsume, pop_time or now_ms())
        self.to_dlq += 1
        if self.on_dlq is not None:
            self.on_dlq(group, real)
        log.info("POP: %s of %s reached %d attempts; moved to %s", props.get("UNIQ_KEY"), real, reconsume, target)
