"""5.x gRPC messages <-> the 4.x stored format, as the 5.x proxy maps them.

message_id <-> ``UNIQ_KEY``; tag <-> ``TAGS``; keys <-> ``KEYS`` (space-joined); message_group <->
``__SHARDINGKEY``; priority <-> ``_SYS_MSG_PRIORITY_`` (5.4); lite_topic <-> ``__LITE_TOPIC`` (5.5);
delivery_timestamp <-> ``TIMER_DELIVER_MS``; TRANSACTION <-> ``TRAN_MSG=true``
+ ``PGROUP``; trace_context <-> ``TRACE_CONTEXT``; receipt_handle <- POP_CK + commit-log offset;
delivery_attempt = reconsumeTimes + 1.  User properties travel as ordinary properties both ways, so
a 4.x client reading what a 5.x client sent (and the other way round) sees the same ids, tags, keys
and properties.
"""
from __future__ import annotations

import hashlib
import time
import zlib
from typing import Mapping, Optional

from google.protobuf.duration_pb2 import Duration
from google.protobuf.timestamp_pb2 import Timestamp

from rmqd.grpc.pb import definition_pb2 as d
from rmqd.pop.extra_info import ReceiptHandle
from rmqd.store.message import StoredMessage

UNIQ_KEY, TAGS, KEYS, SHARDING_KEY = "UNIQ_KEY", "TAGS", "KEYS", "__SHARDINGKEY"
TIMER_DELIVER_MS, DELAY, TRAN_MSG, PGROUP = "TIMER_DELIVER_MS", "DELAY", "TRAN_MSG", "PGROUP"
TRACE_CONTEXT, RETRY_TOPIC = "TRACE_CONTEXT", "RETRY_TOPIC"
PRIORITY, LITE_TOPIC = "_SYS_MSG_PRIORITY_", "__LITE_TOPIC"
BORN_HOST_PROPERTY = "__BORNHOST"
# MessageConst.STRING_HASH_SET (5.5.0): what a consumer never sees among a message's user properties, and the
# names a user property may not take (ILLEGAL_MESSAGE_PROPERTY_KEY). Anything else stored with a message (a
# 4.x client's own properties, TRACE_CONTEXT, __SHARDINGKEY...) the proxy shows as a user property too.
JAVA_SYSTEM_PROPERTIES = frozenset({
    "1ST_POP_TIME", "ARRIVE_TIME", "BORN_TIMESTAMP", "BUYER_ID", "CLUSTER", "CONSUME_START_TIME", "CORRECTION_FLAG",
    "CORRELATION_ID", "DELAY", "DLQ_ORIGIN_MESSAGE_ID", "DLQ_ORIGIN_TOPIC", "DUP_INFO", "EXTEND_UNIQ_INFO",
    "INNER_MULTI_QUEUE_OFFSET", "INSTANCE_ID", "KEYS", "MAX_OFFSET", "MAX_RECONSUME_TIMES", "MIN_OFFSET",
    "MQ2_FLAG", "MSG_REGION", "MSG_TYPE", "ORIGIN_GROUP", "ORIGIN_MESSAGE_ID", "PGROUP", "POP_CK", "POP_CK_OFFSET",
    "PUSH_REPLY_TIME", "REAL_QID", "REAL_TOPIC", "RECONSUME_TIME", "REPLY_TO_CLIENT", "RETRY_TOPIC", "TAGS",
    "TIMER_DELAY_LEVEL", "TIMER_DELAY_MS", "TIMER_DELAY_SEC", "TIMER_DELIVER_MS", "TIMER_DEL_UNIQKEY",
    "TIMER_DEQUEUE_MS", "TIMER_ENQUEUE_MS", "TIMER_OUT_MS", "TIMER_ROLL_TIMES", "TRACE_ON", "TRANSFER_FLAG",
    "TRAN_MSG", "TRAN_PREPARED_QUEUE_OFFSET", "TTL", "UNIQ_KEY", "WAIT", "_SYS_MSG_PRIORITY_", "__BORNHOST",
    "__CRC32#", "__LITE_TOPIC"})


def ms_to_timestamp(ms: int) -> Timestamp:
    ts = Timestamp()
    ts.seconds, ts.nanos = divmod(int(ms), 1000)
    ts.nanos *= 1_000_000
    return ts


def timestamp_to_ms(ts: Timestamp) -> int:
    return ts.seconds * 1000 + ts.nanos // 1_000_000


def duration_ms(dur: Duration) -> int:
    return dur.seconds * 1000 + dur.nanos // 1_000_000


def ms_to_duration(ms: int) -> Duration:
    dur = Duration()
    dur.seconds, rest = divmod(int(ms), 1000)
    dur.nanos = rest * 1_000_000
    return dur


def message_type_of(props: Mapping[str, str], sys_flag: int = 0) -> d.MessageType.ValueType:
    """The type the proxy reports for a stored message (``TopicMessageType.parseFromMessageProperty``, first match
    wins): TRANSACTION > DELAY (a delay level or timer property) > FIFO > PRIORITY > LITE > NORMAL."""
    if props.get(TRAN_MSG, "").lower() == "true":
        return d.TRANSACTION
    if any(props.get(k) is not None for k in (DELAY, TIMER_DELIVER_MS, "TIMER_DELAY_SEC", "TIMER_DELAY_MS")):
        return d.DELAY
    if props.get(SHARDING_KEY) is not None:
        return d.FIFO
    if props.get(PRIORITY) is not None:
        return d.PRIORITY
    if props.get(LITE_TOPIC) is not None:
        return d.LITE
    return d.NORMAL


def to_properties(msg: d.Message, producer_group: Optional[str]) -> dict[str, str]:
    """The 4.x properties of a 5.x ``Message`` being sent (user properties first, then the system ones)."""
    sp = msg.system_properties
    props = dict(msg.user_properties)
    if sp.message_id:
        props[UNIQ_KEY] = sp.message_id
    if sp.HasField("tag") and sp.tag:
        props[TAGS] = sp.tag
    if sp.keys:
        props[KEYS] = " ".join(sp.keys)
    if sp.HasField("message_group") and sp.message_group:
        props[SHARDING_KEY] = sp.message_group
    if sp.HasField("delivery_timestamp"):
        props[TIMER_DELIVER_MS] = str(timestamp_to_ms(sp.delivery_timestamp))
    if sp.message_type == d.TRANSACTION:
        props[TRAN_MSG] = "true"
        if producer_group:
            props[PGROUP] = producer_group
    if sp.HasField("trace_context") and sp.trace_context:
        props[TRACE_CONTEXT] = sp.trace_context
    if sp.HasField("priority"):
        props[PRIORITY] = str(sp.priority)
    if sp.HasField("lite_topic") and sp.lite_topic:
        props[LITE_TOPIC] = sp.lite_topic
    if sp.born_host.strip():
        props[BORN_HOST_PROPERTY] = sp.born_host
    if sp.HasField("born_timestamp"):
        props["BORN_TIMESTAMP"] = str(timestamp_to_ms(sp.born_timestamp))
    props["WAIT"] = "true"
    return props


def java_split(text: str, sep: str) -> list[str]:
    """Java's ``String.split`` of a plain separator: trailing empty strings dropped."""
    parts = text.split(sep)
    while parts and parts[-1] == "":
        parts.pop()
    return parts


def body_digest(body: bytes) -> d.Digest:
    """MD5, upper-case hex, as the proxy sends it (clients format CRC32 differently, MD5 alike)."""
    return d.Digest(type=d.MD5, checksum=hashlib.md5(body).hexdigest().upper())


def to_grpc_message(m: StoredMessage, topic: Optional[str] = None, receipt: Optional[ReceiptHandle] = None,
                    invisible_ms: Optional[int] = None, namespace: str = "") -> d.Message:
    """A stored record as the 5.x ``Message`` a consumer receives (``topic``: the real topic of a
    retry-topic redelivery)."""
    props = m.properties
    body = m.body
    encoding = d.IDENTITY
    if m.sys_flag & 0x1:          # COMPRESSED: 4.x clients zlib-deflate bodies
        try:
            body = zlib.decompress(body)
        except zlib.error:
            pass
    born_host = props.get(BORN_HOST_PROPERTY) or ""
    sp = d.SystemProperties(
        message_id=props.get(UNIQ_KEY) or m.msg_id,
        body_digest=body_digest(body),
        body_encoding=encoding,
        message_type=message_type_of(props, m.sys_flag),
        born_timestamp=ms_to_timestamp(m.born_timestamp),
        born_host=born_host if born_host.strip() else m.born_host[0],
        store_timestamp=ms_to_timestamp(m.store_timestamp),
        store_host=f"{m.store_host[0]}:{m.store_host[1]}",
        queue_id=m.queue_id,
        queue_offset=m.queue_offset,
        delivery_attempt=m.reconsume_times + 1,
    )
    # GrpcConverter.buildSystemProperties: a field for each property present
    if props.get(TAGS) is not None:
        sp.tag = props[TAGS]
    if props.get(KEYS) is not None:
        sp.keys.extend(java_split(props[KEYS], " "))
    if props.get(SHARDING_KEY) is not None:
        sp.message_group = props[SHARDING_KEY]
    if props.get("TIMER_DELAY_SEC", "").isdigit():
        sp.delivery_timestamp.CopyFrom(ms_to_timestamp(int(time.time() * 1000) + int(props["TIMER_DELAY_SEC"]) * 1000))
    elif props.get(TIMER_DELIVER_MS, "").lstrip("-").isdigit():
        sp.delivery_timestamp.CopyFrom(ms_to_timestamp(int(props[TIMER_DELIVER_MS])))
    if props.get(TRACE_CONTEXT) is not None:
        sp.trace_context = props[TRACE_CONTEXT]
    if props.get(LITE_TOPIC) is not None:
        sp.lite_topic = props[LITE_TOPIC]
    priority = props.get(PRIORITY, "")
    if priority.isdigit():
        sp.priority = min(int(priority), 2 ** 31 - 1)
    if receipt is not None:
        sp.receipt_handle = receipt.encode()
    if invisible_ms is not None:
        sp.invisible_duration.CopyFrom(ms_to_duration(invisible_ms))
    origin_topic, origin_id = props.get("DLQ_ORIGIN_TOPIC"), props.get("DLQ_ORIGIN_MESSAGE_ID")
    if origin_topic is not None and origin_id is not None:
        sp.dead_letter_queue.CopyFrom(d.DeadLetterQueue(topic=origin_topic, message_id=origin_id))
    user = {k: v for k, v in props.items() if k not in JAVA_SYSTEM_PROPERTIES}
    return d.Message(topic=d.Resource(resource_namespace=namespace, name=topic or m.topic),
                     user_properties=user, system_properties=sp, body=body)
