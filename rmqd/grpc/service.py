"""``apache.rocketmq.v2.MessagingService`` over rmqd's broker (what the 5.x proxy does in LOCAL mode).

Sends and transaction ends become the broker's own SEND_MESSAGE / END_TRANSACTION requests (the
same checks, timers, retry/DLQ and half-message rules as 4.x clients get); receive, ack, change
invisible duration use :class:`rmqd.pop.PopService`, like the remoting POP codes.  Every RPC checks
``x-mq-client-id`` (CLIENT_ID_REQUIRED) and, with ACL on, the ``authorization`` header; blocking work
is awaited in bounded executors (TOO_MANY_REQUESTS when full).
"""
from __future__ import annotations

import asyncio
import logging
import time
from typing import Any, AsyncIterator, Optional

from rmqd.filter.message_filter import ExpressionMessageFilter
from rmqd.filter.errors import SQLParseError
from rmqd.grpc import auth, message_types
from rmqd.grpc.lite import LITE_CLIENT_TYPES, LiteGrpc
from rmqd.grpc.clients import GrpcClientManager, parse_transaction_id, producer_group_of, transaction_id_of
from rmqd.grpc.convert import (RESERVED_USER_KEYS, duration_ms, ms_to_duration, ms_to_timestamp, to_grpc_message,
                               to_properties)
from rmqd.grpc.pb import definition_pb2 as d
from rmqd.grpc.pb import service_pb2 as s
from rmqd.grpc.pb import service_pb2_grpc
from rmqd.acl.permission import PUB, SUB
from rmqd.auth.errors import AuthError
from rmqd.pop.extra_info import ReceiptHandle
from rmqd.pop.frontend import Busy, PopExecutor, pop_with_polling
from rmqd.pop.codes import PopError
from rmqd.remoting.codes import RequestCode, ResponseCode
from rmqd.remoting.command import error_response, new_request
from rmqd.remoting.dispatch import TO_POOL
from rmqd.store.message import decode_message, encode_properties, java_string_hash
from rmqd.store.topic_attributes import is_lite_topic

log = logging.getLogger(__name__)

C = d.Code
MAX_BATCH = 32
FORWARD_TIMEOUT_S = 5.0               # a slave's endpoint waiting for its master's answer to a forwarded send
DEFAULT_INVISIBLE_MS = 60_000
MAX_RENEW_MS = 3 * 3600 * 1000        # auto-renew keeps a push consumer's message at most this long
_SEND_CODES = {ResponseCode.SUCCESS: C.OK, ResponseCode.FLUSH_DISK_TIMEOUT: C.MASTER_PERSISTENCE_TIMEOUT,
               ResponseCode.FLUSH_SLAVE_TIMEOUT: C.SLAVE_PERSISTENCE_TIMEOUT,
               ResponseCode.SLAVE_NOT_AVAILABLE: C.HA_NOT_AVAILABLE, ResponseCode.SYSTEM_BUSY: C.TOO_MANY_REQUESTS,
               ResponseCode.MESSAGE_ILLEGAL: C.BAD_REQUEST, ResponseCode.NO_PERMISSION: C.FORBIDDEN,
               ResponseCode.TOPIC_NOT_EXIST: C.TOPIC_NOT_FOUND,
               ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST: C.CONSUMER_GROUP_NOT_FOUND,
               2017: C.LITE_TOPIC_QUOTA_EXCEEDED}      # LMQ_QUOTA_EXCEEDED (5.5)
_POP_CODES = {ResponseCode.TOPIC_NOT_EXIST: C.TOPIC_NOT_FOUND,
              ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST: C.CONSUMER_GROUP_NOT_FOUND,
              ResponseCode.NO_PERMISSION: C.FORBIDDEN, ResponseCode.NO_MESSAGE: C.INVALID_RECEIPT_HANDLE,
              ResponseCode.MESSAGE_ILLEGAL: C.INVALID_RECEIPT_HANDLE, 29: C.BAD_REQUEST}
_MESSAGE_TYPES = {"NORMAL": [d.NORMAL], "FIFO": [d.FIFO], "DELAY": [d.DELAY], "TRANSACTION": [d.TRANSACTION],
                  "PRIORITY": [d.PRIORITY], "LITE": [d.LITE]}       # MIXED: the four below, never PRIORITY/LITE


def status(code: int, message: str = "") -> Any:
    return d.Status(code=code, message=message or ("OK" if code == C.OK else d.Code.Name(code)))


class RpcError(Exception):
    """Ends an RPC with ``status(code, message)`` in its response."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class GrpcConn:
    """The remoting-connection surface the broker's processors read (peer address)."""

    def __init__(self, peer_host: str, peer_port: int) -> None:
        self.peer_host, self.peer_port = peer_host, peer_port
        self.remote_address = f"{peer_host}:{peer_port}"
        self.closed = False


def _peer(context: Any) -> tuple[str, int]:
    peer = context.peer() or ""
    addr = peer.split(":", 1)[1] if ":" in peer else peer
    host, _, port = addr.rpartition(":")
    return (host.strip("[]") or "127.0.0.1"), int(port) if port.isdigit() else 0


class MessagingService(service_pb2_grpc.MessagingServiceServicer):
    def __init__(self, broker: Any, endpoint_address: tuple[str, int]) -> None:
        self.broker = broker
        self.pop = broker.pop_service
        self.pop_executor: PopExecutor = broker.pop_executor
        c = broker.config
        self.send_executor = PopExecutor(max(2, min(8, int(c.sendMessageThreadPoolNums))),
                                         int(c.popExecutorCapacity), name="grpc-send")
        self.clients = GrpcClientManager(broker)
        self.address = endpoint_address
        self.min_invisible_ms = int(c.minInvisibleTimeMillsForRecv)
        self.max_long_polling_ms = int(c.grpcClientConsumerMaxLongPollingTimeoutMillis)
        self.client_idle_s = int(c.grpcClientIdleTimeMills) / 1000.0   # then no more renewals, registrations
        self.inline_acks = broker.store.config.flush_disk_type == "ASYNC_FLUSH"
        self._renewals: dict[str, dict] = {}       # client id -> {checkpoint key: (invisible ms, renew until ms)}
        self._renew_task: Optional[asyncio.Task] = None
        self.renew_interval_s = 1.0
        self.lite = LiteGrpc(self, broker.lite_priority.manager)     # 5.5 Lite Mode (rmqd.grpc.lite)
        self.max_lite_topic_size = int(broker.lite_priority.lite_config.maxLiteTopicSize)
        self._forward_client = None             # a slave's connection to its master (sends, _forward_send)

    def close(self) -> None:
        if self._renew_task is not None:
            self._renew_task.cancel()
        if self._forward_client is not None:
            self._forward_client.close()
        self.clients.close_all()
        self.send_executor.shutdown()

    # ------------------------------------------------------------------ request context
    def _begin(self, context: Any, need: Optional[dict] = None, request: Any = None) -> tuple[dict, tuple[str, int]]:
        """The call's metadata and peer, once it passed the checks: access control 2.0 on ``request`` first (5.x's
        pipelines run before anything else: UNAUTHORIZED), the client id, then ACL 1.0 on ``need``."""
        md = {m.key: m.value for m in (context.invocation_metadata() or ())}
        peer = _peer(context)
        guard = self.broker.auth.guard
        if guard is not None and request is not None:
            try:
                guard.check_grpc(request, md, peer[0])
            except AuthError as exc:
                raise RpcError(C.UNAUTHORIZED, exc.message) from None
        client_id = md.get("x-mq-client-id")
        if not client_id:
            raise RpcError(C.CLIENT_ID_REQUIRED, "x-mq-client-id is required")
        self.clients.seen(client_id)
        if self.broker.acl_manager is not None:
            try:
                auth.check(self.broker.acl_manager, peer[0], md, need or {})
            except auth.GrpcAuthError as exc:
                raise RpcError(exc.code, exc.message) from None
        return md, peer

    def _topic(self, name: str) -> Any:
        if not name:
            raise RpcError(C.ILLEGAL_TOPIC, "topic name cannot be empty")
        tc = self.broker.topic_config_manager.get(name)
        if tc is None:
            raise RpcError(C.TOPIC_NOT_FOUND, f"topic not found: {name}")
        return tc

    async def _group(self, name: str) -> Any:
        """The group's config; auto-creating one writes subscriptionGroup.json, so that runs off the loop."""
        if not name:
            raise RpcError(C.ILLEGAL_CONSUMER_GROUP, "consumer group cannot be empty")
        groups = self.broker.subscription_group_manager
        sg = groups.table.get(name)
        if sg is None and groups.auto_create:
            sg = await self.send_executor.run(groups.find, name)
        if sg is None:
            raise RpcError(C.CONSUMER_GROUP_NOT_FOUND, f"consumer group not found: {name}")
        return sg

    def _broker_pb(self, request_endpoints: Any = None) -> Any:
        eps = d.Endpoints(scheme=d.IPv4, addresses=[d.Address(host=self.address[0], port=self.address[1])])
        if request_endpoints is not None and request_endpoints.addresses:
            eps = request_endpoints
        return d.Broker(name=self.broker.config.brokerName, id=0, endpoints=eps)

    @staticmethod
    def _accept_types(tc: Any) -> list[int]:
        kind = str((tc.attributes or {}).get("+message.type") or (tc.attributes or {}).get("message.type") or "").upper()
        return _MESSAGE_TYPES.get(kind, [d.NORMAL, d.FIFO, d.DELAY, d.TRANSACTION])

    async def _unary(self, fn: Any, response_type: Any, request: Any, context: Any) -> Any:
        try:
            return await fn(request, context)
        except RpcError as exc:
            return response_type(status=status(exc.code, exc.message))
        except Busy as exc:
            return response_type(status=status(C.TOO_MANY_REQUESTS, str(exc)))
        except Exception as exc:
            log.exception("gRPC %s failed", response_type.__name__)
            return response_type(status=status(C.INTERNAL_ERROR, f"{type(exc).__name__}: {exc}"))

    # ------------------------------------------------------------------ route, heartbeat, assignment
    async def QueryRoute(self, request: Any, context: Any) -> Any:
        return await self._unary(self._query_route, s.QueryRouteResponse, request, context)

    async def _query_route(self, request: Any, context: Any) -> Any:
        self._begin(context, request=request)
        tc = self._topic(request.topic.name)
        broker = self._broker_pb(request.endpoints)
        types = self._accept_types(tc)
        queues = []
        for qid in range(max(tc.read_queue_nums, tc.write_queue_nums)):
            r, w = qid < tc.read_queue_nums and tc.perm & 4, qid < tc.write_queue_nums and tc.perm & 2
            perm = d.READ_WRITE if r and w else d.READ if r else d.WRITE if w else d.NONE
            queues.append(d.MessageQueue(topic=request.topic, id=qid, permission=perm, broker=broker,
                                         accept_message_types=types))
        return s.QueryRouteResponse(status=status(C.OK), message_queues=queues)

    async def Heartbeat(self, request: Any, context: Any) -> Any:
        return await self._unary(self._heartbeat, s.HeartbeatResponse, request, context)

    async def _heartbeat(self, request: Any, context: Any) -> Any:
        md, peer = self._begin(context, request=request)
        if request.HasField("group") and request.group.name and request.client_type != d.PRODUCER:
            await self._group(request.group.name)
        ch = self.clients.channel(md["x-mq-client-id"], f"{peer[0]}:{peer[1]}")
        self.clients.touch(ch)
        return s.HeartbeatResponse(status=status(C.OK))

    async def QueryAssignment(self, request: Any, context: Any) -> Any:
        return await self._unary(self._query_assignment, s.QueryAssignmentResponse, request, context)

    async def _query_assignment(self, request: Any, context: Any) -> Any:
        self._begin(context, {request.topic.name: SUB, f"%RETRY%{request.group.name}": SUB}, request)
        tc = self._topic(request.topic.name)
        await self._group(request.group.name)
        mq = d.MessageQueue(topic=request.topic, id=-1, permission=d.READ_WRITE,
                            broker=self._broker_pb(request.endpoints), accept_message_types=self._accept_types(tc))
        return s.QueryAssignmentResponse(status=status(C.OK), assignments=[d.Assignment(message_queue=mq)])

    # ------------------------------------------------------------------ send
    async def SendMessage(self, request: Any, context: Any) -> Any:
        return await self._unary(self._send_message, s.SendMessageResponse, request, context)

    async def _send_message(self, request: Any, context: Any) -> Any:
        topic = request.messages[0].topic.name if request.messages else ""
        _, peer = self._begin(context, {topic: PUB}, request)
        if not request.messages:
            raise RpcError(C.BAD_REQUEST, "no message to send")
        tc = self._topic(topic)
        if any(m.topic.name != topic for m in request.messages):
            raise RpcError(C.BAD_REQUEST, "messages of one SendMessage must share one topic")
        max_size = int(self.broker.config.maxMessageSize)
        conn = GrpcConn(*peer)
        entries = []
        for m in request.messages:
            sp = m.system_properties
            if not sp.message_id:
                entries.append(s.SendResultEntry(status=status(C.ILLEGAL_MESSAGE_ID, "message id cannot be empty")))
                continue
            if len(m.body) > max_size:
                entries.append(s.SendResultEntry(status=status(
                    C.MESSAGE_BODY_TOO_LARGE, f"message body size exceeds the threshold: {max_size} bytes")))
                continue
            bad = [k for k in m.user_properties if k in RESERVED_USER_KEYS]
            if bad:
                entries.append(s.SendResultEntry(status=status(C.ILLEGAL_MESSAGE_PROPERTY_KEY,
                                                               f"property key {bad[0]} is reserved")))
                continue
            refused = message_types.check(tc, m, self.max_lite_topic_size)      # priority / lite topic
            if refused is not None:
                entries.append(s.SendResultEntry(status=status(*refused), message_id=m.system_properties.message_id))
                continue
            request_, transactional = self._send_request(tc, m)
            master = self._master_to_forward(transactional)
            if master is not None:
                resp = await self._forward_send(master, request_)
                entries.append(self._send_result(resp, m.system_properties, transactional))
                continue
            sp = self.broker.send_processor
            # the broker's send lane rule: a small ASYNC_FLUSH append to an existing topic is a memory copy,
            # answered on the loop; anything that may block goes to the executor
            resp = sp.process_inline(conn, request_)
            if resp is TO_POOL:
                resp = await self.send_executor.run(sp.process, conn, request_)
            entries.append(self._send_result(resp, m.system_properties, transactional))
        codes = {e.status.code for e in entries}
        top = entries[0].status if len(codes) == 1 else status(C.MULTIPLE_RESULTS, "multiple results")
        return s.SendMessageResponse(status=top, entries=entries)

    def _master_to_forward(self, transactional: bool) -> Optional[str]:
        """A slave's endpoint passes a (non-transactional) send on to its master, as the 5.x proxy routes sends to
        the master: a client given every replica's endpoint keeps sending through a failover. None on a master,
        or while a slave knows no master (then the local broker refuses it, and the client retries)."""
        rm = self.broker.role_manager
        if transactional or not rm.is_slave:
            return None
        return rm.master_addr

    async def _forward_send(self, master: str, request: Any) -> Any:
        if self._forward_client is None:
            from rmqd.remoting.client import RemotingClient
            self._forward_client = RemotingClient(signer=self.broker.auth.request_signer())
        try:
            return await self._forward_client.invoke(master, request, FORWARD_TIMEOUT_S)
        except (OSError, ConnectionError, asyncio.TimeoutError) as exc:
            log.warning("gRPC send forwarded to the master %s failed: %r", master, exc)
            return error_response(ResponseCode.SERVICE_NOT_AVAILABLE, f"master {master} unreachable: {exc!r}")

    @staticmethod
    def _send_request(tc: Any, m: Any) -> tuple[Any, bool]:
        """The SEND_MESSAGE request a 4.x client would send for ``m`` (and whether it is transactional)."""
        sp = m.system_properties
        transactional = sp.message_type == d.TRANSACTION
        props = to_properties(m, producer_group_of(tc.topic_name) if transactional else None)
        queue_id = -1
        if sp.HasField("message_group") and sp.message_group:       # FIFO: one group, one queue
            queue_id = abs(java_string_hash(sp.message_group)) % max(1, tc.write_queue_nums)
        born = sp.born_timestamp.seconds * 1000 + sp.born_timestamp.nanos // 1_000_000 if sp.HasField(
            "born_timestamp") else int(time.time() * 1000)
        ext = {"producerGroup": props.get("PGROUP", "CID_RMQ_SYS_GRPC"), "topic": tc.topic_name,
               "defaultTopic": "TBW102", "defaultTopicQueueNums": "4", "queueId": str(queue_id),
               "sysFlag": "4" if transactional else "0", "bornTimestamp": str(born), "flag": "0",
               "properties": encode_properties(props), "reconsumeTimes": "0", "unitMode": "false",
               "batch": "false"}
        return new_request(RequestCode.SEND_MESSAGE, ext, m.body), transactional

    @staticmethod
    def _send_result(resp: Any, sp: Any, transactional: bool) -> Any:
        code = _SEND_CODES.get(resp.code, C.INTERNAL_ERROR)
        if code != C.OK:
            return s.SendResultEntry(status=status(code, resp.remark or ""), message_id=sp.message_id)
        re = resp.ext_fields or {}
        entry = s.SendResultEntry(status=status(C.OK), message_id=sp.message_id, offset=int(re.get("queueOffset", 0)))
        if transactional:
            cl = int(re["msgId"][-16:], 16)
            entry.transaction_id = transaction_id_of(cl, int(re.get("queueOffset", 0)), sp.message_id)
        return entry

    async def EndTransaction(self, request: Any, context: Any) -> Any:
        return await self._unary(self._end_transaction, s.EndTransactionResponse, request, context)

    async def _end_transaction(self, request: Any, context: Any) -> Any:
        _, peer = self._begin(context, {request.topic.name: PUB}, request)
        try:
            cl, qo, _ = parse_transaction_id(request.transaction_id)
        except ValueError:
            raise RpcError(C.INVALID_TRANSACTION_ID, f"transaction id is invalid: {request.transaction_id}") from None
        if request.resolution not in (d.COMMIT, d.ROLLBACK):
            raise RpcError(C.BAD_REQUEST, "resolution must be COMMIT or ROLLBACK")
        ext = {"producerGroup": producer_group_of(request.topic.name), "tranStateTableOffset": str(qo),
               "commitLogOffset": str(cl), "commitOrRollback": "8" if request.resolution == d.COMMIT else "12",
               "fromTransactionCheck": "true" if request.source == d.SOURCE_SERVER_CHECK else "false",
               "msgId": request.message_id, "transactionId": request.transaction_id}
        proc = self.broker.end_transaction_processor
        resp = await self.send_executor.run(proc.process, GrpcConn(*peer),
                                            new_request(RequestCode.END_TRANSACTION, ext))
        if resp is None or resp.code == ResponseCode.SUCCESS:
            return s.EndTransactionResponse(status=status(C.OK))
        return s.EndTransactionResponse(status=status(C.INVALID_TRANSACTION_ID if resp.code == ResponseCode.SYSTEM_ERROR
                                                      else _SEND_CODES.get(resp.code, C.INTERNAL_ERROR),
                                                      resp.remark or ""))

    # ------------------------------------------------------------------ receive (POP)
    async def ReceiveMessage(self, request: Any, context: Any) -> AsyncIterator[Any]:
        try:
            head, messages, invisible = await self._receive(request, context)
        except RpcError as exc:
            yield s.ReceiveMessageResponse(status=status(exc.code, exc.message))
            return
        except Busy as exc:
            yield s.ReceiveMessageResponse(status=status(C.TOO_MANY_REQUESTS, str(exc)))
            return
        yield s.ReceiveMessageResponse(status=head)
        for msg in messages:
            yield s.ReceiveMessageResponse(message=msg)
        if messages:
            yield s.ReceiveMessageResponse(delivery_timestamp=ms_to_timestamp(int(time.time() * 1000)))

    async def _receive(self, request: Any, context: Any) -> tuple[Any, list, int]:
        topic, group = request.message_queue.topic.name, request.group.name
        md, peer = self._begin(context, {topic: SUB, f"%RETRY%{group}": SUB}, request)
        self.clients.channel(md["x-mq-client-id"], f"{peer[0]}:{peer[1]}")     # seen now
        tc = self._topic(topic)
        sg = await self._group(group)
        if request.batch_size <= 0 or request.batch_size > MAX_BATCH:
            raise RpcError(C.BAD_REQUEST, f"batch size {request.batch_size} is out of range (1..{MAX_BATCH})")
        invisible = duration_ms(request.invisible_duration) if request.HasField("invisible_duration") \
            else DEFAULT_INVISIBLE_MS
        if invisible < self.min_invisible_ms:
            raise RpcError(C.ILLEGAL_INVISIBLE_TIME, f"the invisibleTime is too small. min: {self.min_invisible_ms}")
        poll = min(duration_ms(request.long_polling_timeout), self.max_long_polling_ms) \
            if request.HasField("long_polling_timeout") else self.max_long_polling_ms
        remaining = context.time_remaining()
        if remaining is not None:                    # answer before the client's deadline
            poll = min(poll, max(0, int(remaining * 1000) - 1000))
        msg_filter = None
        fe = request.filter_expression
        if fe.expression and fe.expression.strip() != "*" or fe.type == d.SQL:
            try:
                msg_filter = ExpressionMessageFilter("SQL92" if fe.type == d.SQL else "TAG", fe.expression)
            except (SQLParseError, ValueError) as exc:
                raise RpcError(C.ILLEGAL_FILTER_EXPRESSION, f"filter expression is illegal: {exc}") from None
        qid = -1     # as the proxy: a receive pops every queue of the broker, whatever queue the client names
        try:
            if is_lite_topic(tc):           # 5.5 Lite Mode: the client's lite topics
                result, state = await self.lite.receive(md["x-mq-client-id"], sg, topic, request.batch_size,
                                                        invisible, poll, f"{peer[0]}:{peer[1]}")
            else:
                result, state = await pop_with_polling(self.pop, self.pop_executor, group, topic, qid,
                                                       request.batch_size, invisible, msg_filter, 0, poll,
                                                       f"{peer[0]}:{peer[1]}", order=sg.consume_message_orderly)
        except PopError as exc:
            raise RpcError(_POP_CODES.get(exc.code, C.INTERNAL_ERROR), exc.remark) from None
        if not result.messages:
            if state == "full":
                return status(C.TOO_MANY_REQUESTS, "too many long-polling receive requests"), [], invisible
            return status(C.MESSAGE_NOT_FOUND, "no new message"), [], invisible
        out = await self.pop_executor.run(self._to_messages, result.messages, topic, invisible,
                                          request.message_queue.topic.resource_namespace)
        if request.auto_renew:          # a push consumer: kept invisible while it works, as the proxy does
            until = int(time.time() * 1000) + MAX_RENEW_MS
            mine = self._renewals.setdefault(md["x-mq-client-id"], {})
            for pm in result.messages:
                mine[(pm.topic, group, pm.queue_id, pm.extra.ck_queue_offset, pm.extra.pop_time)] = (invisible, until)
        return status(C.OK), out, invisible

    # ------------------------------------------------------------------ auto-renew (push consumers)
    def start(self) -> None:
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
            by_invisible: dict[int, list] = {}
            for key, (invisible, until) in list(entries.items()):
                if until < now:
                    del entries[key]
                else:
                    by_invisible.setdefault(invisible, []).append(key)
            for invisible, keys in by_invisible.items():
                still = set(await self.pop_executor.run(self.pop.renew, keys, invisible,
                                                        max(2 * interval_ms, invisible // 2)))
                for key in keys:
                    if key not in still:
                        entries.pop(key, None)
            if not entries:
                self._renewals.pop(cid, None)

    @staticmethod
    def _to_messages(popped: list, topic: str, invisible: int, namespace: str) -> list:
        """Popped records as 5.x messages (in the executor: decoding is CPU work)."""
        out = []
        for pm in popped:
            m = decode_message(pm.record)
            real = (m.properties.get("RETRY_TOPIC") or topic) if pm.topic.startswith("%RETRY%") else topic
            msg = to_grpc_message(m, real, ReceiptHandle(pm.extra, m.commit_log_offset), invisible, namespace)
            if pm.attempt:                  # an orderly batch handed out again
                msg.system_properties.delivery_attempt = pm.attempt
            out.append(msg)
        return out

    # ------------------------------------------------------------------ ack, invisible time, DLQ
    async def AckMessage(self, request: Any, context: Any) -> Any:
        return await self._unary(self._ack, s.AckMessageResponse, request, context)

    async def _ack(self, request: Any, context: Any) -> Any:
        topic, group = request.topic.name, request.group.name
        self._begin(context, {topic: SUB, f"%RETRY%{group}": SUB}, request)
        lite = is_lite_topic(self._topic(topic))
        await self._group(group)
        if not request.entries:
            raise RpcError(C.BAD_REQUEST, "no entry to ack")
        results = []
        for e in request.entries:
            code, msg = C.OK, "OK"
            try:
                h = ReceiptHandle.parse(e.receipt_handle)
                queue = self.lite.queue_of(topic, e.lite_topic, h.commit_log_offset) if lite else topic
                if self.inline_acks:        # ASYNC_FLUSH: an ack record is a memory copy, done on the loop
                    self.pop.ack(group, queue, h.extra, h.extra.queue_offset)
                else:
                    await self.pop_executor.run(self.pop.ack, group, queue, h.extra, h.extra.queue_offset)
            except RpcError as exc:
                code, msg = exc.code, exc.message
            except ValueError:
                code, msg = C.INVALID_RECEIPT_HANDLE, "receipt handle is invalid"
            except PopError as exc:
                code, msg = _POP_CODES.get(exc.code, C.INTERNAL_ERROR), exc.remark
            results.append(s.AckMessageResultEntry(message_id=e.message_id, receipt_handle=e.receipt_handle,
                                                   status=status(code, msg)))
        codes = {r.status.code for r in results}
        top = results[0].status if len(codes) == 1 else status(C.MULTIPLE_RESULTS, "multiple results")
        return s.AckMessageResponse(status=top, entries=results)

    async def ChangeInvisibleDuration(self, request: Any, context: Any) -> Any:
        return await self._unary(self._change_invisible, s.ChangeInvisibleDurationResponse, request, context)

    async def _change_invisible(self, request: Any, context: Any) -> Any:
        topic, group = request.topic.name, request.group.name
        self._begin(context, {topic: SUB, f"%RETRY%{group}": SUB}, request)
        lite = is_lite_topic(self._topic(topic))
        await self._group(group)
        try:
            h = ReceiptHandle.parse(request.receipt_handle)
        except ValueError:
            raise RpcError(C.INVALID_RECEIPT_HANDLE, "receipt handle is invalid") from None
        ms = duration_ms(request.invisible_duration)
        if ms < 0:
            raise RpcError(C.ILLEGAL_INVISIBLE_TIME, "the invisibleTime cannot be negative")
        queue = self.lite.queue_of(topic, request.lite_topic, h.commit_log_offset) if lite else topic
        try:
            extra = await self.pop_executor.run(self.pop.change_invisible_time, group, queue, h.extra,
                                                h.extra.queue_offset, ms, bool(request.suspend))
        except PopError as exc:
            raise RpcError(_POP_CODES.get(exc.code, C.INTERNAL_ERROR), exc.remark) from None
        return s.ChangeInvisibleDurationResponse(status=status(C.OK),
                                                 receipt_handle=ReceiptHandle(extra, h.commit_log_offset).encode())

    async def ForwardMessageToDeadLetterQueue(self, request: Any, context: Any) -> Any:
        return await self._unary(self._forward_to_dlq, s.ForwardMessageToDeadLetterQueueResponse, request, context)

    async def _forward_to_dlq(self, request: Any, context: Any) -> Any:
        topic, group = request.topic.name, request.group.name
        _, peer = self._begin(context, {topic: SUB, f"%RETRY%{group}": SUB}, request)
        lite = is_lite_topic(self._topic(topic))
        await self._group(group)
        try:
            h = ReceiptHandle.parse(request.receipt_handle)
        except ValueError:
            raise RpcError(C.INVALID_RECEIPT_HANDLE, "receipt handle is invalid") from None
        queue = self.lite.queue_of(topic, request.lite_topic, h.commit_log_offset) if lite else topic
        ext = {"offset": str(h.commit_log_offset), "group": group, "delayLevel": "-1",
               "originMsgId": request.message_id, "originTopic": topic,
               "maxReconsumeTimes": str(max(0, request.max_delivery_attempts - 1))}
        resp = await self.send_executor.run(self.broker.send_back_processor.process, GrpcConn(*peer),
                                            new_request(RequestCode.CONSUMER_SEND_MSG_BACK, ext))
        if resp.code != ResponseCode.SUCCESS:
            return s.ForwardMessageToDeadLetterQueueResponse(status=status(_SEND_CODES.get(resp.code, C.INTERNAL_ERROR),
                                                                           resp.remark or ""))
        try:
            await self.pop_executor.run(self.pop.ack, group, queue, h.extra, h.extra.queue_offset)
        except PopError as exc:
            log.warning("ack after forwarding %s to the DLQ failed: %s", request.message_id, exc.remark)
        return s.ForwardMessageToDeadLetterQueueResponse(status=status(C.OK))

    # ------------------------------------------------------------------ telemetry
    async def Telemetry(self, request_iterator: Any, context: Any) -> AsyncIterator[Any]:
        try:
            md, peer = self._begin(context)
        except RpcError as exc:
            yield s.TelemetryCommand(status=status(exc.code, exc.message))
            return
        guard = self.broker.auth.guard
        ch = self.clients.channel(md["x-mq-client-id"], f"{peer[0]}:{peer[1]}")
        outbox: asyncio.Queue = asyncio.Queue()
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
                        self.clients.on_settings(ch, cmd.settings)
                        outbox.put_nowait(s.TelemetryCommand(status=status(C.OK),
                                                             settings=self._server_settings(cmd.settings)))
                    elif cmd.HasField("thread_stack_trace") or cmd.HasField("verify_message_result"):
                        pass
            except asyncio.CancelledError:
                raise
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
                yield cmd
        finally:
            reader.cancel()
            if ch.outbox is outbox:
                ch.outbox = None
                if not ch.closed:        # ended (or cancelled) by the client without NotifyClientTermination
                    self.clients.release(ch)
                self.lite.client_gone(ch.client_id, "telemetry stream ended")

    def _server_settings(self, client: Any) -> Any:
        """The Settings the server answers with (the proxy's GrpcClientSettingsManager defaults)."""
        st = d.Settings()
        st.CopyFrom(client)
        st.request_timeout.CopyFrom(ms_to_duration(3000))
        if client.HasField("subscription"):
            sg = self.broker.subscription_group_manager.table.get(client.subscription.group.name)
            attempts = (sg.retry_max_times if sg is not None else 16) + 1
            st.backoff_policy.CopyFrom(d.RetryPolicy(max_attempts=attempts, customized_backoff=d.CustomizedBackoff(
                next=[ms_to_duration(ms) for ms in (1000, 5000, 10000, 30000, 60000, 120000, 180000, 240000,
                                                     300000, 360000, 420000, 480000, 540000, 600000, 1200000,
                                                     1800000, 3600000, 7200000)])))
            st.subscription.fifo = bool(sg is not None and sg.consume_message_orderly)
            st.subscription.receive_batch_size = MAX_BATCH
            st.subscription.long_polling_timeout.CopyFrom(ms_to_duration(self.max_long_polling_ms))
            if client.client_type in LITE_CLIENT_TYPES and sg is not None:
                self.lite.fill_settings(st, sg)
        else:
            st.backoff_policy.CopyFrom(d.RetryPolicy(max_attempts=3, exponential_backoff=d.ExponentialBackoff(
                initial=ms_to_duration(10), max=ms_to_duration(1000), multiplier=2.0)))
            st.publishing.max_body_size = int(self.broker.config.maxMessageSize)
            st.publishing.validate_message_type = False
        return st

    async def NotifyClientTermination(self, request: Any, context: Any) -> Any:
        return await self._unary(self._terminate, s.NotifyClientTerminationResponse, request, context)

    async def _terminate(self, request: Any, context: Any) -> Any:
        md, _ = self._begin(context, request=request)
        self.clients.terminate(md["x-mq-client-id"])
        self.lite.client_gone(md["x-mq-client-id"], "client terminated")
        return s.NotifyClientTerminationResponse(status=status(C.OK))

    # ------------------------------------------------------------------ offsets (pull-style API)
    async def GetOffset(self, request: Any, context: Any) -> Any:
        return await self._unary(self._get_offset, s.GetOffsetResponse, request, context)

    async def _get_offset(self, request: Any, context: Any) -> Any:
        mq = request.message_queue
        self._begin(context, {mq.topic.name: SUB}, request)
        self._topic(mq.topic.name)
        off = self.broker.consumer_offset_manager.query_offset(request.group.name, mq.topic.name, mq.id)
        if off < 0:
            raise RpcError(C.OFFSET_NOT_FOUND, "offset not found")
        return s.GetOffsetResponse(status=status(C.OK), offset=off)

    async def UpdateOffset(self, request: Any, context: Any) -> Any:
        return await self._unary(self._update_offset, s.UpdateOffsetResponse, request, context)

    async def _update_offset(self, request: Any, context: Any) -> Any:
        mq = request.message_queue
        _, peer = self._begin(context, {mq.topic.name: SUB}, request)
        self._topic(mq.topic.name)
        await self._group(request.group.name)
        self.broker.consumer_offset_manager.commit_offset(f"{peer[0]}:{peer[1]}", request.group.name, mq.topic.name,
                                                          mq.id, request.offset)
        return s.UpdateOffsetResponse(status=status(C.OK))

    async def QueryOffset(self, request: Any, context: Any) -> Any:
        return await self._unary(self._query_offset, s.QueryOffsetResponse, request, context)

    async def _query_offset(self, request: Any, context: Any) -> Any:
        mq = request.message_queue
        self._begin(context, {mq.topic.name: SUB}, request)
        self._topic(mq.topic.name)
        store = self.broker.store
        if request.query_offset_policy == d.BEGINNING:
            off = store.get_min_offset(mq.topic.name, mq.id)
        elif request.query_offset_policy == d.END:
            off = store.get_max_offset(mq.topic.name, mq.id)
        else:
            ts = request.timestamp.seconds * 1000 + request.timestamp.nanos // 1_000_000
            off = await self.pop_executor.run(store.get_offset_by_time, mq.topic.name, mq.id, ts)
        return s.QueryOffsetResponse(status=status(C.OK), offset=off)

    async def PullMessage(self, request: Any, context: Any) -> AsyncIterator[Any]:
        yield s.PullMessageResponse(status=status(C.NOT_IMPLEMENTED, "PullMessage is not supported by rmqd yet"))

    async def RecallMessage(self, request: Any, context: Any) -> Any:
        return s.RecallMessageResponse(status=status(C.NOT_IMPLEMENTED, "RecallMessage is not supported by rmqd"))

    async def SyncLiteSubscription(self, request: Any, context: Any) -> Any:
        return await self._unary(self._sync_lite, s.SyncLiteSubscriptionResponse, request, context)

    async def _sync_lite(self, request: Any, context: Any) -> Any:
        md, peer = self._begin(context, {request.topic.name: SUB}, request)
        return await self.lite.sync(request, context, md["x-mq-client-id"], f"{peer[0]}:{peer[1]}")
