"""Orderly queues (the order-lock half of :class:`rmqd.pop.service.PopService`): a FIFO group's queue hands out one
batch at a time, and an unacked batch again from the same queue (no retry topic) up to the group's max attempts,
then to the DLQ; 5.5 lite queues (:meth:`OrderlyQueues.pop_queues`) keep that state in memory only and move the
consume offset on ack (see :mod:`rmqd.pop.service`). Orderly listeners hear when a queue's batch goes out and
when the queue is free again.
"""
from __future__ import annotations

import itertools
import logging
from typing import TYPE_CHECKING, Callable, Optional

from rmqd.pop.checkpoint import OrderKey, PopCheckPoint, ack_record, now_ms
from rmqd.pop.queue_reads import INIT_MODE_LAST, QueueReads
from rmqd.pop.results import PopResult
from rmqd.store.message import decode_message

if TYPE_CHECKING:
    from rmqd.store.api import MessageFilter

log = logging.getLogger(__name__)


class OrderlyQueues(QueueReads):
    # the state of PopService (set in its __init__) the orderly queues use besides the reads'
    orderly_listeners: list[Callable[[str, str, int, Optional[int]], None]]
    _revive_counter: itertools.count[int]

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

    def _tell_orderly(self, topic: str, group: str, qid: int, deadline: Optional[int]) -> None:
        for fn in self.orderly_listeners:
            try:
                fn(topic, group, qid, deadline)
            except Exception:
                log.exception("orderly listener %r failed for %s@%s q%d", fn, topic, group, qid)
