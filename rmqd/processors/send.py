"""SEND_MESSAGE (10), SEND_MESSAGE_V2 (310), SEND_BATCH_MESSAGE (320) (README §3.2, §4.5).

Java: ``SendMessageProcessor`` / ``AbstractSendMessageProcessor.msgCheck``.  Runs in the send pool;
this is the throughput path, so the common case (existing topic, single message) does one dict
lookup for the topic, a few string operations on the properties and one ``put_messages`` call.

Hook: ``SendMessageProcessor.add_before_store(hook, markers)`` – a callable
``(ctx, msgs) -> response|None`` run just before the store write (delay levels, timers plug in
here).  Returning a response short-circuits the send.  ``markers`` are the property substrings
the hook acts on: a message carrying none of them may take the send fast lane
(``rmqd.cython_ext.send_lane``), which serves plain single-message sends on the event loop and
hands everything else to this processor.
"""
from __future__ import annotations

import logging
import random
import struct
from typing import TYPE_CHECKING, Any, Callable, Optional

from rmqd.remoting.codes import FAQ_SUGGEST, ResponseCode, Version
from rmqd.remoting.command import RPC_TYPE_RESPONSE, RemotingCommand, error_response
from rmqd.cython_ext.send_lane import SendLane
from rmqd.remoting.dispatch import TO_POOL
from rmqd.store.message import (MULTI_TAGS_FLAG, MessageToStore, find_property, java_string_hash)
from rmqd.store.message_store import PutMessageStatus
from rmqd.store.topic_attributes import is_compaction_topic
from rmqd.store.metadata import (DLQ_GROUP_TOPIC_PREFIX, PERM_READ, PERM_WRITE,
                                 RETRY_GROUP_TOPIC_PREFIX, TOPIC_NAME_RE)

if TYPE_CHECKING:
    from rmqd.broker_controller import BrokerController

log = logging.getLogger(__name__)

# Topics a client may never send to (Java TopicValidator.NOT_ALLOWED_SEND_TOPIC_SET).
NOT_ALLOWED_SEND_TOPICS = frozenset({
    "SCHEDULE_TOPIC_XXXX", "RMQ_SYS_TRANS_HALF_TOPIC", "RMQ_SYS_TRANS_OP_HALF_TOPIC",
    "TRANS_CHECK_MAX_TIME_TOPIC", "SELF_TEST_TOPIC", "OFFSET_MOVED_EVENT",
})

# V2 compact header name -> full name
V2_NAMES = {"a": "producerGroup", "b": "topic", "c": "defaultTopic", "d": "defaultTopicQueueNums",
            "e": "queueId", "f": "sysFlag", "g": "bornTimestamp", "h": "flag", "i": "properties",
            "j": "reconsumeTimes", "k": "unitMode", "l": "maxReconsumeTimes", "m": "batch"}

_REQUIRED = ("defaultTopic", "defaultTopicQueueNums", "queueId", "sysFlag",
             "bornTimestamp", "flag")


def full_header(request: RemotingCommand) -> dict:
    """The send header under its full field names (codes 310/320 use the compact ``a..n``)."""
    ext = request.ext_fields or {}
    if request.code == 10:
        return ext
    names = V2_NAMES
    return {names.get(k, k): v for k, v in ext.items()}


# Largest body appended on the event loop (a few pages of memcpy); larger ones use the pool.
INLINE_MAX_BODY = 256 * 1024

PROP_SEP = "\x02"
NV_SEP = "\x01"
_BATCH_HDR = struct.Struct(">iiiii")   # totalSize, magic, bodyCRC, flag, bodyLen
_I16 = struct.Struct(">h")

_STATUS_CODES = {
    PutMessageStatus.PUT_OK: (ResponseCode.SUCCESS, None),
    PutMessageStatus.FLUSH_DISK_TIMEOUT: (ResponseCode.FLUSH_DISK_TIMEOUT, None),
    PutMessageStatus.FLUSH_SLAVE_TIMEOUT: (ResponseCode.FLUSH_SLAVE_TIMEOUT, None),
    PutMessageStatus.SLAVE_NOT_AVAILABLE: (ResponseCode.SLAVE_NOT_AVAILABLE, None),
    PutMessageStatus.CREATE_MAPEDFILE_FAILED: (ResponseCode.SYSTEM_ERROR,
                                               "create mapped file failed, server is busy or broken."),
    # MESSAGE_ILLEGAL / PROPERTIES_SIZE_EXCEEDED: ILLEGAL_REMARK with maxMessageSize (SendMessageProcessor)
    PutMessageStatus.SERVICE_NOT_AVAILABLE: (ResponseCode.SERVICE_NOT_AVAILABLE,
                                             "service not available now. It may be caused by one of the following "
                                             "reasons: the broker's disk is full, messages are put to the slave, "
                                             "message store has been shut down, etc."),
    PutMessageStatus.OS_PAGECACHE_BUSY: (ResponseCode.SYSTEM_ERROR,
                                         "[PC_SYNCHRONIZED]broker busy, start flow control for a while"),
    PutMessageStatus.UNKNOWN_ERROR: (ResponseCode.SYSTEM_ERROR, "UNKNOWN_ERROR"),
}


ILLEGAL_REMARK = ("the message is illegal, maybe msg body or properties length not matched. msg body length "
                  "limit %dB, msg properties length limit 32KB.")
_ILLEGAL = (PutMessageStatus.MESSAGE_ILLEGAL, PutMessageStatus.PROPERTIES_SIZE_EXCEEDED)

_PUT_OK = PutMessageStatus.PUT_OK
_SUCCESS = int(ResponseCode.SUCCESS)


def _truthy(value: Optional[str]) -> bool:
    """Java parseBoolean, but also the C++ client's "1" (it sends batch/m as "1")."""
    return value is not None and (value == "1" or value.lower() == "true")


def strip_property(props: str, name: str) -> str:
    """Remove ``name`` from an encoded properties string (no-op when absent)."""
    key = name + NV_SEP
    if key not in props:
        return props
    parts = [p for p in props.split(PROP_SEP) if p and not p.startswith(key)]
    return PROP_SEP.join(parts)


def join_properties(props: str, extra: str) -> str:
    if not props:
        return extra
    if props.endswith(PROP_SEP):
        return props + extra
    return props + PROP_SEP + extra


class SendContext:
    """Per-request values shared with ``before_store`` hooks."""

    __slots__ = ("conn", "request", "header", "topic_config", "queue_id", "producer_group", "batch")

    def __init__(self, conn: Any, request: RemotingCommand, header: dict, topic_config: Any,
                 queue_id: int, producer_group: str, batch: bool) -> None:
        self.conn = conn
        self.request = request
        self.header = header
        self.topic_config = topic_config
        self.queue_id = queue_id
        self.producer_group = producer_group
        self.batch = batch


def decode_batch(body: Any) -> list[tuple[int, bytes, str]]:
    """Batch body (§4.5) → [(flag, body, properties)]; raises ValueError when malformed."""
    mv = memoryview(body)
    n = len(mv)
    pos = 0
    out = []
    while pos < n:
        if n - pos < 20:
            raise ValueError(f"truncated batch record at {pos}")
        total, _magic, _crc, flag, body_len = _BATCH_HDR.unpack_from(mv, pos)
        start = pos + 20
        if body_len < 0 or start + body_len + 2 > n:
            raise ValueError(f"bad batch body length {body_len} at {pos}")
        msg_body = bytes(mv[start:start + body_len])
        p = start + body_len
        props_len = _I16.unpack_from(mv, p)[0]
        p += 2
        if props_len < 0 or p + props_len > n:
            raise ValueError(f"bad batch properties length {props_len} at {pos}")
        props = bytes(mv[p:p + props_len]).decode("utf-8")
        p += props_len
        if total != p - pos:
            raise ValueError(f"batch record size {total} does not match its content ({p - pos})")
        out.append((flag, msg_body, props))
        pos = p
    return out


class SendMessageProcessor:
    """Handles codes 10, 310 and 320."""

    def __init__(self, broker: "BrokerController") -> None:
        self.broker = broker
        self.config = broker.config
        self.store = broker.store
        self.topics = broker.topic_config_manager
        self.groups = broker.subscription_group_manager
        self.before_store: list[Callable[[SendContext, list], Optional[RemotingCommand]]] = []
        # TRAN_MSG=true → half message (installed by rmqd.processors.transaction)
        self.prepare_half_message: Optional[Callable[[MessageToStore], MessageToStore]] = None
        self._valid_topics: set[str] = set()
        self.lane = SendLane()
        self.lane.valid_topics = self._valid_topics
        # TRAN_MSG: half messages; __SHARDINGKEY: FIFO messages, counted as message_type=fifo (rmqd.metrics)
        self.lane.markers = ("TRAN_MSG", "__SHARDINGKEY")

    # ------------------------------------------------------------------ fast lane
    def add_before_store(self, hook: Callable[[SendContext, list], Optional[RemotingCommand]],
                         markers: tuple[str, ...]) -> None:
        """Run ``hook`` before every store write; messages whose properties contain one of
        ``markers`` (substrings) never take the fast lane, so the hook sees all it acts on."""
        self.before_store.append(hook)
        self.lane.markers = tuple(dict.fromkeys(self.lane.markers + tuple(markers)))

    def open_lane(self) -> None:
        """Serve plain sends on the event loop (ASYNC_FLUSH only; called once the broker's
        address is known, since it is part of every msgId)."""
        lane = self.lane
        lane.engine = self.store._engine
        lane.ok_status = _PUT_OK
        lane.topic_manager = self.topics
        lane.broker_config = self.config
        lane.store_host = self.broker.store_host
        lane.msg_id_prefix = self.broker.msg_id_prefix
        lane.max_body = INLINE_MAX_BODY
        lane.sync_flush = self.store.config.flush_disk_type == "SYNC_FLUSH"
        lane.flush_waiter = self._answer_when_flushed
        lane.request_hook = self.broker.dispatcher.request_hook
        lane.enabled = True

    def _answer_when_flushed(self, conn: Any, end_offset: int, ok_frame: bytes, timeout_frame: bytes) -> None:
        """SYNC_FLUSH lane sends: the message is stored; its answer leaves once the group commit
        has flushed it (FLUSH_DISK_TIMEOUT after syncFlushTimeout), without holding a thread."""
        self.store.on_flushed(end_offset, lambda flushed: conn.send_encoded(
            [ok_frame if flushed else timeout_frame]))

    def forget_lane_topic(self, topic: str) -> None:
        """Keep ``topic`` off the fast lane (a COMPACTION topic: its sends need the key check)."""
        self._valid_topics.discard(topic)

    def close_lane(self) -> None:
        self.lane.enabled = False

    # ------------------------------------------------------------------ entry point
    def process(self, conn: Any, request: RemotingCommand) -> Optional[RemotingCommand]:
        h = full_header(request)
        if "topic" not in h:        # Java: a null topic fails TopicValidator, with the send ext fields
            return self._with_send_ext(error_response(ResponseCode.SYSTEM_ERROR, "The specified topic is blank."))
        for name in _REQUIRED:
            if name not in h:
                return error_response(ResponseCode.SYSTEM_ERROR, f"the custom field <{name}> is null")
        return self.send(conn, request, h)

    def _with_send_ext(self, response: RemotingCommand) -> RemotingCommand:
        """Java adds MSG_REGION and TRACE_ON to the send response before any check, so failures carry them."""
        ext = dict(response.ext_fields or {})
        ext.setdefault("MSG_REGION", self.config.regionId)
        ext.setdefault("TRACE_ON", "true" if self.config.traceOn else "false")
        response.ext_fields = ext
        return response

    def process_inline(self, conn: Any, request: RemotingCommand) -> Any:
        """Loop-thread fast path (see ``Dispatcher.register(inline_first=...)``).

        Under ASYNC_FLUSH, appending one small message to an existing topic is a memory copy into
        the mapped CommitLog: it is answered right here.  Anything that may block or loop over
        many messages (SYNC_FLUSH waits, auto-create writing topics.json and re-registering,
        retry/DLQ routing, batches, large bodies) goes to the send pool.
        """
        if self.store.config.flush_disk_type != "ASYNC_FLUSH":
            return TO_POOL
        body = request.body
        if body is not None and len(body) > INLINE_MAX_BODY:
            return TO_POOL
        ext = request.ext_fields
        if not ext:
            return TO_POOL
        if request.code == 10:
            topic, batch = ext.get("topic"), ext.get("batch")
        else:
            topic, batch = ext.get("b"), ext.get("m")
        if topic is None or _truthy(batch) or topic.startswith(RETRY_GROUP_TOPIC_PREFIX) or \
                self.topics.get(topic) is None:
            return TO_POOL
        return self.process(conn, request)

    # ------------------------------------------------------------------ checks (Java msgCheck)
    def _check_topic(self, conn: Any, h: dict) -> tuple[Optional[RemotingCommand], Any]:
        topic = h["topic"]
        cfg = self.config
        if not (cfg.brokerPermission & PERM_WRITE):
            tc = self.topics.get(topic)
            if tc is not None and tc.order:
                return error_response(ResponseCode.NO_PERMISSION,
                                      f"the broker[{cfg.brokerIP1}] sending message is forbidden"), None
        if topic not in self._valid_topics:
            if not topic.strip():
                return error_response(ResponseCode.SYSTEM_ERROR, "The specified topic is blank."), None
            if not TOPIC_NAME_RE.match(topic):
                return error_response(ResponseCode.SYSTEM_ERROR,
                                      "The specified topic contains illegal characters, allowing only "
                                      "^[%|a-zA-Z0-9_-]+$"), None
            if len(topic) > 127:
                return error_response(ResponseCode.SYSTEM_ERROR,
                                      "The specified topic is longer than topic max length."), None
            if topic in NOT_ALLOWED_SEND_TOPICS:
                return error_response(ResponseCode.NO_PERMISSION,
                                      f"Sending message to topic[{topic}] is forbidden."), None
        tc = self.topics.get(topic)
        if topic not in self._valid_topics and len(self._valid_topics) < 100000 and \
                (tc is None or not is_compaction_topic(tc)):
            self._valid_topics.add(topic)
        if tc is None:
            sys_flag = 0
            if _truthy(h.get("unitMode")):
                sys_flag = 1 if not topic.startswith(RETRY_GROUP_TOPIC_PREFIX) else 2
            if topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
                tc = self.topics.create_topic_in_send_message_back_method(
                    topic, 1, PERM_READ | PERM_WRITE, sys_flag)
            else:
                tc = self.topics.create_topic_in_send_message_method(
                    topic, h["defaultTopic"], conn.remote_address, int(h["defaultTopicQueueNums"]), sys_flag)
            if tc is None:
                return error_response(ResponseCode.TOPIC_NOT_EXIST,
                                      f"topic[{topic}] not exist, apply first please!{FAQ_SUGGEST}"), None
            # The topics.json change callback re-registers with the name servers (synchronously
            # on this thread), so the new route is visible when the client gets this response.
        queue_id = int(h["queueId"])
        id_valid = max(tc.write_queue_nums, tc.read_queue_nums)
        if queue_id >= id_valid:
            return error_response(ResponseCode.SYSTEM_ERROR,
                                  f"request queueId[{queue_id}] is illegal, {tc.java_str()} Producer: "
                                  f"{conn.remote_address}"), None
        return None, tc

    # ------------------------------------------------------------------ send
    def send(self, conn: Any, request: RemotingCommand, h: dict) -> RemotingCommand:
        response = self._send(conn, request, h)
        if response is not None and response.code != _SUCCESS and not response.ext_fields:
            self._with_send_ext(response)
        return response

    def _send(self, conn: Any, request: RemotingCommand, h: dict) -> RemotingCommand:
        err, tc = self._check_topic(conn, h)
        if err is not None:
            return err
        if not (tc.perm & PERM_WRITE):
            return error_response(ResponseCode.NO_PERMISSION,
                                  f"the topic[{tc.topic_name}] sending message is forbidden")
        topic = tc.topic_name
        queue_id = int(h["queueId"])
        if queue_id < 0:
            queue_id = random.randrange(max(1, tc.write_queue_nums))
        sys_flag = int(h["sysFlag"])
        if tc.topic_filter_type == "MULTI_TAG":
            sys_flag |= MULTI_TAGS_FLAG
        reconsume_times = int(h.get("reconsumeTimes") or 0)
        props = h.get("properties") or ""
        batch = _truthy(h.get("batch"))
        if topic.startswith(RETRY_GROUP_TOPIC_PREFIX) and not batch:
            resp, topic, queue_id = self._handle_retry(conn, request, h, topic, queue_id,
                                                       reconsume_times)
            if resp is not None:
                return resp
            props = strip_property(props, "DELAY") if topic.startswith(DLQ_GROUP_TOPIC_PREFIX) else props

        broker = self.broker
        born_host = (conn.peer_host, conn.peer_port)
        store_host = broker.store_host
        born_ts = int(h["bornTimestamp"])
        cluster = NV_SEP.join(("CLUSTER", self.config.brokerClusterName))
        tran = False
        if batch:
            try:
                records = decode_batch(request.body if request.body is not None else b"")
            except (ValueError, UnicodeDecodeError, struct.error) as exc:
                return error_response(ResponseCode.MESSAGE_ILLEGAL, f"bad batch body: {exc}")
            if not records:
                return error_response(ResponseCode.MESSAGE_ILLEGAL, "empty batch")
            tail = join_properties(strip_property(props, "WAIT"), cluster)
            msgs = []
            for flag, body, own in records:
                p = join_properties(own, tail)
                tags = find_property(own, "TAGS")
                msgs.append(MessageToStore(topic, queue_id, body, p, flag, sys_flag, born_ts, born_host,
                                           store_host, reconsume_times, 0,
                                           java_string_hash(tags) if tags else 0,
                                           find_property(own, "KEYS"), find_property(own, "UNIQ_KEY")))
        else:
            body = request.body if request.body is not None else b""
            tran = bool(props) and "TRAN_MSG" in props and find_property(props, "TRAN_MSG") == "true"
            if tran and self.config.rejectTransactionMessage:
                return error_response(ResponseCode.NO_PERMISSION,
                                      f"the broker[{self.config.brokerIP1}] sending transaction message is forbidden")
            if props:
                tags = find_property(props, "TAGS")
                keys = find_property(props, "KEYS")
                uniq = find_property(props, "UNIQ_KEY")
                if "WAIT\x01true" in props:
                    props = strip_property(props, "WAIT")
                stored_props = join_properties(props, cluster)
            else:
                tags = keys = uniq = None
                stored_props = cluster
            if is_compaction_topic(tc) and not (keys and keys.strip()):
                return error_response(ResponseCode.MESSAGE_ILLEGAL, "Required message key is missing")
            msgs = [MessageToStore(topic, queue_id, body, stored_props, int(h["flag"]), sys_flag, born_ts,
                                   born_host, store_host, reconsume_times, 0,
                                   java_string_hash(tags) if tags else 0, keys, uniq)]
            if tran and self.prepare_half_message is not None and \
                    not (reconsume_times > 0 and find_property(props, "DELAY")):
                self.prepare_half_message(msgs[0])
        if self.before_store:
            ctx = SendContext(conn, request, h, tc, queue_id, h.get("producerGroup"), batch)
            for hook in self.before_store:
                resp = hook(ctx, msgs)
                if resp is not None:
                    return resp
            if msgs[0].topic == topic:        # a hook may choose the queue of the topic (priority messages)
                queue_id = msgs[0].queue_id
        result = self.store.put_message(msgs[0]) if len(msgs) == 1 else self.store.put_messages(msgs)
        if result.status is _PUT_OK:
            code = _SUCCESS
            broker.metrics.messages.on_put(tc.topic_name, h.get("properties"), [len(m.body) for m in msgs])
        else:
            if result.status in _ILLEGAL:
                log.info("send to %s from %s refused: %s", tc.topic_name, conn.remote_address, result.remark)
                return error_response(ResponseCode.MESSAGE_ILLEGAL, ILLEGAL_REMARK % self.store.config.max_message_size)
            code, remark = _STATUS_CODES.get(result.status, (ResponseCode.SYSTEM_ERROR, None))
            if code not in (ResponseCode.SUCCESS, ResponseCode.FLUSH_DISK_TIMEOUT,
                            ResponseCode.FLUSH_SLAVE_TIMEOUT, ResponseCode.SLAVE_NOT_AVAILABLE):
                if result.remark:
                    remark = f"{remark} ({result.remark})" if remark else result.remark
                return error_response(code, remark or result.status.name)
        prefix = broker.msg_id_prefix
        if len(result.wrote_offsets) == 1:
            msg_id = "%s%016X" % (prefix, result.wrote_offsets[0])
        else:
            msg_id = ",".join("%s%016X" % (prefix, off) for off in result.wrote_offsets)
        ext = {
            "msgId": msg_id,
            "queueId": str(queue_id),
            "queueOffset": str(result.queue_offset),
            "MSG_REGION": self.config.regionId,
            "TRACE_ON": "true" if self.config.traceOn else "false",
        }
        if tran and uniq:
            ext["transactionId"] = uniq
        return RemotingCommand(code, ext, None, None, 0, RPC_TYPE_RESPONSE)

    # ------------------------------------------------------------------ retry topics
    def _handle_retry(self, conn: Any, request: RemotingCommand, h: dict, topic: str, queue_id: int,
                      reconsume_times: int) -> tuple[Optional[RemotingCommand], str, int]:
        """Java handleRetryAndDLQ: too many reconsumes → ``%DLQ%<group>``."""
        group = topic[len(RETRY_GROUP_TOPIC_PREFIX):]
        sg = self.groups.find(group)
        if sg is None:
            return error_response(ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
                                  f"subscription group not exist, {group} {FAQ_SUGGEST}"), topic, queue_id
        max_times = sg.retry_max_times
        if request.version >= Version.V3_4_9 and h.get("maxReconsumeTimes") not in (None, ""):
            max_times = int(h["maxReconsumeTimes"])
        if reconsume_times >= max_times:
            dlq = DLQ_GROUP_TOPIC_PREFIX + group
            tc = self.topics.create_topic_in_send_message_back_method(dlq, 1, PERM_READ | PERM_WRITE, 0)
            if tc is None:
                return error_response(ResponseCode.SYSTEM_ERROR, f"topic[{dlq}] not exist"), topic, queue_id
            self.broker.metrics.messages.on_dlq(group, find_property(h.get("properties") or "", "RETRY_TOPIC")
                                                or topic)
            return None, dlq, random.randrange(max(1, tc.write_queue_nums))
        return None, topic, queue_id
