"""Transactional messages: half messages on send, END_TRANSACTION (37) (README §3.2, §6.8, §6.9).

Java: ``broker/transaction/queue/TransactionalMessageBridge``, ``TransactionalMessageServiceImpl``,
``TransactionalMessageUtil`` and ``broker/processor/EndTransactionProcessor``.

* A send with ``TRAN_MSG=true`` is stored as a *half* message: topic/queue swapped to
  ``RMQ_SYS_TRANS_HALF_TOPIC``/0 with ``REAL_TOPIC``/``REAL_QID`` added and the transaction bits of
  sysFlag reset to NOT_TYPE, so it sits in the half topic's consume queue, invisible to consumers.
* Commit writes the real message (sysFlag COMMIT, preparedTransactionOffset = half offset), then an
  *op* record (``RMQ_SYS_TRANS_OP_HALF_TOPIC``, tag ``d``, body = half queue offset); rollback only
  writes the op record.  The check-back service (:mod:`transaction_check`) skips half messages that
  have an op record.
"""
from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any, Optional

from rmqd.remoting.codes import RequestCode, ResponseCode
from rmqd.remoting.command import RemotingCommand, error_response, new_response, require
from rmqd.store.message import (MessageToStore, StoredMessage, decode_message, encode_properties,
                                java_string_hash)
from rmqd.store.message_store import PutMessageResult, PutMessageStatus
from rmqd.store.metadata import TRANS_CHECK_MAX_TIME_TOPIC, TRANS_HALF_TOPIC, TRANS_OP_HALF_TOPIC

if TYPE_CHECKING:
    from rmqd.broker_controller import BrokerController

log = logging.getLogger(__name__)

TRANS_SYS_GROUP = "CID_RMQ_SYS_TRANS"        # progress of the half / op queues
REMOVE_TAG = "d"
PROPERTY_TRANSACTION_PREPARED = "TRAN_MSG"
PROPERTY_PRODUCER_GROUP = "PGROUP"
PROPERTY_REAL_TOPIC = "REAL_TOPIC"
PROPERTY_REAL_QUEUE_ID = "REAL_QID"
PROPERTY_TRANSACTION_CHECK_TIMES = "TRANSACTION_CHECK_TIMES"
PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS = "CHECK_IMMUNITY_TIME_IN_SECONDS"
PROPERTY_TRANSACTION_PREPARED_QUEUE_OFFSET = "TRAN_PREPARED_QUEUE_OFFSET"
PROPERTY_UNIQ_KEY = "UNIQ_KEY"

TRANSACTION_NOT_TYPE = 0x0
TRANSACTION_COMMIT_TYPE = 0x8
TRANSACTION_ROLLBACK_TYPE = 0xC

_FINAL_STATUS = {
    PutMessageStatus.PUT_OK: (ResponseCode.SUCCESS, None),
    PutMessageStatus.FLUSH_DISK_TIMEOUT: (ResponseCode.SUCCESS, None),
    PutMessageStatus.FLUSH_SLAVE_TIMEOUT: (ResponseCode.SUCCESS, None),
    PutMessageStatus.SLAVE_NOT_AVAILABLE: (ResponseCode.SUCCESS, None),
    PutMessageStatus.CREATE_MAPEDFILE_FAILED: (ResponseCode.SYSTEM_ERROR, "Create mapped file failed."),
    PutMessageStatus.MESSAGE_ILLEGAL: (ResponseCode.MESSAGE_ILLEGAL,
                                       "The message is illegal, maybe msg body or properties length not "
                                       "matched. msg body length limit 128k, msg properties length limit 32k."),
    PutMessageStatus.PROPERTIES_SIZE_EXCEEDED: (ResponseCode.MESSAGE_ILLEGAL,
                                                "The message is illegal, maybe msg body or properties length "
                                                "not matched. msg body length limit 128k, msg properties "
                                                "length limit 32k."),
    PutMessageStatus.SERVICE_NOT_AVAILABLE: (ResponseCode.SERVICE_NOT_AVAILABLE, "Service not available now."),
    PutMessageStatus.OS_PAGECACHE_BUSY: (ResponseCode.SYSTEM_ERROR,
                                         "OS page cache busy, please try another machine"),
    PutMessageStatus.UNKNOWN_ERROR: (ResponseCode.SYSTEM_ERROR, "UNKNOWN_ERROR"),
}


def with_properties(props: dict, **changes: Optional[str]) -> str:
    """Encode ``props`` with ``changes`` applied (a None value removes the property)."""
    out = dict(props)
    for k, v in changes.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = v
    return encode_properties(out)


def tags_code(props: dict) -> int:
    tags = props.get("TAGS")
    return java_string_hash(tags) if tags else 0


class TransactionalMessageBridge:
    """Store access for the transaction module (all calls block: pool / service threads only)."""

    def __init__(self, broker: "BrokerController") -> None:
        self.broker = broker
        self.store = broker.store

    # ------------------------------------------------------------------ half messages
    def prepare_half_message(self, msg: MessageToStore) -> MessageToStore:
        """Turn a ``TRAN_MSG=true`` send into its half message (in place; returns it). The half topic's
        config appears with the first half message (Java's checker creates it in its first round)."""
        tcm = self.broker.topic_config_manager
        if tcm.get(TRANS_HALF_TOPIC) is None:
            tcm.create_topic_in_send_message_back_method(TRANS_HALF_TOPIC, 1, 6, 0)
        extra = f"{PROPERTY_REAL_TOPIC}\x01{msg.topic}\x02{PROPERTY_REAL_QUEUE_ID}\x01{msg.queue_id}"
        props = msg.properties or ""
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
                              self.broker.store_host, m.reconsume_times, prepared_offset, tags_code(props),
                              props.get("KEYS"), props.get(PROPERTY_UNIQ_KEY))

    def renew_half_message(self, m: StoredMessage, properties: str) -> PutMessageResult:
        """Re-append a half message (with updated properties) at the tail of its half queue."""
        return self.store.put_message(self.copy_of(m, TRANS_HALF_TOPIC, m.queue_id, properties))

    def put_op_message(self, half_queue_offset: int, queue_id: int) -> bool:
        """Op ("remove") record for the half message at ``half_queue_offset``."""
        props = f"TAGS\x01{REMOVE_TAG}\x02WAIT\x01false"
        tcm = self.broker.topic_config_manager
        if tcm.get(TRANS_OP_HALF_TOPIC) is None:       # created on first use, as Java's bridge does
            tcm.create_topic_in_send_message_back_method(TRANS_OP_HALF_TOPIC, 1, 6, 0)
        host = self.broker.store_host
        msg = MessageToStore(TRANS_OP_HALF_TOPIC, queue_id, str(half_queue_offset).encode(), props, 0, 0,
                             int(time.time() * 1000), host, host, 0, 0, java_string_hash(REMOVE_TAG))
        r = self.store.put_message(msg)
        if not r.ok:
            log.error("transaction: writing the op record for half offset %d failed: %s %s",
                      half_queue_offset, r.status.name, r.remark)
        return r.ok

    def put_discard_message(self, m: StoredMessage, properties: str) -> bool:
        """Move a half message checked too often to TRANS_CHECK_MAX_TIME_TOPIC."""
        tcm = self.broker.topic_config_manager
        if tcm.get(TRANS_CHECK_MAX_TIME_TOPIC) is None:
            tcm.create_topic_in_send_message_back_method(TRANS_CHECK_MAX_TIME_TOPIC, 1, 6, 0)
        r = self.store.put_message(self.copy_of(m, TRANS_CHECK_MAX_TIME_TOPIC, 0, properties))
        if not r.ok:
            log.error("transaction: discarding half message %s failed: %s", m.msg_id, r.status.name)
        return r.ok

    # ------------------------------------------------------------------ progress (CID_RMQ_SYS_TRANS)
    def fetch_consume_offset(self, topic: str, queue_id: int) -> int:
        off = self.broker.consumer_offset_manager.query_offset(TRANS_SYS_GROUP, topic, queue_id)
        if off < 0:
            off = self.store.get_min_offset(topic, queue_id)
        return off

    def update_consume_offset(self, topic: str, queue_id: int, offset: int) -> None:
        self.broker.consumer_offset_manager.commit_offset(TRANS_SYS_GROUP, TRANS_SYS_GROUP, topic, queue_id,
                                                          offset)


class EndTransactionProcessor:
    """END_TRANSACTION (37); runs in the transaction pool."""

    def __init__(self, broker: "BrokerController", bridge: TransactionalMessageBridge) -> None:
        self.broker = broker
        self.bridge = bridge

    def process(self, conn: Any, request: RemotingCommand) -> Optional[RemotingCommand]:
        if self.broker.role_manager.is_slave:
            log.warning("END_TRANSACTION from %s refused: this broker is a slave", conn.remote_address)
            return error_response(ResponseCode.SLAVE_NOT_AVAILABLE, "Store is slave mode, can not endTransaction")
        group, state_offset, cl_offset, kind = require(request, "producerGroup", "tranStateTableOffset",
                                                       "commitLogOffset", "commitOrRollback")
        ext = request.ext_fields or {}
        state_offset, cl_offset, kind = int(state_offset), int(cl_offset), int(kind)
        origin = "check back" if str(ext.get("fromTransactionCheck")).lower() in ("true", "1") else "producer"
        if kind == TRANSACTION_NOT_TYPE:
            log.info("END_TRANSACTION UNKNOW from %s (%s) for msgId %s: nothing to do", conn.remote_address,
                     origin, ext.get("msgId"))
            return new_response()
        if kind not in (TRANSACTION_COMMIT_TYPE, TRANSACTION_ROLLBACK_TYPE):
            log.warning("END_TRANSACTION with unknown commitOrRollback %d from %s", kind, conn.remote_address)
            return new_response()
        half = self.bridge.look_message(cl_offset)
        err = self.check_prepare_message(half, group, state_offset, cl_offset)
        if err is not None:
            log.warning("END_TRANSACTION %s from %s (%s) for msgId %s rejected: %s",
                        "commit" if kind == TRANSACTION_COMMIT_TYPE else "rollback", conn.remote_address,
                        origin, ext.get("msgId"), err.remark)
            return err
        real_topic = half.properties.get("REAL_TOPIC") or half.topic
        if kind == TRANSACTION_ROLLBACK_TYPE:
            self.bridge.put_op_message(half.queue_offset, half.queue_id)
            self.broker.metrics.messages.on_end_transaction(real_topic, commit=False)
            return new_response()
        final = self.end_message_transaction(half, cl_offset)
        result = self.broker.store.put_message(final)
        code, remark = _FINAL_STATUS.get(result.status, (ResponseCode.SYSTEM_ERROR, "UNKNOWN_ERROR DEFAULT"))
        if code == ResponseCode.SUCCESS:
            self.bridge.put_op_message(half.queue_offset, half.queue_id)
            self.broker.metrics.messages.on_end_transaction(real_topic, commit=True, born_ms=half.born_timestamp)
            return new_response()
        log.error("END_TRANSACTION commit of %s: storing the final message failed: %s %s", half.msg_id,
                  result.status.name, result.remark)
        return error_response(code, remark)

    @staticmethod
    def check_prepare_message(half: Optional[StoredMessage], group: str, state_offset: int,
                              cl_offset: int) -> Optional[RemotingCommand]:
        if half is None or half.topic != TRANS_HALF_TOPIC:
            return error_response(ResponseCode.SYSTEM_ERROR, "Find prepared transaction message failed")
        if half.properties.get(PROPERTY_PRODUCER_GROUP) != group:
            return error_response(ResponseCode.SYSTEM_ERROR, "The producer group wrong")
        if half.queue_offset != state_offset:
            return error_response(ResponseCode.SYSTEM_ERROR, "The transaction state table offset wrong")
        if half.commit_log_offset != cl_offset:
            return error_response(ResponseCode.SYSTEM_ERROR, "The commit log offset wrong")
        return None

    def end_message_transaction(self, half: StoredMessage, cl_offset: int) -> MessageToStore:
        """The real message of a committed half message."""
        props = half.properties
        topic = props.get(PROPERTY_REAL_TOPIC) or ""
        queue_id = int(props.get(PROPERTY_REAL_QUEUE_ID) or 0)
        stored = with_properties(props, **{PROPERTY_REAL_TOPIC: None, PROPERTY_REAL_QUEUE_ID: None,
                                           PROPERTY_TRANSACTION_PREPARED: None})
        sys_flag = (half.sys_flag & ~0xC) | TRANSACTION_COMMIT_TYPE
        return self.bridge.copy_of(half, topic, queue_id, stored, sys_flag, cl_offset)


def install(broker: "BrokerController") -> EndTransactionProcessor:
    """Register END_TRANSACTION, the send-side half-message hook and the check-back service."""
    from rmqd.processors.transaction_check import TransactionalMessageCheckService

    bridge = broker.transactional_message_bridge = TransactionalMessageBridge(broker)
    p = broker.end_transaction_processor = EndTransactionProcessor(broker, bridge)
    broker.dispatcher.register(RequestCode.END_TRANSACTION, p.process, broker.pools["transaction"])
    broker.send_processor.prepare_half_message = bridge.prepare_half_message
    service = broker.transaction_check_service = TransactionalMessageCheckService(broker, bridge)
    broker.services.append(service)
    return p
