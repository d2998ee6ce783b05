"""The reads under every pop (the queue-reading half of :class:`rmqd.pop.service.PopService`): the Java broker's
pop preconditions, where a queue's next pop starts, and one queue read, checkpointed (durably, or in memory for a
5.5 lite queue) and handed out.

A mixin over the revive's state (:class:`rmqd.pop.revive.ReviveMixin`), as PopService is made of:
``QueueReads`` -> ``OrderlyQueues`` (:mod:`rmqd.pop.orderly`) -> ``Acks`` (:mod:`rmqd.pop.acks`) -> PopService.
"""
from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING, Callable, Optional

from rmqd.broker.consume_checks import check_consume_group
from rmqd.pop.checkpoint import OrderKey, PopCheckPoint
from rmqd.pop.codes import INVALID_PARAMETER, PopError
from rmqd.pop.extra_info import ExtraInfo, retry_flag
from rmqd.pop.results import PoppedMessage, PopResult
from rmqd.pop.revive import ReviveMixin
from rmqd.remoting.codes import ResponseCode
from rmqd.store.message_store import GetMessageStatus
from rmqd.store.metadata import PERM_READ

if TYPE_CHECKING:
    from rmqd.store.api import MessageFilter
    from rmqd.store.metadata import SubscriptionGroupConfig, TopicConfig

log = logging.getLogger(__name__)

INIT_MODE_LAST, INIT_MODE_MIN = 0, 1
MAX_POP_NUMS = 32
FAQ_TOPIC = "\nSee https://rocketmq.apache.org/docs/bestPractice/06FAQ for further details."
FAQ_GROUP = "\nSee https://rocketmq.apache.org/docs/bestPractice/06FAQ for further details."
_S = GetMessageStatus


class QueueReads(ReviveMixin):
    # the state of PopService (set in its __init__) the reads use besides the revive's
    on_out: Optional[Callable[[str, str, int, int], None]]
    _queue_locks: dict[OrderKey, threading.Lock]

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
