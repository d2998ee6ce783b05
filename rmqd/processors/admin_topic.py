"""Topic admin codes: UPDATE_AND_CREATE_TOPIC (17), DELETE_TOPIC_IN_BROKER (215),
GET_ALL_TOPIC_CONFIG (21), GET_TOPIC_STATS_INFO (202), GET_SYSTEM_TOPIC_LIST_FROM_BROKER (305),
CLEAN_EXPIRED_CONSUMEQUEUE (306), CLEAN_UNUSED_TOPIC (316); 5.x: UPDATE_AND_CREATE_TOPIC_LIST (18),
GET_TOPIC_CONFIG (351).

Java: ``AdminBrokerProcessor`` (README §3.5).  Handlers block on metadata persistence and the
store: they run in the admin pool.
"""
from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Mapping, cast

from rmqd.broker.context import BrokerContext
from rmqd.processors.admin_common import (NOT_SET_REMARK, check_system_topic, json_document, json_response,
                                          refused_on_slave, validate_topic, validate_topic_5x)
from rmqd.processors.client_manage import parse_json_body
from rmqd.remoting import fastjson
from rmqd.remoting.codes import RequestCode, ResponseCode
from rmqd.remoting.dispatch import Dispatcher, ProcessorPool
from rmqd.remoting.command import RemotingCommand, error_response, ext_int, new_response, require
from rmqd.store import topic_attributes
from rmqd.store.metadata import SCHEDULE_TOPIC, TopicConfig

if TYPE_CHECKING:
    from rmqd.processors.handles import RequestPeer


log = logging.getLogger(__name__)

UPDATE_AND_CREATE_TOPIC_LIST = 18
GET_TOPIC_CONFIG = 351
INVALID_PARAMETER = 29          # 5.x ResponseCode: what its admin codes answer a bad name


def topic_config_5x(tc: TopicConfig) -> dict[str, fastjson.Encodable]:
    """A topic config as the 5.x broker writes one (``attributes`` always present)."""
    # the JSON boundary: TopicConfigJson is a TypedDict of JSON values (fastjson's Encodable has no TypedDict form)
    return {**cast("Mapping[str, fastjson.Encodable]", tc.to_json()), "attributes": dict(tc.attributes or {})}


class TopicAdminProcessor:
    def __init__(self, ctx: BrokerContext) -> None:
        self.ctx = ctx

    # ------------------------------------------------------------------ 17
    @refused_on_slave
    def update_and_create_topic(self, conn: RequestPeer, request: RemotingCommand) -> RemotingCommand:
        ctx = self.ctx
        topic = (request.ext_fields or {}).get("topic")      # Java: a null topic is "blank"
        err = validate_topic(topic)
        if err is not None:
            return err
        assert topic is not None            # validate_topic refuses a missing name
        err = check_system_topic(topic, ctx.config)
        if err is not None:
            return err
        read_q, write_q, perm = require(request, "readQueueNums", "writeQueueNums", "perm")
        ext = request.ext_fields or {}
        mgr = ctx.topics
        old = mgr.get(topic)
        try:
            attrs = topic_attributes.alter(old is None, old.attributes if old else {},
                                           topic_attributes.parse(ext.get("attributes")))
        except topic_attributes.AttributeValueError as exc:
            return error_response(ResponseCode.SYSTEM_ERROR, str(exc))
        tc = TopicConfig(topic, int(read_q), int(write_q), int(perm),
                         ext.get("topicFilterType") or "SINGLE_TAG", ext_int(request, "topicSysFlag", 0) or 0,
                         (ext.get("order") or "false").strip().lower() == "true", attrs)
        log.info("updateAndCreateTopic called by %s: %s", conn.remote_address, tc)
        t0 = time.monotonic()
        mgr.update(tc)   # persists, then re-registers with the name servers (on_change)
        # controller mode: answered once the in-sync slaves hold it too, so a switch keeps it (rocketmq#9804)
        copied = ctx.replication.wait_topics_replicated(ctx.config.slaveTimeout / 1000)
        ctx.metrics.messages.on_create("topic", time.monotonic() - t0, copied, mgr.is_system_topic(topic))
        if not copied:     # never a success the next failover can take back: the caller retries (idempotent)
            return error_response(ResponseCode.SYSTEM_ERROR, f"topic {topic} created on the master but not copied "
                                  f"by every in-sync replica within slaveTimeout; retry the update")
        return new_response()

    # ------------------------------------------------------------------ 18 (5.x)
    @refused_on_slave
    def update_and_create_topic_list(self, conn: RequestPeer, request: RemotingCommand) -> RemotingCommand:
        """Body ``{"topicConfigList": [TopicConfig]}``; each name is checked as 5.x does (INVALID_PARAMETER).

        Java answers SUCCESS as soon as it meets a config equal to the existing one, creating nothing of the
        list; rmqd answers the same SUCCESS but applies the others (docs/compatibility.md)."""
        ctx = self.ctx
        data = parse_json_body(request)
        items = data.get("topicConfigList") if isinstance(data, dict) else None
        if not isinstance(items, list) or not all(isinstance(d, dict) for d in items):
            return error_response(ResponseCode.SYSTEM_ERROR, "the topic config list body is invalid")
        mgr, tcs = ctx.topics, []
        for d in items:
            topic = d.get("topicName")
            remark = validate_topic_5x(topic)
            if remark is None and check_system_topic(topic, ctx.config) is not None:
                remark = f"The topic[{topic}] is conflict with system topic."
            if remark is not None:
                return error_response(INVALID_PARAMETER, remark)
            attrs_in = {str(k): str(v) for k, v in (d.get("attributes") or {}).items()}
            if attrs_in.get("+message.type", "").upper() == "MIXED" and not ctx.config.extra.get(
                    "enableMixedMessageType", "false").lower() == "true":
                return error_response(INVALID_PARAMETER, "MIXED message type is not supported.")
            old = mgr.get(topic)
            try:
                attrs = topic_attributes.alter(old is None, old.attributes if old else {}, attrs_in)
                tc = TopicConfig(topic, int(d.get("readQueueNums", 16)), int(d.get("writeQueueNums", 16)),
                                 int(d.get("perm", 6)), str(d.get("topicFilterType") or "SINGLE_TAG"),
                                 int(d.get("topicSysFlag") or 0), bool(d.get("order", False)), attrs)
            except (topic_attributes.AttributeValueError, TypeError, ValueError) as exc:
                return error_response(ResponseCode.SYSTEM_ERROR, str(exc))
            if tc != old:
                tcs.append(tc)
        log.info("updateAndCreateTopicList called by %s: %s", conn.remote_address, [tc.topic_name for tc in tcs])
        t0 = time.monotonic()
        mgr.update_many(tcs)
        copied = ctx.replication.wait_topics_replicated(ctx.config.slaveTimeout / 1000)
        for tc in tcs:
            ctx.metrics.messages.on_create("topic", time.monotonic() - t0, copied, mgr.is_system_topic(tc.topic_name))
        if not copied:
            return error_response(ResponseCode.SYSTEM_ERROR, "topics created on the master but not copied by every "
                                  "in-sync replica within slaveTimeout; retry the update")
        return new_response(ResponseCode.SUCCESS, NOT_SET_REMARK)

    # ------------------------------------------------------------------ 351 (5.x)
    def get_topic_config(self, conn: RequestPeer, request: RemotingCommand) -> RemotingCommand:
        """The topic's config (``lo=true`` would add its static-topic mapping: rmqd has none)."""
        (topic,) = require(request, "topic")
        tc = self.ctx.topics.get(topic)
        if tc is None:
            log.error("No topic in this broker, client: %s topic: %s", conn.remote_address, topic)
            return error_response(ResponseCode.TOPIC_NOT_EXIST, f"No topic in this broker. topic: {topic}")
        return json_response(topic_config_5x(tc))

    # ------------------------------------------------------------------ 215
    @refused_on_slave
    def delete_topic(self, conn: RequestPeer, request: RemotingCommand) -> RemotingCommand:
        ctx = self.ctx
        (topic,) = require(request, "topic")
        err = validate_topic(topic) or check_system_topic(topic)
        if err is not None:
            return err
        log.info("deleteTopic called by %s: %s", conn.remote_address, topic)
        ctx.topics.delete(topic)
        removed = ctx.store.delete_topic(topic)
        ctx.offsets.remove_topic(topic)
        ctx.stats.on_topic_deleted(topic)
        log.info("topic %s deleted: %d consume queue(s) removed", topic, removed)
        return new_response()

    # ------------------------------------------------------------------ 21
    def get_all_topic_config(self, conn: RequestPeer, request: RemotingCommand) -> RemotingCommand:
        wrapper = self.ctx.topics.wrapper()
        if not wrapper.get("topicConfigTable"):
            return error_response(ResponseCode.SYSTEM_ERROR, "No topic in this broker")
        return json_response(json_document(wrapper))

    # ------------------------------------------------------------------ 202
    def get_topic_stats_info(self, conn: RequestPeer, request: RemotingCommand) -> RemotingCommand:
        (topic,) = require(request, "topic")
        ctx = self.ctx
        tc = ctx.topics.get(topic)
        if tc is None:
            return error_response(ResponseCode.TOPIC_NOT_EXIST, f"topic[{topic}] not exist")
        return json_response({"offsetTable": topic_offset_table(ctx, topic, tc.write_queue_nums)})

    # ------------------------------------------------------------------ 305
    def get_system_topic_list(self, conn: RequestPeer, request: RemotingCommand) -> RemotingCommand:
        mgr = self.ctx.topics
        topics = sorted(t for t in mgr.topics() if mgr.is_system_topic(t))
        return json_response({"topicList": topics})

    # ------------------------------------------------------------------ 306 / 316
    def clean_unused_topics(self, conn: RequestPeer, request: RemotingCommand) -> RemotingCommand:
        """CLEAN_UNUSED_TOPIC (316): drop the consume queues of topics no longer configured, but for
        SCHEDULE_TOPIC_XXXX and RMQ_SYS_TRANS_OP_HALF_TOPIC (Java's DefaultMessageStore.cleanUnusedTopic)."""
        ctx = self.ctx
        mgr = ctx.topics
        gone = [t for t in ctx.store.topics() if mgr.get(t) is None and t not in _KEPT_WHEN_UNUSED]
        for topic in gone:
            log.info("cleanUnusedTopic: removing consume queues of unused topic %s (from %s)", topic,
                     getattr(conn, "remote_address", "?"))
            ctx.store.delete_topic(topic)
        return new_response()

    def clean_expired_consume_queues(self, conn: RequestPeer, request: RemotingCommand) -> RemotingCommand:
        """CLEAN_EXPIRED_CONSUMEQUEUE (306): drop the consume queues whose messages retention removed
        (MessageStore.clean_expired_consume_queues)."""
        dropped = self.ctx.store.clean_expired_consume_queues()
        log.info("cleanExpiredConsumeQueue from %s: %d consume queue(s) destroyed",
                 getattr(conn, "remote_address", "?"), len(dropped))
        return new_response()

    def register(self, dispatcher: Dispatcher, pool: ProcessorPool) -> None:
        """Register the codes this processor answers (in ``pool``, or on the loop where noted)."""
        dispatcher.register(RequestCode.UPDATE_AND_CREATE_TOPIC, self.update_and_create_topic, pool)
        dispatcher.register(RequestCode.DELETE_TOPIC_IN_BROKER, self.delete_topic, pool)
        dispatcher.register(RequestCode.GET_ALL_TOPIC_CONFIG, self.get_all_topic_config, pool)
        dispatcher.register(RequestCode.GET_TOPIC_STATS_INFO, self.get_topic_stats_info, pool)
        dispatcher.register(RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_BROKER, self.get_system_topic_list, pool)
        dispatcher.register(RequestCode.CLEAN_UNUSED_TOPIC, self.clean_unused_topics, pool)
        dispatcher.register(RequestCode.CLEAN_EXPIRED_CONSUMEQUEUE, self.clean_expired_consume_queues, pool)
        dispatcher.register(UPDATE_AND_CREATE_TOPIC_LIST, self.update_and_create_topic_list, pool)
        dispatcher.register(GET_TOPIC_CONFIG, self.get_topic_config, pool)


_KEPT_WHEN_UNUSED = frozenset({SCHEDULE_TOPIC, "RMQ_SYS_TRANS_OP_HALF_TOPIC"})


def topic_offset_table(ctx: BrokerContext, topic: str, queues: int) -> dict[fastjson.MessageQueue, dict[str, int]]:
    """TopicStatsTable.offsetTable: MessageQueue → TopicOffset (min, max, last update)."""
    store = ctx.store
    table = {}
    for qid in range(queues):
        mn = max(0, store.get_min_offset(topic, qid))
        mx = max(0, store.get_max_offset(topic, qid))
        ts = 0
        if mx > 0:
            ts = max(0, store.get_message_store_timestamp(topic, qid, mx - 1))
        table[fastjson.MessageQueue(topic, ctx.config.brokerName, qid)] = {
            "lastUpdateTimestamp": ts, "maxOffset": mx, "minOffset": mn}
    return table
