"""What every part of the console's cluster view shares: the error a page shows, the JSON shapes of the pages
(pages of a list, topic kinds, a message), and ``ClusterView``, the model the pages read and act on.
"""
from __future__ import annotations

import base64
from typing import Any

from rmqd.constants import DLQ_GROUP_TOPIC_PREFIX, RETRY_GROUP_TOPIC_PREFIX
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


class ViewError(Exception):
    """A request the view refuses or the cluster answered with an error (shown to the user)."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


def jsonable(obj: Any) -> Any:
    """fastjson bodies as plain JSON: a MessageQueue map key becomes "topic/brokerName/queueId"."""
    if isinstance(obj, dict):
        return {_key(k): jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple, set)):
        return [jsonable(v) for v in obj]
    to = getattr(obj, "to_fastjson", None)
    return jsonable(to()) if to is not None else obj


def _key(k: Any) -> str:
    if isinstance(k, str):
        return k
    if isinstance(k, fastjson.MessageQueue):
        return f"{k.topic}/{k.brokerName}/{k.queueId}"
    return str(k)


def page_of(items: list, page: int, size: int) -> dict:
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


def message_json(m: StoredMessage, broker: str = "", body: bool = False) -> dict:
    """A message as the pages show it; ``body`` adds the raw body (base64)."""
    raw = bytes(m.body)
    try:
        text = raw.decode("utf-8")
        binary = False
    except UnicodeDecodeError:
        text = raw[:PREVIEW_CHARS].decode("utf-8", "replace")
        binary = True
    out = {"msgId": m.msg_id, "uniqKey": m.properties.get("UNIQ_KEY") or "", "topic": m.topic,
           "broker": broker, "queueId": m.queue_id, "queueOffset": m.queue_offset,
           "commitLogOffset": m.commit_log_offset, "tags": m.properties.get("TAGS") or "",
           "keys": m.properties.get("KEYS") or "", "bornTimestamp": m.born_timestamp,
           "storeTimestamp": m.store_timestamp, "bornHost": "%s:%d" % tuple(m.born_host),
           "storeHost": "%s:%d" % tuple(m.store_host), "reconsumeTimes": m.reconsume_times,
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

