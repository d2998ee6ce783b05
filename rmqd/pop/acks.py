"""Acks, batch acks, auto-renew and changes of invisible time (the settling half of
:class:`rmqd.pop.service.PopService`; Java ``AckMessageProcessor`` and ``ChangeInvisibleTimeProcessor``): an ack
writes an ``ack`` record and sets the checkpoint's bit (a memory checkpoint, 5.5 lite: in memory, and the consume
offset moves); a checkpoint with every bit set is forgotten; a change of invisible time writes a new one-message
checkpoint and acks the old.
"""
from __future__ import annotations

import heapq
import logging

from rmqd.pop.checkpoint import CK_TAG, CkKey, PopCheckPoint, ack_record, now_ms
from rmqd.pop.codes import PopError
from rmqd.pop.extra_info import ExtraInfo, real_topic
from rmqd.pop.long_polling import PopLongPolling
from rmqd.pop.orderly import OrderlyQueues
from rmqd.pop.queue_reads import FAQ_TOPIC
from rmqd.remoting.codes import ResponseCode

log = logging.getLogger(__name__)

_LITE_QUEUE_PREFIX = "%LMQ%$"       # rmqd.store.lite.names.LITE_PREFIX (not imported: the lite store loads lazily)


class Acks(OrderlyQueues):
    # the state of PopService (set in its __init__) the acks use besides the orderly queues'
    polling: PopLongPolling

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
