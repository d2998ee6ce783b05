"""What every part of the console's cluster view shares: the error a page shows, the JSON shapes of the pages
(pages of a list, topic kinds, a message), and ``ClusterView``, the model the pages read and act on.
"""
from __future__ import annotations

import base64
from typing import Generic, Mapping, NotRequired, Required, TypedDict, TypeVar

from rmqd.common.constants import DLQ_GROUP_TOPIC_PREFIX, RETRY_GROUP_TOPIC_PREFIX
from rmqd.processors.admin_common import is_system_topic
from rmqd.remoting import fastjson
from rmqd.store.message import StoredMessage

RETRY = RETRY_GROUP_TOPIC_PREFIX
DLQ = DLQ_GROUP_TOPIC_PREFIX
MAX_PAGE = 200
MAX_MESSAGES = 2000           # one message list (the dashboard's cap)
PREVIEW_CHARS = 160
TOPIC_KINDS = ("all", "normal", "retry", "dlq", "system")
CLUSTER_INFO_TTL_S = 2.0

T = TypeVar("T")

#: A page's JSON object as the HTTP layer sends it (values of any JSON type).
JsonObject = dict[str, object]


class Page(TypedDict, Generic[T]):
    """One page of a list (``page_of``)."""

    total: int
    page: int
    pages: int
    size: int
    items: list[T]


class BrokerRow(TypedDict, total=False):
    """A broker of the cluster (``brokers()``); the overview adds its runtime figures and replication lag."""

    cluster: Required[str]
    brokerName: Required[str]
    brokerId: Required[int]
    addr: Required[str]
    error: str
    version: str
    putTps: str
    getTransferredTps: str
    msgPutTotalTodayNow: str
    msgGetTotalTodayNow: str
    commitLogDiskRatio: str
    bootTimestamp: str
    commitLogMaxOffset: int
    lagBytes: int
    lagMillis: int
    inSyncSlaves: int


class TopicRow(TypedDict, total=False):
    """A row of the topic list; ``_fill_topic_row`` adds where the topic lives."""

    topic: Required[str]
    kind: Required[str]
    brokers: list[str]
    readQueueNums: int
    writeQueueNums: int
    perm: int


class QueueRow(TypedDict):
    """A queue of a topic's page."""

    broker: str
    queueId: int
    minOffset: int
    maxOffset: int
    lastUpdateTimestamp: int


class LagRow(TypedDict):
    """A queue of a consumer group's page: where the broker and the group are."""

    topic: str
    broker: str
    queueId: int
    brokerOffset: int
    consumerOffset: int
    lag: int
    lastTimestamp: int


class GroupSummary(TypedDict):
    """A consumer group's figures in the group list."""

    lag: int
    consumeTps: float
    online: int
    consumeType: str
    messageModel: str


class GroupRow(GroupSummary):
    group: str


class GroupPage(TypedDict):
    """A consumer group's page: its config, its queues with their lag, its consumers and what they subscribe."""

    group: str
    config: Mapping[str, object]
    queues: list[LagRow]
    lag: int
    connections: list[Mapping[str, object]]
    subscriptions: dict[str, object]               # topic -> subscription expression
    consumeType: str
    messageModel: str
    consumeFromWhere: str


class MessageRow(TypedDict):
    """A message as the pages show it (``message_json``)."""

    msgId: str
    uniqKey: str
    topic: str
    broker: str
    queueId: int
    queueOffset: int
    commitLogOffset: int
    tags: str
    keys: str
    bornTimestamp: int
    storeTimestamp: int
    bornHost: str
    storeHost: str
    reconsumeTimes: int
    sysFlag: int
    properties: dict[str, str]
    bodySize: int
    binary: bool
    preview: str
    body: NotRequired[str]


class ViewError(Exception):
    """A request the view refuses or the cluster answered with an error (shown to the user)."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


def jsonable(obj: object) -> object:
    """fastjson bodies as plain JSON: a MessageQueue map key becomes "topic/brokerName/queueId"."""
    if isinstance(obj, dict):
        return {_key(k): jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple, set)):
        return [jsonable(v) for v in obj]
    to = getattr(obj, "to_fastjson", None)
    return jsonable(to()) if to is not None else obj


def _key(k: object) -> str:
    if isinstance(k, str):
        return k
    if isinstance(k, fastjson.MessageQueue):
        return f"{k.topic}/{k.brokerName}/{k.queueId}"
    return str(k)


def page_of(items: list[T], page: int, size: int) -> Page[T]:
    size = max(1, min(MAX_PAGE, int(size)))
    total = len(items)
    pages = max(1, (total + size - 1) // size)
    page = max(1, min(int(page), pages))
    return {"total": total, "page": page, "pages": pages, "size": size,
            "items": items[(page - 1) * size: page * size]}


def topic_kind(topic: str, system: bool = False) -> str:
    """retry | dlq | system (TopicValidator's system topics, the cluster/broker-name topics, the
    reply topic) | normal."""
    if topic.startswith(RETRY):
        return "retry"
    if topic.startswith(DLQ):
        return "dlq"
    return "system" if system or is_system_topic(topic) or topic.endswith("_REPLY_TOPIC") else "normal"


def message_json(m: StoredMessage, broker: str = "", body: bool = False) -> MessageRow:
    """A message as the pages show it; ``body`` adds the raw body (base64)."""
    raw = bytes(m.body)
    try:
        text = raw.decode("utf-8")
        binary = False
    except UnicodeDecodeError:
        text = raw[:PREVIEW_CHARS].decode("utf-8", "replace")
        binary = True
    out: MessageRow = {"msgId": m.msg_id, "uniqKey": m.properties.get("UNIQ_KEY") or "", "topic": m.topic,
           "broker": broker, "queueId": m.queue_id, "queueOffset": m.queue_offset,
           "commitLogOffset": m.commit_log_offset, "tags": m.properties.get("TAGS") or "",
           "keys": m.properties.get("KEYS") or "", "bornTimestamp": m.born_timestamp,
           "storeTimestamp": m.store_timestamp, "bornHost": "%s:%d" % (m.born_host[0], m.born_host[1]),
           "storeHost": "%s:%d" % (m.store_host[0], m.store_host[1]), "reconsumeTimes": m.reconsume_times,
           "sysFlag": m.sys_flag, "properties": dict(m.properties), "bodySize": len(raw),
           "binary": binary, "preview": text[:PREVIEW_CHARS]}
    if body:
        out["body"] = base64.b64encode(raw).decode("ascii")
    return out


class ClusterView:
    """The console's model of a cluster; subclasses decide where the data comes from."""

    read_only = False
    mode = "base"

    def close(self) -> None:
        pass

