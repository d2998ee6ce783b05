"""Consumer/producer group admin codes.

UPDATE_AND_CREATE_SUBSCRIPTIONGROUP (200), GET_ALL_SUBSCRIPTIONGROUP_CONFIG (201),
DELETE_SUBSCRIPTIONGROUP (207), GET_CONSUME_STATS (208), GET_CONSUMER_CONNECTION_LIST (203),
GET_PRODUCER_CONNECTION_LIST (204), GET_ALL_PRODUCER_INFO (328), QUERY_TOPIC_CONSUME_BY_WHO (300),
INVOKE_BROKER_TO_RESET_OFFSET (222, pushes RESET_CONSUMER_CLIENT_OFFSET 220),
INVOKE_BROKER_TO_GET_CONSUMER_STATUS (223, asks clients with 221), CLONE_GROUP_OFFSET (314),
QUERY_CONSUME_TIME_SPAN (303), QUERY_CORRECTION_OFFSET (308), CONSUME_MESSAGE_DIRECTLY (309 relay),
GET_BROKER_CONSUME_STATS (317), GET_ALL_CONSUMER_OFFSET (43), GET_ALL_DELAY_OFFSET (45); 5.x:
UPDATE_AND_CREATE_SUBSCRIPTIONGROUP_LIST (225), GET_SUBSCRIPTIONGROUP_CONFIG (352), QUERY_TOPICS_BY_CONSUMER (343),
QUERY_SUBSCRIPTION_BY_CONSUMER (345), UPDATE_AND_GET_GROUP_FORBIDDEN (353).

Java: ``AdminBrokerProcessor``, ``Broker2Client`` (README §3.5).
"""
from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING, Mapping, Optional, Union, cast

from rmqd.broker.context import BrokerContext
from rmqd.config import BrokerRole
from rmqd.processors.admin_common import consume_stats, json_document, json_response, refused_on_slave, validate_group
from rmqd.processors.client_manage import parse_json_body
from rmqd.remoting import fastjson
from rmqd.remoting.codes import RequestCode, ResponseCode
from rmqd.remoting.dispatch import Dispatcher, ProcessorPool
from rmqd.remoting.command import (RemotingCommand, error_response, ext_bool, new_request,
                                   new_response, require)
from rmqd.store.message import decode_offset_msg_id
from rmqd.store import group_attributes
from rmqd.store.metadata import SubscriptionGroupConfig
from rmqd.store.config import wall_clock_ms

if TYPE_CHECKING:
    from rmqd.processors.handles import RequestPeer
    from rmqd.store.metadata import SubscriptionGroupJson


GET_ALL_PRODUCER_INFO = 328
UPDATE_AND_CREATE_SUBSCRIPTIONGROUP_LIST = 225
QUERY_TOPICS_BY_CONSUMER = 343
QUERY_SUBSCRIPTION_BY_CONSUMER = 345
GET_SUBSCRIPTIONGROUP_CONFIG = 352
UPDATE_AND_GET_GROUP_FORBIDDEN = 353
INVALID_PARAMETER = 29
INDEX_PERM_READ = 2            # PermName.INDEX_PERM_READ: the forbidden bit a pull checks
_SUBSCRIPTION_FIELDS = ("classFilterMode", "codeSet", "expressionType", "subString", "subVersion", "tagsSet", "topic")
# SubscriptionGroupConfig fields of 5.x that rmqd does not keep, with the values 5.x gives a group by default
_GROUP_5X_DEFAULTS: dict[str, fastjson.Encodable] = {"consumeMessageOrderly": False, "consumeTimeoutMinute": 15,
                      "groupRetryPolicy": {"type": "CUSTOMIZED"}, "groupSysFlag": 0}

log = logging.getLogger(__name__)


def group_config_5x(sg: SubscriptionGroupConfig) -> dict[str, fastjson.Encodable]:
    """A group config as the 5.x broker writes one: every field of its SubscriptionGroupConfig."""
    # the JSON boundary: SubscriptionGroupJson is a TypedDict of JSON values (fastjson's Encodable has no
    # TypedDict form)
    return {**_GROUP_5X_DEFAULTS, **cast("Mapping[str, fastjson.Encodable]", sg.to_json()),
            "attributes": dict(sg.attributes or {})}


def _java_date(ms: int) -> str:
    """UtilAll.formatDate(new Date(ms), "yyyy-MM-dd#HH:mm:ss:SSS") in local time (QueueTimeSpan's
    ``*Str`` getters, which fastjson writes as fields)."""
    t = time.localtime(ms // 1000)
    return time.strftime("%Y-%m-%d#%H:%M:%S", t) + ":%03d" % (ms % 1000)

V3_0_7_SNAPSHOT = 43   # MQVersion ordinal: first client able to handle 220 / 221


class GroupAdminProcessor:
    def __init__(self, ctx: BrokerContext) -> None:
        self.ctx = ctx

    # ------------------------------------------------------------------ 200 / 201 / 207
    @refused_on_slave
    def update_and_create_subscription_group(self, conn: RequestPeer, request: RemotingCommand) -> RemotingCommand:
        ctx = self.ctx
        data = parse_json_body(request)
        if not isinstance(data, dict) or not data.get("groupName"):
            return error_response(ResponseCode.SYSTEM_ERROR, "the subscription group config body is invalid")
        # the JSON boundary: a JSON object with a group name, read as SubscriptionGroupJson (from_json reads what
        # it knows, with defaults)
        sg = SubscriptionGroupConfig.from_json(cast("SubscriptionGroupJson", data))
        old = ctx.groups.table.get(sg.group_name)
        try:     # 5.x group attributes (lite.*, priority.factor): merged and checked as Java does
            sg.attributes = group_attributes.alter(old is None, dict(old.attributes) if old else {}, sg.attributes)
        except group_attributes.AttributeValueError as exc:
            return error_response(ResponseCode.SYSTEM_ERROR, str(exc))
        log.info("updateAndCreateSubscriptionGroup called by %s: %s", conn.remote_address, sg)
        t0 = time.monotonic()
        ctx.groups.update(sg)
        # controller mode: answered once the in-sync slaves hold it too, so a switch keeps it (as topics)
        copied = ctx.replication.wait_groups_replicated(ctx.config.slaveTimeout / 1000)
        ctx.metrics.messages.on_create("group", time.monotonic() - t0, copied)
        if not copied:     # as topics: no success that the next failover can take back
            return error_response(ResponseCode.SYSTEM_ERROR, f"subscription group {sg.group_name} updated on the "
                                  f"master but not copied by every in-sync replica within slaveTimeout; retry")
        return new_response()

    def get_all_subscription_group_config(self, conn: RequestPeer, request: RemotingCommand) -> RemotingCommand:
        mgr = self.ctx.groups
        wrapper = mgr.encoded()
        if not wrapper.get("subscriptionGroupTable"):
            return error_response(ResponseCode.SYSTEM_ERROR, "No subscription group in this broker")
        return json_response(json_document(wrapper))

    # ------------------------------------------------------------------ 225 / 352 (5.x)
    @refused_on_slave
    def update_and_create_subscription_group_list(self, conn: RequestPeer, request: RemotingCommand) -> RemotingCommand:
        """Body ``{"groupConfigList": [SubscriptionGroupConfig]}``: every name checked first (INVALID_PARAMETER),
        then all applied."""
        ctx = self.ctx
        data = parse_json_body(request)
        items = data.get("groupConfigList") if isinstance(data, dict) else None
        if not isinstance(items, list) or not all(isinstance(d, dict) for d in items):
            return error_response(ResponseCode.SYSTEM_ERROR, "the subscription group list body is invalid")
        configs = []
        for d in items:
            bad = validate_group(d.get("groupName"))
            if bad is not None:
                return error_response(INVALID_PARAMETER, bad)
            sg = SubscriptionGroupConfig.from_json(d)
            old = ctx.groups.table.get(sg.group_name)
            try:
                sg.attributes = group_attributes.alter(old is None, dict(old.attributes) if old else {}, sg.attributes)
            except group_attributes.AttributeValueError as exc:
                return error_response(ResponseCode.SYSTEM_ERROR, str(exc))
            configs.append(sg)
        log.info("updateAndCreateSubscriptionGroupList called by %s: %s", conn.remote_address,
                 [sg.group_name for sg in configs])
        t0 = time.monotonic()
        for sg in configs:
            ctx.groups.update(sg)
        copied = ctx.replication.wait_groups_replicated(ctx.config.slaveTimeout / 1000)
        for _ in configs:
            ctx.metrics.messages.on_create("group", time.monotonic() - t0, copied)
        if not copied:
            return error_response(ResponseCode.SYSTEM_ERROR, "subscription groups updated on the master but not "
                                  "copied by every in-sync replica within slaveTimeout; retry")
        return new_response()

    def get_subscription_group_config(self, conn: RequestPeer, request: RemotingCommand) -> RemotingCommand:
        """One group's config (auto-created when autoCreateSubscriptionGroup is on, as Java's lookup does)."""
        (group,) = require(request, "group")
        sg = self.ctx.groups.find(group)
        if sg is None:
            log.error("No group in this broker, client: %s group: %s", conn.remote_address, group)
            return error_response(ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, "No group in this broker")
        return json_response(group_config_5x(sg))

    # ------------------------------------------------------------------ 343 / 345 / 353 (5.x)
    def query_topics_by_consumer(self, conn: RequestPeer, request: RemotingCommand) -> RemotingCommand:
        """The topics ``group`` has committed offsets of, and this broker's address."""
        (group,) = require(request, "group")
        topics = sorted(self.ctx.offsets.which_topic_by_consumer(group))
        return json_response({"brokerAddr": self.ctx.identity.address, "topicList": topics})

    def query_subscription_by_consumer(self, conn: RequestPeer, request: RemotingCommand) -> RemotingCommand:
        """The subscription an online ``group`` registered for ``topic`` (absent when it has none)."""
        (group,) = require(request, "group")
        topic = (request.ext_fields or {}).get("topic")
        body: dict[str, fastjson.Encodable] = {"group": group, "topic": topic}
        consumers = self.ctx.consumers
        info = consumers.get(group)
        entry = info.subscriptions.get(topic) if info is not None and topic is not None else None
        data = entry.data if entry is not None else \
            consumers.compensated_subscription(group, topic) if topic is not None else None
        if data is not None:
            body["subscriptionData"] = {k: data.get(k) for k in _SUBSCRIPTION_FIELDS if k in data}
        if topic is None:
            del body["topic"]
        return json_response(body)

    def update_and_get_group_forbidden(self, conn: RequestPeer, request: RemotingCommand) -> RemotingCommand:
        """``readable=false`` forbids ``group`` to pull ``topic``, ``true`` allows it again, absent only reads;
        answers the state (remark "", as Java)."""
        (group,) = require(request, "group")
        groups = self.ctx.groups
        ext = request.ext_fields or {}
        topic, readable = ext.get("topic"), ext.get("readable")
        if topic is None:             # Java reads a null topic as never forbidden; it cannot set one
            if readable is not None or groups.forbidden.get(group):
                require(request, "topic")
            return json_response({"group": group, "readable": True}, remark="")
        if readable is not None:
            log.info("updateAndGetGroupForbidden called by %s for %s@%s readable=%s", conn.remote_address, group,
                     topic, readable)
            groups.update_forbidden(group, topic, INDEX_PERM_READ, readable.strip().lower() != "true")
        body: dict[str, fastjson.Encodable] = {
            "group": group, "readable": not groups.get_forbidden(group, topic, INDEX_PERM_READ), "topic": topic}
        return json_response(body, remark="")

    @refused_on_slave
    def delete_subscription_group(self, conn: RequestPeer, request: RemotingCommand) -> RemotingCommand:
        ctx = self.ctx
        (group,) = require(request, "groupName")
        log.info("deleteSubscriptionGroup called by %s: %s", conn.remote_address, group)
        ctx.groups.delete(group)
        if ext_bool(request, "removeOffset") or ext_bool(request, "cleanOffset"):
            ctx.offsets.remove_offset(group)
        ctx.stats.on_group_deleted(group)
        ctx.consumers.forget(group)
        return new_response()

    # ------------------------------------------------------------------ 208 / 317
    def get_consume_stats(self, conn: RequestPeer, request: RemotingCommand) -> RemotingCommand:
        (group,) = require(request, "consumerGroup")
        ext = request.ext_fields or {}
        topic = ext.get("topic")
        if topic:
            topics = [topic]
        elif ext.get("topicList"):
            topics = [t for t in ext["topicList"].split(";") if t]
        else:
            topics = sorted(self.ctx.offsets.which_topic_by_consumer(group))
        stats, _ = consume_stats(self.ctx, group, topics)
        return json_response(stats)

    def get_broker_consume_stats(self, conn: RequestPeer, request: RemotingCommand) -> RemotingCommand:
        """Java ``fetchAllConsumeStatsInBroker``: every subscription group, over the topics of its
        committed offsets (so a group that consumed and went offline is still listed), skipping topics
        an online group no longer subscribes to; ``isOrder`` keeps ordered topics only."""
        ctx = self.ctx
        is_order = ext_bool(request, "isOrder")
        result = []
        total_diff = 0
        for group in sorted(list(ctx.groups.table)):
            info = ctx.consumers.get(group)
            per_group = []
            for topic in sorted(ctx.offsets.which_topic_by_consumer(group)):
                tc = ctx.topics.get(topic)
                if tc is None or (is_order and not tc.order):
                    continue
                if info is not None and info.subscriptions and topic not in info.subscriptions:
                    continue
                stats, diff = consume_stats(ctx, group, [topic], queue_nums=tc.write_queue_nums,
                                            check_subscription=False)
                total_diff += diff
                per_group.append(stats)
            result.append({group: per_group})
        return json_response({"brokerAddr": ctx.identity.address, "consumeStatsList": result,
                              "totalDiff": total_diff})

    # ------------------------------------------------------------------ 203 / 204 / 300
    def get_consumer_connection_list(self, conn: RequestPeer, request: RemotingCommand) -> RemotingCommand:
        (group,) = require(request, "consumerGroup")
        info = self.ctx.consumers.get(group)
        if info is None or not info.channels:
            return error_response(ResponseCode.CONSUMER_NOT_ONLINE, f"the consumer group[{group}] not online")
        body: dict[str, fastjson.Encodable] = {
            "connectionSet": [c.to_connection_json() for c in list(info.channels.values())],
            "consumeFromWhere": info.consume_from_where,
            "consumeType": info.consume_type,
            "messageModel": info.message_model,
            "subscriptionTable": {t: e.data for t, e in list(info.subscriptions.items())},
        }
        return json_response(body)

    def get_producer_connection_list(self, conn: RequestPeer, request: RemotingCommand) -> RemotingCommand:
        (group,) = require(request, "producerGroup")
        chans = self.ctx.producers.get(group)
        if not chans and not self.ctx.producers.known(group):
            return error_response(ResponseCode.SYSTEM_ERROR, f"the producer group[{group}] not exist")
        connections: list[fastjson.Encodable] = [c.to_connection_json() for c in chans]
        return json_response({"connectionSet": connections})

    def get_all_producer_info(self, conn: RequestPeer, request: RemotingCommand) -> RemotingCommand:
        """GET_ALL_PRODUCER_INFO (328, ``mqadmin producer``): every online producer by group
        (ProducerTableInfo: {"data": {group: [ProducerInfo]}}); remoteIP as Java's ``channel.remoteAddress()
        .toString()``: ``/host:port``."""
        data: dict[str, list[dict[str, fastjson.Encodable]]] = {}
        for group, chans in sorted(self.ctx.producers.groups().items()):
            data[group] = [{"clientId": c.client_id, "remoteIP": "/" + c.conn.remote_address, "language": c.language,
                            "version": c.version, "lastUpdateTimestamp": c.last_update} for c in chans]
        return json_response({"data": data})

    def query_topic_consume_by_who(self, conn: RequestPeer, request: RemotingCommand) -> RemotingCommand:
        (topic,) = require(request, "topic")
        ctx = self.ctx
        groups = {g for g, info in ctx.consumers.groups().items() if topic in info.subscriptions}
        groups |= ctx.offsets.which_group_by_topic(topic)
        return json_response({"groupList": sorted(groups)})

    # ------------------------------------------------------------------ 222 → 220
    def _reset_offset_table(self, topic: str, group: str, timestamp: int,
                            force: bool) -> Union[RemotingCommand, dict[fastjson.MessageQueue, int]]:
        """MessageQueue → target offset, or an error response (Broker2Client.resetOffset)."""
        ctx = self.ctx
        tc = ctx.topics.get(topic)
        if tc is None:
            return error_response(ResponseCode.SYSTEM_ERROR, f"[reset-offset] reset offset failed, no topic in this broker. topic={topic}")
        store, offsets = ctx.store, ctx.offsets
        table: dict[fastjson.MessageQueue, int] = {}
        for qid in range(tc.write_queue_nums):
            committed = offsets.query_offset(group, topic, qid)
            if committed == -1:
                return error_response(ResponseCode.SYSTEM_ERROR, f"THe consumer group <{group}> not exist")
            if timestamp == -1:
                target = store.get_max_offset(topic, qid)
            else:
                target = store.get_offset_by_time(topic, qid, timestamp)
            if target < 0:
                target = 0
            table[fastjson.MessageQueue(topic, ctx.config.brokerName, qid)] = \
                target if (force or target < committed) else committed
        return table

    def _reset_offset_server_side(self, topic: str, group: str, queue_id: int, timestamp: int,
                                  offset: Optional[str]) -> RemotingCommand:
        """5.x's resetOffsetInner: the target offsets (of one queue, or of every read queue by ``timestamp``; a
        negative timestamp is the queue's end) kept for each queue's next pull; answers ResetOffsetBody."""
        ctx = self.ctx
        if ctx.role is BrokerRole.SLAVE:
            return error_response(ResponseCode.SYSTEM_ERROR, "Can not reset offset in slave broker")
        tc = ctx.topics.get(topic)
        if tc is None:
            log.warning("Reset offset failed, topic does not exist. topic=%s, group=%s", topic, group)
            return error_response(ResponseCode.TOPIC_NOT_EXIST, f"Topic {topic} does not exist")
        if group not in ctx.groups.table:
            log.warning("Reset offset failed, group does not exist. topic=%s, group=%s", topic, group)
            return error_response(ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, f"Group {group} does not exist")
        store = ctx.store

        def by_time(qid: int) -> int:
            """5.x's getOffsetInQueueByTime (BoundaryType.LOWER): the first message stored at ``timestamp`` or
            later, the queue's end when every message is older. The store's search is 4.9.8's (the nearest
            message): one further when the message it finds is older."""
            if timestamp < 0:
                return store.get_max_offset(topic, qid)
            found = max(0, store.get_offset_by_time(topic, qid, timestamp))
            if found < store.get_max_offset(topic, qid) and \
                    0 <= store.get_message_store_timestamp(topic, qid, found) < timestamp:
                found += 1
            return found

        targets: dict[int, int] = {}
        if queue_id >= 0:
            if offset is not None and int(offset) != -1:
                mn, mx = store.get_min_offset(topic, queue_id), store.get_max_offset(topic, queue_id)
                if (mn >= 0 and int(offset) < mn) or int(offset) > mx + 1:
                    return error_response(ResponseCode.SYSTEM_ERROR,
                                          f"Target offset {offset} not in consume queue range [{mn}-{mx}]")
                targets[queue_id] = int(offset)
            else:
                targets[queue_id] = by_time(queue_id)
        else:
            targets = {qid: by_time(qid) for qid in range(tc.read_queue_nums)}
        if not targets:
            return error_response(ResponseCode.SYSTEM_ERROR, "No queues to reset.")
        for qid, target in targets.items():
            ctx.offsets.assign_reset_offset(topic, group, qid, target)
        log.info("Reset offset, topic=%s, group=%s, queues=%s", topic, group, targets)
        name = ctx.config.brokerName
        return json_response({"offsetTable": {fastjson.MessageQueue(topic, name, q): o for q, o in targets.items()}})

    def invoke_broker_to_reset_offset(self, conn: RequestPeer, request: RemotingCommand) -> RemotingCommand:
        topic, group, timestamp = require(request, "topic", "group", "timestamp")
        force = ext_bool(request, "isForce")
        ts = int(timestamp)
        if self.ctx.config.useServerSideResetOffset:
            ext = request.ext_fields or {}
            return self._reset_offset_server_side(topic, group, int(ext.get("queueId") or -1), ts, ext.get("offset"))
        table = self._reset_offset_table(topic, group, ts, force)
        if isinstance(table, RemotingCommand):
            return table
        info = self.ctx.consumers.get(group)
        if info is None or not info.channels:
            return error_response(ResponseCode.CONSUMER_NOT_ONLINE,
                                  f"Consumer not online, so can not reset offset, Group: {group} Topic: {topic} "
                                  f"Timestamp: {ts}")
        body = fastjson.dumps({"offsetTable": table})
        body_c = fastjson.dumps({"offsetTable": [
            {"brokerName": mq.brokerName, "offset": off, "queueId": mq.queueId, "topic": mq.topic}
            for mq, off in table.items()]})
        header = {"topic": topic, "group": group, "timestamp": str(ts), "isForce": "true" if force else "false"}
        for ch in list(info.channels.values()):
            if ch.conn.closed:
                continue
            if ch.version < V3_0_7_SNAPSHOT:
                log.warning("[reset-offset] client %s of %s too old (%d) to reset offsets", ch.client_id, group,
                            ch.version)
                continue
            is_c = str(ch.language).upper() == "CPP"
            push = new_request(RequestCode.RESET_CONSUMER_CLIENT_OFFSET, header, body_c if is_c else body,
                               oneway=True)
            try:
                ch.conn.invoke_oneway(push)
                log.info("[reset-offset] reset offset of %s/%s to %s sent to %s", topic, group, ts, ch.client_id)
            except Exception:
                log.exception("[reset-offset] sending RESET_CONSUMER_CLIENT_OFFSET to %s failed",
                              ch.conn.remote_address)
        is_c_admin = str(request.language).upper() == "CPP"
        return new_response(ResponseCode.SUCCESS, None, None, body_c if is_c_admin else body)

    # ------------------------------------------------------------------ 223 → 221 (loop handler)
    async def invoke_broker_to_get_consumer_status(self, conn: RequestPeer,
                                                   request: RemotingCommand) -> RemotingCommand:
        topic, group = require(request, "topic", "group")
        client_addr = (request.ext_fields or {}).get("clientAddr")
        info = self.ctx.consumers.get(group)
        chans = list(info.channels.values()) if info is not None else []
        if not chans:
            return error_response(ResponseCode.SYSTEM_ERROR,
                                  f"No Any Consumer online in the consumer group: [{group}]")
        header = {"topic": topic, "group": group}
        if client_addr:
            header["clientAddr"] = client_addr
        result: dict[str, dict[fastjson.JsonKey, fastjson.JsonValue]] = {}
        for ch in chans:
            if ch.version < V3_0_7_SNAPSHOT:
                return error_response(ResponseCode.SYSTEM_ERROR,
                                      f"the client does not support this feature. version={ch.version}")
            if client_addr and ch.conn.remote_address != client_addr:
                continue
            try:
                answer = await ch.conn.invoke(new_request(RequestCode.GET_CONSUMER_STATUS_FROM_CLIENT, header),
                                              5.0)
            except Exception as exc:
                log.warning("GET_CONSUMER_STATUS_FROM_CLIENT to %s failed: %r", ch.conn.remote_address, exc)
                continue
            if answer.code == ResponseCode.SUCCESS and answer.body is not None:
                try:
                    data = fastjson.loads_lenient(answer.body_bytes()) or {}
                    if not isinstance(data, dict):
                        raise ValueError(f"the body is a {type(data).__name__}, not a JSON object")
                    table = data.get("messageQueueTable") or {}
                    if not isinstance(table, dict):
                        raise ValueError(f"its messageQueueTable is a {type(table).__name__}, not a JSON object")
                    result[ch.client_id] = dict(table)
                except ValueError as exc:
                    log.warning("bad consumer status body from %s: %s", ch.client_id, exc)
        return json_response({"consumerTable": result, "messageQueueTable": {}})

    # ------------------------------------------------------------------ 314
    def clone_group_offset(self, conn: RequestPeer, request: RemotingCommand) -> RemotingCommand:
        src, dest = require(request, "srcGroup", "destGroup")
        ext = request.ext_fields or {}
        topic = ext.get("topic")
        offline = ext_bool(request, "offline")
        ctx = self.ctx
        offsets = ctx.offsets
        topics = [topic] if topic else sorted(offsets.which_topic_by_consumer(src))
        info = ctx.consumers.get(src)
        for t in topics:
            if ctx.topics.get(t) is None:
                log.warning("[cloneGroupOffset] topic %s does not exist", t)
                continue
            if not offline and info is not None and info.subscriptions and t not in info.subscriptions:
                log.warning("[cloneGroupOffset] %s does not subscribe %s", src, t)
                continue
            offsets.clone_offset(src, dest, t)
        return new_response()

    # ------------------------------------------------------------------ 303
    def query_consume_time_span(self, conn: RequestPeer, request: RemotingCommand) -> RemotingCommand:
        topic, group = require(request, "topic", "group")
        ctx = self.ctx
        tc = ctx.topics.get(topic)
        if tc is None:
            return error_response(ResponseCode.TOPIC_NOT_EXIST, f"topic[{topic}] not exist")
        store = ctx.store
        spans: list[fastjson.Encodable] = []
        now = wall_clock_ms()
        for qid in range(tc.write_queue_nums):
            mq = fastjson.MessageQueue(topic, ctx.config.brokerName, qid)
            min_time = max(0, store.get_earliest_message_time(topic, qid))
            max_off = store.get_max_offset(topic, qid)
            max_time = max(0, store.get_message_store_timestamp(topic, qid, max_off - 1)) if max_off > 0 else 0
            consumer_offset = ctx.offsets.query_offset(group, topic, qid)
            if consumer_offset > 0:
                consume_time = max(0, store.get_message_store_timestamp(topic, qid, consumer_offset - 1))
            else:
                consume_time = min_time
            delay = 0
            if 0 <= consumer_offset < max_off:
                next_ts = store.get_message_store_timestamp(topic, qid, consumer_offset)
                if next_ts > 0:
                    delay = now - next_ts
            spans.append({"consumeTimeStamp": consume_time, "consumeTimeStampStr": _java_date(consume_time),
                          "delayTime": delay, "maxTimeStamp": max_time, "maxTimeStampStr": _java_date(max_time),
                          "messageQueue": mq, "minTimeStamp": min_time, "minTimeStampStr": _java_date(min_time)})
        return json_response({"consumeTimeSpanSet": spans})

    # ------------------------------------------------------------------ 308
    def query_correction_offset(self, conn: RequestPeer, request: RemotingCommand) -> RemotingCommand:
        topic, compare_group = require(request, "topic", "compareGroup")
        filters = {g for g in ((request.ext_fields or {}).get("filterGroups") or "").split(",") if g}
        offsets = self.ctx.offsets
        correction: dict[int, int] = {}
        for group in offsets.which_group_by_topic(topic):
            if group in filters:
                continue
            for qid, off in offsets.query_offsets(group, topic).items():
                correction[qid] = min(off, correction.get(qid, off))
        for qid, off in offsets.query_offsets(compare_group, topic).items():
            if qid in correction and correction[qid] > off:
                correction[qid] = 2 ** 63 - 1
        return json_response({"correctionOffsets": correction})

    # ------------------------------------------------------------------ 309 relay (loop handler)
    async def consume_message_directly(self, conn: RequestPeer, request: RemotingCommand) -> RemotingCommand:
        group, client_id, msg_id = require(request, "consumerGroup", "clientId", "msgId")
        ctx = self.ctx
        ext = dict(request.ext_fields or {})
        ext["brokerName"] = ctx.config.brokerName
        try:
            _, _, offset = decode_offset_msg_id(msg_id)
        except Exception as exc:
            return error_response(ResponseCode.SYSTEM_ERROR, f"bad msgId {msg_id}: {exc}")
        loop = asyncio.get_running_loop()
        body = await loop.run_in_executor(None, ctx.store.read_message, offset)
        if body is None:
            return error_response(ResponseCode.SYSTEM_ERROR, f"can not find message by the offset, {offset}")
        info = ctx.consumers.get(group)
        ch = info.find_channel(client_id) if info is not None else None
        if ch is None or ch.conn.closed:
            return error_response(ResponseCode.SYSTEM_ERROR, f"The Consumer <{group}> <{client_id}> not online")
        try:
            answer = await ch.conn.invoke(new_request(RequestCode.CONSUME_MESSAGE_DIRECTLY, ext, body),
                                          ctx.identity.call_client_timeout_s)
        except asyncio.TimeoutError:
            return error_response(ResponseCode.CONSUME_MSG_TIMEOUT,
                                  f"consumer <{group}> <{client_id}> Timeout: invoke client timeout")
        except Exception as exc:
            log.warning("CONSUME_MESSAGE_DIRECTLY relay to %s failed: %r", ch.conn.remote_address, exc)
            return error_response(ResponseCode.SYSTEM_ERROR,
                                  f"invoke consumer <{group}> <{client_id}> Exception: {exc}")
        return new_response(answer.code, answer.remark, answer.ext_fields,
                            answer.body_bytes() if answer.body is not None else None)

    # ------------------------------------------------------------------ 43 / 45
    def get_all_consumer_offset(self, conn: RequestPeer, request: RemotingCommand) -> RemotingCommand:
        table = self.ctx.offsets.table_copy()
        # Java encodes its ConsumerOffsetManager, never empty ({"offsetTable":{}}): its "No consumer offset"
        # branch cannot be reached, and a slave syncing from a master without offsets gets SUCCESS
        return json_response({"offsetTable": table})

    def get_all_delay_offset(self, conn: RequestPeer, request: RemotingCommand) -> RemotingCommand:
        mgr = self.ctx.delay_offsets
        table = mgr.table_copy()
        # Java answers its ScheduleMessageService's encode(): {"offsetTable":{}} before any delayed message
        return json_response({"offsetTable": table})

    def register(self, dispatcher: Dispatcher, pool: ProcessorPool) -> None:
        """Register the codes this processor answers (in ``pool``, or on the loop where noted)."""
        dispatcher.register(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, self.update_and_create_subscription_group, pool)
        dispatcher.register(RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG, self.get_all_subscription_group_config, pool)
        dispatcher.register(RequestCode.DELETE_SUBSCRIPTIONGROUP, self.delete_subscription_group, pool)
        dispatcher.register(RequestCode.GET_CONSUME_STATS, self.get_consume_stats, pool)
        dispatcher.register(RequestCode.GET_BROKER_CONSUME_STATS, self.get_broker_consume_stats, pool)
        dispatcher.register(RequestCode.GET_CONSUMER_CONNECTION_LIST, self.get_consumer_connection_list, pool)
        dispatcher.register(RequestCode.GET_PRODUCER_CONNECTION_LIST, self.get_producer_connection_list, pool)
        dispatcher.register(GET_ALL_PRODUCER_INFO, self.get_all_producer_info, pool)
        dispatcher.register(RequestCode.QUERY_TOPIC_CONSUME_BY_WHO, self.query_topic_consume_by_who, pool)
        dispatcher.register(RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, self.invoke_broker_to_reset_offset, pool)
        dispatcher.register(RequestCode.INVOKE_BROKER_TO_GET_CONSUMER_STATUS, self.invoke_broker_to_get_consumer_status)
        dispatcher.register(RequestCode.CLONE_GROUP_OFFSET, self.clone_group_offset, pool)
        dispatcher.register(RequestCode.QUERY_CONSUME_TIME_SPAN, self.query_consume_time_span, pool)
        dispatcher.register(RequestCode.QUERY_CORRECTION_OFFSET, self.query_correction_offset, pool)
        dispatcher.register(RequestCode.CONSUME_MESSAGE_DIRECTLY, self.consume_message_directly)
        dispatcher.register(RequestCode.GET_ALL_CONSUMER_OFFSET, self.get_all_consumer_offset, pool)
        dispatcher.register(RequestCode.GET_ALL_DELAY_OFFSET, self.get_all_delay_offset, pool)
        dispatcher.register(UPDATE_AND_CREATE_SUBSCRIPTIONGROUP_LIST, self.update_and_create_subscription_group_list,
                            pool)
        dispatcher.register(GET_SUBSCRIPTIONGROUP_CONFIG, self.get_subscription_group_config, pool)
        dispatcher.register(QUERY_TOPICS_BY_CONSUMER, self.query_topics_by_consumer, pool)
        dispatcher.register(QUERY_SUBSCRIPTION_BY_CONSUMER, self.query_subscription_by_consumer, pool)
        dispatcher.register(UPDATE_AND_GET_GROUP_FORBIDDEN, self.update_and_get_group_forbidden, pool)
