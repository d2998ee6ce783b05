"""EndTransaction and RecallMessage: what a 5.x producer does after a send (commit or roll back a half message,
recall a delay message by its handle)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from rmqd.acl.permission import PUB
from rmqd.grpc import message_types, validate
from rmqd.grpc.broker_codes import SEND_CODES
from rmqd.grpc.clients import parse_transaction_id, producer_group_of
from rmqd.grpc.errors import RpcError, proxy_error, status
from rmqd.grpc.pb import definition_pb2 as d
from rmqd.grpc.pb import service_pb2 as s
from rmqd.remoting.codes import ResponseCode

if TYPE_CHECKING:
    from rmqd.config import BrokerConfig
    from rmqd.grpc.backend import Metadata, Producing, RpcContext
    from rmqd.grpc.call_checks import CallChecks

C = d.Code


@dataclass
class TransactionRpcs:
    checks: CallChecks
    metadata: Metadata
    producing: Producing
    config: BrokerConfig

    async def end_transaction(self, request: s.EndTransactionRequest,
                              context: RpcContext) -> s.EndTransactionResponse:
        _, peer = self.checks.begin(context, {request.topic.name: PUB}, request)
        validate.check_topic(request.topic.name)
        if not request.transaction_id.strip():
            raise RpcError(C.INVALID_TRANSACTION_ID, "transaction id cannot be empty")
        try:
            cl, qo, _, broker = parse_transaction_id(request.transaction_id)
        except ValueError:      # the proxy keeps its open transactions by id: one it does not know
            raise proxy_error(C.INTERNAL_SERVER_ERROR, "cannot found transaction data") from None
        if request.resolution not in (d.COMMIT, d.ROLLBACK):     # the broker ignores an end without a resolution
            return s.EndTransactionResponse(status=status(C.OK))
        ext = {"producerGroup": producer_group_of(request.topic.name), "tranStateTableOffset": str(qo),
               "commitLogOffset": str(cl), "commitOrRollback": "8" if request.resolution == d.COMMIT else "12",
               "fromTransactionCheck": "true" if request.source == d.SOURCE_SERVER_CHECK else "false",
               "msgId": request.message_id, "transactionId": request.transaction_id}
        resp = await self.producing.end_transaction(ext, broker, peer)
        if resp is None or resp.code == ResponseCode.SUCCESS:
            return s.EndTransactionResponse(status=status(C.OK))
        return s.EndTransactionResponse(status=status(C.INVALID_TRANSACTION_ID if resp.code == ResponseCode.SYSTEM_ERROR
                                                      else SEND_CODES.get(resp.code, C.INTERNAL_ERROR),
                                                      resp.remark or ""))

    async def recall(self, request: s.RecallMessageRequest, context: RpcContext) -> s.RecallMessageResponse:
        """Recall a delay message by the handle its send answered (the broker's
        :class:`rmqd.processors.recall.Recaller`, as the proxy's ``ProducerProcessor.recallMessage``: the topic
        must be a DELAY topic, then the broker's checks; a refusal is the proxy's INTERNAL_SERVER_ERROR)."""
        from rmqd.processors.recall import RecallError
        md, peer = self.checks.begin(context, request=request)
        topic = request.topic.name
        validate.check_topic(topic)
        self.checks.authorize(md, peer, {topic: PUB})
        message_types.check_recall(self.config, await self.metadata.topic(topic))
        try:
            message_id = await self.producing.recall(topic, request.recall_handle, producer_group_of(topic), peer)
        except RecallError as exc:
            raise proxy_error(C.INTERNAL_SERVER_ERROR, exc.remark) from None
        return s.RecallMessageResponse(status=status(C.OK), message_id=message_id)
