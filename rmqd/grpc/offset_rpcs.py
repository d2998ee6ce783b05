"""GetOffset, UpdateOffset, QueryOffset: the consumer offsets of the pull-style API (PullMessage itself the 5.5
proxy does not implement)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from rmqd.acl.permission import SUB
from rmqd.grpc.errors import RpcError, status
from rmqd.grpc.pb import definition_pb2 as d
from rmqd.grpc.pb import service_pb2 as s

if TYPE_CHECKING:
    from rmqd.grpc.backend import OffsetAccess, RpcContext
    from rmqd.grpc.call_checks import CallChecks
    from rmqd.grpc.lookups import Lookups

C = d.Code


@dataclass
class OffsetRpcs:
    checks: CallChecks
    lookups: Lookups
    offsets: OffsetAccess

    async def get_offset(self, request: s.GetOffsetRequest, context: RpcContext) -> s.GetOffsetResponse:
        mq = request.message_queue
        self.checks.begin(context, {mq.topic.name: SUB}, request)
        await self.lookups.topic(mq.topic.name)
        off = await self.offsets.get_offset(request.group.name, mq.topic.name, mq.id, mq.broker.name)
        if off < 0:
            raise RpcError(C.OFFSET_NOT_FOUND, "offset not found")
        return s.GetOffsetResponse(status=status(C.OK), offset=off)

    async def update_offset(self, request: s.UpdateOffsetRequest, context: RpcContext) -> s.UpdateOffsetResponse:
        mq = request.message_queue
        _, peer = self.checks.begin(context, {mq.topic.name: SUB}, request)
        await self.lookups.topic(mq.topic.name)
        await self.lookups.group(request.group.name)
        await self.offsets.update_offset(f"{peer[0]}:{peer[1]}", request.group.name, mq.topic.name, mq.id,
                                         mq.broker.name, request.offset)
        return s.UpdateOffsetResponse(status=status(C.OK))

    async def query_offset(self, request: s.QueryOffsetRequest, context: RpcContext) -> s.QueryOffsetResponse:
        mq = request.message_queue
        self.checks.begin(context, {mq.topic.name: SUB}, request)
        await self.lookups.topic(mq.topic.name)
        policy = {d.BEGINNING: "BEGINNING", d.END: "END"}.get(request.query_offset_policy, "TIMESTAMP")
        ts = request.timestamp.seconds * 1000 + request.timestamp.nanos // 1_000_000
        off = await self.offsets.query_offset(mq.topic.name, mq.id, mq.broker.name, policy, ts)
        return s.QueryOffsetResponse(status=status(C.OK), offset=off)
