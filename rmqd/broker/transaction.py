"""Transaction state on the store: half messages, op records and the check progress.

Java: ``broker/transaction/queue/TransactionalMessageBridge`` and ``TransactionalMessageUtil``.

* A send with ``TRAN_MSG=true`` is stored as a *half* message: topic/queue swapped to
  ``RMQ_SYS_TRANS_HALF_TOPIC``/0 with ``REAL_TOPIC``/``REAL_QID`` (and, as 5.x, ``__transactionId__`` = its
  ``UNIQ_KEY``) added and the transaction bits of sysFlag reset to NOT_TYPE, so it sits in the half topic's
  consume queue, invisible to consumers.
* Commit writes the real message (sysFlag COMMIT, preparedTransactionOffset = half offset), then an
  *op* record (``RMQ_SYS_TRANS_OP_HALF_TOPIC``, tag ``d``, body = half queue offset); rollback only
  writes the op record.  The check-back service (:mod:`rmqd.broker.transaction_check`) skips half
  messages that have an op record.  END_TRANSACTION is :mod:`rmqd.processors.transaction`.
"""
from __future__ import annotations

import logging
import time
from typing import Mapping, Optional

from rmqd.broker.context import BrokerContext
from rmqd.common.constants import TRANS_CHECK_MAX_TIME_TOPIC, TRANS_HALF_TOPIC, TRANS_OP_HALF_TOPIC, TRANS_SYS_GROUP
from rmqd.store.message import (MessageToStore, StoredMessage, decode_message, decode_properties,
                                encode_properties, find_property, java_string_hash)
from rmqd.store.message_store import PutMessageResult

log = logging.getLogger(__name__)

REMOVE_TAG = "d"
PROPERTY_TRANSACTION_PREPARED = "TRAN_MSG"
PROPERTY_PRODUCER_GROUP = "PGROUP"
PROPERTY_REAL_TOPIC = "REAL_TOPIC"
PROPERTY_REAL_QUEUE_ID = "REAL_QID"
PROPERTY_TRANSACTION_CHECK_TIMES = "TRANSACTION_CHECK_TIMES"
PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS = "CHECK_IMMUNITY_TIME_IN_SECONDS"
PROPERTY_TRANSACTION_PREPARED_QUEUE_OFFSET = "TRAN_PREPARED_QUEUE_OFFSET"
PROPERTY_UNIQ_KEY = "UNIQ_KEY"
PROPERTY_TRANSACTION_ID = "__transactionId__"     # TransactionalMessageUtil.TRANSACTION_ID (5.x)

TRANSACTION_NOT_TYPE = 0x0
TRANSACTION_COMMIT_TYPE = 0x8
TRANSACTION_ROLLBACK_TYPE = 0xC


def with_properties(props: Mapping[str, str], **changes: Optional[str]) -> str:
    """Encode ``props`` with ``changes`` applied (a None value removes the property)."""
    out = dict(props)
    for k, v in changes.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = v
    return encode_properties(out)


def tags_code(props: Mapping[str, str]) -> int:
    tags = props.get("TAGS")
    return java_string_hash(tags) if tags else 0


class TransactionalMessageBridge:
    """Store access for the transaction module (all calls block: pool / service threads only)."""

    def __init__(self, ctx: BrokerContext) -> None:
        self.ctx = ctx
        self.store = ctx.store
        self.topics = ctx.topics

    # ------------------------------------------------------------------ half messages
    def prepare_half_message(self, msg: MessageToStore) -> MessageToStore:
        """Turn a ``TRAN_MSG=true`` send into its half message (in place; returns it). The half topic's
        config appears with the first half message (Java's checker creates it in its first round)."""
        tcm = self.topics
        if tcm.get(TRANS_HALF_TOPIC) is None:
            tcm.create_topic_in_send_message_back_method(TRANS_HALF_TOPIC, 1, 6, 0)
        extra = f"{PROPERTY_REAL_TOPIC}\x01{msg.topic}\x02{PROPERTY_REAL_QUEUE_ID}\x01{msg.queue_id}"
        props = msg.properties or ""
        uniq = msg.uniq_key or find_property(props, PROPERTY_UNIQ_KEY)
        if uniq:        # 5.x marks every half message with its id, kept on the committed message (not 4.9.8)
            if find_property(props, PROPERTY_TRANSACTION_ID) is not None:
                props = encode_properties({k: v for k, v in decode_properties(props).items()
                                           if k != PROPERTY_TRANSACTION_ID})
            extra = f"{PROPERTY_TRANSACTION_ID}\x01{uniq}\x02{extra}"
        if props and not props.endswith("\x02"):
            props += "\x02"
        msg.properties = props + extra
        msg.topic = TRANS_HALF_TOPIC
        msg.queue_id = 0
        msg.sys_flag &= ~0xC
        return msg

    def look_message(self, phys_offset: int) -> Optional[StoredMessage]:
        """The record at ``phys_offset`` decoded, or None."""
        if phys_offset < 0:
            return None
        raw = self.store.read_message(phys_offset)
        if raw is None:
            return None
        try:
            return decode_message(raw)
        except ValueError as exc:
            log.warning("transaction: undecodable record at %d: %s", phys_offset, exc)
            return None

    def copy_of(self, m: StoredMessage, topic: str, queue_id: int, properties: str,
                sys_flag: Optional[int] = None, prepared_offset: int = 0) -> MessageToStore:
        props = m.properties
        return MessageToStore(topic, queue_id, m.body, properties, m.flag,
                              m.sys_flag if sys_flag is None else sys_flag, m.born_timestamp, m.born_host,
                              self.ctx.store_host, m.reconsume_times, prepared_offset, tags_code(props),
                              props.get("KEYS"), props.get(PROPERTY_UNIQ_KEY))

    def renew_half_message(self, m: StoredMessage, properties: str) -> PutMessageResult:
        """Re-append a half message (with updated properties) at the tail of its half queue."""
        return self.store.put_message(self.copy_of(m, TRANS_HALF_TOPIC, m.queue_id, properties))

    def put_op_message(self, half_queue_offset: int, queue_id: int) -> bool:
        """Op ("remove") record for the half message at ``half_queue_offset``."""
        props = f"TAGS\x01{REMOVE_TAG}\x02WAIT\x01false"
        tcm = self.topics
        if tcm.get(TRANS_OP_HALF_TOPIC) is None:       # created on first use, as Java's bridge does
            tcm.create_topic_in_send_message_back_method(TRANS_OP_HALF_TOPIC, 1, 6, 0)
        host = self.ctx.store_host
        msg = MessageToStore(TRANS_OP_HALF_TOPIC, queue_id, str(half_queue_offset).encode(), props, 0, 0,
                             int(time.time() * 1000), host, host, 0, 0, java_string_hash(REMOVE_TAG))
        r = self.store.put_message(msg)
        if not r.ok:
            log.error("transaction: writing the op record for half offset %d failed: %s %s",
                      half_queue_offset, r.status.name, r.remark)
        return r.ok

    def put_discard_message(self, m: StoredMessage, properties: str) -> bool:
        """Move a half message checked too often to TRANS_CHECK_MAX_TIME_TOPIC."""
        tcm = self.topics
        if tcm.get(TRANS_CHECK_MAX_TIME_TOPIC) is None:
            tcm.create_topic_in_send_message_back_method(TRANS_CHECK_MAX_TIME_TOPIC, 1, 6, 0)
        r = self.store.put_message(self.copy_of(m, TRANS_CHECK_MAX_TIME_TOPIC, 0, properties))
        if not r.ok:
            log.error("transaction: discarding half message %s failed: %s", m.msg_id, r.status.name)
        return r.ok

    # ------------------------------------------------------------------ progress (CID_RMQ_SYS_TRANS)
    def fetch_consume_offset(self, topic: str, queue_id: int) -> int:
        off = self.ctx.offsets.query_offset(TRANS_SYS_GROUP, topic, queue_id)
        if off < 0:
            off = self.store.get_min_offset(topic, queue_id)
        return off

    def update_consume_offset(self, topic: str, queue_id: int, offset: int) -> None:
        self.ctx.offsets.commit_offset(TRANS_SYS_GROUP, TRANS_SYS_GROUP, topic, queue_id, offset)
