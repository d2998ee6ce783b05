"""CONSUMER_SEND_MSG_BACK (36): a consumer returns a message it failed to consume (README §3.2, §6.6).

Java: ``AbstractSendMessageProcessor.consumerSendMsgBack`` (4.9).  Runs in the send pool.  The
message is looked up by commit-log offset and stored again as a **new** message on
``%RETRY%<group>`` with ``reconsumeTimes + 1`` and delay level ``3 + reconsumeTimes`` (or the
requested one), which the schedule service delivers later; once ``reconsumeTimes`` reaches the
maximum (or the consumer asks with ``delayLevel < 0``) it goes to ``%DLQ%<group>`` instead.
"""
from __future__ import annotations

import logging
import random
from typing import TYPE_CHECKING

from rmqd.broker.context import BrokerContext, ContextProcessor
from rmqd.broker.schedule import PROPERTY_DELAY, PROPERTY_WAIT, divert_delay_level, edit_properties, requeued
from rmqd.common.constants import PERM_READ, PERM_WRITE, dlq_topic, retry_topic
from rmqd.processors.send import truthy
from rmqd.remoting.codes import FAQ_SUGGEST, RequestCode, ResponseCode, Version
from rmqd.remoting.command import RemotingCommand, error_response, new_response, require
from rmqd.remoting.dispatch import Dispatcher, ProcessorPool
from rmqd.store.message import decode_message, find_property

if TYPE_CHECKING:
    from rmqd.processors.handles import RequestPeer

log = logging.getLogger(__name__)

PROPERTY_RETRY_TOPIC = "RETRY_TOPIC"
PROPERTY_ORIGIN_MESSAGE_ID = "ORIGIN_MESSAGE_ID"
DLQ_NUMS_PER_GROUP = 1
FAQ_URL = FAQ_SUGGEST


class SendMessageBackProcessor(ContextProcessor):
    """Handles CONSUMER_SEND_MSG_BACK.  ``max_delay_level``: the schedule service's highest level."""

    def __init__(self, ctx: BrokerContext, max_delay_level: int) -> None:
        super().__init__(ctx)
        self.max_delay_level = max_delay_level

    def register(self, dispatcher: Dispatcher, pool: ProcessorPool) -> None:
        dispatcher.register(RequestCode.CONSUMER_SEND_MSG_BACK, self.process, pool)

    def process(self, conn: RequestPeer, request: RemotingCommand) -> RemotingCommand:
        offset_s, group, delay_s = require(request, "offset", "group", "delayLevel")
        ext = request.ext_fields or {}
        offset = int(offset_s)
        delay_level = int(delay_s)
        cfg = self.config

        sg = self.groups.find(group)
        if sg is None:
            return error_response(ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
                                  f"subscription group not exist, {group} {FAQ_URL}")
        if not (cfg.brokerPermission & PERM_WRITE):
            return error_response(ResponseCode.NO_PERMISSION,
                                  f"the broker[{cfg.brokerIP1}] sending message is forbidden")
        if sg.retry_queue_nums <= 0:
            return new_response(ResponseCode.SUCCESS)

        topic_sys_flag = 2 if truthy(ext.get("unitMode")) else 0   # TopicSysFlag unit-sub
        new_topic = retry_topic(group)
        tc = self.topics.create_topic_in_send_message_back_method(
            new_topic, sg.retry_queue_nums, PERM_READ | PERM_WRITE, topic_sys_flag)
        if tc is None:
            return error_response(ResponseCode.SYSTEM_ERROR, f"topic[{new_topic}] not exist")
        if not (tc.perm & PERM_WRITE):
            return error_response(ResponseCode.NO_PERMISSION,
                                  f"the topic[{new_topic}] sending message is forbidden")
        queue_id = random.randrange(max(1, sg.retry_queue_nums))

        raw = self.store.read_message(offset)
        if raw is None:
            return error_response(ResponseCode.SYSTEM_ERROR, f"look message by offset failed, {offset}")
        msg = decode_message(raw)
        props = msg.properties_str
        put: dict[str, str] = {PROPERTY_WAIT: "false"}
        if find_property(props, PROPERTY_RETRY_TOPIC) is None:
            put[PROPERTY_RETRY_TOPIC] = msg.topic

        max_times = sg.retry_max_times
        if request.version >= Version.V3_4_9 and ext.get("maxReconsumeTimes") not in (None, ""):
            max_times = int(ext["maxReconsumeTimes"])
        to_dlq = msg.reconsume_times >= max_times or delay_level < 0
        if to_dlq:
            new_topic = dlq_topic(group)
            tc = self.topics.create_topic_in_send_message_back_method(
                new_topic, DLQ_NUMS_PER_GROUP, PERM_READ | PERM_WRITE, 0)
            if tc is None:
                return error_response(ResponseCode.SYSTEM_ERROR, f"topic[{new_topic}] not exist")
            queue_id = random.randrange(DLQ_NUMS_PER_GROUP)
            put[PROPERTY_DELAY] = "0"          # Java: msgExt.setDelayTimeLevel(0), the record shows DELAY=0
        else:
            if delay_level == 0:
                delay_level = 3 + msg.reconsume_times
            put[PROPERTY_DELAY] = str(delay_level)

        origin = find_property(props, PROPERTY_ORIGIN_MESSAGE_ID)
        put[PROPERTY_ORIGIN_MESSAGE_ID] = origin if origin else msg.msg_id
        new_props = edit_properties(props, put=put)
        inner = requeued(msg, new_topic, queue_id, new_props, self.ctx.store_host, msg.reconsume_times + 1)
        if not to_dlq:
            divert_delay_level(inner, self.max_delay_level)
        result = self.store.put_message(inner)
        if result.ok and to_dlq:
            self.ctx.metrics.messages.on_dlq(group, find_property(props, PROPERTY_RETRY_TOPIC) or msg.topic)
        if result.ok:
            return new_response(ResponseCode.SUCCESS)
        log.warning("send back of %d for %s to %s failed: %s %s", offset, group, new_topic,
                    result.status.name, result.remark)
        return error_response(ResponseCode.SYSTEM_ERROR, result.status.name)

