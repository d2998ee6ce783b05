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
from typing import TYPE_CHECKING, Callable, Optional, Union, cast

from rmqd.broker.context import BrokerContext, ContextProcessor
from rmqd.broker.timer import TIMER_TOPIC
from rmqd.common.constants import (DLQ_GROUP_TOPIC_PREFIX, NAME_VALUE_SEPARATOR, OFFSET_MOVED_EVENT, PERM_READ, PERM_WRITE,
                            PROPERTY_SEPARATOR, RETRY_GROUP_TOPIC_PREFIX, SCHEDULE_TOPIC, SELF_TEST_TOPIC,
                            TRANS_CHECK_MAX_TIME_TOPIC, TRANS_HALF_TOPIC, TRANS_OP_HALF_TOPIC, dlq_topic)
from rmqd.remoting.codes import FAQ_SUGGEST, RequestCode, ResponseCode, Version
from rmqd.remoting.command import RPC_TYPE_RESPONSE, RemotingCommand, error_response
from rmqd.cython_ext.send_lane import SendLane
from rmqd.remoting.dispatch import TO_POOL, Dispatcher, ProcessorPool
from rmqd.processors.recall import recall_handle_for
from rmqd.replicas.answers import answer_for
from rmqd.store.message import (MULTI_TAGS_FLAG, MessageToStore, find_property, java_string_hash)
from rmqd.store.message_store import PutMessageStatus
from rmqd.store.topic_attributes import is_compaction_topic
from rmqd.store.metadata import TOPIC_NAME_RE

if TYPE_CHECKING:
    from rmqd.cython_ext.store_put import PutMessageResult
    from rmqd.processors.handles import RequestPeer
    from rmqd.remoting.connection import Connection
    from rmqd.remoting.dispatch import HandlerResult, RequestHook
    from rmqd.store.metadata import TopicConfig

log = logging.getLogger(__name__)

# Topics a client may never send to (Java TopicValidator.NOT_ALLOWED_SEND_TOPIC_SET).
NOT_ALLOWED_SEND_TOPICS = frozenset({
    SCHEDULE_TOPIC, TRANS_HALF_TOPIC, TRANS_OP_HALF_TOPIC, TRANS_CHECK_MAX_TIME_TOPIC, SELF_TEST_TOPIC,
    OFFSET_MOVED_EVENT,
})

# V2 compact header name -> full name
V2_NAMES = {"a": "producerGroup", "b": "topic", "c": "defaultTopic", "d": "defaultTopicQueueNums",
            "e": "queueId", "f": "sysFlag", "g": "bornTimestamp", "h": "flag", "i": "properties",
            "j": "reconsumeTimes", "k": "unitMode", "l": "maxReconsumeTimes", "m": "batch"}

REQUIRED_SEND_FIELDS = ("defaultTopic", "defaultTopicQueueNums", "queueId", "sysFlag",
             "bornTimestamp", "flag")


def full_header(request: RemotingCommand) -> dict[str, str]:
    """The send header under its full field names (codes 310/320 use the compact ``a..n``)."""
    ext = request.ext_fields or {}
    if request.code == 10:
        return ext
    names = V2_NAMES
    return {names.get(k, k): v for k, v in ext.items()}


# Largest body appended on the event loop (a few pages of memcpy); larger ones use the pool.
INLINE_MAX_BODY = 256 * 1024

PROP_SEP = PROPERTY_SEPARATOR
NV_SEP = NAME_VALUE_SEPARATOR
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


def truthy(value: Optional[str]) -> bool:
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


class _Stamp:
    """What every message of one send request carries: where it goes and who sent it."""

    __slots__ = ("topic", "queue_id", "sys_flag", "born_ts", "born_host", "store_host", "reconsume_times",
                 "cluster")

    def __init__(self, topic: str, queue_id: int, sys_flag: int, born_ts: int, born_host: tuple[str, int],
                 store_host: tuple[str, int], reconsume_times: int, cluster: str) -> None:
        self.topic = topic
        self.queue_id = queue_id
        self.sys_flag = sys_flag
        self.born_ts = born_ts
        self.born_host = born_host
        self.store_host = store_host
        self.reconsume_times = reconsume_times
        self.cluster = cluster


class SendContext:
    """Per-request values shared with ``before_store`` hooks."""

    __slots__ = ("conn", "request", "header", "topic_config", "queue_id", "producer_group", "batch")

    def __init__(self, conn: RequestPeer, request: RemotingCommand, header: dict[str, str], topic_config: TopicConfig,
                 queue_id: int, producer_group: Optional[str], batch: bool) -> None:
        self.conn = conn
        self.request = request
        self.header = header
        self.topic_config = topic_config
        self.queue_id = queue_id
        self.producer_group = producer_group
        self.batch = batch


def decode_batch(body: Union[bytes, bytearray, memoryview]) -> list[tuple[int, bytes, str]]:
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


# A ``before_store`` hook: (the send's context, its messages) -> the response that ends the send, or None.
BeforeStore = Callable[[SendContext, list[MessageToStore]], Optional[RemotingCommand]]


class SendMessageProcessor(ContextProcessor):
    """Handles codes 10, 310 and 320."""

    def __init__(self, ctx: BrokerContext) -> None:
        super().__init__(ctx)
        self.before_store: list[BeforeStore] = []
        # TRAN_MSG=true → half message (the broker sets TransactionalMessageBridge.prepare_half_message)
        self.prepare_half_message: Optional[Callable[[MessageToStore], MessageToStore]] = None
        self._valid_topics: set[str] = set()
        self.lane = SendLane()
        self.lane.valid_topics = self._valid_topics
        # TRAN_MSG: half messages; __SHARDINGKEY: FIFO messages, counted as message_type=fifo (rmqd.metrics)
        self.lane.markers = ("TRAN_MSG", "__SHARDINGKEY")

    def register(self, dispatcher: Dispatcher, pool: ProcessorPool) -> None:
        """Codes 10/310/320: on the loop first (:meth:`process_inline`), else in the send pool."""
        dispatcher.register([RequestCode.SEND_MESSAGE, RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_BATCH_MESSAGE],
                            self.process, pool, inline_first=self.process_inline)

    # ------------------------------------------------------------------ fast lane
    def add_before_store(self, hook: BeforeStore,
                         markers: tuple[str, ...]) -> None:
        """Run ``hook`` before every store write; messages whose properties contain one of
        ``markers`` (substrings) never take the fast lane, so the hook sees all it acts on."""
        self.before_store.append(hook)
        self.lane.markers = tuple(dict.fromkeys(self.lane.markers + tuple(markers)))

    def open_lane(self, request_hook: Optional[RequestHook] = None) -> None:
        """Serve plain sends on the event loop (ASYNC_FLUSH only; called once the broker's
        address is known, since it is part of every msgId).  ``request_hook``: the dispatcher's (ACL),
        which the lane runs itself."""
        lane = self.lane
        identity = self.ctx.identity
        lane.engine = self.store.put_engine
        lane.ok_status = _PUT_OK
        lane.topic_manager = self.topics
        lane.broker_config = self.config
        lane.store_host = identity.store_host
        lane.msg_id_prefix = identity.msg_id_prefix
        lane.max_body = INLINE_MAX_BODY
        # SYNC_FLUSH or SYNC_MASTER: answered once flushed / on a slave; a slave serves no sends (rmqd.replicas)
        lane.sync_flush = self.store.config.flush_disk_type == "SYNC_FLUSH" or \
            getattr(self.store, "waits_for_replica", False)
        lane.flush_waiter = self._answer_when_flushed
        lane.request_hook = request_hook
        lane.enabled = not getattr(self.store, "refuses_puts", False)

    def _answer_when_flushed(self, conn: Connection, end_offset: int, ok_frame: bytes, timeout_frame: bytes) -> None:
        """SYNC_FLUSH / SYNC_MASTER lane sends: the message is stored; its answer leaves once the group commit
        has flushed it (FLUSH_DISK_TIMEOUT after syncFlushTimeout) and a slave has it (SLAVE_NOT_AVAILABLE,
        FLUSH_SLAVE_TIMEOUT), without holding a thread."""
        on_durable = getattr(self.store, "on_durable", None)
        if on_durable is None:
            self.store.on_flushed(end_offset, lambda flushed: conn.send_encoded(
                [ok_frame if flushed else timeout_frame]))
            return
        on_durable(end_offset, lambda status: conn.send_encoded([answer_for(status, ok_frame, timeout_frame)]))

    def forget_lane_topic(self, topic: str) -> None:
        """Keep ``topic`` off the fast lane (a COMPACTION topic: its sends need the key check)."""
        self._valid_topics.discard(topic)

    def close_lane(self) -> None:
        self.lane.enabled = False

    # ------------------------------------------------------------------ entry point
    def process(self, conn: RequestPeer, request: RemotingCommand) -> RemotingCommand:
        h = full_header(request)
        if "topic" not in h:        # Java: a null topic fails TopicValidator, with the send ext fields
            return self._with_send_ext(error_response(ResponseCode.SYSTEM_ERROR, "The specified topic is blank."))
        for name in REQUIRED_SEND_FIELDS:
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

    def process_inline(self, conn: RequestPeer, request: RemotingCommand) -> HandlerResult:
        """Loop-thread fast path (see ``Dispatcher.register(inline_first=...)``).

        Under ASYNC_FLUSH, appending one small message to an existing topic is a memory copy into
        the mapped CommitLog: it is answered right here.  Anything that may block or loop over
        many messages (SYNC_FLUSH waits, auto-create writing topics.json and re-registering,
        retry/DLQ routing, batches, large bodies) goes to the send pool.
        """
        if self.store.config.flush_disk_type != "ASYNC_FLUSH" or getattr(self.store, "waits_for_replica", False):
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
        if topic is None or truthy(batch) or topic.startswith(RETRY_GROUP_TOPIC_PREFIX) or \
                self.topics.get(topic) is None:
            return TO_POOL
        return self.process(conn, request)

    # ------------------------------------------------------------------ checks (Java msgCheck)
    def check_topic(self, conn: RequestPeer,
                    h: dict[str, str]) -> tuple[Optional[RemotingCommand], Optional[TopicConfig]]:
        """Java ``msgCheck``: (error response, None) or (None, the topic's config, auto-created if allowed).
        Shared with SEND_REPLY_MESSAGE."""
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
            if truthy(h.get("unitMode")):
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
    def send(self, conn: RequestPeer, request: RemotingCommand, h: dict[str, str]) -> RemotingCommand:
        response = self._send(conn, request, h)
        if response is not None and response.code != _SUCCESS and not response.ext_fields:
            self._with_send_ext(response)
        return response

    def _send(self, conn: RequestPeer, request: RemotingCommand, h: dict[str, str]) -> RemotingCommand:
        err, tc = self.check_topic(conn, h)
        if err is not None:
            return err
        assert tc is not None       # check_topic answers an error or the topic's config
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
        batch = truthy(h.get("batch"))
        if topic.startswith(RETRY_GROUP_TOPIC_PREFIX) and not batch:
            resp, topic, queue_id = self._handle_retry(conn, request, h, topic, queue_id,
                                                       reconsume_times)
            if resp is not None:
                return resp
            props = strip_property(props, "DELAY") if topic.startswith(DLQ_GROUP_TOPIC_PREFIX) else props
        m = _Stamp(topic, queue_id, sys_flag, int(h["bornTimestamp"]), (conn.peer_host, conn.peer_port),
                   self.ctx.identity.store_host, reconsume_times,
                   NV_SEP.join(("CLUSTER", self.config.brokerClusterName)))
        if batch:
            msgs = self._batch_messages(request, props, m)
            tran = False
            uniq = None
        else:
            msgs, tran, uniq = self._single_message(request, h, tc, props, m)
        if isinstance(msgs, RemotingCommand):
            return msgs
        if self.before_store:
            ctx = SendContext(conn, request, h, tc, queue_id, h.get("producerGroup"), batch)
            for hook in self.before_store:
                resp = hook(ctx, msgs)
                if resp is not None:
                    return resp
            if msgs[0].topic == topic:        # a hook may choose the queue of the topic (priority messages)
                queue_id = msgs[0].queue_id
        result = self.store.put_message(msgs[0]) if len(msgs) == 1 else self.store.put_messages(msgs)
        return self._answer(conn, h, tc, msgs, result, queue_id, uniq if tran else None)

    def _batch_messages(self, request: RemotingCommand, props: str,
                        m: "_Stamp") -> Union[list[MessageToStore], RemotingCommand]:
        """The messages of a batch body, each with the batch's properties appended (or the error response)."""
        try:
            records = decode_batch(request.body if request.body is not None else b"")
        except (ValueError, UnicodeDecodeError, struct.error) as exc:
            return error_response(ResponseCode.MESSAGE_ILLEGAL, f"bad batch body: {exc}")
        if not records:
            return error_response(ResponseCode.MESSAGE_ILLEGAL, "empty batch")
        tail = join_properties(strip_property(props, "WAIT"), m.cluster)
        msgs = []
        for flag, body, own in records:
            tags = find_property(own, "TAGS")
            msgs.append(MessageToStore(m.topic, m.queue_id, body, join_properties(own, tail), flag, m.sys_flag,
                                       m.born_ts, m.born_host, m.store_host, m.reconsume_times, 0,
                                       java_string_hash(tags) if tags else 0,
                                       find_property(own, "KEYS"), find_property(own, "UNIQ_KEY")))
        return msgs

    def _single_message(self, request: RemotingCommand, h: dict[str, str], tc: TopicConfig, props: str,
                        m: "_Stamp") -> tuple[Union[list[MessageToStore], RemotingCommand], bool, Optional[str]]:
        """([message], is a half message, UNIQ_KEY), or (error response, False, None)."""
        body = request.body if request.body is not None else b""
        tran = bool(props) and "TRAN_MSG" in props and find_property(props, "TRAN_MSG") == "true"
        if tran and self.config.rejectTransactionMessage:
            return error_response(ResponseCode.NO_PERMISSION, f"the broker[{self.config.brokerIP1}] sending "
                                                              "transaction message is forbidden"), False, None
        if props:
            tags = find_property(props, "TAGS")
            keys = find_property(props, "KEYS")
            uniq = find_property(props, "UNIQ_KEY")
            if "WAIT\x01true" in props:
                props = strip_property(props, "WAIT")
            stored_props = join_properties(props, m.cluster)
        else:
            tags = keys = uniq = None
            stored_props = m.cluster
        if is_compaction_topic(tc) and not (keys and keys.strip()):
            return error_response(ResponseCode.MESSAGE_ILLEGAL, "Required message key is missing"), False, None
        msg = MessageToStore(m.topic, m.queue_id, body, stored_props, int(h["flag"]), m.sys_flag, m.born_ts,
                             m.born_host, m.store_host, m.reconsume_times, 0,
                             java_string_hash(tags) if tags else 0, keys, uniq)
        if tran and self.prepare_half_message is not None and \
                not (m.reconsume_times > 0 and find_property(props, "DELAY")):
            self.prepare_half_message(msg)
        return [msg], tran, uniq

    def _answer(self, conn: RequestPeer, h: dict[str, str], tc: TopicConfig, msgs: list[MessageToStore],
                result: PutMessageResult, queue_id: int,
                transaction_id: Optional[str]) -> RemotingCommand:
        """The send response of a store result (Java ``handlePutMessageResult``)."""
        if result.status is _PUT_OK:
            code = _SUCCESS
            # the bodies put here are bytes (the stub types MessageToStore.body as any readable buffer)
            self.ctx.metrics.messages.on_put(tc.topic_name, h.get("properties"),
                                             [len(cast("bytes", m.body)) for m in msgs])
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
        prefix = self.ctx.identity.msg_id_prefix
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
        if transaction_id:
            ext["transactionId"] = transaction_id
        if len(msgs) == 1 and msgs[0].topic == TIMER_TOPIC:        # 5.x: a parked timer message can be recalled
            handle = recall_handle_for(msgs[0], self.config.brokerName)
            if handle is not None:
                ext["recallHandle"] = handle
        return RemotingCommand(code, ext, None, None, 0, RPC_TYPE_RESPONSE)

    # ------------------------------------------------------------------ retry topics
    def _handle_retry(self, conn: RequestPeer, request: RemotingCommand, h: dict[str, str], topic: str, queue_id: int,
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
            dlq = dlq_topic(group)
            tc = self.topics.create_topic_in_send_message_back_method(dlq, 1, PERM_READ | PERM_WRITE, 0)
            if tc is None:
                return error_response(ResponseCode.SYSTEM_ERROR, f"topic[{dlq}] not exist"), topic, queue_id
            self.ctx.metrics.messages.on_dlq(group, find_property(h.get("properties") or "", "RETRY_TOPIC")
                                                or topic)
            return None, dlq, random.randrange(max(1, tc.write_queue_nums))
        return None, topic, queue_id
