"""``apache.rocketmq.v2.MessagingService``: the 5.x proxy's part, over a :class:`rmqd.grpc.backend.MessagingBackend`
(the broker in this process, :mod:`rmqd.grpc.local_backend`, as the proxy's LOCAL mode; or brokers anywhere over
remoting, :mod:`rmqd.proxy.backend`, as its CLUSTER mode).

Every RPC checks ``x-mq-client-id`` (CLIENT_ID_REQUIRED) and, with ACL on, the ``authorization`` header; the
backend awaits blocking work in bounded executors (TOO_MANY_REQUESTS when full).

Answers follow the 5.5 proxy's (judged by compat_tests/grpc/test_grpc5_probes.py against the Java proxy): its
request checks and texts (:mod:`rmqd.grpc.validate`), the topic message-type check
(:mod:`rmqd.grpc.message_types`), a client's Settings known before its Heartbeat, consumer RPCs and
NotifyClientTermination are served, a consumer group that must exist (lite groups always; others when
``autoCreateSubscriptionGroup`` is off) refused on the Telemetry stream as INVALID_ARGUMENT.
"""
from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING, AsyncIterator, Awaitable, Callable, Hashable, Optional, Protocol, Sequence, TypeVar

import grpc

from rmqd.filter.message_filter import ExpressionMessageFilter
from rmqd.filter.errors import SQLParseError
from rmqd.grpc import auth, message_types, validate
from rmqd.grpc.bad_input import CauseLog, MalformedRequest
from rmqd.grpc.errors import RpcError, proxy_error, status
from rmqd.grpc.backend import ReceiveRequest
from rmqd.grpc.lite import LITE_CLIENT_TYPES
from rmqd.grpc.routes import assignments, message_queues
from rmqd.grpc.clients import (GrpcChannel, GrpcClientManager, Outgoing, TelemetryFailed, parse_transaction_id,
                               producer_group_of, transaction_id_of)
from rmqd.grpc.convert import duration_ms, ms_to_duration, ms_to_timestamp, to_properties
from rmqd.grpc.pb import definition_pb2 as d
from rmqd.grpc.pb import service_pb2 as s
from rmqd.grpc.pb import service_pb2_grpc
from rmqd.acl.permission import PUB, SUB
from rmqd.auth.errors import AuthError
from rmqd.pop.extra_info import ReceiptHandle
from rmqd.pop.frontend import Busy
from rmqd.pop.codes import PopError
from rmqd.remoting.codes import RequestCode, ResponseCode
from rmqd.remoting.command import new_request
from rmqd.store import group_attributes as ga
from rmqd.store.message import encode_properties
from rmqd.store.topic_attributes import is_lite_topic

if TYPE_CHECKING:
    from google.protobuf.message import Message

    from rmqd.grpc.backend import MessagingBackend, RpcContext
    from rmqd.grpc.routes import TopicRoute
    from rmqd.remoting.command import RemotingCommand
    from rmqd.store.metadata import SubscriptionGroupConfig, TopicConfig

R = TypeVar("R")
Q = TypeVar("Q")
R_co = TypeVar("R_co", covariant=True)


class _StatusResponse(Protocol[R_co]):
    """A response message class: made with just a status (an RPC that failed)."""

    __name__: str

    def __call__(self, *, status: d.Status) -> R_co: ...

log = logging.getLogger(__name__)

C = d.Code
MAX_BATCH = 32
DEFAULT_INVISIBLE_MS = 60_000
MAX_RENEW_MS = 3 * 3600 * 1000        # auto-renew keeps a push consumer's message at most this long
# send answers a client retries or tells apart (the proxy's cluster mapping); any other broker refusal is the
# local proxy's INTERNAL_SERVER_ERROR with the broker's remark
_SEND_CODES = {ResponseCode.SYSTEM_BUSY: C.TOO_MANY_REQUESTS, 2017: C.LITE_TOPIC_QUOTA_EXCEEDED}
_FLUSH_CODES: dict[int, tuple[d.Code.ValueType, str]] = {
    ResponseCode.FLUSH_DISK_TIMEOUT: (C.MASTER_PERSISTENCE_TIMEOUT, "FLUSH_DISK_TIMEOUT"),
    ResponseCode.FLUSH_SLAVE_TIMEOUT: (C.SLAVE_PERSISTENCE_TIMEOUT, "FLUSH_SLAVE_TIMEOUT"),
    ResponseCode.SLAVE_NOT_AVAILABLE: (C.HA_NOT_AVAILABLE, "SLAVE_NOT_AVAILABLE")}
_POP_CODES = {ResponseCode.TOPIC_NOT_EXIST: C.TOPIC_NOT_FOUND,
              ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST: C.CONSUMER_GROUP_NOT_FOUND,
              ResponseCode.NO_PERMISSION: C.FORBIDDEN, ResponseCode.NO_MESSAGE: C.INVALID_RECEIPT_HANDLE,
              ResponseCode.MESSAGE_ILLEGAL: C.INVALID_RECEIPT_HANDLE, 29: C.BAD_REQUEST}
#: an ack or a change of invisible time the broker refused (offset out of the queue, queue id out of the topic): the
#: 5.x local proxy turns every refusal into AckStatus.NO_EXIST, answered with these texts
_SETTLE_REFUSED = {ResponseCode.NO_MESSAGE, ResponseCode.MESSAGE_ILLEGAL}
ACK_REFUSED = "ack failed: status is abnormal"
CHANGE_REFUSED = "changeInvisibleDuration failed: status is abnormal"
NO_SETTINGS = "cannot find client settings for this client"
CONSUMER_TYPES = (d.PUSH_CONSUMER, d.SIMPLE_CONSUMER, *LITE_CLIENT_TYPES)
TELEMETRY_FAILED = "process client telemetryCommand failed. "


def topic_not_found(topic: str) -> RpcError:
    """What the proxy answers for a topic without a route (the client library's MQClientException text)."""
    return RpcError(C.TOPIC_NOT_FOUND, f"CODE: 17  DESC: No topic route info in name server for the topic: {topic}\n"
                                       "For more information, please visit the url, "
                                       "https://rocketmq.apache.org/docs/bestPractice/06FAQ")


class _LanguageError(Exception):
    """An ``x-mq-language`` the proxy's ``LanguageCode`` has no constant for."""


def _peer(context: RpcContext) -> tuple[str, int]:
    peer = context.peer() or ""
    addr = peer.split(":", 1)[1] if ":" in peer else peer
    host, _, port = addr.rpartition(":")
    return (host.strip("[]") or "127.0.0.1"), int(port) if port.isdigit() else 0


def _same_peer(host: str, port: int) -> tuple[str, int]:
    return host, port


class MessagingService(service_pb2_grpc.MessagingServiceServicer):
    def __init__(self, backend: "MessagingBackend", endpoint_address: tuple[str, int],
                 peer_of: Callable[[str, int], tuple[str, int]] = _same_peer) -> None:
        """``peer_of``: the client behind a gRPC peer address (the TLS front's loopback connection -> the client)."""
        self.backend = backend
        self.peer_of = peer_of
        c = self.config = backend.config
        self.clients = GrpcClientManager(backend.registry)
        self.address = endpoint_address
        self.min_invisible_ms = int(c.minInvisibleTimeMillsForRecv)
        self.max_invisible_ms = int(c.maxInvisibleTimeMills)
        self.min_long_polling_ms = int(c.grpcClientConsumerMinLongPollingTimeoutMillis)
        self.max_long_polling_ms = int(c.grpcClientConsumerMaxLongPollingTimeoutMillis)
        self.client_idle_s = int(c.grpcClientIdleTimeMills) / 1000.0   # then no more renewals, registrations
        self.inline_acks = backend.inline_acks
        # client id -> {held message's key: (renew key, invisible ms, renew until ms)} (auto-renew)
        self._renewals: dict[str, dict[Hashable, tuple[Hashable, int, int]]] = {}
        self._renew_task: Optional[asyncio.Future[None]] = None
        self.renew_interval_s = 1.0
        self.lite = backend.lite(self)           # 5.5 Lite Mode (rmqd.grpc.lite)
        self.max_lite_topic_size = backend.max_lite_topic_size
        self.causes = CauseLog()                # bad input and unexpected failures: a line per cause and minute

    def close(self) -> None:
        if self._renew_task is not None:
            self._renew_task.cancel()
        self.clients.close_all()
        self.backend.close()

    # ------------------------------------------------------------------ request context
    def _begin(self, context: RpcContext, need: Optional[dict[str, int]] = None,
               request: Optional[Message] = None) -> tuple[dict[str, str], tuple[str, int]]:
        """The call's metadata and peer, once it passed the checks: access control 2.0 on ``request`` first (5.x's
        pipelines run before anything else: UNAUTHORIZED), the client id, then ACL 1.0 on ``need``."""
        # (grpc's binary "-bin" values are bytes: no header read here is one)
        md = {key: value for key, value in (context.invocation_metadata() or ()) if isinstance(value, str)}
        peer = self.peer_of(*_peer(context))
        guard = self.backend.guard
        if guard is not None and request is not None:
            try:
                guard.check_grpc(request, md, peer[0])
            except AuthError as exc:
                raise RpcError(C.UNAUTHORIZED, exc.message) from None
        client_id = md.get("x-mq-client-id")
        if not client_id:
            raise RpcError(C.CLIENT_ID_REQUIRED, "client id cannot be empty")
        self.clients.seen(client_id)
        if need is not None:
            self._authorize(md, peer, need)
        return md, peer

    def _authorize(self, md: dict[str, str], peer: tuple[str, int], need: dict[str, int]) -> None:
        if self.backend.acl_manager is not None:
            try:
                auth.check(self.backend.acl_manager, peer[0], md, need)
            except auth.GrpcAuthError as exc:
                raise RpcError(exc.code, exc.message) from None

    async def _topic(self, name: str) -> TopicConfig:
        """The config of a topic the request names (validated as the proxy does; TOPIC_NOT_FOUND without one)."""
        validate.check_topic(name)
        tc = await self.backend.topic(name)
        if tc is None:
            raise topic_not_found(name)
        return tc

    async def _group(self, name: str) -> SubscriptionGroupConfig:
        """The group's config (made where the brokers auto-create groups)."""
        validate.check_group(name)
        sg = await self.backend.group(name)
        if sg is None:
            raise RpcError(C.CONSUMER_GROUP_NOT_FOUND, f"consumer group not found: {name}")
        return sg

    async def _route(self, topic: str) -> tuple[Optional[TopicConfig], TopicRoute]:
        """(topic config or None, the route): the route of ``topic`` (every broker); TOPIC_NOT_FOUND without one."""
        validate.check_topic(topic)
        tc = await self.backend.topic(topic)
        route = await self.backend.route(topic, tc)
        if route is None:
            raise topic_not_found(topic)
        return tc, route

    @staticmethod
    def _asked(request_endpoints: Optional[d.Endpoints]) -> list[tuple[str, int]]:
        return [(a.host, a.port) for a in request_endpoints.addresses] if request_endpoints is not None else []

    @staticmethod
    def _accept_types(tc: Optional[TopicConfig]) -> list[d.MessageType.ValueType]:
        """The topic's message types (rmqd.grpc.message_types); a topic this broker does not have (another broker's,
        known from the name server) takes the four 4.x-era types: the broker that has it checks each send."""
        return message_types.accept_types(tc) if tc is not None else [d.NORMAL, d.FIFO, d.DELAY, d.TRANSACTION]

    async def _consumer_group(self, name: str, client_type: d.ClientType.ValueType,
                              subscriptions: Sequence[d.SubscriptionEntry]) -> SubscriptionGroupConfig:
        """The group of a consumer registering (Settings, Heartbeat), with the proxy's checks
        (``ClientProcessor.registerConsumer``): it must exist (rmqd creates a plain consumer's group when
        ``autoCreateSubscriptionGroup`` is on; a lite group cannot be made that way), a lite group takes lite
        consumers only and the other way round, and a lite consumer subscribes its group's bind topic."""
        validate.check_group(name)
        lite_mode = client_type in LITE_CLIENT_TYPES
        sg = await self.backend.group(name, create=not lite_mode)
        if sg is None:
            raise RpcError(C.ILLEGAL_CONSUMER_GROUP, f"group not found: {name}")
        bind = ga.bind_topic(sg)
        if not bind and lite_mode:
            raise RpcError(C.ILLEGAL_CONSUMER_GROUP, f"regular group cannot use LITE mode: {name}")
        if bind and not lite_mode:
            raise RpcError(C.ILLEGAL_CONSUMER_GROUP, f"lite group must use LITE mode: {name}")
        if lite_mode and len(subscriptions) and subscriptions[0].topic.name != bind:
            raise RpcError(C.ILLEGAL_TOPIC, f"lite group {name} is expected to bind topic {bind}, "
                                            f"but actual is {subscriptions[0].topic.name}")
        return sg

    @staticmethod
    def _check_language(language: str) -> None:
        """The proxy registers a client under ``LanguageCode.valueOf(x-mq-language)``: one it does not know fails."""
        error = validate.language_error(language)
        if error is not None:
            raise _LanguageError(error)

    @staticmethod
    def _language_refused(language: str) -> None:
        """A unary call that registers or unregisters the client: Java's INTERNAL_SERVER_ERROR for the language."""
        error = validate.language_error(language)
        if error is not None:
            raise RpcError(C.INTERNAL_SERVER_ERROR, f"{error}. IllegalArgumentException. "
                                                    "java.base/java.lang.Enum.valueOf(Enum.java:273)")

    def _settings_of(self, client_id: str) -> d.Settings:
        ch = self.clients.channels.get(client_id)
        if ch is None or ch.settings is None:
            raise RpcError(C.UNRECOGNIZED_CLIENT_TYPE, NO_SETTINGS)
        return ch.settings

    async def _unary(self, fn: Callable[[Q, RpcContext], Awaitable[R]], response_type: _StatusResponse[R], request: Q,
                     context: RpcContext) -> R:
        try:
            return await fn(request, context)
        except RpcError as exc:
            return response_type(status=status(exc.code, exc.message))
        except Busy as exc:
            return response_type(status=status(C.TOO_MANY_REQUESTS, str(exc)))
        except Exception as exc:
            self.causes.exception(f"gRPC {response_type.__name__} failed with {type(exc).__name__}", str(exc), exc)
            return response_type(status=status(C.INTERNAL_ERROR, f"{type(exc).__name__}: {exc}"))

    # ------------------------------------------------------------------ route, heartbeat, assignment
    async def QueryRoute(self, request: s.QueryRouteRequest, context: RpcContext) -> s.QueryRouteResponse:
        return await self._unary(self._query_route, s.QueryRouteResponse, request, context)

    async def _query_route(self, request: s.QueryRouteRequest, context: RpcContext) -> s.QueryRouteResponse:
        self._begin(context, {}, request)
        tc, route = await self._route(request.topic.name)
        endpoints = await self.backend.endpoints(route, self._asked(request.endpoints))
        queues = message_queues(route, request.topic, self._accept_types(tc), endpoints)
        return s.QueryRouteResponse(status=status(C.OK), message_queues=queues)

    async def Heartbeat(self, request: s.HeartbeatRequest, context: RpcContext) -> s.HeartbeatResponse:
        return await self._unary(self._heartbeat, s.HeartbeatResponse, request, context)

    async def _heartbeat(self, request: s.HeartbeatRequest, context: RpcContext) -> s.HeartbeatResponse:
        md, peer = self._begin(context, {}, request)
        settings = self._settings_of(md["x-mq-client-id"])
        ctype = settings.client_type
        if ctype in CONSUMER_TYPES:
            validate.check_group(request.group.name)
            self._language_refused(md.get("x-mq-language", ""))
            await self._consumer_group(request.group.name, ctype, settings.subscription.subscriptions)
        elif ctype == d.PRODUCER:
            self._language_refused(md.get("x-mq-language", ""))
        else:
            raise RpcError(C.UNRECOGNIZED_CLIENT_TYPE, d.ClientType.Name(ctype))
        ch = self.clients.channel(md["x-mq-client-id"], f"{peer[0]}:{peer[1]}")
        self.clients.touch(ch)
        return s.HeartbeatResponse(status=status(C.OK))

    async def QueryAssignment(self, request: s.QueryAssignmentRequest,
                              context: RpcContext) -> s.QueryAssignmentResponse:
        return await self._unary(self._query_assignment, s.QueryAssignmentResponse, request, context)

    async def _query_assignment(self, request: s.QueryAssignmentRequest,
                                context: RpcContext) -> s.QueryAssignmentResponse:
        self._begin(context, {request.topic.name: SUB, f"%RETRY%{request.group.name}": SUB}, request)
        validate.check_topic(request.topic.name)
        validate.check_group(request.group.name)
        _, route = await self._route(request.topic.name)
        sg = await self.backend.group(request.group.name, create=False)
        fifo = sg is not None and sg.consume_message_orderly
        lite = sg is not None and bool(ga.bind_topic(sg))
        endpoints = await self.backend.endpoints(route, self._asked(request.endpoints))
        # a FIFO group (not a lite one) is assigned each readable queue, any other group queue -1 of each broker
        found = assignments(route, request.topic, endpoints, per_queue=fifo and not lite)
        if not found:
            raise RpcError(C.FORBIDDEN, "no readable queue")
        return s.QueryAssignmentResponse(status=status(C.OK), assignments=found)

    # ------------------------------------------------------------------ send
    async def SendMessage(self, request: s.SendMessageRequest, context: RpcContext) -> s.SendMessageResponse:
        return await self._unary(self._send_message, s.SendMessageResponse, request, context)

    async def _send_message(self, request: s.SendMessageRequest, context: RpcContext) -> s.SendMessageResponse:
        md, peer = self._begin(context, request=request)
        if not request.messages:
            raise RpcError(C.MESSAGE_CORRUPTED, "no message to send")
        first = request.messages[0]
        topic = first.topic.name
        validate.check_topic(topic)
        self._authorize(md, peer, {topic: PUB})
        config = self.config
        for m in request.messages:                  # SendMessageActivity.buildMessage, in its order
            if m.topic != first.topic:
                raise RpcError(C.MESSAGE_CORRUPTED, "topic in message is not same")
            validate.check_message(m, config, self.max_lite_topic_size)
        tc = await self.backend.topic(topic)
        message_types.check_send(config, tc, first)
        if tc is None:
            raise topic_not_found(topic)
        entries = []
        single = len(request.messages) == 1
        for m in request.messages:
            request_, transactional = self._send_request(tc, m)
            sp = m.system_properties
            key = (sp.message_group or sp.lite_topic) if single else ""
            resp, broker = await self.backend.send(tc, request_, key, peer)
            entries.append(self._send_result(resp, sp, transactional, broker))
        codes = {e.status.code for e in entries}
        top = status(C.MULTIPLE_RESULTS) if len(codes) > 1 else status(entries[0].status.code)
        return s.SendMessageResponse(status=top, entries=entries)

    @staticmethod
    def _send_request(tc: TopicConfig, m: d.Message) -> tuple[RemotingCommand, bool]:
        """The SEND_MESSAGE request a 4.x client would send for ``m`` (and whether it is transactional), queue -1:
        the backend picks the queue (a message group's or lite topic's as the proxy does)."""
        sp = m.system_properties
        transactional = sp.message_type == d.TRANSACTION
        props = to_properties(m, producer_group_of(tc.topic_name) if transactional else None)
        queue_id = -1
        born = sp.born_timestamp.seconds * 1000 + sp.born_timestamp.nanos // 1_000_000 if sp.HasField(
            "born_timestamp") else int(time.time() * 1000)
        ext = {"producerGroup": props.get("PGROUP", "CID_RMQ_SYS_GRPC"), "topic": tc.topic_name,
               "defaultTopic": "TBW102", "defaultTopicQueueNums": "4", "queueId": str(queue_id),
               "sysFlag": "4" if transactional else "0", "bornTimestamp": str(born), "flag": "0",
               "properties": encode_properties(props), "reconsumeTimes": "0", "unitMode": "false",
               "batch": "false"}
        return new_request(RequestCode.SEND_MESSAGE, ext, m.body), transactional

    @staticmethod
    def _send_result(resp: RemotingCommand, sp: d.SystemProperties, transactional: bool,
                     broker: Optional[str] = None) -> s.SendResultEntry:
        if resp.code in _FLUSH_CODES:
            code, name = _FLUSH_CODES[resp.code]
            return s.SendResultEntry(status=status(code, f"send message failed, sendStatus={name}"))
        if resp.code != ResponseCode.SUCCESS:
            if resp.code in _SEND_CODES:
                raise RpcError(_SEND_CODES[resp.code], resp.remark or "")
            raise proxy_error(C.INTERNAL_SERVER_ERROR, resp.remark or str(resp.code))
        re = resp.ext_fields or {}
        entry = s.SendResultEntry(status=status(C.OK), message_id=sp.message_id,
                                  offset=int(re.get("queueOffset", 0)), transaction_id=sp.message_id,
                                  recall_handle=re.get("recallHandle") or "")
        if transactional:
            cl = int(re["msgId"][-16:], 16)
            entry.transaction_id = transaction_id_of(cl, int(re.get("queueOffset", 0)), sp.message_id, broker)
        return entry

    async def EndTransaction(self, request: s.EndTransactionRequest, context: RpcContext) -> s.EndTransactionResponse:
        return await self._unary(self._end_transaction, s.EndTransactionResponse, request, context)

    async def _end_transaction(self, request: s.EndTransactionRequest, context: RpcContext) -> s.EndTransactionResponse:
        _, peer = self._begin(context, {request.topic.name: PUB}, request)
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
        resp = await self.backend.end_transaction(ext, broker, peer)
        if resp is None or resp.code == ResponseCode.SUCCESS:
            return s.EndTransactionResponse(status=status(C.OK))
        return s.EndTransactionResponse(status=status(C.INVALID_TRANSACTION_ID if resp.code == ResponseCode.SYSTEM_ERROR
                                                      else _SEND_CODES.get(resp.code, C.INTERNAL_ERROR),
                                                      resp.remark or ""))

    # ------------------------------------------------------------------ receive (POP)
    async def ReceiveMessage(self, request: s.ReceiveMessageRequest,
                             context: RpcContext) -> AsyncIterator[s.ReceiveMessageResponse]:
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
        md, peer = self._begin(context, {topic: SUB, f"%RETRY%{group}": SUB}, request)
        cid = md["x-mq-client-id"]
        self.clients.channel(cid, f"{peer[0]}:{peer[1]}")     # seen now
        validate.check_topic(topic)
        validate.check_group(group)
        poll = self._polling_ms(request, context, md)
        tc = await self._topic(topic)
        sg = await self._group(group)
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
                got = await self.backend.receive(rr)
        except PopError as exc:
            raise RpcError(_POP_CODES.get(exc.code, C.INTERNAL_ERROR), exc.remark) from None
        if not got.messages:
            if got.state == "full":
                return status(C.TOO_MANY_REQUESTS, "too many long-polling receive requests"), [], invisible
            return status(C.MESSAGE_NOT_FOUND, "no new message"), [], invisible
        if request.auto_renew:          # kept invisible while the client works, as the proxy does
            until = int(time.time() * 1000) + MAX_RENEW_MS
            mine = self._renewals.setdefault(cid, {})
            for match, renew_key in got.holds:
                mine[match] = (renew_key, invisible, until)
        return status(C.OK), got.messages, invisible

    def _polling_ms(self, request: s.ReceiveMessageRequest, context: RpcContext, md: dict[str, str]) -> int:
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

    # ------------------------------------------------------------------ auto-renew (push consumers)
    def start(self) -> None:
        self.backend.start()
        self._renew_task = asyncio.ensure_future(self._renew_loop())

    async def _renew_loop(self) -> None:
        while True:
            await asyncio.sleep(self.renew_interval_s)
            try:
                for cid in self.clients.expire_idle(self.client_idle_s):
                    self.lite.client_gone(cid, "idle")
                await self._renew_once()
            except asyncio.CancelledError:
                raise
            except Busy:
                pass                       # the next round renews what this one could not
            except Exception:
                log.exception("renewing the invisible time of push consumers' messages failed")

    async def _renew_once(self) -> None:
        """Extend what live push consumers hold and have not acked; a client gone quiet for
        ``grpcClientIdleTimeMills`` (or a message held past MAX_RENEW_MS) is let go, so its messages come back."""
        now = int(time.time() * 1000)
        interval_ms = int(self.renew_interval_s * 1000)
        for cid in list(self._renewals):
            ch = self.clients.channels.get(cid)
            entries = self._renewals[cid]
            if ch is None or ch.closed or time.monotonic() - ch.last_seen > self.client_idle_s:
                del self._renewals[cid]
                continue
            by_invisible: dict[int, dict[Hashable, Hashable]] = {}
            for match, (renew_key, invisible, until) in list(entries.items()):
                if until < now:
                    del entries[match]
                else:
                    by_invisible.setdefault(invisible, {})[renew_key] = match
            for invisible, keys in by_invisible.items():
                still = set(await self.backend.renew(list(keys), invisible, max(2 * interval_ms, invisible // 2)))
                for renew_key, match in keys.items():
                    if renew_key not in still:
                        entries.pop(match, None)
            if not entries:
                self._renewals.pop(cid, None)

    # ------------------------------------------------------------------ ack, invisible time, DLQ
    def _handle(self, client_id: str, group: str, text: str) -> ReceiptHandle:
        """A receipt handle the client sends back, checked as the proxy does: decodable, and not past its
        invisible time unless this endpoint keeps renewing it (a push consumer's message under auto-renew)."""
        h = validate.parse_receipt_handle(text)
        if not self._renewed(client_id, group, h):
            validate.check_not_expired(h, int(time.time() * 1000))
        return h

    def _renewed(self, client_id: str, group: str, h: ReceiptHandle) -> bool:
        mine = self._renewals.get(client_id)
        if not mine:
            return False
        return self.backend.handle_key(group, h) in mine

    async def AckMessage(self, request: s.AckMessageRequest, context: RpcContext) -> s.AckMessageResponse:
        return await self._unary(self._ack, s.AckMessageResponse, request, context)

    async def _ack(self, request: s.AckMessageRequest, context: RpcContext) -> s.AckMessageResponse:
        topic, group = request.topic.name, request.group.name
        md, _ = self._begin(context, {topic: SUB, f"%RETRY%{group}": SUB}, request)
        validate.check_topic(topic)
        validate.check_group(group)
        lite = is_lite_topic(await self._topic(topic))
        await self._group(group)
        if not request.entries:
            raise RpcError(C.INTERNAL_SERVER_ERROR, "ack message result is empty")
        results = []
        for e in request.entries:
            code, msg = C.OK, "OK"
            try:
                h = self._handle(md["x-mq-client-id"], group, e.receipt_handle)
                queue = await self.lite.queue_of(topic, e.lite_topic, h) if lite else topic
                await self.backend.ack(group, queue, h, self.inline_acks)
            except RpcError as exc:
                code, msg = exc.code, exc.message
            except PopError as exc:
                code, msg = (C.INTERNAL_SERVER_ERROR, ACK_REFUSED) if exc.code in _SETTLE_REFUSED else \
                    (_POP_CODES.get(exc.code, C.INTERNAL_ERROR), exc.remark)
            results.append(s.AckMessageResultEntry(message_id=e.message_id, receipt_handle=e.receipt_handle,
                                                   status=status(code, msg)))
        codes = {r.status.code for r in results}
        top = status(C.MULTIPLE_RESULTS) if len(codes) > 1 else status(results[0].status.code)
        return s.AckMessageResponse(status=top, entries=results)

    async def ChangeInvisibleDuration(self, request: s.ChangeInvisibleDurationRequest,
                                      context: RpcContext) -> s.ChangeInvisibleDurationResponse:
        return await self._unary(self._change_invisible, s.ChangeInvisibleDurationResponse, request, context)

    async def _change_invisible(self, request: s.ChangeInvisibleDurationRequest,
                                context: RpcContext) -> s.ChangeInvisibleDurationResponse:
        topic, group = request.topic.name, request.group.name
        md, _ = self._begin(context, {topic: SUB, f"%RETRY%{group}": SUB}, request)
        validate.check_topic(topic)
        validate.check_group(group)
        ms = duration_ms(request.invisible_duration)
        validate.check_invisible_time(ms, 0, self.max_invisible_ms)
        h = self._handle(md["x-mq-client-id"], group, request.receipt_handle)
        lite = is_lite_topic(await self._topic(topic))
        await self._group(group)
        queue = await self.lite.queue_of(topic, request.lite_topic, h) if lite else topic
        try:
            extra = await self.backend.change_invisible(group, queue, h, ms, bool(request.suspend))
        except PopError as exc:
            if exc.code in _SETTLE_REFUSED:
                raise RpcError(C.INTERNAL_SERVER_ERROR, CHANGE_REFUSED) from None
            raise RpcError(_POP_CODES.get(exc.code, C.INTERNAL_ERROR), exc.remark) from None
        return s.ChangeInvisibleDurationResponse(status=status(C.OK),
                                                 receipt_handle=ReceiptHandle(extra, h.commit_log_offset).encode())

    async def ForwardMessageToDeadLetterQueue(self, request: s.ForwardMessageToDeadLetterQueueRequest,
                                              context: RpcContext) -> s.ForwardMessageToDeadLetterQueueResponse:
        return await self._unary(self._forward_to_dlq, s.ForwardMessageToDeadLetterQueueResponse, request, context)

    async def _forward_to_dlq(self, request: s.ForwardMessageToDeadLetterQueueRequest,
                              context: RpcContext) -> s.ForwardMessageToDeadLetterQueueResponse:
        topic, group = request.topic.name, request.group.name
        md, peer = self._begin(context, {topic: SUB, f"%RETRY%{group}": SUB}, request)
        validate.check_topic(topic)
        validate.check_group(group)
        h = self._handle(md["x-mq-client-id"], group, request.receipt_handle)
        lite = is_lite_topic(await self._topic(topic))
        await self._group(group)
        queue = await self.lite.queue_of(topic, request.lite_topic, h) if lite else topic
        ext = {"offset": str(h.commit_log_offset), "group": group, "delayLevel": "-1",
               "originMsgId": request.message_id, "originTopic": topic,
               "maxReconsumeTimes": str(max(0, request.max_delivery_attempts - 1))}
        resp = await self.backend.send_back(ext, h, peer)
        if resp.code != ResponseCode.SUCCESS:
            # the proxy maps the broker's code (most to INTERNAL_SERVER_ERROR) and keeps its remark
            return s.ForwardMessageToDeadLetterQueueResponse(status=status(
                _SEND_CODES.get(resp.code, C.INTERNAL_SERVER_ERROR), resp.remark or str(resp.code)))
        try:
            await self.backend.ack(group, queue, h)
        except PopError as exc:
            log.warning("ack after forwarding %s to the DLQ failed: %s", request.message_id, exc.remark)
        # ResponseBuilder.buildStatus(code, remark): a success without a remark says its code, "0"
        return s.ForwardMessageToDeadLetterQueueResponse(status=status(C.OK, resp.remark or "0"))

    # ------------------------------------------------------------------ telemetry
    async def Telemetry(self, request_iterator: AsyncIterator[s.TelemetryCommand],
                        context: RpcContext) -> AsyncIterator[s.TelemetryCommand]:
        try:
            md, peer = self._begin(context)
        except RpcError as exc:
            yield s.TelemetryCommand(status=status(exc.code, exc.message))
            return
        guard = self.backend.guard
        ch = self.clients.channel(md["x-mq-client-id"], f"{peer[0]}:{peer[1]}")
        ch.language_header = md.get("x-mq-language", "")
        outbox: asyncio.Queue[Outgoing] = asyncio.Queue()
        ch.outbox = outbox

        async def read() -> None:
            try:
                async for cmd in request_iterator:
                    ch.last_seen = time.monotonic()
                    if guard is not None:           # 5.x runs its pipelines on every command of the stream,
                        try:                        # and a refusal is its last answer (the stream completes)
                            guard.check_grpc(cmd, md, peer[0])
                        except AuthError as exc:
                            outbox.put_nowait(s.TelemetryCommand(status=status(C.UNAUTHORIZED, exc.message)))
                            return
                    if cmd.HasField("settings"):
                        try:
                            answer = await self._accept_settings(ch, cmd.settings)
                        except TelemetryFailed as failed:
                            outbox.put_nowait(failed)
                            return
                        except Exception as exc:        # a bug: the proxy's INTERNAL, a line per cause
                            self.causes.exception(f"gRPC Telemetry settings failed with {type(exc).__name__}",
                                                  str(exc), exc)
                            outbox.put_nowait(TelemetryFailed(grpc.StatusCode.INTERNAL, TELEMETRY_FAILED + str(exc)))
                            return
                        outbox.put_nowait(s.TelemetryCommand(status=status(C.OK), settings=answer))
                    elif cmd.HasField("thread_stack_trace") or cmd.HasField("verify_message_result"):
                        pass
            except asyncio.CancelledError:
                raise
            except MalformedRequest:     # noted by rmqd.grpc.bad_input; the call ends as grpc-java ends it
                outbox.put_nowait(TelemetryFailed(grpc.StatusCode.UNKNOWN, ""))
            except Exception as exc:     # the client went away mid-stream
                log.debug("telemetry stream of %s ended: %r", ch.client_id, exc)
            finally:
                outbox.put_nowait(None)

        reader = asyncio.ensure_future(read())
        try:
            while True:
                cmd = await outbox.get()
                if cmd is None:
                    break
                if isinstance(cmd, TelemetryFailed):
                    await context.abort(cmd.code, cmd.details)
                yield cmd
        finally:
            reader.cancel()
            if ch.outbox is outbox:
                ch.outbox = None
                if not ch.closed:        # ended (or cancelled) by the client without NotifyClientTermination
                    self.clients.release(ch)
                self.lite.client_gone(ch.client_id, "telemetry stream ended")

    async def _accept_settings(self, ch: GrpcChannel, settings: d.Settings) -> d.Settings:
        """A client's Settings, checked and registered as the proxy does (``processAndWriteClientSettings``);
        the Settings to answer. Raises :class:`TelemetryFailed` with the status the proxy ends the stream with."""
        kind = settings.WhichOneof("pub_sub")
        if kind is None:
            raise TelemetryFailed(grpc.StatusCode.INVALID_ARGUMENT,
                                   "there is no publishing or subscription data in settings")
        try:
            if kind == "publishing":
                for t in settings.publishing.topics:
                    validate.check_topic(t.name)
                    self._check_language(ch.language_header)
            else:
                validate.check_group(settings.subscription.group.name)
                self._check_language(ch.language_header)
                await self._consumer_group(settings.subscription.group.name, settings.client_type,
                                           settings.subscription.subscriptions)
                if settings.client_type not in CONSUMER_TYPES:
                    raise RpcError(C.INTERNAL_SERVER_ERROR,
                                   f"Client type is not consumer, type: {d.ClientType.Name(settings.client_type)}")
        except RpcError as exc:
            grpc_code = grpc.StatusCode.INVALID_ARGUMENT if C.BAD_REQUEST <= exc.code < C.INTERNAL_ERROR \
                else grpc.StatusCode.INTERNAL
            raise TelemetryFailed(grpc_code, TELEMETRY_FAILED + exc.message) from None
        except _LanguageError as exc:
            raise TelemetryFailed(grpc.StatusCode.INTERNAL, TELEMETRY_FAILED + str(exc)) from None
        self.clients.on_settings(ch, settings)
        return await self._server_settings(settings)

    async def _server_settings(self, client: d.Settings) -> d.Settings:
        """The Settings the server answers with (the proxy's ``GrpcClientSettingsManager``: its producer and
        consumer defaults merged with the group's config; metrics off)."""
        c = self.config
        st = d.Settings()
        st.CopyFrom(client)
        st.request_timeout.CopyFrom(client.request_timeout if client.HasField("request_timeout")
                                    else ms_to_duration(3000))
        if client.HasField("subscription"):
            sg = await self.backend.group(client.subscription.group.name, create=False)
            attempts = (sg.retry_max_times if sg is not None else 16) + 1
            st.backoff_policy.CopyFrom(d.RetryPolicy(max_attempts=attempts, customized_backoff=d.CustomizedBackoff(
                next=[ms_to_duration(ms) for ms in (1000, 5000, 10000, 30000, 60000, 120000, 180000, 240000,
                                                     300000, 360000, 420000, 480000, 540000, 600000, 1200000,
                                                     1800000, 3600000, 7200000)])))
            st.subscription.fifo = bool(sg is not None and sg.consume_message_orderly)
            st.subscription.receive_batch_size = MAX_BATCH
            st.subscription.long_polling_timeout.CopyFrom(ms_to_duration(self.max_long_polling_ms))
            self.lite.fill_settings(st, sg)
        else:
            st.backoff_policy.CopyFrom(d.RetryPolicy(max_attempts=3, exponential_backoff=d.ExponentialBackoff(
                initial=ms_to_duration(10), max=ms_to_duration(1000), multiplier=2.0)))
            st.publishing.max_body_size = int(c.maxMessageSize)
            st.publishing.validate_message_type = message_types.enabled(c)
        st.metric.CopyFrom(d.Metric(on=False))
        return st

    async def NotifyClientTermination(self, request: s.NotifyClientTerminationRequest,
                                      context: RpcContext) -> s.NotifyClientTerminationResponse:
        return await self._unary(self._terminate, s.NotifyClientTerminationResponse, request, context)

    async def _terminate(self, request: s.NotifyClientTerminationRequest,
                         context: RpcContext) -> s.NotifyClientTerminationResponse:
        md, _ = self._begin(context, request=request)
        cid = md["x-mq-client-id"]
        self._language_refused(md.get("x-mq-language", ""))
        settings = self._settings_of(cid)
        if settings.client_type in CONSUMER_TYPES:
            validate.check_group(request.group.name)
        elif settings.client_type != d.PRODUCER:
            raise RpcError(C.UNRECOGNIZED_CLIENT_TYPE, d.ClientType.Name(settings.client_type))
        self.clients.terminate(cid)
        self.lite.client_gone(cid, "client terminated")
        return s.NotifyClientTerminationResponse(status=status(C.OK))

    # ------------------------------------------------------------------ offsets (pull-style API)
    async def GetOffset(self, request: s.GetOffsetRequest, context: RpcContext) -> s.GetOffsetResponse:
        return await self._unary(self._get_offset, s.GetOffsetResponse, request, context)

    async def _get_offset(self, request: s.GetOffsetRequest, context: RpcContext) -> s.GetOffsetResponse:
        mq = request.message_queue
        self._begin(context, {mq.topic.name: SUB}, request)
        await self._topic(mq.topic.name)
        off = await self.backend.get_offset(request.group.name, mq.topic.name, mq.id, mq.broker.name)
        if off < 0:
            raise RpcError(C.OFFSET_NOT_FOUND, "offset not found")
        return s.GetOffsetResponse(status=status(C.OK), offset=off)

    async def UpdateOffset(self, request: s.UpdateOffsetRequest, context: RpcContext) -> s.UpdateOffsetResponse:
        return await self._unary(self._update_offset, s.UpdateOffsetResponse, request, context)

    async def _update_offset(self, request: s.UpdateOffsetRequest, context: RpcContext) -> s.UpdateOffsetResponse:
        mq = request.message_queue
        _, peer = self._begin(context, {mq.topic.name: SUB}, request)
        await self._topic(mq.topic.name)
        await self._group(request.group.name)
        await self.backend.update_offset(f"{peer[0]}:{peer[1]}", request.group.name, mq.topic.name, mq.id,
                                         mq.broker.name, request.offset)
        return s.UpdateOffsetResponse(status=status(C.OK))

    async def QueryOffset(self, request: s.QueryOffsetRequest, context: RpcContext) -> s.QueryOffsetResponse:
        return await self._unary(self._query_offset, s.QueryOffsetResponse, request, context)

    async def _query_offset(self, request: s.QueryOffsetRequest, context: RpcContext) -> s.QueryOffsetResponse:
        mq = request.message_queue
        self._begin(context, {mq.topic.name: SUB}, request)
        await self._topic(mq.topic.name)
        policy = {d.BEGINNING: "BEGINNING", d.END: "END"}.get(request.query_offset_policy, "TIMESTAMP")
        ts = request.timestamp.seconds * 1000 + request.timestamp.nanos // 1_000_000
        off = await self.backend.query_offset(mq.topic.name, mq.id, mq.broker.name, policy, ts)
        return s.QueryOffsetResponse(status=status(C.OK), offset=off)

    async def PullMessage(self, request: s.PullMessageRequest,
                          context: RpcContext) -> AsyncIterator[s.PullMessageResponse]:
        # as the 5.5 proxy, which does not implement it (grpc-java's answer for an unimplemented method)
        await context.abort(grpc.StatusCode.UNIMPLEMENTED,
                            "Method apache.rocketmq.v2.MessagingService/PullMessage is unimplemented")
        yield s.PullMessageResponse()

    async def RecallMessage(self, request: s.RecallMessageRequest, context: RpcContext) -> s.RecallMessageResponse:
        return await self._unary(self._recall, s.RecallMessageResponse, request, context)

    async def _recall(self, request: s.RecallMessageRequest, context: RpcContext) -> s.RecallMessageResponse:
        """Recall a delay message by the handle its send answered (the broker's
        :class:`rmqd.processors.recall.Recaller`, as the proxy's ``ProducerProcessor.recallMessage``: the topic
        must be a DELAY topic, then the broker's checks; a refusal is the proxy's INTERNAL_SERVER_ERROR)."""
        from rmqd.processors.recall import RecallError
        md, peer = self._begin(context, request=request)
        topic = request.topic.name
        validate.check_topic(topic)
        self._authorize(md, peer, {topic: PUB})
        message_types.check_recall(self.config, await self.backend.topic(topic))
        try:
            message_id = await self.backend.recall(topic, request.recall_handle, producer_group_of(topic), peer)
        except RecallError as exc:
            raise proxy_error(C.INTERNAL_SERVER_ERROR, exc.remark) from None
        return s.RecallMessageResponse(status=status(C.OK), message_id=message_id)

    async def SyncLiteSubscription(self, request: s.SyncLiteSubscriptionRequest,
                                   context: RpcContext) -> s.SyncLiteSubscriptionResponse:
        return await self._unary(self._sync_lite, s.SyncLiteSubscriptionResponse, request, context)

    async def _sync_lite(self, request: s.SyncLiteSubscriptionRequest,
                         context: RpcContext) -> s.SyncLiteSubscriptionResponse:
        md, peer = self._begin(context, {request.topic.name: SUB}, request)
        return await self.lite.sync(request, context, md["x-mq-client-id"], f"{peer[0]}:{peer[1]}")
