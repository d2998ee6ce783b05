"""PopService: POP state (checkpoints, acks, invisible time, revive) under both front ends.

Java: ``PopMessageProcessor`` (pop), ``AckMessageProcessor`` (ack, batch ack),
``ChangeInvisibleTimeProcessor`` and ``PopReviveService``.  The remoting POP codes and the gRPC
endpoint call the same methods; they run in pool threads (they append to the store).

- **Pop** reads each queue from the group's offset (the same consumer offset table 4.x uses),
  writes a checkpoint record to the revive topic, then moves the offset past what it read.  An
  orderly pop (a FIFO group) hands out one batch per queue at a time and hands an unacked batch out
  again from the same queue.
- **Ack** writes an ``ack`` record and sets the checkpoint's bit; a checkpoint with every bit set
  is forgotten.
- **5.5 lite queues** (:meth:`PopService.pop_queues`) follow Java's ``PopLiteMessageProcessor``: the
  orderly state is kept in memory only (``MemoryConsumerOrderInfoManager``): a pop writes no ``ck`` record
  and does not move the consume offset; an ack writes no ``ack`` record and commits the consume offset up to
  the lowest message of the queue still out.  After a crash the in-memory state is gone and the consumer
  gets every unacked message again from the committed offset (and, as with any consume offset persisted
  every 5 s, possibly some acked in the last seconds): nothing acked is lost, nothing unacked is skipped.  **Change invisible time** writes a new one-message checkpoint and acks the old.
- **Revive** and the crash-safe **revive log**: :mod:`rmqd.pop.revive`.  Java leaves the DLQ decision
  to the proxy (gRPC) or the client (remoting); rmqd takes it in the revive so both front ends follow
  one rule.  A kill -9 at any step loses no message; at worst a message acked or revived at the
  moment of the crash is delivered once more (at-least-once, as in Java).
"""
from __future__ import annotations

import heapq
import itertools
import logging
import random
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Optional

from rmqd.broker.consume_checks import check_consume_group
from rmqd.pop.checkpoint import CK_TAG, CkKey, OrderKey, PopCheckPoint, ack_record, now_ms
from rmqd.pop.codes import INVALID_PARAMETER, PopError
from rmqd.pop.extra_info import (ExtraInfo, msg_offset_info, pop_retry_topic, real_topic, retry_flag,
                                 start_offset_info)
from rmqd.pop.long_polling import PopLongPolling
from rmqd.pop.queue_selector import QueueSelector, RotatingQueueSelector
from rmqd.pop.revive import ReviveMixin
from rmqd.remoting.codes import ResponseCode
from rmqd.store.message import decode_message
from rmqd.store.message_store import GetMessageStatus
from rmqd.store.metadata import PERM_READ

if TYPE_CHECKING:
    from rmqd.pop.handles import AddDispatchListener, PopGroups, PopOffsets, PopStore, PopTopics, ReviveRecorder
    from rmqd.store.api import MessageFilter
    from rmqd.store.message import Host
    from rmqd.store.metadata import SubscriptionGroupConfig, TopicConfig

log = logging.getLogger(__name__)

INIT_MODE_LAST, INIT_MODE_MIN = 0, 1
MAX_POP_NUMS = 32
FAQ_TOPIC = "\nSee https://rocketmq.apache.org/docs/bestPractice/06FAQ for further details."
FAQ_GROUP = "\nSee https://rocketmq.apache.org/docs/bestPractice/06FAQ for further details."
_S = GetMessageStatus
_LITE_QUEUE_PREFIX = "%LMQ%$"       # rmqd.store.lite.names.LITE_PREFIX (not imported: the lite store loads lazily)


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
    start_infos: list[tuple[str, int, int]] = field(default_factory=list)         # (flag, qid, start offset)
    msg_infos: list[tuple[str, int, list[int]]] = field(default_factory=list)     # (flag, qid, offsets)
    order_infos: list[tuple[str, int, int]] = field(default_factory=list)     # orderly pops: (flag, qid, redeliveries)
    visited: int = 0         # pop_queues: how many of the given queues it read before the batch was full

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


class PopService(ReviveMixin):
    """POP state of one broker.  ``start()``/``shutdown()`` are the broker's service hooks."""

    master_only = True     # a slave does not run it (rmqd.replicas.wiring)

    def __init__(self, broker_name: str, cluster: str, store: PopStore, topics: PopTopics, groups: PopGroups,
                 offsets: PopOffsets, store_host: Callable[[], Host], revive_queue_num: int = 8,
                 on_dlq: Optional[Callable[[str, str], None]] = None, counters: Optional[ReviveRecorder] = None,
                 on_out: Optional[Callable[[str, str, int, int], None]] = None,
                 queue_selector: Optional[QueueSelector] = None) -> None:
        """``on_dlq(group, topic)``: a message went to the DLQ; ``counters``: a
        :class:`rmqd.metrics.recorders.PopCounters`; ``on_out(group, topic, messages, bytes)``: messages
        handed out by a pop or a peek (the broker's GROUP_GET stats); ``queue_selector``: the order a pop
        reads queues in (:mod:`rmqd.pop.queue_selector`; priority mode lives there)."""
        self.broker_name = broker_name
        self.store = store
        self.topics = topics
        self.groups = groups
        self.offsets = offsets
        self.store_host = store_host
        self.on_dlq = on_dlq
        self.counters = counters
        self.on_out = on_out
        self.queue_selector: QueueSelector = queue_selector or RotatingQueueSelector()
        # (topic, group, queue id, deadline ms) when an orderly batch is handed out; deadline None when the
        # queue is free again (all acked): 5.5 lite delivery offers the lite topic again (rmqd.lite.subscriptions)
        self.orderly_listeners: list[Callable[[str, str, int, Optional[int]], None]] = []
        self.revive_queue_num = max(1, int(revive_queue_num))
        self.revive_topic = f"rmq_sys_REVIVE_LOG_{cluster}"
        self.polling = PopLongPolling()
        self._cks: dict[CkKey, PopCheckPoint] = {}
        self._order_cks: dict[OrderKey, list[PopCheckPoint]] = {}     # (topic, group, qid) -> orderly checkpoints
        self._heap: list[tuple[int, int, CkKey]] = []
        self._seq = itertools.count()
        self._revive_counter = itertools.count()
        self._lock = threading.RLock()
        self._cond = threading.Condition(self._lock)
        self._queue_locks: dict[OrderKey, threading.Lock] = {}
        self._writing: dict[int, int] = {}        # reviveQid -> records being written (progress guard)
        self._running = False
        self._thread: Optional[threading.Thread] = None
        self.revived = 0
        self.to_dlq = 0

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> None:
        """Replay the revive log, start the revive thread (blocking).  The revive topic is created with the
        first record, so a broker nobody pops from lists the topics a 4.9 broker does."""
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

    def attach(self, store_listener: AddDispatchListener) -> None:
        """Register the long-polling wake-up as a store dispatch listener (``store.add_dispatch_listener``)."""
        store_listener(self.polling.on_dispatch, watch=self.polling.watched)

    @property
    def checkpoint_count(self) -> int:
        return len(self._cks)

    # ------------------------------------------------------------------ metrics (read at scrape time)
    def inflight(self) -> dict[tuple[str, str, int], int]:
        """(topic, group, queue id) -> messages handed out and neither acked nor revived yet."""
        out: dict[tuple[str, str, int], int] = {}
        with self._lock:
            for ck in self._cks.values():
                n = len(ck.offsets) - len(ck.acked)
                if n > 0:
                    key = (ck.topic, ck.group, ck.queue_id)
                    out[key] = out.get(key, 0) + n
        return out

    def revive_backlog(self, now: Optional[int] = None) -> list[tuple[int, int, int]]:
        """Per revive queue: (queue id, records the revive is not done with, age in ms of the oldest).

        The revive is done with everything below the ``ck`` record of the oldest open checkpoint (what
        the revive progress is committed to); with no open checkpoint, with everything."""
        now = now_ms() if now is None else now
        with self._lock:
            lowest: dict[int, int] = {}
            for ck in self._cks.values():
                if 0 <= ck.revive_offset < lowest.get(ck.revive_qid, 1 << 62):
                    lowest[ck.revive_qid] = ck.revive_offset
        out = []
        for q in range(self.revive_queue_num):
            mx = max(0, self.store.get_max_offset(self.revive_topic, q))
            progress = min(lowest.get(q, mx), mx)
            behind = mx - progress
            age = 0
            if behind > 0:
                ts = self.store.get_message_store_timestamp(self.revive_topic, q, progress)
                age = max(0, now - ts) if ts > 0 else 0
            out.append((q, behind, age))
        return out

    # ------------------------------------------------------------------ pop
    def check_pop(self, group: str, topic: str, queue_id: int, max_nums: int, broker_ip: str = "",
                  client: str = "") -> tuple[TopicConfig, SubscriptionGroupConfig]:
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
                                              f"topicConfig.readQueueNums:[{tc.read_queue_nums}] consumer:[/{client}]")
        sg, err = check_consume_group(self.groups, group, FAQ_GROUP)
        if err is not None:
            raise PopError(*err)
        assert sg is not None, "check_consume_group answers a group config or a refusal"
        return tc, sg

    def pop(self, group: str, topic: str, queue_id: int, max_nums: int, invisible_ms: int,
            message_filter: Optional[MessageFilter] = None, init_mode: int = INIT_MODE_LAST, client_host: str = "",
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
        queues, retry_first, skip_busy = self.queue_selector.select(
            tc, sg, [queue_id] if queue_id >= 0 else list(range(tc.read_queue_nums)))
        retry_first = retry_first and rtc is not None
        retry_qids: list[int] = []
        if rtc is not None:
            n = rtc.read_queue_nums
            # priority mode over a retry topic with a queue per level (useSeparateRetryQueue): by level too
            retry_qids = ([q for q in queues if q < n] + [q for q in range(n) if q not in queues]) if skip_busy \
                else list(range(n))
        if retry_first:
            self._pop_topic(retry, retry_qids, group, max_nums, message_filter, INIT_MODE_MIN, client_host, result,
                            skip_busy)
        self._pop_topic(topic, queues, group, max_nums, message_filter, init_mode, client_host, result, skip_busy)
        if rtc is not None and not retry_first:
            self._pop_topic(retry, retry_qids, group, max_nums, message_filter, INIT_MODE_MIN, client_host, result,
                            skip_busy)
        return result

    def pop_queues(self, group: str, queues: list[tuple[str, int]], max_nums: int, invisible_ms: int,
                   client_host: str = "", init_mode: int = INIT_MODE_LAST, in_memory: bool = True) -> PopResult:
        """Orderly pops of the given (topic, queue) pairs in turn, up to ``max_nums`` messages in all: one
        batch in flight per queue (5.5 lite consumers, whose lite topics are such queues; the caller checked
        the group and the topics).  ``in_memory`` (lite, as Java 5.5): no revive records, the consume offset
        moves on ack (see the module docstring)."""
        sg = self.groups.find(group)
        max_times = sg.retry_max_times if sg is not None else 16
        result = PopResult(now_ms(), int(invisible_ms), next(self._revive_counter) % self.revive_queue_num)
        for topic, qid in queues:
            need = max_nums - len(result.messages)
            if need <= 0:
                break
            result.visited += 1
            self._pop_queue_orderly(topic, qid, group, need, None, init_mode, client_host, result, max_times,
                                    memory=in_memory)
        return result

    def forget_memory(self, topic: str, group: str, qid: int) -> int:
        """Drop the queue's in-memory (lite) batches, e.g. when its consume offset is reset (Java's
        ``clearBlock``): acks of them then change nothing and the next pop reads from the new offset."""
        key = (topic, group, qid)
        with self._lock:
            gone = [ck for ck in self._order_cks.get(key, ()) if ck.memory and self._cks.get(ck.key) is ck]
            for ck in gone:
                del self._cks[ck.key]
                self._settled(ck)
            if gone:
                self._order_cks[key] = [ck for ck in self._order_cks[key] if not ck.memory]
        return len(gone)

    def open_orderly_count(self, topic: str, group: str, qid: int) -> int:
        """Orderly checkpoints of the queue still open (handed out, not acked)."""
        return len(self._open_orderly((topic, group, qid)))

    @staticmethod
    def _rotate(qids: list[int]) -> list[int]:
        if len(qids) > 1:
            k = random.randrange(len(qids))
            qids = qids[k:] + qids[:k]
        return qids

    def _pop_topic(self, topic: str, qids: list[int], group: str, max_nums: int,
                   message_filter: Optional[MessageFilter], init_mode: int, client_host: str, result: PopResult,
                   skip_busy: bool = False) -> None:
        """Read ``qids`` in order until the batch is full.  ``skip_busy`` (priority mode): a queue with
        nothing to read is passed over without a lock or a read (its backlog is two lookups), and one another
        pop holds is passed over too (Java's tryLock) and read last, waiting for it, if the batch is still
        short: concurrent consumers take the next levels instead of queueing behind each other, and none
        answers empty-handed while messages wait behind a busy queue."""
        busy: list[int] = []
        for qid in qids:
            need = max_nums - len(result.messages)
            if need <= 0:
                result.rest_num += self._backlog(topic, group, qid)
                continue
            if skip_busy:
                if self._backlog(topic, group, qid, init_mode) <= 0:
                    continue
                lock = self._queue_lock((topic, group, qid))
                if not lock.acquire(blocking=False):
                    busy.append(qid)
                    continue
                try:
                    result.rest_num += self._pop_queue(topic, qid, group, need, message_filter, init_mode,
                                                       client_host, result, locked=True)
                finally:
                    lock.release()
                continue
            result.rest_num += self._pop_queue(topic, qid, group, need, message_filter, init_mode, client_host,
                                               result)
        for qid in busy:
            need = max_nums - len(result.messages)
            if need <= 0:
                result.rest_num += self._backlog(topic, group, qid)
                continue
            result.rest_num += self._pop_queue(topic, qid, group, need, message_filter, init_mode, client_host,
                                               result)

    def _queue_lock(self, key: OrderKey) -> threading.Lock:
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

    def _backlog(self, topic: str, group: str, qid: int, init_mode: int = INIT_MODE_LAST) -> int:
        return max(0, self.store.get_max_offset(topic, qid) - self.pop_offset(group, topic, qid, init_mode))

    def _hand_out(self, topic: str, group: str, qid: int, start: int, records: list[bytes], offs: list[int],
                  result: PopResult, order: bool = False, attempt: int = 0, memory: bool = False,
                  next_offset: int = -1) -> PopCheckPoint:
        """Checkpoint ``records`` (durably, unless ``memory``) and add them to ``result``."""
        ck = PopCheckPoint(topic, group, qid, start, result.pop_time, result.invisible_time, result.revive_qid,
                           self.broker_name, offs, order=order, attempt=attempt, memory=memory,
                           next_offset=next_offset, ck_records=0 if memory else 1)
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
        if self.on_out is not None:
            self.on_out(group, topic, len(records), sum(len(r) for r in records))
        return ck

    def _open_orderly(self, key: OrderKey) -> list[PopCheckPoint]:
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

    def _pop_queue_orderly(self, topic: str, qid: int, group: str, need: int, message_filter: Optional[MessageFilter],
                           init_mode: int, client_host: str, result: PopResult, max_times: int,
                           memory: bool = False) -> int:
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
                    self._hand_out(topic, group, qid, offs[0], records, offs, result, True, attempt,
                                   memory=memory, next_offset=max(ck.next_offset for ck in open_))
                for ck in open_:                                 # the old checkpoints are settled
                    done = [o for o in ck.unacked() if o in pending]
                    if done:
                        self._settle(ck, done)
                if memory:                                       # messages sent to the DLQ are done with
                    self._commit_memory(key, client_host)
                if attempt <= max_times and records:
                    return self._backlog(topic, group, qid)
            return self._pop_queue(topic, qid, group, need, message_filter, init_mode, client_host, result,
                                   order=True, locked=True, memory=memory)

    def _settle(self, ck: PopCheckPoint, offsets: list[int]) -> None:
        """Record ``offsets`` of ``ck`` as done (a ``bAck``; in memory only for a memory checkpoint) and forget
        the checkpoint when nothing is left."""
        if not ck.memory:
            tag, body = ack_record(ck.key, self.broker_name, offsets)
            self._append(tag, body, ck.revive_qid, ck.group, ck.topic)
        with self._lock:
            ck.acked.update(offsets)
            ck.ack_records += 0 if ck.memory else 1
            if ck.done() and self._cks.get(ck.key) is ck:
                del self._cks[ck.key]
                self._settled(ck)

    def _pop_queue(self, topic: str, qid: int, group: str, need: int, message_filter: Optional[MessageFilter],
                   init_mode: int, client_host: str, result: PopResult, order: bool = False, locked: bool = False,
                   memory: bool = False) -> int:
        if not locked:
            with self._queue_lock((topic, group, qid)):
                return self._pop_queue(topic, qid, group, need, message_filter, init_mode, client_host, result,
                                       order, True, memory)
        offset = self.pop_offset(group, topic, qid, init_mode)
        res = self.store.get_messages(topic, qid, offset, need, message_filter=message_filter)
        if res.status in (_S.OFFSET_TOO_SMALL, _S.OFFSET_OVERFLOW_BADLY, _S.OFFSET_FOUND_NULL):
            log.info("pop offset of %s@%s q%d corrected %d -> %d (%s)", topic, group, qid, offset,
                     res.next_begin_offset, res.status.name)
            offset = res.next_begin_offset
            res = self.store.get_messages(topic, qid, offset, need, message_filter=message_filter)
        nxt = res.next_begin_offset
        moved = nxt > offset and res.status in (_S.FOUND, _S.NO_MATCHED_MESSAGE, _S.MESSAGE_WAS_REMOVING)
        handed = False
        try:
            if res.buffers:
                offs = list(res.queue_offsets)
                self._hand_out(topic, group, qid, offset, [bytes(b) for b in res.buffers], offs, result, order,
                               memory=memory, next_offset=nxt if moved else offs[-1] + 1)
                handed = True
        finally:
            res.release()
        if memory and handed:               # a memory checkpoint's acks move the offset (_commit_memory); a
            if self.offsets.query_offset(group, topic, qid) < 0:     # first pop commits where it started (Java's
                self.offsets.commit_offset(client_host, group, topic, qid, offset)      # getInitOffset(init=true))
        elif moved:
            self.offsets.commit_offset(client_host, group, topic, qid, nxt)
        else:
            nxt = offset
        return max(0, res.max_offset - nxt)

    def _commit_memory(self, key: OrderKey, client_host: str = "") -> None:
        """Commit a memory-checkpointed queue's consume offset up to its lowest message still out (Java 5.5
        lite: the offset moves on ack), never backwards."""
        topic, group, qid = key
        with self._lock:
            cks = self._order_cks.get(key, ())
            live = [ck for ck in cks if ck.memory and self._cks.get(ck.key) is ck and not ck.done()]
            if live:
                target = min(min(ck.unacked()) for ck in live)
            else:
                target = max((ck.next_offset for ck in cks if ck.memory), default=-1)
                self._order_cks.pop(key, None)
            if target > self.offsets.query_offset(group, topic, qid):
                self.offsets.commit_offset(client_host, group, topic, qid, target)

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
                got = [bytes(b) for b in res.buffers]
            finally:
                res.release()
            if got and self.on_out is not None:
                self.on_out(group, topic, len(got), sum(len(b) for b in got))
            out.extend(got)
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
    def check_ack(self, group: str, topic: str, extra: ExtraInfo, offset: int, *, change: bool = False) -> str:
        """Java AckMessageProcessor's checks (``change``: ChangeInvisibleTimeProcessor's, which also refuses the
        queue's max offset itself, apache/rocketmq#9187); returns the checkpoint's topic."""
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
        if offset < mn or offset > mx or (change and offset == mx):
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
            if ck is None and offsets:      # a 5.5 lite handle names the message's own offset, not the batch's
                ck = next((c for c in self._order_cks.get((ck_topic, group, extra.queue_id), ())
                           if c.pop_time == extra.pop_time and offsets[0] in c.offsets), None)
                key = ck.key if ck is not None else key
            live = [o for o in offsets if ck is not None and o in ck.offsets and o not in ck.acked]
        if not live or ck is None:          # (live holds offsets of ck only)
            return 0
        if not ck.memory:
            tag, body = ack_record(key, self.broker_name, live)
            self._append(tag, body, extra.revive_qid, group, ck_topic)
        unlocked = False
        with self._lock:
            ck = self._cks.get(key)
            if ck is not None:
                ck.acked.update(live)
                ck.ack_records += 0 if ck.memory else 1
                if ck.done():
                    del self._cks[key]
                    self._settled(ck)
                    unlocked = ck.order
                if ck.memory:           # under the lock: a pop must not read the queue before the offset moved
                    self._commit_memory((ck_topic, group, extra.queue_id))
        if unlocked:                         # an orderly queue is free again: parked pops may go on
            self.polling.notify_threadsafe(ck_topic)
            self._tell_orderly(ck_topic, group, extra.queue_id, None)
        return len(live)

    def batch_ack_in_range(self, group: str, topic: str, extra: ExtraInfo, offsets: list[int]) -> int:
        """One entry of a BATCH_ACK_MESSAGE, as Java's AckMessageProcessor takes it: an unknown topic or queue is
        skipped and offsets outside the queue's [min, max] are left out, silently; the rest is :meth:`batch_ack`.
        Returns how many were still invisible."""
        ck_topic = real_topic(topic, group, extra.retry)
        tc = self.topics.get(ck_topic)
        if tc is None or not 0 <= extra.queue_id < tc.read_queue_nums:
            log.info("batch ack of %s@%s queue %d: no such topic or queue; skipped", group, ck_topic, extra.queue_id)
            return 0
        mn = self.store.get_min_offset(ck_topic, extra.queue_id)
        mx = self.store.get_max_offset(ck_topic, extra.queue_id)
        kept = [o for o in offsets if mn <= o <= mx]
        if not kept:
            return 0
        return self.batch_ack(group, topic, extra, kept)

    def _tell_orderly(self, topic: str, group: str, qid: int, deadline: Optional[int]) -> None:
        for fn in self.orderly_listeners:
            try:
                fn(topic, group, qid, deadline)
            except Exception:
                log.exception("orderly listener %r failed for %s@%s q%d", fn, topic, group, qid)

    def renew(self, keys: list[CkKey], invisible_ms: int, within_ms: int) -> list[CkKey]:
        """Keep checkpoints invisible (the proxy's auto-renew for push consumers): each of ``keys`` whose
        deadline is less than ``within_ms`` away becomes invisible for ``invisible_ms`` from now, under the
        same key, so the receipt handles the client holds stay valid.  A ``ck`` record with the longer
        invisible time makes it durable.  Returns the keys still open (settled ones are dropped)."""
        now = now_ms()
        still, due = [], []
        with self._lock:
            for key in keys:
                ck = self._cks.get(key)
                if ck is None or ck.done():
                    continue
                still.append(key)
                if now < ck.deadline < now + within_ms:
                    due.append(ck)
        for ck in due:
            new_it = now + int(invisible_ms) - ck.pop_time
            if ck.memory:                   # 5.5 lite: in memory only, as Java's order info
                with self._cond:
                    if self._cks.get(ck.key) is ck and new_it > ck.invisible_time:
                        ck.invisible_time = new_it
                continue
            record = PopCheckPoint(ck.topic, ck.group, ck.queue_id, ck.start_offset, ck.pop_time, new_it,
                                   ck.revive_qid, ck.broker_name, ck.offsets, order=ck.order, attempt=ck.attempt)
            self._append(CK_TAG, record.ck_record(), ck.revive_qid, ck.group, ck.topic)
            with self._cond:
                ck.ck_records += 1
                if self._cks.get(ck.key) is ck and new_it > ck.invisible_time:
                    ck.invisible_time = new_it
                    if not ck.order:
                        heapq.heappush(self._heap, (ck.deadline, next(self._seq), ck.key))
        return still

    def change_invisible_time(self, group: str, topic: str, extra: ExtraInfo, offset: int,
                              invisible_ms: int, suspend: bool = False) -> ExtraInfo:
        """A new one-message checkpoint (invisible from now for ``invisible_ms``), then ack of the old one.
        ``suspend`` (5.5): an orderly message handed out again keeps its delivery attempt."""
        ck_topic = self.check_ack(group, topic, extra, offset, change=True)
        pop_time = now_ms()
        with self._lock:
            while (ck_topic, group, extra.queue_id, offset, pop_time) in self._cks:
                pop_time += 1
        with self._lock:
            old = self._cks.get((ck_topic, group, extra.queue_id, extra.ck_queue_offset, extra.pop_time))
            if old is None:                 # a lite handle names the message's own offset (see batch_ack)
                old = next((c for c in self._order_cks.get((ck_topic, group, extra.queue_id), ())
                            if c.pop_time == extra.pop_time and offset in c.offsets and c.memory), None)
        if old is None and ck_topic.startswith(_LITE_QUEUE_PREFIX):
            # the in-memory batch is gone (acked, or the broker restarted): the message comes again from the
            # consume offset if it was not acked, so no checkpoint is made here (it would deliver it twice)
            return ExtraInfo(offset, pop_time, int(invisible_ms), extra.revive_qid, extra.retry, self.broker_name,
                             extra.queue_id, offset)
        memory = bool(old and old.memory)
        ck = PopCheckPoint(ck_topic, group, extra.queue_id, offset, pop_time, int(invisible_ms), extra.revive_qid,
                           self.broker_name, [offset], order=bool(old and old.order),
                           attempt=(old.attempt if old else 0) - (1 if suspend and old and old.order else 0),
                           memory=memory, next_offset=old.next_offset if old is not None and memory else -1,
                           ck_records=0 if memory else 1)
        self._add_checkpoint(ck)
        self.batch_ack(group, topic, extra, [offset])
        return ExtraInfo(offset, pop_time, int(invisible_ms), extra.revive_qid, extra.retry, self.broker_name,
                         extra.queue_id, offset)
