"""``apache.rocketmq.v2.MessagingService``: the 5.x proxy's part, over a :class:`rmqd.grpc.backend.MessagingBackend`
(the broker in this process, :mod:`rmqd.grpc.local_backend`, as the proxy's LOCAL mode; or brokers anywhere over
remoting, :mod:`rmqd.proxy.backend`, as its CLUSTER mode).

A thin servicer: each RPC is one job's (:mod:`rmqd.grpc.route_rpcs` QueryRoute / QueryAssignment,
:mod:`rmqd.grpc.send_rpcs` SendMessage, :mod:`rmqd.grpc.transaction_rpcs` EndTransaction / RecallMessage,
:mod:`rmqd.grpc.receive_rpcs` ReceiveMessage, :mod:`rmqd.grpc.settle_rpcs` Ack / ChangeInvisibleDuration / DLQ,
:mod:`rmqd.grpc.client_rpcs` Heartbeat / Telemetry / NotifyClientTermination, :mod:`rmqd.grpc.offset_rpcs` the
offsets, :mod:`rmqd.grpc.lite` SyncLiteSubscription), each given only the backend interfaces it uses.

Every RPC checks ``x-mq-client-id`` (CLIENT_ID_REQUIRED) and, with ACL on, the ``authorization`` header
(:mod:`rmqd.grpc.call_checks`); the backend awaits blocking work in bounded executors (TOO_MANY_REQUESTS when
full); push consumers' messages are renewed while held (:mod:`rmqd.grpc.renewals`).

Answers follow the 5.5 proxy's (judged by compat_tests/grpc/test_grpc5_probes.py against the Java proxy): its
request checks and texts (:mod:`rmqd.grpc.validate`), the topic message-type check
(:mod:`rmqd.grpc.message_types`), a client's Settings known before its Heartbeat, consumer RPCs and
NotifyClientTermination are served, a consumer group that must exist (lite groups always; others when
``autoCreateSubscriptionGroup`` is off) refused on the Telemetry stream as INVALID_ARGUMENT.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, AsyncGenerator, AsyncIterator, Awaitable, Callable, TypeVar

import grpc

from rmqd.acl.permission import SUB
from rmqd.grpc.bad_input import CauseLog
from rmqd.grpc.call_checks import CallChecks, PeerOf, StatusResponse, same_peer, unary
from rmqd.grpc.client_rpcs import ClientRpcs
from rmqd.grpc.clients import GrpcClientManager
from rmqd.grpc.lookups import Lookups
from rmqd.grpc.offset_rpcs import OffsetRpcs
from rmqd.grpc.pb import service_pb2 as s
from rmqd.grpc.pb import service_pb2_grpc
from rmqd.grpc.receive_rpcs import ReceiveRpcs
from rmqd.grpc.renewals import Renewals
from rmqd.grpc.route_rpcs import RouteRpcs
from rmqd.grpc.send_rpcs import SendRpcs
from rmqd.grpc.settle_rpcs import SettleRpcs
from rmqd.grpc.transaction_rpcs import TransactionRpcs

if TYPE_CHECKING:
    from rmqd.grpc.backend import MessagingBackend, RpcContext

R = TypeVar("R")
Q = TypeVar("Q")


async def _closing(stream: AsyncGenerator[R, None]) -> AsyncIterator[R]:
    """``stream``'s items, closed (its ``finally`` run) as soon as the caller stops rather than when it is collected:
    grpc.aio serves a streaming RPC by calling an async generator function, so the servicer's streaming methods are
    async generators that delegate through this."""
    try:
        async for item in stream:
            yield item
    finally:
        await stream.aclose()


class MessagingService(service_pb2_grpc.MessagingServiceServicer):
    def __init__(self, backend: MessagingBackend, endpoint_address: tuple[str, int],
                 peer_of: PeerOf = same_peer) -> None:
        """``peer_of``: the client behind a gRPC peer address (the TLS front's loopback connection -> the client)."""
        self.backend = backend
        self.address = endpoint_address
        c = self.config = backend.config
        self.clients = GrpcClientManager(backend.registry)
        self.causes = CauseLog()                # bad input and unexpected failures: a line per cause and minute
        self.lite = backend.lite(self.clients)  # 5.5 Lite Mode (rmqd.grpc.lite)
        checks = self.checks = CallChecks(backend, self.clients, peer_of)
        lookups = Lookups(backend)
        self.renewals = Renewals(self.clients, backend, int(c.grpcClientIdleTimeMills) / 1000.0,
                                 lambda cid: self.lite.client_gone(cid, "idle"))
        self.routes = RouteRpcs(checks, lookups, metadata=backend)
        self.sends = SendRpcs(checks, metadata=backend, producing=backend, config=c,
                              max_lite_topic_size=backend.max_lite_topic_size)
        self.transactions = TransactionRpcs(checks, metadata=backend, producing=backend, config=c)
        self.receives = ReceiveRpcs(checks, lookups, consuming=backend, lite=self.lite, renewals=self.renewals,
                                    config=c, causes=self.causes)
        self.settles = SettleRpcs(checks, lookups, consuming=backend, lite=self.lite, renewals=self.renewals,
                                  max_invisible_ms=int(c.maxInvisibleTimeMills), inline_acks=backend.inline_acks)
        self.sessions = ClientRpcs(checks, lookups, access=backend, metadata=backend, clients=self.clients,
                                   lite=self.lite, config=c, causes=self.causes)
        self.offsets = OffsetRpcs(checks, lookups, offsets=backend)

    def start(self) -> None:
        self.backend.start()
        self.renewals.start()

    def close(self) -> None:
        self.renewals.close()
        self.clients.close_all()
        self.backend.close()

    async def _unary(self, fn: Callable[[Q, RpcContext], Awaitable[R]], response_type: StatusResponse[R], request: Q,
                     context: RpcContext) -> R:
        return await unary(fn, response_type, request, context, self.causes)

    # ------------------------------------------------------------------ route, assignment
    async def QueryRoute(self, request: s.QueryRouteRequest, context: RpcContext) -> s.QueryRouteResponse:
        return await self._unary(self.routes.query_route, s.QueryRouteResponse, request, context)

    async def QueryAssignment(self, request: s.QueryAssignmentRequest,
                              context: RpcContext) -> s.QueryAssignmentResponse:
        return await self._unary(self.routes.query_assignment, s.QueryAssignmentResponse, request, context)

    # ------------------------------------------------------------------ producers
    async def SendMessage(self, request: s.SendMessageRequest, context: RpcContext) -> s.SendMessageResponse:
        return await self._unary(self.sends.send_message, s.SendMessageResponse, request, context)

    async def EndTransaction(self, request: s.EndTransactionRequest, context: RpcContext) -> s.EndTransactionResponse:
        return await self._unary(self.transactions.end_transaction, s.EndTransactionResponse, request, context)

    async def RecallMessage(self, request: s.RecallMessageRequest, context: RpcContext) -> s.RecallMessageResponse:
        return await self._unary(self.transactions.recall, s.RecallMessageResponse, request, context)

    # ------------------------------------------------------------------ consumers
    async def ReceiveMessage(self, request: s.ReceiveMessageRequest,
                             context: RpcContext) -> AsyncIterator[s.ReceiveMessageResponse]:
        async for answer in _closing(self.receives.receive_message(request, context)):
            yield answer

    async def AckMessage(self, request: s.AckMessageRequest, context: RpcContext) -> s.AckMessageResponse:
        return await self._unary(self.settles.ack, s.AckMessageResponse, request, context)

    async def ChangeInvisibleDuration(self, request: s.ChangeInvisibleDurationRequest,
                                      context: RpcContext) -> s.ChangeInvisibleDurationResponse:
        return await self._unary(self.settles.change_invisible, s.ChangeInvisibleDurationResponse, request, context)

    async def ForwardMessageToDeadLetterQueue(self, request: s.ForwardMessageToDeadLetterQueueRequest,
                                              context: RpcContext) -> s.ForwardMessageToDeadLetterQueueResponse:
        return await self._unary(self.settles.forward_to_dlq, s.ForwardMessageToDeadLetterQueueResponse, request,
                                 context)

    # ------------------------------------------------------------------ client sessions
    async def Heartbeat(self, request: s.HeartbeatRequest, context: RpcContext) -> s.HeartbeatResponse:
        return await self._unary(self.sessions.heartbeat, s.HeartbeatResponse, request, context)

    async def Telemetry(self, request_iterator: AsyncIterator[s.TelemetryCommand],
                        context: RpcContext) -> AsyncIterator[s.TelemetryCommand]:
        async for cmd in _closing(self.sessions.telemetry(request_iterator, context)):
            yield cmd

    async def NotifyClientTermination(self, request: s.NotifyClientTerminationRequest,
                                      context: RpcContext) -> s.NotifyClientTerminationResponse:
        return await self._unary(self.sessions.terminate, s.NotifyClientTerminationResponse, request, context)

    # ------------------------------------------------------------------ offsets (pull-style API)
    async def GetOffset(self, request: s.GetOffsetRequest, context: RpcContext) -> s.GetOffsetResponse:
        return await self._unary(self.offsets.get_offset, s.GetOffsetResponse, request, context)

    async def UpdateOffset(self, request: s.UpdateOffsetRequest, context: RpcContext) -> s.UpdateOffsetResponse:
        return await self._unary(self.offsets.update_offset, s.UpdateOffsetResponse, request, context)

    async def QueryOffset(self, request: s.QueryOffsetRequest, context: RpcContext) -> s.QueryOffsetResponse:
        return await self._unary(self.offsets.query_offset, s.QueryOffsetResponse, request, context)

    async def PullMessage(self, request: s.PullMessageRequest,
                          context: RpcContext) -> AsyncIterator[s.PullMessageResponse]:
        # as the 5.5 proxy, which does not implement it (grpc-java's answer for an unimplemented method)
        await context.abort(grpc.StatusCode.UNIMPLEMENTED,
                            "Method apache.rocketmq.v2.MessagingService/PullMessage is unimplemented")
        yield s.PullMessageResponse()

    # ------------------------------------------------------------------ 5.5 Lite Mode
    async def SyncLiteSubscription(self, request: s.SyncLiteSubscriptionRequest,
                                   context: RpcContext) -> s.SyncLiteSubscriptionResponse:
        return await self._unary(self._sync_lite, s.SyncLiteSubscriptionResponse, request, context)

    async def _sync_lite(self, request: s.SyncLiteSubscriptionRequest,
                         context: RpcContext) -> s.SyncLiteSubscriptionResponse:
        md, peer = self.checks.begin(context, {request.topic.name: SUB}, request)
        return await self.lite.sync(request, context, md["x-mq-client-id"], f"{peer[0]}:{peer[1]}")
