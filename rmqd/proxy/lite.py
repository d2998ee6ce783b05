"""5.5 Lite Mode through ``rmqd proxy``: what the 5.5 proxy in cluster mode sends the brokers.

- SyncLiteSubscription: the proxy's checks (:func:`rmqd.grpc.lite.proxy_checks`), then LITE_SUBSCRIPTION_CTL
  (body ``{"subscriptionSet":[{action, clientId, group, topic, liteTopicSet, offsetOption, version}]}``) to every
  broker of the bind topic (a lite topic's messages are on the broker its name hashes to).
- Receive: POP_LITE_MESSAGE to the broker the client's queue names (round robin when none); each record carries
  its LMQ (``INNER_MULTI_DISPATCH``) and lite offset (``INNER_MULTI_QUEUE_OFFSET``), from which the handle is
  built (the lite offset as both checkpoint and message offset, queue 0, as the 5.5 proxy's); ``orderCountInfo``
  holds one consume count per message.
- Ack / change invisible / DLQ: the LMQ of the request's ``lite_topic`` (else the one the message was delivered
  from, kept for a while), sent as the parent topic plus ``liteTopic`` (:meth:`RemoteBackend._pop_ext`).
- A broker's NOTIFY_UNSUBSCRIBE_LITE goes to the client's Telemetry stream; a client gone is removed
  (COMPLETE_REMOVE) from the brokers it subscribed on.
"""
from __future__ import annotations

import asyncio
import collections
import logging
import time
from typing import TYPE_CHECKING, Hashable, NotRequired, Optional, TypedDict

import orjson

from rmqd.grpc.backend import Received, ReceiveRequest
from rmqd.grpc.convert import to_grpc_message
from rmqd.grpc.errors import RpcError
from rmqd.grpc.lite import offset_option, proxy_checks
from rmqd.grpc.pb import definition_pb2 as d
from rmqd.grpc.pb import service_pb2 as s
from rmqd.pop.codes import POLLING_TIMEOUT
from rmqd.pop.extra_info import NORMAL_TOPIC, ExtraInfo, ReceiptHandle
from rmqd.pop.frontend import Busy
from rmqd.proxy.brokers import CALL_TIMEOUT_S
from rmqd.proxy.remote_pop import long_poll
from rmqd.remoting.codes import ResponseCode
from rmqd.remoting.command import new_request
from rmqd.store import group_attributes as ga
from rmqd.store.lite.names import check_name, lmq_name
from rmqd.store.message import StoredMessage, decode_messages

if TYPE_CHECKING:
    from rmqd.grpc.backend import RpcContext
    from rmqd.grpc.clients import GrpcClientManager
    from rmqd.proxy.backend import RemoteBackend
    from rmqd.store.metadata import SubscriptionGroupConfig

log = logging.getLogger(__name__)

C = d.Code
POP_LITE_MESSAGE = 200070
LITE_SUBSCRIPTION_CTL = 200071
ACTIONS = {d.PARTIAL_ADD: "PARTIAL_ADD", d.PARTIAL_REMOVE: "PARTIAL_REMOVE", d.COMPLETE_ADD: "COMPLETE_ADD",
           d.COMPLETE_REMOVE: "COMPLETE_REMOVE"}
CODES = {2018: C.LITE_SUBSCRIPTION_QUOTA_EXCEEDED, 2017: C.LITE_TOPIC_QUOTA_EXCEEDED, 604: C.FORBIDDEN,
         ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST: C.CONSUMER_GROUP_NOT_FOUND,
         ResponseCode.TOPIC_NOT_EXIST: C.TOPIC_NOT_FOUND, ResponseCode.SYSTEM_BUSY: C.TOO_MANY_REQUESTS,
         29: C.BAD_REQUEST}
DELIVERED_KEPT = 100_000        # (broker, commit-log offset) -> LMQ of delivered lite messages, for acks without one


class OffsetOptionJson(TypedDict):
    """A LITE_SUBSCRIPTION_CTL entry's ``offsetOption``."""
    type: str
    value: int


class LiteSubscriptionJson(TypedDict):
    """One entry of LITE_SUBSCRIPTION_CTL's ``subscriptionSet``."""
    action: str
    clientId: str
    group: str
    topic: str
    liteTopicSet: list[str]
    version: int
    offsetOption: NotRequired[OffsetOptionJson]


def _offset_json(request: s.SyncLiteSubscriptionRequest) -> Optional[OffsetOptionJson]:
    opt = offset_option(request)
    if opt is None:
        return None
    if opt.offset is not None:
        return {"type": "OFFSET", "value": opt.offset}
    if opt.tail_n is not None:
        return {"type": "TAIL_N", "value": opt.tail_n}
    if opt.timestamp is not None:
        return {"type": "TIMESTAMP", "value": opt.timestamp}
    return {"type": "POLICY", "value": {"LAST": 0, "MIN": 1, "MAX": 2}.get(opt.policy, 0)}


class RemoteLite:
    """The lite RPCs of one MessagingService over :class:`rmqd.proxy.backend.RemoteBackend`."""

    def __init__(self, clients: GrpcClientManager, backend: RemoteBackend) -> None:
        self.clients = clients
        self.backend = backend
        self.directory = backend.directory
        self.max_lite_topic_size = backend.max_lite_topic_size
        self._subscribed: dict[str, tuple[str, str, set[str]]] = {}     # client id -> (group, topic, brokers)
        # (broker, commit-log offset) -> LMQ
        self._delivered: collections.OrderedDict[tuple[str, int], str] = collections.OrderedDict()
        backend.registry.lite_notice = clients.notify_unsubscribe_lite

    # ------------------------------------------------------------------ subscriptions
    async def _brokers_of(self, topic: str) -> list[str]:
        route = await self.directory.topic_route(topic)
        return sorted({q.broker_name for q in route.queue_datas}) if route is not None else []

    async def _ctl(self, brokers: list[str], dto: LiteSubscriptionJson) -> Optional[tuple[int, str]]:
        """LITE_SUBSCRIPTION_CTL to each broker; the first refusal as (code, remark)."""
        body = orjson.dumps({"subscriptionSet": [dto]})
        calls = [self.directory.invoke(b, new_request(LITE_SUBSCRIPTION_CTL, {}, body), CALL_TIMEOUT_S)
                 for b in brokers]
        refused: Optional[tuple[int, str]] = None
        for b, result in zip(brokers, await asyncio.gather(*calls, return_exceptions=True)):
            if isinstance(result, BaseException):
                log.warning("proxy: lite subscription of %s on %s failed: %r", dto.get("clientId"), b, result)
                refused = refused or (ResponseCode.SYSTEM_ERROR, f"broker {b}: {result!r}")
            elif result.code != ResponseCode.SUCCESS:
                refused = refused or (result.code, result.remark or str(result.code))
        return refused

    async def sync(self, request: s.SyncLiteSubscriptionRequest, context: RpcContext, client_id: str,
                   peer: str) -> s.SyncLiteSubscriptionResponse:
        names = list(request.lite_topic_set)
        await proxy_checks(request, names, self.backend, self.max_lite_topic_size)
        topic, group = request.topic.name, request.group.name
        brokers = await self._brokers_of(topic)
        dto: LiteSubscriptionJson = {"action": ACTIONS.get(request.action, "PARTIAL_ADD"), "clientId": client_id, "group": group,
               "topic": topic, "liteTopicSet": names, "version": int(time.time() * 1000)}
        opt = _offset_json(request)
        if opt is not None:
            dto["offsetOption"] = opt
        refused = await self._ctl(brokers, dto)
        if refused is not None:
            return s.SyncLiteSubscriptionResponse(status=d.Status(code=CODES.get(refused[0], C.INTERNAL_ERROR),
                                                                  message=refused[1]))
        self._subscribed[client_id] = (group, topic, set(brokers))
        return s.SyncLiteSubscriptionResponse(status=d.Status(code=C.OK, message="OK"))

    def client_gone(self, client_id: str, why: str) -> None:
        sub = self._subscribed.pop(client_id, None)
        if sub is None:
            return
        group, topic, brokers = sub
        dto: LiteSubscriptionJson = {"action": "COMPLETE_REMOVE", "clientId": client_id, "group": group, "topic": topic,
               "liteTopicSet": [], "version": int(time.time() * 1000)}
        log.info("proxy: lite client %s gone (%s): its subscriptions removed", client_id, why)
        asyncio.ensure_future(self._ctl(sorted(brokers), dto))

    def fill_settings(self, settings: d.Settings, group_config: Optional[SubscriptionGroupConfig]) -> None:
        settings.subscription.lite_subscription_quota = ga.get_int(group_config, ga.LITE_CLIENT_QUOTA)
        settings.subscription.max_lite_topic_size = self.max_lite_topic_size

    # ------------------------------------------------------------------ receive
    async def receive(self, rr: ReceiveRequest) -> Received:
        names = await self._brokers_of(rr.topic.topic_name)
        if not names:
            raise RpcError(C.TOPIC_NOT_FOUND, f"no route of {rr.topic.topic_name}")
        broker = rr.broker if rr.broker in names else names[next(self.backend._round) % len(names)]
        ext = {"clientId": rr.client_id, "consumerGroup": rr.group.group_name, "topic": rr.topic.topic_name,
               "maxMsgNum": str(rr.batch), "invisibleTime": str(rr.invisible_ms), "pollTime": str(rr.poll_ms),
               "bornTime": str(int(time.time() * 1000))}
        resp = await long_poll(self.directory, broker, new_request(POP_LITE_MESSAGE, ext), rr.poll_ms)
        if resp is None or resp.code == POLLING_TIMEOUT:
            return Received([], "timeout")
        if resp.code == ResponseCode.SYSTEM_BUSY:
            raise Busy(resp.remark or "broker busy")
        if resp.code != ResponseCode.SUCCESS:
            raise RpcError(CODES.get(resp.code, C.INTERNAL_ERROR), resp.remark or str(resp.code))
        records = await self.backend.run(decode_messages, bytes(resp.body or b""))    # CPU work: off the loop
        return self._messages(dict(resp.ext_fields or {}), records, broker, rr)

    def _messages(self, ext: dict[str, str], records: list[StoredMessage], broker: str,
                  rr: ReceiveRequest) -> Received:
        pop_time, invisible, revive = (int(ext.get(k, 0)) for k in ("popTime", "invisibleTime", "reviveQid"))
        counts = [int(c) for c in (ext.get("orderCountInfo") or "").split(";") if c.strip()]
        out: list[d.Message] = []
        holds: list[tuple[Hashable, Hashable]] = []
        for i, m in enumerate(records):
            lmq = m.properties.get("INNER_MULTI_DISPATCH", "")
            off = int(m.properties.get("INNER_MULTI_QUEUE_OFFSET", m.queue_offset))
            h = ReceiptHandle(ExtraInfo(off, pop_time, invisible, revive, NORMAL_TOPIC, broker, 0, off),
                              m.commit_log_offset)
            msg = to_grpc_message(m, rr.topic.topic_name, h, namespace=rr.namespace)
            if i < len(counts):
                msg.system_properties.delivery_attempt = counts[i] + 1
            out.append(msg)
            self._delivered[(broker, m.commit_log_offset)] = lmq
            if len(self._delivered) > DELIVERED_KEPT:
                self._delivered.popitem(last=False)
            key = self.backend.handle_key(rr.group.group_name, h)
            holds.append((key, key))
            if rr.auto_renew:
                self.backend._held[key] = (rr.group.group_name, lmq, h)
        return Received(out, "found", holds)

    async def queue_of(self, topic: str, lite: Optional[str], handle: ReceiptHandle) -> str:
        if lite:
            reason = check_name(lite, self.max_lite_topic_size)
            if reason:
                raise RpcError(C.ILLEGAL_LITE_TOPIC, f"{reason}: {lite!r}")
            return lmq_name(topic, lite)
        return self._delivered.get((handle.extra.broker_name, handle.commit_log_offset)) or topic
