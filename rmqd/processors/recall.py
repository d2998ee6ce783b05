"""Message recall (RocketMQ 5.3.2+): RECALL_MESSAGE 370, and the recall handle of a timer message's send.

Java: ``RecallMessageProcessor``, ``RecallMessageHandle``, ``SendMessageProcessor.attachRecallHandle``.

- A send whose message is parked on the timer wheel (``TIMER_DELIVER_MS`` / ``TIMER_DELAY_SEC`` /
  ``TIMER_DELAY_MS``; not a delay level, not a batch, not a retry topic) answers a ``recallHandle`` header:
  URL-safe Base64 of ``"v1 <topic> <brokerName> <TIMER_OUT_MS + 1> <UNIQ_KEY>"`` (:func:`recall_handle_for`).
- A recall (:class:`Recaller`, shared by the remoting code and the gRPC ``RecallMessage``) checks what Java checks,
  in Java's order, then stores a delete marker on the timer topic: a message carrying ``TIMER_DEL_UNIQKEY =
  <topic>+<UNIQ_KEY>``, due at the handle's time. The timer service (:mod:`rmqd.broker.timer`) learns the key when
  it reads the marker and drops the parked message when it comes due; the marker itself is never delivered. The
  answer is SUCCESS with the marker's msgId as soon as the marker is stored, whether or not a message with that
  key is still parked (as Java).
- ``recallMessageEnable`` (Java default false) gates recall; ``allowRecallWhenBrokerNotWriteable`` (default true)
  lets it through on a broker whose permission is not writable.
"""
from __future__ import annotations

import base64
import binascii
import logging
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Optional

from rmqd.broker.schedule import PROPERTY_REAL_TOPIC, edit_properties
from rmqd.broker.timer import TIMER_OUT_MS, TIMER_TOPIC, park_timer_message
from rmqd.config import BrokerRole
from rmqd.common.constants import PERM_WRITE, RETRY_GROUP_TOPIC_PREFIX
from rmqd.remoting.codes import ResponseCode
from rmqd.remoting.command import MissingHeaderField, RemotingCommand, new_response
from rmqd.remoting.dispatch import Dispatcher, ProcessorPool
from rmqd.store.message import MessageToStore, find_property, java_string_hash
from rmqd.store.message_store import PutMessageStatus

if TYPE_CHECKING:
    from rmqd.config import BrokerConfig
    from rmqd.cython_ext.store_put import PutMessageResult
    from rmqd.processors.handles import RequestPeer
    from rmqd.store.metadata import TopicConfigManager

log = logging.getLogger(__name__)

RECALL_MESSAGE = 370
ILLEGAL_OPERATION = 604
TIMER_DEL_UNIQKEY = "TIMER_DEL_UNIQKEY"
RECALL_TAG = "_RECALL_TAG_"
_VERSION = "v1"
_INVALID = "recall handle is invalid"
NOT_SET_REMARK = "not set any response code"      # Java's createResponseCommand(header class) remark, kept
_NOT_AVAILABLE = "recall failed, broker service not available"
# put statuses Java's RecallMessageProcessor answers SUCCESS to (the marker is stored)
_STORED = frozenset({PutMessageStatus.PUT_OK, PutMessageStatus.FLUSH_DISK_TIMEOUT,
                     PutMessageStatus.FLUSH_SLAVE_TIMEOUT, PutMessageStatus.SLAVE_NOT_AVAILABLE})


class RecallError(Exception):
    """A refused recall: ``code`` is the remoting ResponseCode Java answers, ``remark`` its text."""

    def __init__(self, code: int, remark: str) -> None:
        super().__init__(remark)
        self.code = code
        self.remark = remark


@dataclass(frozen=True)
class RecallHandle:
    """A decoded v1 recall handle (``RecallMessageHandle.HandleV1``)."""

    topic: str
    broker_name: str
    timestamp: str          # ms, as text: Java parses it leniently (NumberUtils.toLong(..., -1))
    message_id: str         # the message's UNIQ_KEY

    def encode(self) -> str:
        raw = " ".join((_VERSION, self.topic, self.broker_name, self.timestamp, self.message_id))
        return base64.urlsafe_b64encode(raw.encode("utf-8")).decode("ascii")

    @classmethod
    def decode(cls, text: Optional[str]) -> "RecallHandle":
        """Raises ValueError("recall handle is invalid") as Java's decodeHandle does."""
        if not text:
            raise ValueError(_INVALID)
        try:
            raw = base64.urlsafe_b64decode(text.encode("utf-8")).decode("utf-8", errors="replace")
        except (binascii.Error, ValueError):
            raise ValueError(_INVALID) from None
        items = raw.split(" ")
        if items[0] != _VERSION or len(items) < 5:
            raise ValueError(_INVALID)
        return cls(items[1], items[2], items[3], items[4])


def delete_key(topic: str, uniq_key: str) -> str:
    """``TimerMessageStore.buildDeleteKey``: what a delete marker names."""
    return f"{topic}+{uniq_key}"


def recall_handle_for(msg: MessageToStore, broker_name: str) -> Optional[str]:
    """The handle a send answers for ``msg`` as stored (None unless it was parked on the timer wheel)."""
    if msg.topic != TIMER_TOPIC:
        return None
    props = msg.properties or ""
    out = find_property(props, TIMER_OUT_MS)
    real = find_property(props, PROPERTY_REAL_TOPIC)
    uniq = msg.uniq_key or find_property(props, "UNIQ_KEY")
    if out is None or real is None or uniq is None or real.startswith(RETRY_GROUP_TOPIC_PREFIX) \
            or find_property(props, TIMER_DEL_UNIQKEY) is not None:
        return None
    try:
        ts = str(int(out) + 1)              # Java: "consider of floor" (its wheel rounds deliver times down)
    except ValueError:
        return None
    return RecallHandle(real, broker_name, ts, uniq).encode()


def _to_long(text: str) -> int:
    """NumberUtils.toLong(text, -1)."""
    try:
        return int(text)
    except ValueError:
        return -1


class Recaller:
    """The recall itself, for the remoting code and the gRPC endpoint.

    ``config``: the broker's (recallMessageEnable, allowRecallWhenBrokerNotWriteable, brokerPermission,
    brokerName); ``role``: the broker's current role; ``topics``: ``get(topic)``; ``put``: stores one message
    (the store's ``put_message``); ``max_delay_ms``: the timer's longest delay (timerMaxDelaySec);
    ``store_host``: the broker's (host, port)."""

    def __init__(self, config: BrokerConfig, role: Callable[[], BrokerRole], topics: TopicConfigManager,
                 put: Callable[[MessageToStore], PutMessageResult], max_delay_ms: Callable[[], int],
                 store_host: Callable[[], tuple[str, int]]) -> None:
        self.config = config
        self.role = role
        self.topics = topics
        self.put = put
        self.max_delay_ms = max_delay_ms
        self.store_host = store_host

    def recall(self, topic: Optional[str], handle_text: Optional[str], producer_group: Optional[str] = None,
               born_host: tuple[str, int] = ("127.0.0.1", 0)) -> str:
        """Recall the message ``handle_text`` names; returns the delete marker's msgId (Java's answer).
        Raises :class:`RecallError` with Java's code and remark."""
        cfg = self.config
        if not getattr(cfg, "recallMessageEnable", False):
            raise RecallError(ResponseCode.NO_PERMISSION, "recall failed, operation is forbidden")
        if self.role() is BrokerRole.SLAVE:
            raise RecallError(ResponseCode.SLAVE_NOT_AVAILABLE, _NOT_AVAILABLE)
        if not (int(cfg.brokerPermission) & PERM_WRITE) and not getattr(cfg, "allowRecallWhenBrokerNotWriteable", True):
            raise RecallError(ResponseCode.SERVICE_NOT_AVAILABLE, _NOT_AVAILABLE)
        if topic is None:                  # Java: selectTopicConfig(null) fails with a NullPointerException
            raise RecallError(ResponseCode.SYSTEM_ERROR, "the custom field <topic> is null")
        if self.topics.get(topic) is None:
            raise RecallError(ResponseCode.TOPIC_NOT_EXIST, f"recall failed, the topic[{topic}] not exist")
        try:
            handle = RecallHandle.decode(handle_text)
        except ValueError as exc:
            raise RecallError(ILLEGAL_OPERATION, str(exc)) from None
        if handle.topic != topic:
            raise RecallError(ILLEGAL_OPERATION, "recall failed, topic not match")
        if handle.broker_name != cfg.brokerName:
            raise RecallError(ILLEGAL_OPERATION, _NOT_AVAILABLE)
        now = int(time.time() * 1000)
        ts = _to_long(handle.timestamp)
        left = ts - now
        if left <= 0 or left >= self.max_delay_ms():
            raise RecallError(ILLEGAL_OPERATION, "recall failed, timestamp invalid")
        marker = self._marker(handle, ts, now, producer_group, born_host)
        result = self.put(marker)
        if result.status not in _STORED:
            log.warning("recall of %s on %s: storing the delete marker failed: %s %s", handle.message_id, topic,
                        result.status.name, result.remark)
            raise RecallError(ResponseCode.SYSTEM_ERROR, "recall failed, execute error")
        log.info("recall of %s on %s accepted (due %d)", handle.message_id, topic, ts)
        return handle.message_id

    def _marker(self, handle: RecallHandle, ts: int, now: int, producer_group: Optional[str],
                born_host: tuple[str, int]) -> MessageToStore:
        """The delete marker (Java's ``buildMessage``), parked on the timer topic as a timer send would be."""
        props = {"TAGS": RECALL_TAG, TIMER_DEL_UNIQKEY: delete_key(handle.topic, handle.message_id),
                 "UNIQ_KEY": handle.message_id, "TIMER_DELIVER_MS": str(ts), "BORN_TIMESTAMP": str(now),
                 "TRACE_CONTEXT": "", "PGROUP": producer_group or "",
                 "CLUSTER": str(self.config.brokerClusterName)}
        text = edit_properties("", put=props)
        msg = MessageToStore(handle.topic, 0, b"0", text, 0, 0, now, born_host, self.store_host(), 0, 0,
                             java_string_hash(RECALL_TAG), None, handle.message_id)
        remark = park_timer_message(msg, now, self.max_delay_ms())
        if remark is not None or msg.topic != TIMER_TOPIC:
            raise RecallError(ILLEGAL_OPERATION, "recall failed, timestamp invalid")
        return msg


class RecallMessageProcessor:
    """RECALL_MESSAGE over remoting: header ``topic recallHandle [producerGroup]``; answer header ``msgId``
    and, on every answer, ``MSG_REGION`` (as Java)."""

    def __init__(self, recaller: Recaller, region: Callable[[], str]) -> None:
        self.recaller = recaller
        self.region = region

    def register(self, dispatcher: Dispatcher, pool: ProcessorPool) -> None:
        """In the send pool, as Java (the marker is a store write)."""
        dispatcher.register(RECALL_MESSAGE, self.recall_message, pool)

    def recall_message(self, conn: RequestPeer, request: RemotingCommand) -> RemotingCommand:
        """As Java, a missing handle is an invalid one (its header decoder leaves absent fields null); a missing
        topic fails where Java's topic lookup throws, and is answered without the region, as Java's is."""
        ext = request.ext_fields or {}
        try:
            msg_id = self.recaller.recall(ext.get("topic"), ext.get("recallHandle"), ext.get("producerGroup"),
                                          (getattr(conn, "peer_host", "127.0.0.1"), getattr(conn, "peer_port", 0)))
        except RecallError as exc:
            if ext.get("topic") is None and exc.code == ResponseCode.SYSTEM_ERROR:
                raise MissingHeaderField(exc.remark) from None
            return new_response(exc.code, exc.remark, {"MSG_REGION": self.region()})
        return new_response(ResponseCode.SUCCESS, NOT_SET_REMARK, {"MSG_REGION": self.region(), "msgId": msg_id})
