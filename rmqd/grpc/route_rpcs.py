"""QueryRoute and QueryAssignment: where a 5.x client sends and which queues a consumer group reads."""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from rmqd.acl.permission import SUB
from rmqd.grpc import validate
from rmqd.grpc.errors import RpcError, status
from rmqd.grpc.lookups import Lookups, accept_types, asked_addresses
from rmqd.grpc.pb import definition_pb2 as d
from rmqd.grpc.pb import service_pb2 as s
from rmqd.grpc.routes import assignments, message_queues
from rmqd.store import group_attributes as ga

if TYPE_CHECKING:
    from rmqd.grpc.backend import Metadata, RpcContext
    from rmqd.grpc.call_checks import CallChecks

C = d.Code


@dataclass
class RouteRpcs:
    checks: CallChecks
    lookups: Lookups
    metadata: Metadata

    async def query_route(self, request: s.QueryRouteRequest, context: RpcContext) -> s.QueryRouteResponse:
        self.checks.begin(context, {}, request)
        tc, route = await self.lookups.route(request.topic.name)
        endpoints = await self.metadata.endpoints(route, asked_addresses(request.endpoints))
        queues = message_queues(route, request.topic, accept_types(tc), endpoints)
        return s.QueryRouteResponse(status=status(C.OK), message_queues=queues)

    async def query_assignment(self, request: s.QueryAssignmentRequest,
                               context: RpcContext) -> s.QueryAssignmentResponse:
        self.checks.begin(context, {request.topic.name: SUB, f"%RETRY%{request.group.name}": SUB}, request)
        validate.check_topic(request.topic.name)
        validate.check_group(request.group.name)
        _, route = await self.lookups.route(request.topic.name)
        sg = await self.metadata.group(request.group.name, create=False)
        fifo = sg is not None and sg.consume_message_orderly
        lite = sg is not None and bool(ga.bind_topic(sg))
        endpoints = await self.metadata.endpoints(route, asked_addresses(request.endpoints))
        # a FIFO group (not a lite one) is assigned each readable queue, any other group queue -1 of each broker
        found = assignments(route, request.topic, endpoints, per_queue=fifo and not lite)
        if not found:
            raise RpcError(C.FORBIDDEN, "no readable queue")
        return s.QueryAssignmentResponse(status=status(C.OK), assignments=found)
