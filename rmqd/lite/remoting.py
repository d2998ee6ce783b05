"""Lite Mode over remoting (5.5): the codes a 5.5 proxy in cluster mode and the 5.5 admin tools send.

- ``POP_LITE_MESSAGE`` (200070): header ``clientId consumerGroup topic maxMsgNum invisibleTime pollTime
  bornTime [attemptId]``; the Java pre-checks in their order (POLLING_TIMEOUT, NO_PERMISSION,
  INVALID_PARAMETER for > 32, TOPIC_NOT_EXIST, INVALID_PARAMETER for a non-LITE topic,
  SUBSCRIPTION_GROUP_NOT_EXIST, NO_PERMISSION, INVALID_PARAMETER for another bind topic); the answer holds
  messages of several lite topics, each record carrying ``INNER_MULTI_DISPATCH`` (its LMQ) and
  ``INNER_MULTI_QUEUE_OFFSET`` (its lite offset), which is what the proxy builds receipt handles from;
  header ``popTime invisibleTime reviveQid=999 orderCountInfo`` (one consume count per message, ``;``-joined).
  Nothing found: parked up to ``pollTime`` (keyed by client id), then POLLING_TIMEOUT.
- ``LITE_SUBSCRIPTION_CTL`` (200071): body ``{"subscriptionSet":[{action, clientId, group, topic,
  liteTopicSet, offsetOption{type, value}, version}]}``; an empty body or set is ILLEGAL_OPERATION (604);
  quotas answer LITE_SUBSCRIPTION_QUOTA_EXCEEDED (2018).
- ``NOTIFY_UNSUBSCRIBE_LITE`` (200073): sent to the connection that subscribed, on Exclusive eviction.
- ACK_MESSAGE / CHANGE_MESSAGE_INVISIBLETIME with header ``liteTopic``: the existing POP codes
  (:mod:`rmqd.processors.pop_ack`, its ``lite_queue_of``) on the lite topic's queue.
- Admin: ``GET_BROKER_LITE_INFO`` (200074), ``GET_PARENT_TOPIC_INFO`` (200075), ``GET_LITE_TOPIC_INFO``
  (200076), ``GET_LITE_CLIENT_INFO`` (200077), ``GET_LITE_GROUP_INFO`` (200078), ``TRIGGER_LITE_DISPATCH``
  (200079). Bodies use the Java field names where the Java classes were read (broker and lite-topic info);
  the others are documented in docs/lite-priority.md.
"""
from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING, Callable, Mapping

import orjson

from rmqd.broker.context import BrokerContext
from rmqd.pop.codes import INVALID_PARAMETER, POLLING_TIMEOUT
from rmqd.pop.frontend import Busy
from rmqd.lite.subscriptions import LiteError, OffsetOption
from rmqd.common.json_values import json_int
from rmqd.processors.pop_message import FAQ_APPLY_TOPIC
from rmqd.remoting.codes import ResponseCode
from rmqd.remoting.command import RemotingCommand, error_response, new_request, new_response, require
from rmqd.store.lite.names import parse_lmq
from rmqd.store.metadata import PERM_READ
from rmqd.store.group_attributes import bind_topic
from rmqd.store.topic_attributes import is_lite_topic, lite_expiration_minutes

if TYPE_CHECKING:
    from rmqd.pop.frontend import PopExecutor
    from rmqd.lite.subscriptions import LiteSubscriptionManager
    from rmqd.pop.service import PopService
    from rmqd.processors.handles import RequestPeer
    from rmqd.remoting.connection import Connection
    from rmqd.remoting.dispatch import Dispatcher, ProcessorPool
    from rmqd.lite.wiring import LitePriority

log = logging.getLogger(__name__)

POP_LITE_MESSAGE, LITE_SUBSCRIPTION_CTL, ACK_LITE_MESSAGE, NOTIFY_UNSUBSCRIBE_LITE = 200070, 200071, 200072, 200073
GET_BROKER_LITE_INFO, GET_PARENT_TOPIC_INFO, GET_LITE_TOPIC_INFO = 200074, 200075, 200076
GET_LITE_CLIENT_INFO, GET_LITE_GROUP_INFO, TRIGGER_LITE_DISPATCH = 200077, 200078, 200079
ILLEGAL_OPERATION = 604
LITE_SUBSCRIPTION_QUOTA_EXCEEDED = 2018
POP_ORDER_REVIVE_QUEUE = 999
_ACTIONS = {"PARTIAL_ADD": 0, "PARTIAL_REMOVE": 1, "COMPLETE_ADD": 2, "COMPLETE_REMOVE": 3}
_LITE_CODES = {LiteError.SUBSCRIPTION_QUOTA: LITE_SUBSCRIPTION_QUOTA_EXCEEDED, LiteError.TOPIC_QUOTA: 2017,
               LiteError.FORBIDDEN: ILLEGAL_OPERATION, LiteError.GROUP_NOT_FOUND: ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
               LiteError.TOPIC_NOT_FOUND: ResponseCode.TOPIC_NOT_EXIST, LiteError.TOO_MANY_REQUESTS: ResponseCode.SYSTEM_BUSY}
_NV, _SEP = "\x01", "\x02"


def with_properties(record: bytes, extra: dict[str, str]) -> bytes:
    """The stored record with ``extra`` appended to its properties (body, CRC and offsets unchanged)."""
    sys_flag = int.from_bytes(record[36:40], "big")
    q = 48 + (20 if sys_flag & 0x10 else 8) + 8 + (20 if sys_flag & 0x20 else 8) + 12
    q += 4 + int.from_bytes(record[q:q + 4], "big")
    q += 1 + record[q]
    plen = int.from_bytes(record[q:q + 2], "big")
    props = record[q + 2:q + 2 + plen].decode("utf-8")
    if props and not props.endswith(_SEP):
        props += _SEP
    props += "".join(f"{k}{_NV}{v}{_SEP}" for k, v in extra.items())
    raw = props.encode("utf-8")
    out = bytearray(record[:q])
    out += len(raw).to_bytes(2, "big")
    out += raw
    out[0:4] = len(out).to_bytes(4, "big")
    return bytes(out)


class LiteRemoting:
    """The 5.5 lite remoting codes over the broker context, POP and the lite parts."""

    def __init__(self, ctx: BrokerContext, pop_service: PopService, pop_executor: PopExecutor,
                 lp: "LitePriority", manager: LiteSubscriptionManager) -> None:
        self.ctx = ctx
        self.pop_service = pop_service
        self.pop_executor = pop_executor
        self.lp = lp
        self.manager = manager

    # ------------------------------------------------------------------ POP_LITE_MESSAGE
    def _pre_check(self, ext: Mapping[str, str]) -> RemotingCommand | None:
        cfg = self.ctx.config
        ip = cfg.brokerIP1
        try:
            born, poll, max_num = int(ext["bornTime"]), int(ext["pollTime"]), int(ext["maxMsgNum"])
            int(ext["invisibleTime"])
        except (KeyError, ValueError) as exc:
            return error_response(ResponseCode.SYSTEM_ERROR, f"the custom field <{exc}> is null or not a number")
        for name in ("clientId", "consumerGroup", "topic"):
            if not ext.get(name):
                return error_response(ResponseCode.SYSTEM_ERROR, f"the custom field <{name}> is null")
        if born > 0 and int(time.time() * 1000) - born - poll > 500:
            return error_response(POLLING_TIMEOUT, f"the broker[{ip}] pop message is timeout too much")
        if not (int(cfg.brokerPermission) & PERM_READ):
            return error_response(ResponseCode.NO_PERMISSION, f"the broker[{ip}] pop message is forbidden")
        if max_num > 32:
            return error_response(INVALID_PARAMETER, f"the broker[{ip}] pop message's num is greater than 32")
        topic = ext["topic"]
        tc = self.ctx.topics.get(topic)
        if tc is None:
            return error_response(ResponseCode.TOPIC_NOT_EXIST, f"topic [{topic}] not exist, apply first please! "
                                                                f"{FAQ_APPLY_TOPIC}")
        if not (tc.perm & PERM_READ):
            return error_response(ResponseCode.NO_PERMISSION, f"the topic [{topic}] peeking message is forbidden")
        if not is_lite_topic(tc):
            return error_response(INVALID_PARAMETER, f"the topic [{topic}] message type not match")
        group = ext["consumerGroup"]
        sg = self.ctx.groups.find(group)
        if sg is None:
            return error_response(ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
                                  f"subscription group [{group}] not exist")
        if not sg.consume_enable:
            return error_response(ResponseCode.NO_PERMISSION, f"subscription group no permission, {group}")
        from rmqd.store.group_attributes import bind_topic
        if bind_topic(sg) != topic:
            return error_response(INVALID_PARAMETER, f"subscription bind topic not match, {group}")
        return None

    async def pop_lite_message(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        ext = request.ext_fields or {}
        refused = self._pre_check(ext)
        if refused is not None:
            if refused.code != ResponseCode.SYSTEM_ERROR:     # Java's answer header is made before its checks
                refused.ext_fields = {"popTime": "0", "invisibleTime": "0", "reviveQid": "0"}
            return refused
        m = self.manager
        client_id, group, topic = ext["clientId"], ext["consumerGroup"], ext["topic"]
        sg = self.ctx.groups.find(group)
        assert sg is not None           # _pre_check refuses a group that does not exist
        m.attach(client_id, group, topic, sg, conn.remote_address, self._notifier(conn, client_id, group))
        max_num, invisible = int(ext["maxMsgNum"]), int(ext["invisibleTime"])
        executor = self.pop_executor
        loop = asyncio.get_running_loop()
        end = loop.time() + max(0, int(ext["pollTime"])) / 1000.0
        try:
            while True:
                result = await executor.run(m.pop, client_id, max_num, invisible, conn.remote_address)
                left = end - loop.time()
                if result.messages or left <= 0:
                    break
                if not await m.wait(client_id, left):
                    result = await executor.run(m.pop, client_id, max_num, invisible, conn.remote_address)
                    break
        except Busy as exc:
            return error_response(ResponseCode.SYSTEM_BUSY, str(exc))
        header = {"popTime": str(result.pop_time), "invisibleTime": str(result.invisible_time),
                  "reviveQid": str(POP_ORDER_REVIVE_QUEUE)}
        if not result.messages:
            resp = error_response(POLLING_TIMEOUT, "NO_MESSAGE_IN_QUEUE")
            resp.ext_fields = {**(resp.ext_fields or {}), **header, "orderCountInfo": ""}
            return resp
        records = [with_properties(pm.record, {"INNER_MULTI_DISPATCH": pm.topic,
                                               "INNER_MULTI_QUEUE_OFFSET": str(pm.queue_offset)})
                   for pm in result.messages]
        header["orderCountInfo"] = ";".join(str(max(0, pm.attempt - 1)) for pm in result.messages)
        return new_response(ResponseCode.SUCCESS, "FOUND", header, b"".join(records))

    def _notifier(self, conn: Connection, client_id: str, group: str) -> Callable[[str], None]:
        def notify(lite: str) -> None:
            conn.invoke_oneway(new_request(NOTIFY_UNSUBSCRIBE_LITE, {"liteTopic": lite, "consumerGroup": group,
                                                                     "clientId": client_id}))
        return notify

    # ------------------------------------------------------------------ LITE_SUBSCRIPTION_CTL
    def subscription_ctl(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        if not request.body:
            return error_response(ILLEGAL_OPERATION, "Request body is null.")
        try:
            body = orjson.loads(bytes(request.body))
        except orjson.JSONDecodeError as exc:
            return error_response(ILLEGAL_OPERATION, f"bad LITE_SUBSCRIPTION_CTL body: {exc}")
        subs = body.get("subscriptionSet") if isinstance(body, dict) else None
        if not subs:
            return error_response(ILLEGAL_OPERATION, "LiteSubscriptionCtlRequestBody is empty.")
        for dto in subs:
            if not isinstance(dto, dict) or not dto.get("clientId") or not dto.get("group") or not dto.get("topic"):
                continue                                  # Java skips a DTO with a blank client, group or topic
            action = dto.get("action")
            action = _ACTIONS.get(action, action) if isinstance(action, str) else action
            opt = dto.get("offsetOption") or None
            option = None
            if isinstance(opt, dict) and opt.get("type"):
                kind, value = str(opt["type"]).upper(), opt.get("value")
                option = (OffsetOption(policy={0: "LAST", 1: "MIN", 2: "MAX"}.get(int(value or 0), "LAST"))
                          if kind == "POLICY" else OffsetOption(offset=json_int(value)) if kind == "OFFSET" else
                          OffsetOption(tail_n=json_int(value)) if kind == "TAIL_N" else
                          OffsetOption(timestamp=json_int(value)))
            try:
                self.manager.sync(dto["clientId"], dto["group"], dto["topic"], int(action if action is not None else 0),
                                  dto.get("liteTopicSet") or [], option, conn.remote_address,
                                  self._notifier(conn, dto["clientId"], dto["group"]))
            except LiteError as exc:
                return error_response(_LITE_CODES.get(exc.kind, INVALID_PARAMETER), exc.message)
            except (TypeError, ValueError) as exc:
                return error_response(ILLEGAL_OPERATION, f"bad lite subscription: {exc}")
        return new_response(ResponseCode.SUCCESS)

    # ------------------------------------------------------------------ admin
    def broker_lite_info(self, conn: RequestPeer, request: RemotingCommand) -> RemotingCommand:
        """``LiteManagerProcessor.getBrokerLiteInfo``: topicMeta is every LITE topic's ``lite.topic.expiration``,
        groupMeta every bind topic's lite groups (``LiteMetadataUtil``), from the topic and group tables."""
        m, index, cfg = self.manager, self.lp.lite_store.index, self.lp.lite_config
        topic_meta = {name: lite_expiration_minutes(tc) for name, tc in list(self.ctx.topics.table.items())
                      if is_lite_topic(tc)}
        group_meta: dict[str, list[str]] = {}
        for name, sg in list(self.ctx.groups.table.items()):
            parent = bind_topic(sg)
            if parent is not None:
                group_meta.setdefault(parent, []).append(name)
        # as Java's: the store's type setting, the consume queue table's topics, the whole offset table
        body = {"storeType": str(self.ctx.config.extra.get("storeType", "default")),
                "maxLmqNum": cfg.maxLmqConsumeQueueNum,
                "currentLmqNum": index.lite_count, "liteSubscriptionCount": m.active,
                "orderInfoCount": sum(1 for key in self.pop_service.inflight() if parse_lmq(key[0])),
                "cqTableSize": len(self.ctx.store.topics()),
                "offsetTableSize": len(self.ctx.offsets.table),
                "eventMapSize": sum(len(c.events) for c in list(m.clients.values())),
                "topicMeta": topic_meta, "groupMeta": group_meta}
        return new_response(ResponseCode.SUCCESS, None, None, orjson.dumps(body))

    def _not_a_lite_parent(self, topic: str) -> RemotingCommand | None:
        """Java's LiteManagerProcessor checks of a parent topic: it exists, and it is a LITE topic."""
        tc = self.ctx.topics.get(topic)
        if tc is None:
            return error_response(ResponseCode.TOPIC_NOT_EXIST, f"Topic [{topic}] not exist.")
        if not is_lite_topic(tc):
            return error_response(INVALID_PARAMETER, f"Topic [{topic}] type not match.")
        return None

    def parent_topic_info(self, conn: RequestPeer, request: RemotingCommand) -> RemotingCommand:
        (topic,) = require(request, "topic")       # Java: a lookup of a null key (NullPointerException)
        refused = self._not_a_lite_parent(topic)
        if refused is not None:
            return refused
        tc = self.ctx.topics.get(topic)
        assert tc is not None           # _not_a_lite_parent refuses a missing topic
        index = self.lp.lite_store.index
        groups = sorted(name for name, sg in self.ctx.groups.table.items()
                        if (sg.attributes or {}).get("lite.bind.topic") == topic)
        body = {"topic": topic, "ttl": int((tc.attributes or {}).get("lite.topic.expiration", -1)),
                "groups": groups, "liteTopicCount": len(index.lite_topics(topic)),
                "lmqNum": index.lite_count}
        return new_response(ResponseCode.SUCCESS, None, None, orjson.dumps(body))

    def lite_topic_info(self, conn: RequestPeer, request: RemotingCommand) -> RemotingCommand:
        parent, lite = require(request, "parentTopic", "liteTopic")
        refused = self._not_a_lite_parent(parent)
        if refused is not None:
            return refused
        q = self.lp.lite_store.index.queue(parent, lite)
        subs = self.manager.subscribers_of(parent, lite)
        body = {"parentTopic": parent, "liteTopic": lite,
                "subscriber": [{"clientId": cid, "group": g} for g, ids in subs.items() for cid in ids],
                "topicOffset": {"minOffset": q.min_offset if q else 0, "maxOffset": q.max_offset if q else 0,
                                "lastUpdateTimestamp": q.last_store_ts if q else 0},
                "shardingToBroker": True}
        return new_response(ResponseCode.SUCCESS, None, None, orjson.dumps(body))

    def lite_client_info(self, conn: RequestPeer, request: RemotingCommand) -> RemotingCommand:
        (cid,) = require(request, "clientId")
        info = self.manager.client_info(cid)
        if info is None:
            return error_response(ResponseCode.SYSTEM_ERROR, f"lite client {cid} not found")
        return new_response(ResponseCode.SUCCESS, None, None, orjson.dumps(info))

    def lite_group_info(self, conn: RequestPeer, request: RemotingCommand) -> RemotingCommand:
        (group,) = require(request, "group")
        top_k = int((request.ext_fields or {}).get("topK") or 20)
        sg = self.ctx.groups.find(group)
        parent = bind_topic(sg) if sg is not None else None
        if parent is None:
            return error_response(ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, f"lite group {group} not found")
        lags = [(self.manager.backlog(group, parent, lite), lite) for lite in self.lp.lite_store.index.lite_topics(parent)]
        lags.sort(reverse=True)
        body = {"group": group, "parentTopic": parent, "totalLagCount": sum(n for n, _ in lags),
                "lagCountTopK": [{"liteTopic": lite, "lagCount": n} for n, lite in lags[:top_k] if n > 0],
                "clients": self.manager.group_subscriptions(group)}
        return new_response(ResponseCode.SUCCESS, None, None, orjson.dumps(body))

    def trigger_dispatch(self, conn: RequestPeer, request: RemotingCommand) -> RemotingCommand:
        (group,) = require(request, "group")
        n = self.manager.full_dispatch(group, (request.ext_fields or {}).get("clientId") or None)
        return new_response(ResponseCode.SUCCESS, None, None, orjson.dumps({"dispatched": n}))


def install(d: Dispatcher, pools: Mapping[str, ProcessorPool], ctx: BrokerContext, pop_service: PopService,
            pop_executor: PopExecutor,
            lp: "LitePriority") -> LiteRemoting:
    """Register the lite codes: POP_LITE_MESSAGE on the loop, the subscription control and info codes in pools."""
    assert lp.manager is not None            # LitePriority.install makes it before it installs these codes
    r = LiteRemoting(ctx, pop_service, pop_executor, lp, lp.manager)
    admin = pools["admin"]
    d.register(POP_LITE_MESSAGE, r.pop_lite_message)
    d.register(LITE_SUBSCRIPTION_CTL, r.subscription_ctl, pools["consumer"])
    for code, fn in ((GET_BROKER_LITE_INFO, r.broker_lite_info), (GET_PARENT_TOPIC_INFO, r.parent_topic_info),
                     (GET_LITE_TOPIC_INFO, r.lite_topic_info), (GET_LITE_CLIENT_INFO, r.lite_client_info),
                     (GET_LITE_GROUP_INFO, r.lite_group_info), (TRIGGER_LITE_DISPATCH, r.trigger_dispatch)):
        d.register(code, fn, admin)
    return r

