"""END_TRANSACTION (37): a producer commits or rolls back a half message (README §3.2, §6.8, §6.9).

Java: ``broker/processor/EndTransactionProcessor``.  The half messages, op records and the check-back
progress are :mod:`rmqd.broker.transaction` (the bridge); the check-back service is
:mod:`rmqd.broker.transaction_check`.
"""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Optional

from rmqd.broker.context import BrokerContext
from rmqd.broker.transaction import (PROPERTY_REAL_QUEUE_ID, PROPERTY_REAL_TOPIC,
                                     PROPERTY_PRODUCER_GROUP, TRANSACTION_COMMIT_TYPE, TRANSACTION_NOT_TYPE,
                                     TRANSACTION_ROLLBACK_TYPE, TransactionalMessageBridge, with_properties)
from rmqd.config import BrokerRole
from rmqd.common.constants import TRANS_HALF_TOPIC
from rmqd.remoting.codes import RequestCode, ResponseCode
from rmqd.remoting.command import RemotingCommand, error_response, new_response, require
from rmqd.remoting.dispatch import Dispatcher, ProcessorPool
from rmqd.store.message import MessageToStore, StoredMessage
from rmqd.store.message_store import PutMessageStatus

if TYPE_CHECKING:
    from rmqd.processors.handles import RequestPeer

log = logging.getLogger(__name__)

# status of the final message's put -> (code, remark); a success is answered without a remark
_FINAL_STATUS: dict[PutMessageStatus, tuple[int, str]] = {
    PutMessageStatus.PUT_OK: (ResponseCode.SUCCESS, ""),
    PutMessageStatus.FLUSH_DISK_TIMEOUT: (ResponseCode.SUCCESS, ""),
    PutMessageStatus.FLUSH_SLAVE_TIMEOUT: (ResponseCode.SUCCESS, ""),
    PutMessageStatus.SLAVE_NOT_AVAILABLE: (ResponseCode.SUCCESS, ""),
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


class EndTransactionProcessor:
    """END_TRANSACTION (37); runs in the transaction pool."""

    def __init__(self, ctx: BrokerContext, bridge: TransactionalMessageBridge) -> None:
        self.ctx = ctx
        self.bridge = bridge

    def process(self, conn: RequestPeer, request: RemotingCommand) -> Optional[RemotingCommand]:
        if self.ctx.role is BrokerRole.SLAVE:
            log.warning("END_TRANSACTION from %s refused: this broker is a slave", conn.remote_address)
            return error_response(ResponseCode.SLAVE_NOT_AVAILABLE, "Store is slave mode, can not endTransaction")
        group, state_text, cl_text, kind_text = require(request, "producerGroup", "tranStateTableOffset",
                                                        "commitLogOffset", "commitOrRollback")
        ext = request.ext_fields or {}
        state_offset, cl_offset, kind = int(state_text), int(cl_text), int(kind_text)
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
        assert half is not None         # check_prepare_message refuses a missing half message
        real_topic = half.properties.get("REAL_TOPIC") or half.topic
        if kind == TRANSACTION_ROLLBACK_TYPE:
            self.bridge.put_op_message(half.queue_offset, half.queue_id)
            self.ctx.metrics.messages.on_end_transaction(real_topic, commit=False)
            return new_response()
        final = self.end_message_transaction(half, cl_offset)
        result = self.ctx.store.put_message(final)
        code, remark = _FINAL_STATUS.get(result.status, (ResponseCode.SYSTEM_ERROR, "UNKNOWN_ERROR DEFAULT"))
        if code == ResponseCode.SUCCESS:
            self.bridge.put_op_message(half.queue_offset, half.queue_id)
            self.ctx.metrics.messages.on_end_transaction(real_topic, commit=True, born_ms=half.born_timestamp)
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
        # Java keeps TRAN_MSG=true on the committed message (4.9.8 and 5.5 alike); 5.x drops REAL_TOPIC/REAL_QID
        stored = with_properties(props, **{PROPERTY_REAL_TOPIC: None, PROPERTY_REAL_QUEUE_ID: None})
        sys_flag = (half.sys_flag & ~0xC) | TRANSACTION_COMMIT_TYPE
        return self.bridge.copy_of(half, topic, queue_id, stored, sys_flag, cl_offset)

    def register(self, dispatcher: Dispatcher, pool: ProcessorPool) -> None:
        dispatcher.register(RequestCode.END_TRANSACTION, self.process, pool)
