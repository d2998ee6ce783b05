"""AckMessage, ChangeInvisibleDuration, ForwardMessageToDeadLetterQueue: what a consumer does with a received
message, by the receipt handle it holds (a lite message's: on its lite topic's LMQ)."""
from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Optional, Union

from rmqd.acl.permission import SUB
from rmqd.grpc import validate
from rmqd.grpc.broker_codes import POP_CODES, SEND_CODES, SETTLE_REFUSED
from rmqd.grpc.consumer_rpcs import ConsumerRpcs
from rmqd.grpc.convert import duration_ms
from rmqd.grpc.errors import RpcError, status
from rmqd.grpc.pb import definition_pb2 as d
from rmqd.grpc.pb import service_pb2 as s
from rmqd.pop.codes import PopError
from rmqd.pop.extra_info import ReceiptHandle
from rmqd.remoting.codes import ResponseCode
from rmqd.store.topic_attributes import is_lite_topic

if TYPE_CHECKING:
    from rmqd.grpc.backend import RpcContext

log = logging.getLogger(__name__)

C = d.Code
ACK_REFUSED = "ack failed: status is abnormal"
CHANGE_REFUSED = "changeInvisibleDuration failed: status is abnormal"

#: the requests that name one held message (topic, group, receipt handle, lite topic)
OneMessage = Union[s.ChangeInvisibleDurationRequest, s.ForwardMessageToDeadLetterQueueRequest]


@dataclass
class SettleRpcs(ConsumerRpcs):
    max_invisible_ms: int
    inline_acks: bool

    def _begin(self, context: RpcContext, request: Union[s.AckMessageRequest, OneMessage]
               ) -> tuple[dict[str, str], tuple[str, int]]:
        """The call's checks, then the topic's and group's names."""
        topic, group = request.topic.name, request.group.name
        md, peer = self.checks.begin(context, {topic: SUB, f"%RETRY%{group}": SUB}, request)
        validate.check_topic(topic)
        validate.check_group(group)
        return md, peer

    async def _held(self, md: dict[str, str], request: OneMessage) -> tuple[ReceiptHandle, str]:
        """(the request's receipt handle, checked; the queue its message is in: the topic or a lite topic's LMQ),
        once its topic and group are found."""
        topic, group = request.topic.name, request.group.name
        h = self.renewals.checked_handle(md["x-mq-client-id"], group, request.receipt_handle)
        lite = is_lite_topic(await self.lookups.topic(topic))
        await self.lookups.group(group)
        return h, await self._queue(lite, topic, request.lite_topic, h)

    async def _queue(self, lite: bool, topic: str, lite_topic: Optional[str], h: ReceiptHandle) -> str:
        return await self.lite.queue_of(topic, lite_topic, h) if lite else topic

    async def ack(self, request: s.AckMessageRequest, context: RpcContext) -> s.AckMessageResponse:
        topic, group = request.topic.name, request.group.name
        md, _ = self._begin(context, request)
        lite = is_lite_topic(await self.lookups.topic(topic))
        await self.lookups.group(group)
        if not request.entries:
            raise RpcError(C.INTERNAL_SERVER_ERROR, "ack message result is empty")
        results = []
        for e in request.entries:
            code, msg = C.OK, "OK"
            try:
                h = self.renewals.checked_handle(md["x-mq-client-id"], group, e.receipt_handle)
                queue = await self._queue(lite, topic, e.lite_topic, h)
                await self.consuming.ack(group, queue, h, self.inline_acks)
            except RpcError as exc:
                code, msg = exc.code, exc.message
            except PopError as exc:
                code, msg = (C.INTERNAL_SERVER_ERROR, ACK_REFUSED) if exc.code in SETTLE_REFUSED else \
                    (POP_CODES.get(exc.code, C.INTERNAL_ERROR), exc.remark)
            results.append(s.AckMessageResultEntry(message_id=e.message_id, receipt_handle=e.receipt_handle,
                                                   status=status(code, msg)))
        codes = {r.status.code for r in results}
        top = status(C.MULTIPLE_RESULTS) if len(codes) > 1 else status(results[0].status.code)
        return s.AckMessageResponse(status=top, entries=results)

    async def change_invisible(self, request: s.ChangeInvisibleDurationRequest,
                               context: RpcContext) -> s.ChangeInvisibleDurationResponse:
        md, _ = self._begin(context, request)
        ms = duration_ms(request.invisible_duration)
        validate.check_invisible_time(ms, 0, self.max_invisible_ms)
        h, queue = await self._held(md, request)
        try:
            extra = await self.consuming.change_invisible(request.group.name, queue, h, ms, bool(request.suspend))
        except PopError as exc:
            if exc.code in SETTLE_REFUSED:
                raise RpcError(C.INTERNAL_SERVER_ERROR, CHANGE_REFUSED) from None
            raise RpcError(POP_CODES.get(exc.code, C.INTERNAL_ERROR), exc.remark) from None
        return s.ChangeInvisibleDurationResponse(status=status(C.OK),
                                                 receipt_handle=ReceiptHandle(extra, h.commit_log_offset).encode())

    async def forward_to_dlq(self, request: s.ForwardMessageToDeadLetterQueueRequest,
                             context: RpcContext) -> s.ForwardMessageToDeadLetterQueueResponse:
        topic, group = request.topic.name, request.group.name
        md, peer = self._begin(context, request)
        h, queue = await self._held(md, request)
        ext = {"offset": str(h.commit_log_offset), "group": group, "delayLevel": "-1",
               "originMsgId": request.message_id, "originTopic": topic,
               "maxReconsumeTimes": str(max(0, request.max_delivery_attempts - 1))}
        resp = await self.consuming.send_back(ext, h, peer)
        if resp.code != ResponseCode.SUCCESS:
            # the proxy maps the broker's code (most to INTERNAL_SERVER_ERROR) and keeps its remark
            return s.ForwardMessageToDeadLetterQueueResponse(status=status(
                SEND_CODES.get(resp.code, C.INTERNAL_SERVER_ERROR), resp.remark or str(resp.code)))
        try:
            await self.consuming.ack(group, queue, h)
        except PopError as exc:
            log.warning("ack after forwarding %s to the DLQ failed: %s", request.message_id, exc.remark)
        # ResponseBuilder.buildStatus(code, remark): a success without a remark says its code, "0"
        return s.ForwardMessageToDeadLetterQueueResponse(status=status(C.OK, resp.remark or "0"))
