"""Helpers shared by the admin processors (``admin_topic``, ``admin_group``, ``admin_broker``)."""
from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Callable, Mapping, Optional, Protocol, TypeVar, cast

from rmqd.broker.context import BrokerContext
from rmqd.common import constants as C
from rmqd.config import BrokerRole
from rmqd.remoting import fastjson
from rmqd.remoting.codes import ResponseCode
from rmqd.remoting.command import RemotingCommand, error_response, new_response
from rmqd.store.metadata import TOPIC_NAME_RE

if TYPE_CHECKING:
    from rmqd.config import BrokerConfig
    from rmqd.processors.handles import RequestPeer
    from rmqd.remoting.command import ExtValue
    from rmqd.store.api import MessageStoreAPI
    from rmqd.store.metadata import ConsumerOffsetManager


# TopicValidator.SYSTEM_TOPIC_SET (4.9.8) plus the ``rmq_sys_`` prefix.
SYSTEM_TOPIC_SET = frozenset({
    C.AUTO_CREATE_TOPIC_KEY_TOPIC, C.SCHEDULE_TOPIC, C.BENCHMARK_TOPIC, C.TRANS_HALF_TOPIC, C.TRACE_TOPIC,
    C.TRANS_OP_HALF_TOPIC, C.TRANS_CHECK_MAX_TIME_TOPIC, C.SELF_TEST_TOPIC, C.OFFSET_MOVED_EVENT,
})
# The remark of Java's RemotingCommand.createResponseCommand(null): kept by processors that only set the code.
NOT_SET_REMARK = "not set any response code"
SLAVE_REMARK = "Can't modify topic or subscription group from slave broker, please execute it from master broker."


def is_system_topic(topic: str) -> bool:
    return topic in SYSTEM_TOPIC_SET or topic.startswith("rmq_sys_")


def validate_topic(topic: Optional[str]) -> Optional[RemotingCommand]:
    """TopicValidator.validateTopic: SYSTEM_ERROR with the Java remark, or None if fine."""
    if not topic or not topic.strip():
        return error_response(ResponseCode.SYSTEM_ERROR, "The specified topic is blank.")
    if not TOPIC_NAME_RE.match(topic):
        return error_response(ResponseCode.SYSTEM_ERROR,
                              "The specified topic contains illegal characters, allowing only ^[%|a-zA-Z0-9_-]+$")
    if len(topic) > 127:
        return error_response(ResponseCode.SYSTEM_ERROR, "The specified topic is longer than topic max length.")
    return None


def validate_topic_5x(topic: Optional[str]) -> Optional[str]:
    """5.x TopicValidator.validateTopic: the remark refusing ``topic``, or None if fine."""
    if not topic or not topic.strip():
        return "The specified topic is blank."
    if not TOPIC_NAME_RE.match(topic):
        return f"The specified topic: {topic}, contains illegal characters, allowing only ^[%|a-zA-Z0-9_-]+$"
    if topic.startswith((C.RETRY_GROUP_TOPIC_PREFIX, C.DLQ_GROUP_TOPIC_PREFIX)):
        if len(topic) > 255:
            return (f"The specified topic is DLQ or Retry topic: {topic}, and it's longer than topic max "
                    f"length: 255")
    elif len(topic) > 127:
        return f"The specified topic: {topic}, is longer than topic max length: 127"
    return None


def validate_group(group: object) -> Optional[str]:
    """5.x TopicValidator.validateGroup: the remark refusing ``group``, or None if fine."""
    if not isinstance(group, str) or not group.strip():
        return "The specified group is blank."
    if not TOPIC_NAME_RE.match(group):
        return f"The specified group: {group}, contains illegal characters, allowing only ^[%|a-zA-Z0-9_-]+$"
    if len(group) > 120:
        return f"The specified group: {group}, is longer than group max length: 120"
    return None


def broker_system_topics(config: BrokerConfig) -> set[str]:
    """The names the Java broker's TopicConfigManager adds to TopicValidator's system set at start: its
    cluster, its broker name, ``<cluster>_REPLY_TOPIC`` and, with traceTopicEnable, the trace topic."""
    names = {str(config.brokerClusterName), str(config.brokerName), f"{config.brokerClusterName}_REPLY_TOPIC"}
    if getattr(config, "traceTopicEnable", False):
        names.add(str(getattr(config, "msgTraceTopicName", None) or config.extra.get("msgTraceTopicName")
                      or C.TRACE_TOPIC))
    return names


def check_system_topic(topic: str, config: Optional[BrokerConfig] = None) -> Optional[RemotingCommand]:
    """TopicValidator.isSystemTopic as a broker answers it (``config``: the broker's, for its own names)."""
    if is_system_topic(topic) or (config is not None and topic in broker_system_topics(config)):
        return error_response(ResponseCode.SYSTEM_ERROR, f"The topic[{topic}] is conflict with system topic.")
    return None


def slave_error(ctx: BrokerContext) -> Optional[RemotingCommand]:
    """Topic and group changes are refused on a slave (Java's remark)."""
    if ctx.role is BrokerRole.SLAVE:
        return error_response(ResponseCode.SYSTEM_ERROR, SLAVE_REMARK)
    return None


class _AdminProcessor(Protocol):
    @property
    def ctx(self) -> BrokerContext: ...


P = TypeVar("P", bound=_AdminProcessor)
AdminHandler = Callable[[P, "RequestPeer", RemotingCommand], RemotingCommand]


def refused_on_slave(handler: AdminHandler[P]) -> AdminHandler[P]:
    """A topic or group change handler that a slave answers with :func:`slave_error` instead of running it."""
    @functools.wraps(handler)
    def on_master(self: P, conn: RequestPeer, request: RemotingCommand) -> RemotingCommand:
        err = slave_error(self.ctx)
        return err if err is not None else handler(self, conn, request)
    return on_master


def json_response(obj: fastjson.Encodable, ext: Optional[Mapping[str, Optional[ExtValue]]] = None,
                  remark: Optional[str] = None) -> RemotingCommand:
    """SUCCESS with a fastjson-dialect body (MessageQueue keys as objects, int keys unquoted)."""
    return new_response(ResponseCode.SUCCESS, remark, ext, fastjson.dumps(obj))


def json_document(doc: Mapping[str, object]) -> fastjson.Encodable:
    """A body built of TypedDicts (JSON values by construction: the metadata wrappers, the tier's and the
    compaction's status) as what fastjson encodes. The JSON boundary: fastjson's Encodable has no TypedDict form."""
    return cast("fastjson.Encodable", doc)


def offset_wrapper(store: MessageStoreAPI, offsets: ConsumerOffsetManager, group: str, topic: str,
                   queue_id: int) -> tuple[dict[str, int], int]:
    """OffsetWrapper JSON for (group, topic, queue) and its lag (ConsumeStats rules)."""
    broker_offset = max(0, store.get_max_offset(topic, queue_id))
    consumer_offset = offsets.query_offset(group, topic, queue_id)
    if consumer_offset < 0:
        consumer_offset = 0
    last_ts = 0
    if consumer_offset - 1 >= 0:
        ts = store.get_message_store_timestamp(topic, queue_id, consumer_offset - 1)
        if ts > 0:
            last_ts = ts
    return ({"brokerOffset": broker_offset, "consumerOffset": consumer_offset, "lastTimestamp": last_ts},
            broker_offset - consumer_offset)


def consume_stats(ctx: BrokerContext, group: str, topics: list[str], queue_nums: int | None = None,
                  check_subscription: bool = True) -> tuple[dict[str, fastjson.Encodable], int]:
    """ConsumeStats JSON for ``group`` over ``topics`` (GET_CONSUME_STATS) and the total lag.

    Queues are the topic's read queues unless ``queue_nums`` is given (the broker-wide stats use the
    write queues, as Java does); ``check_subscription`` skips topics an online group does not
    subscribe to."""
    store = ctx.store
    offsets = ctx.offsets
    info = ctx.consumers.get(group)
    table: dict[fastjson.MessageQueue, dict[str, int]] = {}
    tps = 0.0
    diff = 0
    for topic in topics:
        tc = ctx.topics.get(topic)
        if tc is None:
            continue
        if check_subscription and info is not None and info.subscriptions and topic not in info.subscriptions:
            continue
        for qid in range(tc.read_queue_nums if queue_nums is None else queue_nums):
            mq = fastjson.MessageQueue(topic, ctx.config.brokerName, qid)
            wrapper, lag = offset_wrapper(store, offsets, group, topic, qid)
            table[mq] = wrapper
            diff += lag
        tps += ctx.stats.tps_group_get_nums(group, topic)
    return {"consumeTps": float(tps), "offsetTable": table}, diff
