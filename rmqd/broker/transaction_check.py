"""Transaction check-back service: CHECK_TRANSACTION_STATE (39) to producers (README §3.2, §6.9).

Java: ``TransactionalMessageCheckService`` / ``TransactionalMessageServiceImpl.check`` /
``AbstractTransactionalMessageCheckListener``.  Every ``transactionCheckInterval`` ms, for each half
queue, starting at the ``CID_RMQ_SYS_TRANS`` progress:

* half messages with an op record are done;
* a half message checked ``transactionCheckMax`` times (or older than ``fileReservedTime``) is
  moved to ``TRANS_CHECK_MAX_TIME_TOPIC``;
* a half message older than ``transactionTimeOut`` (or its ``CHECK_IMMUNITY_TIME_IN_SECONDS``) is
  re-appended with ``TRANSACTION_CHECK_TIMES``+1 and CHECK_TRANSACTION_STATE for the new copy goes
  oneway to a live channel of its producer group; the scan stops at the first younger message.

The progress of the half and op queues is committed in the consumer offset table (so it is
persisted with consumerOffset.json and survives a restart).  The service is a ServiceThread: it
never runs on the event loop.
"""
from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field
from typing import Optional

from rmqd.broker.context import BrokerContext
from rmqd.broker.schedule import edit_properties
from rmqd.broker.transaction import (PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS, PROPERTY_PRODUCER_GROUP,
                                     PROPERTY_REAL_QUEUE_ID, PROPERTY_REAL_TOPIC, PROPERTY_TRANSACTION_CHECK_TIMES,
                                     PROPERTY_TRANSACTION_PREPARED_QUEUE_OFFSET, PROPERTY_UNIQ_KEY, REMOVE_TAG,
                                     TransactionalMessageBridge, with_properties)
from rmqd.common.constants import TRANS_HALF_TOPIC, TRANS_OP_HALF_TOPIC
from rmqd.cython_ext import message_codec as _codec
from rmqd.remoting.codes import RequestCode
from rmqd.remoting.command import new_request
from rmqd.common.service_thread import ServiceThread
from rmqd.store.message import StoredMessage, decode_message, offset_msg_id, pack_host
from rmqd.store.message_store import GetMessageStatus
from rmqd.store.config import wall_clock_ms as _now_ms

log = logging.getLogger(__name__)

MAX_PROCESS_TIME_LIMIT_MS = 60_000
OP_PULL_BATCH = 32
MAX_OP_RECORDS_PER_ROUND = 100_000


def immunity_time_ms(value: str, transaction_timeout_ms: int) -> int:
    """CHECK_IMMUNITY_TIME_IN_SECONDS → ms, never below ``transactionTimeOut`` (Java getImmunityTime)."""
    try:
        t = int(value) * 1000
    except ValueError:
        return transaction_timeout_ms
    return max(t, transaction_timeout_ms)


def encode_check_body(m: StoredMessage, topic: str, queue_id: int, queue_offset: int, phys_offset: int,
                      properties: str) -> bytes:
    """The half message in stored form with topic/queue restored and the new copy's offsets."""
    topic_b = topic.encode("utf-8")
    props_b = properties.encode("utf-8")
    born, store = pack_host(m.born_host), pack_host(m.store_host)
    total = _codec.record_size(len(m.body), len(topic_b), len(props_b), len(born), len(store))
    buf = bytearray(total)
    _codec.encode_record_into(buf, 0, total, topic_b, queue_id, m.flag, queue_offset, phys_offset, m.sys_flag,
                              m.born_timestamp, born, m.store_timestamp, store, m.reconsume_times,
                              m.prepared_transaction_offset, m.body, props_b)
    return bytes(buf)


@dataclass
class _QueueRound:
    """One check round of one half queue: its progress and the op records read for it."""

    qid: int
    start_ms: int
    half_offset: int
    op_offset: int
    remove_map: dict[int, int] = field(default_factory=dict)     # half queue offset -> op queue offset
    done_op: list[int] = field(default_factory=list)              # op queue offsets that are settled
    resolved_below: set[int] = field(default_factory=set)         # half offsets below the progress, resolved


class TransactionalMessageCheckService(ServiceThread):
    """Periodic check-back of unresolved half messages (a broker service: ``start``/``shutdown``).

    Like Java's, it waits one ``transactionCheckInterval`` before its first round; the interval is read
    again after each round, so UPDATE_BROKER_CONFIG changes it."""

    master_only = True     # a slave does not run it (rmqd.replicas.wiring)

    def __init__(self, ctx: BrokerContext, bridge: TransactionalMessageBridge) -> None:
        super().__init__("TransactionalMessageCheckService", self._interval_of(ctx))
        self.ctx = ctx
        self.config = ctx.config
        self.bridge = bridge
        self.store = ctx.store
        self._round_lock = threading.Lock()
        self._waited = False
        self.checks_sent = 0
        self.discarded = 0

    # ------------------------------------------------------------------ lifecycle
    @staticmethod
    def _interval_of(ctx: BrokerContext) -> float:
        return max(0.01, int(ctx.config.transactionCheckInterval) / 1000.0)

    @property
    def interval_s(self) -> float:
        return self._interval_of(self.ctx)

    def run_once(self) -> None:
        if self._waited:
            self.check_once()
        self._waited = True
        self.interval = self.interval_s

    # ------------------------------------------------------------------ one round
    def check_once(self) -> int:
        """Run one check round over every half queue; returns the number of checks sent."""
        with self._round_lock:
            if self.stopped:
                return 0
            tcm = self.ctx.topics
            tc = tcm.get(TRANS_HALF_TOPIC)
            if tc is None:          # Java's checker creates the half topic in its first round
                tc = tcm.create_topic_in_send_message_back_method(TRANS_HALF_TOPIC, 1, 6, 0)
            queues = range(max(1, tc.read_queue_nums if tc is not None else 1))
            sent = 0
            for qid in queues:
                if self.store.get_max_offset(TRANS_HALF_TOPIC, qid) <= 0:
                    continue
                sent += self._check_queue(qid)
            return sent

    def _read_op_records(self, qid: int, op_offset: int, half_offset: int,
                         remove_map: dict[int, int], done_op: list[int], resolved_below: set[int]) -> None:
        """Java fillOpRemoveMap over every op record from ``op_offset`` (bounded per round).

        Op records naming a half offset below the progress are done; their half offsets are kept in
        ``resolved_below`` so a deferred (immune) copy of such a message is recognised this round."""
        offset = op_offset
        seen = 0
        while seen < MAX_OP_RECORDS_PER_ROUND:
            res = self.store.get_messages(TRANS_OP_HALF_TOPIC, qid, offset, OP_PULL_BATCH)
            if res.status != GetMessageStatus.FOUND:
                if res.next_begin_offset > offset and res.status in (GetMessageStatus.OFFSET_TOO_SMALL,
                                                                     GetMessageStatus.OFFSET_FOUND_NULL,
                                                                     GetMessageStatus.MESSAGE_WAS_REMOVING,
                                                                     GetMessageStatus.NO_MATCHED_MESSAGE):
                    offset = res.next_begin_offset
                    continue
                break
            for buf, qoff in zip(res.buffers, res.queue_offsets):
                seen += 1
                try:
                    op = decode_message(buf)
                    half_qoff = int(op.body.decode("ascii"))
                except (ValueError, UnicodeDecodeError) as exc:
                    log.error("transaction: bad op record at %s/%d offset %d: %s", TRANS_OP_HALF_TOPIC, qid,
                              qoff, exc)
                    done_op.append(qoff)
                    continue
                if op.properties.get("TAGS") != REMOVE_TAG:
                    log.error("transaction: op record %d has tag %r, expected %r", qoff, op.tags, REMOVE_TAG)
                    done_op.append(qoff)
                elif half_qoff < half_offset:
                    done_op.append(qoff)
                    resolved_below.add(half_qoff)
                else:
                    remove_map[half_qoff] = qoff
            res.release()
            offset = res.next_begin_offset

    def _get_half(self, qid: int, offset: int) -> tuple[Optional[StoredMessage], int]:
        """(message at ``offset`` or None, the offset to continue from)."""
        res = self.store.get_messages(TRANS_HALF_TOPIC, qid, offset, 1)
        try:
            if res.status == GetMessageStatus.FOUND:
                return decode_message(res.buffers[0]), offset
            return None, res.next_begin_offset
        finally:
            res.release()

    def _check_queue(self, qid: int) -> int:
        """One round over half queue ``qid``: settle, discard, defer or check back each half message from the
        progress on, then commit the new half and op progress.  Returns the checks sent."""
        rnd = _QueueRound(qid, _now_ms(), self.bridge.fetch_consume_offset(TRANS_HALF_TOPIC, qid),
                          self.bridge.fetch_consume_offset(TRANS_OP_HALF_TOPIC, qid))
        if rnd.half_offset < 0 or rnd.op_offset < 0:
            log.error("transaction: bad progress half=%d op=%d for queue %d", rnd.half_offset, rnd.op_offset, qid)
            return 0
        self._read_op_records(qid, rnd.op_offset, rnd.half_offset, rnd.remove_map, rnd.done_op, rnd.resolved_below)
        sent, new_offset = self._scan_half_queue(rnd)
        self._commit_progress(rnd, new_offset)
        return sent

    def _scan_half_queue(self, rnd: _QueueRound) -> tuple[int, int]:
        """Walk the half queue from the progress; (checks sent, the new half progress)."""
        cfg = self.config
        timeout = int(cfg.transactionTimeOut)
        check_max = int(cfg.transactionCheckMax)
        reserved_ms = int(float(cfg.fileReservedTime) * 3600 * 1000)
        qid = rnd.qid
        sent = 0
        i = new_offset = rnd.half_offset
        half_max = self.store.get_max_offset(TRANS_HALF_TOPIC, qid)
        while i < half_max and not self.stopped:
            if _now_ms() - rnd.start_ms > MAX_PROCESS_TIME_LIMIT_MS:
                log.info("transaction: check round of queue %d hit the time limit at offset %d", qid, i)
                break
            if i in rnd.remove_map:
                rnd.done_op.append(rnd.remove_map.pop(i))
                i += 1
                new_offset = i
                continue
            m, next_offset = self._get_half(qid, i)
            if m is None:
                if next_offset <= i:
                    break                                   # nothing more readable now
                log.warning("transaction: half queue %d offset %d unreadable, skipping to %d", qid, i,
                            next_offset)
                i = new_offset = next_offset
                continue
            step = self._check_half(rnd, m, timeout, check_max, reserved_ms)
            if step is None:
                break
            sent += step
            i += 1
            new_offset = i
        return sent, new_offset

    def _check_half(self, rnd: _QueueRound, m: StoredMessage, timeout: int, check_max: int,
                    reserved_ms: int) -> Optional[int]:
        """Settle one unresolved half message: discard it, defer it (immune), or re-append it and check back.
        Returns the checks sent (0 or 1), or None to end the scan here (too young, or a store write failed)."""
        props = m.properties
        times = int(props.get(PROPERTY_TRANSACTION_CHECK_TIMES) or 0)
        age = _now_ms() - m.born_timestamp
        if times >= check_max or age > reserved_ms:
            log.warning("transaction: half message %s (msgId %s) checked %d times, discarding it to "
                        "TRANS_CHECK_MAX_TIME_TOPIC", m.msg_id, props.get(PROPERTY_UNIQ_KEY), times)
            if not self.bridge.put_discard_message(m, m.properties_str):
                return None
            self.discarded += 1
            return 0
        if m.store_timestamp > rnd.start_ms:
            return None     # appended during this round (half_max already bounds the scan)
        immunity = timeout
        immunity_str = props.get(PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS)
        if immunity_str is not None:
            immunity = immunity_time_ms(immunity_str, timeout)
            if age < immunity:
                if not self._defer_immune(m, rnd.remove_map, rnd.done_op, rnd.resolved_below):
                    return None
                return 0
        elif 0 <= age < immunity:
            return None
        if not (age > immunity or age <= -1):
            return None
        new_props = with_properties(props, **{PROPERTY_TRANSACTION_CHECK_TIMES: str(times + 1)})
        r = self.bridge.renew_half_message(m, new_props)
        if not r.ok:
            log.error("transaction: re-appending half message %s failed: %s", m.msg_id, r.status.name)
            return None
        return 1 if self._send_check(m, new_props, r.queue_offset, r.wrote_offsets[0]) else 0

    def _commit_progress(self, rnd: _QueueRound, new_offset: int) -> None:
        """Commit the half progress and the op progress (up to the first op record not yet settled)."""
        if new_offset != rnd.half_offset:
            self.bridge.update_consume_offset(TRANS_HALF_TOPIC, rnd.qid, new_offset)
        new_op_offset = rnd.op_offset
        for off in sorted(rnd.done_op):
            if off == new_op_offset:
                new_op_offset += 1
            elif off > new_op_offset:
                break
        if new_op_offset != rnd.op_offset:
            self.bridge.update_consume_offset(TRANS_OP_HALF_TOPIC, rnd.qid, new_op_offset)

    def _defer_immune(self, m: StoredMessage, remove_map: dict[int, int], done_op: list[int],
                      resolved_below: set[int]) -> bool:
        """Java checkPrepareQueueOffset: a message still inside its immunity time is either already
        resolved (an op record names its original queue offset) or re-appended with
        TRAN_PREPARED_QUEUE_OFFSET so the queue can advance.  False if re-appending failed."""
        prepared = m.properties.get(PROPERTY_TRANSACTION_PREPARED_QUEUE_OFFSET)
        if prepared is None:
            props = with_properties(m.properties, **{PROPERTY_TRANSACTION_PREPARED_QUEUE_OFFSET:
                                                     str(m.queue_offset)})
            return self.bridge.renew_half_message(m, props).ok
        try:
            original = int(prepared)
        except ValueError:
            return True
        if original in remove_map:
            done_op.append(remove_map.pop(original))
            return True
        if original in resolved_below:
            return True
        return self.bridge.renew_half_message(m, m.properties_str).ok

    def _send_check(self, m: StoredMessage, props_str: str, queue_offset: int, phys_offset: int) -> bool:
        """CHECK_TRANSACTION_STATE (oneway) for the re-appended copy to one live producer channel."""
        props = m.properties
        group = props.get(PROPERTY_PRODUCER_GROUP)
        conn = self.ctx.producers.available_channel(group) if group else None
        if conn is None:
            log.warning("transaction: check of msgId %s failed, no live producer channel of group %s",
                        props.get(PROPERTY_UNIQ_KEY), group)
            return False
        host = self.ctx.store_host
        header = {"tranStateTableOffset": str(queue_offset), "commitLogOffset": str(phys_offset),
                  "offsetMsgId": offset_msg_id(host[0], host[1], phys_offset)}
        uniq = props.get(PROPERTY_UNIQ_KEY)
        if uniq is not None:
            header["msgId"] = uniq
            header["transactionId"] = uniq
        topic = props.get(PROPERTY_REAL_TOPIC) or m.topic
        queue_id = int(props.get(PROPERTY_REAL_QUEUE_ID) or m.queue_id)
        copy = StoredMessage(m.store_size, m.magic_code, m.body_crc, m.queue_id, m.flag, queue_offset,
                             phys_offset, m.sys_flag, m.born_timestamp, m.born_host, m.store_timestamp, host,
                             m.reconsume_times, m.prepared_transaction_offset, m.body, m.topic, props_str)
        # Java's renew shares the properties map with the message it checks and sets WAIT=false on it: the
        # producer's check message carries WAIT=false (4.9.8 and 5.5), the renewed half record does not
        body = encode_check_body(copy, topic, queue_id, queue_offset, phys_offset,
                                 edit_properties(props_str, put={"WAIT": "false"}))
        try:
            conn.invoke_oneway(new_request(RequestCode.CHECK_TRANSACTION_STATE, header, body))
        except Exception:
            log.exception("transaction: sending CHECK_TRANSACTION_STATE to %s failed", conn.remote_address)
            return False
        self.checks_sent += 1
        log.info("transaction: CHECK_TRANSACTION_STATE for msgId %s (half offset %d) sent to %s", uniq,
                 queue_offset, conn.remote_address)
        return True
