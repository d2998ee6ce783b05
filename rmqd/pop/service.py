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
  every 5 s, possibly some acked in the last seconds): nothing acked is lost, nothing unacked is skipped.
- **Change invisible time** writes a new one-message checkpoint and acks the old.
- **Revive** and the crash-safe **revive log**: :mod:`rmqd.pop.revive`.  Java leaves the DLQ decision
  to the proxy (gRPC) or the client (remoting); rmqd takes it in the revive so both front ends follow
  one rule.  A kill -9 at any step loses no message; at worst a message acked or revived at the
  moment of the crash is delivered once more (at-least-once, as in Java).

Made of one module per job, each a mixin over the state this class keeps: :mod:`rmqd.pop.queue_reads` (the pop
preconditions, one queue read, checkpointed and handed out), :mod:`rmqd.pop.orderly` (orderly and lite queues:
one batch out at a time), :mod:`rmqd.pop.acks` (ack, batch ack, renew, change invisible time) and
:mod:`rmqd.pop.revive`; this class keeps the state, the lifecycle, the metrics, and pop / peek / notification
over a topic's queues.
"""
from __future__ import annotations

import itertools
import logging
import threading
from typing import TYPE_CHECKING, Callable, Optional

from rmqd.pop.acks import Acks
from rmqd.pop.checkpoint import CkKey, OrderKey, PopCheckPoint, now_ms
from rmqd.pop.codes import PopError
from rmqd.pop.extra_info import pop_retry_topic
from rmqd.pop.long_polling import PopLongPolling
from rmqd.pop.queue_reads import FAQ_GROUP, FAQ_TOPIC, INIT_MODE_LAST, INIT_MODE_MIN, MAX_POP_NUMS
from rmqd.pop.queue_selector import QueueSelector, RotatingQueueSelector, rotate
from rmqd.pop.results import PoppedMessage, PopResult

if TYPE_CHECKING:
    from rmqd.pop.handles import AddDispatchListener, PopGroups, PopOffsets, PopStore, PopTopics, ReviveRecorder
    from rmqd.store.api import MessageFilter
    from rmqd.store.message import Host

log = logging.getLogger(__name__)

__all__ = ["FAQ_GROUP", "FAQ_TOPIC", "INIT_MODE_LAST", "INIT_MODE_MIN", "MAX_POP_NUMS", "PopError", "PopResult",
           "PopService", "PoppedMessage"]


class PopService(Acks):
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
            for qid in ([queue_id] if queue_id >= 0 else rotate(list(range(tc.read_queue_nums)))):
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
