"""Remoting requests as the Java client and ``mqadmin`` send them, over rmqd's BlockingClient: one-shot calls,
topic and group creation, SEND_MESSAGE_V2.

``via`` arguments take a broker address (a connection is opened for the call) or an open client.
"""
from __future__ import annotations

import time
from contextlib import contextmanager
from typing import Any, Iterator, Optional

import orjson

from rmqd.remoting.client import BlockingClient
from rmqd.remoting.codes import RequestCode, ResponseCode
from rmqd.remoting.command import RemotingCommand, new_request

#: how many times a create is sent while a controller-mode master answers SYSTEM_ERROR "not copied" (an in-sync
#: replica has not copied the metadata yet), as a user would send it again
NOT_COPIED_TRIES = 3


@contextmanager
def connected(via: "str | BlockingClient", timeout: float) -> Iterator[BlockingClient]:
    """``via`` itself if it is a client, else a client connected to that address for the block."""
    if isinstance(via, str):
        with BlockingClient(via, timeout=timeout) as c:
            yield c
    else:
        yield via


def call(addr: str, code: int, ext: Optional[dict] = None, body: Optional[bytes] = None,
         timeout: float = 5.0) -> RemotingCommand:
    """One request on a fresh connection to ``addr``; its response."""
    with BlockingClient(addr, timeout=timeout) as c:
        return c.invoke(new_request(code, ext or {}, body), timeout)


def _create(via: "str | BlockingClient", request: RemotingCommand, timeout: float) -> RemotingCommand:
    with connected(via, timeout) as c:
        for _ in range(NOT_COPIED_TRIES):
            r = c.invoke(request, timeout)
            if r.code != ResponseCode.SYSTEM_ERROR or "not copied" not in (r.remark or ""):
                break
    assert r.code == ResponseCode.SUCCESS, (r.code, r.remark)
    return r


def topic_fields(topic: str, queues: int = 4, message_type: Optional[str] = None) -> dict[str, str]:
    """UPDATE_AND_CREATE_TOPIC's header as ``mqadmin updateTopic`` sends it (``message_type``: the 5.x
    ``message.type`` attribute, NORMAL / FIFO / DELAY / TRANSACTION)."""
    ext = {"topic": topic, "defaultTopic": "TBW102", "readQueueNums": str(queues), "writeQueueNums": str(queues),
           "perm": "6", "topicFilterType": "SINGLE_TAG", "topicSysFlag": "0", "order": "false"}
    if message_type:
        ext["attributes"] = f"+message.type={message_type}"
    return ext


def create_topic(via: "str | BlockingClient", topic: str, queues: int = 4, message_type: Optional[str] = None,
                 timeout: float = 5.0) -> None:
    """Create (or update) ``topic`` on the broker as ``mqadmin updateTopic`` does; asserts SUCCESS."""
    _create(via, new_request(RequestCode.UPDATE_AND_CREATE_TOPIC, topic_fields(topic, queues, message_type)),
            timeout)


def group_body(group: str, retry_max_times: int = 16, orderly: bool = False) -> bytes:
    """A SubscriptionGroupConfig as ``mqadmin updateSubGroup`` sends it (Java's defaults but for the arguments)."""
    return orjson.dumps({"groupName": group, "consumeMessageOrderly": orderly, "consumeEnable": True,
                         "consumeFromMinEnable": True, "consumeBroadcastEnable": True, "retryQueueNums": 1,
                         "retryMaxTimes": retry_max_times, "brokerId": 0, "whichBrokerWhenConsumeSlowly": 1,
                         "notifyConsumerIdsChangedEnable": True})


def create_group(via: "str | BlockingClient", group: str, retry_max_times: int = 16, orderly: bool = False,
                 timeout: float = 5.0) -> None:
    """Create (or update) a subscription group as ``mqadmin updateSubGroup`` does; asserts SUCCESS."""
    _create(via, new_request(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, None,
                             group_body(group, retry_max_times, orderly)), timeout)


def send_fields(topic: str, queue_id: int = 0, properties: str = "", *, group: str = "PG",
                born_ms: Optional[int] = None, sys_flag: int = 0, reconsume_times: int = 0,
                max_reconsume: Optional[int] = None) -> dict[str, str]:
    """SEND_MESSAGE_V2's short header names as the Java client fills them (born now unless ``born_ms``)."""
    ext = {"a": group, "b": topic, "c": "TBW102", "d": "4", "e": str(queue_id), "f": str(sys_flag),
           "g": str(int(time.time() * 1000) if born_ms is None else born_ms), "h": "0", "i": properties,
           "j": str(reconsume_times), "k": "false", "m": "false"}
    if max_reconsume is not None:
        ext["l"] = str(max_reconsume)
    return ext


def send_v2(client: BlockingClient, topic: str, body: bytes = b"hello", queue_id: int = 0, properties: str = "",
            *, code: int = RequestCode.SEND_MESSAGE_V2, version: Optional[int] = None,
            timeout: Optional[float] = None, fields: Optional[dict[str, str]] = None,
            **header: Any) -> RemotingCommand:
    """A send with :func:`send_fields`'s header (``header`` are its keyword arguments; ``fields`` replace or add
    header entries as they are); ``version``: the client version the request says."""
    ext = send_fields(topic, queue_id, properties, **header)
    ext.update(fields or {})
    req = new_request(code, ext, body)
    if version is not None:
        req.version = version
    return client.invoke(req, timeout)


def send_keyed(client: BlockingClient, topic: str, key: str, body: bytes, queue_id: int = 0, wait: bool = True,
               timeout: float = 10.0) -> RemotingCommand:
    """A send with the message key ``key`` (KEYS) and WAIT (store before answering) as the Java client sets it."""
    props = f"KEYS\x01{key}\x02WAIT\x01{'true' if wait else 'false'}"
    return send_v2(client, topic, body, queue_id, props, timeout=timeout)
