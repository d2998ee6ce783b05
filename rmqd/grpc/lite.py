"""Lite Mode over gRPC (5.5): what the 5.x proxy adds for LitePushConsumer / LiteSimpleConsumer.

:class:`rmqd.grpc.service.MessagingService` delegates here: ``SyncLiteSubscription``; the Settings a lite
consumer gets (``lite_subscription_quota`` from the group's ``lite.sub.client.quota``, ``max_lite_topic_size`` from
``maxLiteTopicSize``); ReceiveMessage on a LITE topic (the client's lite topics, long polling keyed by
client id); the LMQ an ack / change-invisible / DLQ forward of a lite message applies to; and
NotifyUnsubscribeLite on the client's Telemetry stream when an Exclusive group evicts it. The registry and
delivery rules are :class:`rmqd.lite.subscriptions.LiteSubscriptionManager`'s.
"""
from __future__ import annotations

import asyncio
import functools
import logging
from typing import TYPE_CHECKING, Callable, Optional, Protocol

from rmqd.grpc.errors import RpcError
from rmqd.grpc.pb import definition_pb2 as d
from rmqd.grpc.pb import service_pb2 as s
from rmqd.grpc import validate
from rmqd.lite.subscriptions import QUOTA_SLACK, LiteError, LiteSubscriptionManager, OffsetOption
from rmqd.store import group_attributes as ga
from rmqd.grpc.backend import Metadata, Received, ReceiveRequest
from rmqd.store.lite.names import LITE_TOPIC_PROPERTY, check_name, lmq_name
from rmqd.store.message import decode_message

if TYPE_CHECKING:
    from rmqd.grpc.backend import RpcContext
    from rmqd.grpc.clients import GrpcClientManager
    from rmqd.pop.extra_info import ReceiptHandle
    from rmqd.pop.frontend import PopExecutor
    from rmqd.pop.service import PoppedMessage, PopResult, PopService
    from rmqd.store.metadata import SubscriptionGroupConfig

log = logging.getLogger(__name__)

C = d.Code
CODES: dict[str, d.Code.ValueType] = {
         LiteError.ILLEGAL_LITE_TOPIC: C.ILLEGAL_LITE_TOPIC, LiteError.ILLEGAL_TOPIC: C.ILLEGAL_TOPIC,
         LiteError.ILLEGAL_GROUP: C.ILLEGAL_CONSUMER_GROUP, LiteError.TOPIC_NOT_FOUND: C.TOPIC_NOT_FOUND,
         LiteError.GROUP_NOT_FOUND: C.CONSUMER_GROUP_NOT_FOUND, LiteError.FORBIDDEN: C.FORBIDDEN,
         LiteError.SUBSCRIPTION_QUOTA: C.LITE_SUBSCRIPTION_QUOTA_EXCEEDED,
         LiteError.TOPIC_QUOTA: C.LITE_TOPIC_QUOTA_EXCEEDED, LiteError.TOO_MANY_REQUESTS: C.TOO_MANY_REQUESTS,
         LiteError.BAD_REQUEST: C.BAD_REQUEST}
LITE_CLIENT_TYPES = (d.LITE_PUSH_CONSUMER, d.LITE_SIMPLE_CONSUMER)


def offset_option(request: s.SyncLiteSubscriptionRequest) -> Optional[OffsetOption]:
    if not request.HasField("offset_option"):
        return None
    opt = request.offset_option
    kind = opt.WhichOneof("offset_type")
    if kind == "offset":
        return OffsetOption(offset=opt.offset)
    if kind == "tail_n":
        return OffsetOption(tail_n=opt.tail_n)
    if kind == "timestamp":
        return OffsetOption(timestamp=opt.timestamp)
    return OffsetOption(policy=d.OffsetOption.Policy.Name(opt.policy) if kind == "policy" else "LAST")


async def proxy_checks(request: s.SyncLiteSubscriptionRequest, names: list[str], backend: Metadata,
                       max_lite_topic_size: int) -> SubscriptionGroupConfig:
    """What the proxy refuses before the broker sees a SyncLiteSubscription (``ClientActivity`` and
    ``ClientProcessor.syncLiteSubscription``), with its texts: names, group, bind topic, the +300 quota. Returns the
    group's config."""
    topic, group = request.topic.name, request.group.name
    validate.check_topic(topic)
    validate.check_group(group)
    if request.action == d.PARTIAL_ADD:
        for name in dict.fromkeys(names):
            validate.check_lite_topic(name, max_lite_topic_size)
    sg = await backend.group(group, create=False)
    if sg is None:
        raise RpcError(C.ILLEGAL_CONSUMER_GROUP, f"group not found: {group}")
    bind = ga.bind_topic(sg)
    if bind != topic:
        raise RpcError(C.ILLEGAL_TOPIC, f"lite group {group} is expected to bind topic {bind or 'null'}, "
                                        f"but actual is {topic}")
    quota = ga.get_int(sg, ga.LITE_CLIENT_QUOTA)
    if names and len(set(names)) > quota + QUOTA_SLACK:
        raise RpcError(C.LITE_SUBSCRIPTION_QUOTA_EXCEEDED, f"lite subscription quota exceeded: {quota}")
    return sg


class LiteBackend(Metadata, Protocol):
    """What the lite RPCs use of the broker in this process (:class:`rmqd.grpc.local_backend.LocalBackend`): groups,
    POP and its executor, the conversion of popped messages, and stored records."""

    @property
    def pop(self) -> PopService: ...

    @property
    def pop_executor(self) -> PopExecutor: ...

    async def received(self, result: PopResult, state: str, rr: ReceiveRequest) -> Received: ...

    def read_message(self, commit_log_offset: int) -> Optional[bytes]: ...


class LiteGrpc:
    """The lite RPCs and hooks of one MessagingService."""

    def __init__(self, clients: GrpcClientManager, manager: LiteSubscriptionManager, backend: LiteBackend) -> None:
        """``clients``: the service's client sessions (their Telemetry streams)."""
        self.clients = clients
        self.manager = manager
        self.backend = backend

    def error(self, exc: LiteError) -> tuple[d.Code.ValueType, str]:
        return CODES.get(exc.kind, C.INTERNAL_ERROR), exc.message

    # ------------------------------------------------------------------ SyncLiteSubscription
    def _notifier(self, client_id: str) -> Callable[[str], None]:
        return functools.partial(self.clients.notify_unsubscribe_lite, client_id)

    async def sync(self, request: s.SyncLiteSubscriptionRequest, context: RpcContext, client_id: str,
                   peer: str) -> s.SyncLiteSubscriptionResponse:
        names = list(request.lite_topic_set)
        await self._proxy_checks(request, names)
        try:
            self.manager.sync(client_id, request.group.name, request.topic.name, int(request.action), names,
                              offset_option(request), peer, self._notifier(client_id))
        except LiteError as exc:
            code, message = self.error(exc)
            return s.SyncLiteSubscriptionResponse(status=d.Status(code=code, message=message))
        return s.SyncLiteSubscriptionResponse(status=d.Status(code=C.OK, message="OK"))

    async def _proxy_checks(self, request: s.SyncLiteSubscriptionRequest, names: list[str]) -> None:
        await proxy_checks(request, names, self.backend, int(self.manager.config.maxLiteTopicSize))

    # ------------------------------------------------------------------ settings
    def fill_settings(self, settings: d.Settings, group_config: Optional[SubscriptionGroupConfig]) -> None:
        """A consumer's lite settings (the proxy merges them into every consumer's): the group's
        ``lite.sub.client.quota`` as it is (2000 by default, -1 unlimited) and the max lite topic size."""
        settings.subscription.lite_subscription_quota = ga.get_int(group_config, ga.LITE_CLIENT_QUOTA)
        settings.subscription.max_lite_topic_size = int(self.manager.config.maxLiteTopicSize)

    # ------------------------------------------------------------------ receive
    async def receive(self, rr: ReceiveRequest) -> Received:
        """Pop the client's lite topics; park (keyed by client id) up to ``poll_ms`` when none has news.
        Messages of a lite topic the client unsubscribed while the pop ran are given back, not delivered."""
        client_id, group_config, topic, batch = rr.client_id, rr.group, rr.topic.topic_name, rr.batch
        invisible_ms, poll_ms, host = rr.invisible_ms, rr.poll_ms, rr.host
        m = self.manager
        try:
            m.check_group(group_config.group_name, topic)
        except LiteError as exc:
            raise RpcError(*self.error(exc)) from None
        m.attach(client_id, group_config.group_name, topic, group_config, host, self._notifier(client_id))
        executor = self.backend.pop_executor
        loop = asyncio.get_running_loop()
        end = loop.time() + max(0, poll_ms) / 1000.0
        state = "timeout"
        while True:
            result = await executor.run(m.pop, client_id, batch, invisible_ms, host)
            if result.messages:
                state = "found"
                break
            left = end - loop.time()
            if left <= 0:
                break
            if not await m.wait(client_id, left):
                result = await executor.run(m.pop, client_id, batch, invisible_ms, host)
                state = "found" if result.messages else "timeout"
                break
        keep = [pm for pm in result.messages if m.subscribed(client_id, pm.topic)]
        if len(keep) < len(result.messages):
            gone = [pm for pm in result.messages if pm not in keep]
            asyncio.ensure_future(self._give_back(group_config.group_name, gone))
            result.messages = keep
            state = "found" if keep else "timeout"
        return await self.backend.received(result, state, rr)

    async def _give_back(self, group: str, popped: list[PoppedMessage]) -> None:
        """Make messages popped for a client that unsubscribed meanwhile visible again (same attempt)."""
        pop = self.backend.pop
        for pm in popped:
            try:
                await self.backend.pop_executor.run(pop.change_invisible_time, group, pm.topic, pm.extra,
                                                    pm.queue_offset, 0, True)
            except Exception:
                log.exception("lite: giving back %s@%d of %s failed (visible again after its invisible time)",
                              pm.topic, pm.queue_offset, group)

    # ------------------------------------------------------------------ ack, invisible time, DLQ
    async def queue_of(self, topic: str, lite: Optional[str], handle: ReceiptHandle) -> str:
        """The LMQ a lite receipt handle belongs to: the request's ``lite_topic``, else the lite topic stored
        with the message (a client that leaves the field out still acks the right queue)."""
        if lite:
            reason = check_name(lite, self.manager.config.maxLiteTopicSize)
            if reason:
                    raise RpcError(C.ILLEGAL_LITE_TOPIC, f"{reason}: {lite!r}")
            return lmq_name(topic, lite)
        rec = self.backend.read_message(handle.commit_log_offset)
        if rec is not None:
            stored = decode_message(rec).properties.get(LITE_TOPIC_PROPERTY)
            if stored:
                return lmq_name(topic, stored)
        return topic

    def client_gone(self, client_id: str, why: str) -> None:
        self.manager.drop_client(client_id, why)
