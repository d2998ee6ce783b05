"""ReceiveMessage (POP): the proxy's ``ReceiveMessageActivity`` checks (invisible time, long-polling time against
the call's deadline, the filter expression), then a pop of the topic (a LITE topic: the client's lite topics),
answered as a stream: the status, the messages, the delivery timestamp."""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, AsyncGenerator

from rmqd.acl.permission import SUB
from rmqd.filter.errors import SQLParseError
from rmqd.filter.message_filter import ExpressionMessageFilter
from rmqd.grpc import validate
from rmqd.grpc.backend import ReceiveRequest
from rmqd.grpc.broker_codes import POP_CODES
from rmqd.grpc.consumer_rpcs import ConsumerRpcs
from rmqd.grpc.convert import duration_ms, ms_to_timestamp
from rmqd.grpc.errors import RpcError, status
from rmqd.grpc.pb import definition_pb2 as d
from rmqd.grpc.pb import service_pb2 as s
from rmqd.pop.codes import PopError
from rmqd.pop.frontend import Busy
from rmqd.store.topic_attributes import is_lite_topic

if TYPE_CHECKING:
    from rmqd.config import BrokerConfig
    from rmqd.grpc.backend import RpcContext
    from rmqd.grpc.bad_input import CauseLog

C = d.Code
MAX_BATCH = 32
DEFAULT_INVISIBLE_MS = 60_000


@dataclass
class ReceiveRpcs(ConsumerRpcs):
    config: BrokerConfig
    causes: CauseLog

    def __post_init__(self) -> None:
        config = self.config
        self.min_invisible_ms = int(config.minInvisibleTimeMillsForRecv)
        self.max_invisible_ms = int(config.maxInvisibleTimeMills)
        self.min_long_polling_ms = int(config.grpcClientConsumerMinLongPollingTimeoutMillis)
        self.max_long_polling_ms = int(config.grpcClientConsumerMaxLongPollingTimeoutMillis)

    async def receive_message(self, request: s.ReceiveMessageRequest,
                              context: RpcContext) -> AsyncGenerator[s.ReceiveMessageResponse, None]:
        try:
            head, messages, invisible = await self._receive(request, context)
        except RpcError as exc:
            yield s.ReceiveMessageResponse(status=status(exc.code, exc.message))
            return
        except Busy as exc:
            yield s.ReceiveMessageResponse(status=status(C.TOO_MANY_REQUESTS, str(exc)))
            return
        except Exception as exc:
            self.causes.exception(f"gRPC ReceiveMessage failed with {type(exc).__name__}", str(exc), exc)
            yield s.ReceiveMessageResponse(status=status(C.INTERNAL_ERROR, f"{type(exc).__name__}: {exc}"))
            return
        yield s.ReceiveMessageResponse(status=head)
        for msg in messages:
            yield s.ReceiveMessageResponse(message=msg)
        if messages:
            yield s.ReceiveMessageResponse(delivery_timestamp=ms_to_timestamp(int(time.time() * 1000)))

    async def _receive(self, request: s.ReceiveMessageRequest,  # noqa: C901
                       context: RpcContext) -> tuple[d.Status, list[d.Message], int]:
        topic, group = request.message_queue.topic.name, request.group.name
        md, peer = self.checks.begin(context, {topic: SUB, f"%RETRY%{group}": SUB}, request)
        cid = md["x-mq-client-id"]
        self.checks.clients.channel(cid, f"{peer[0]}:{peer[1]}")     # seen now
        validate.check_topic(topic)
        validate.check_group(group)
        poll = self.polling_ms(request, context, md)
        tc = await self.lookups.topic(topic)
        sg = await self.lookups.group(group)
        if request.auto_renew:          # a push consumer: not checked (the proxy pops it for its own time and
            # renews it; rmqd renews what the client asked for, and lets it go soon after the client does)
            invisible = duration_ms(request.invisible_duration) if request.HasField("invisible_duration") else 0
            invisible = invisible if invisible > 0 else DEFAULT_INVISIBLE_MS
        else:
            invisible = duration_ms(request.invisible_duration)
            validate.check_invisible_time(invisible, self.min_invisible_ms, self.max_invisible_ms)
        batch = min(request.batch_size, MAX_BATCH)
        msg_filter = None
        fe = request.filter_expression
        if fe.expression and fe.expression.strip() != "*" or fe.type == d.SQL:
            try:
                msg_filter = ExpressionMessageFilter("SQL92" if fe.type == d.SQL else "TAG", fe.expression)
            except (SQLParseError, ValueError) as exc:
                raise RpcError(C.ILLEGAL_FILTER_EXPRESSION, f"filter expression is illegal: {exc}") from None
        if batch <= 0:                  # the broker pops nothing for it
            return status(C.MESSAGE_NOT_FOUND, "no new message"), [], invisible
        rr = ReceiveRequest(cid, sg, tc, request.message_queue.broker.name, batch, invisible, poll,
                            "SQL92" if fe.type == d.SQL else "TAG", fe.expression or "*", msg_filter,
                            f"{peer[0]}:{peer[1]}", request.message_queue.topic.resource_namespace,
                            bool(request.auto_renew))
        try:
            if is_lite_topic(tc):           # 5.5 Lite Mode: the client's lite topics
                got = await self.lite.receive(rr)
            else:
                got = await self.consuming.receive(rr)
        except PopError as exc:
            raise RpcError(POP_CODES.get(exc.code, C.INTERNAL_ERROR), exc.remark) from None
        if not got.messages:
            if got.state == "full":
                return status(C.TOO_MANY_REQUESTS, "too many long-polling receive requests"), [], invisible
            return status(C.MESSAGE_NOT_FOUND, "no new message"), [], invisible
        if request.auto_renew:          # kept invisible while the client works, as the proxy does
            self.renewals.hold(cid, got.holds, invisible)
        return status(C.OK), got.messages, invisible

    def polling_ms(self, request: s.ReceiveMessageRequest, context: RpcContext, md: dict[str, str]) -> int:
        """How long a receive may wait (``ReceiveMessageActivity``): the asked time (or what the deadline leaves
        beyond half the request timeout), held within the long-polling bounds and the call's deadline, less a
        reserve for the answer to reach the client."""
        remaining = context.time_remaining()
        left_ms = None if remaining is None else int(remaining * 1000) - 1000
        if request.HasField("long_polling_timeout"):
            poll = duration_ms(request.long_polling_timeout)
        else:
            poll = self.max_long_polling_ms if left_ms is None else left_ms
        poll = min(max(poll, self.min_long_polling_ms), self.max_long_polling_ms)
        if left_ms is not None and poll > left_ms:
            if left_ms >= min(self.min_long_polling_ms, self.max_long_polling_ms):
                poll = left_ms
            else:
                version = md.get("x-mq-client-version") or ""
                code = C.BAD_REQUEST if not version or version < "5.0.3" else C.ILLEGAL_POLLING_TIME
                raise RpcError(code, "The deadline time remaining is not enough for polling, please check network "
                                     "condition")
        return max(0, poll)
