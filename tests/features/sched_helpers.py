"""Shared helpers for the delay / timer / retry feature tests: an embedded broker that can be
restarted on the same store, byte-exact SEND_MESSAGE_V2 / PULL / CONSUMER_SEND_MSG_BACK requests."""
from __future__ import annotations

import time
from typing import Any, Optional

from rmqd.remoting.client import BlockingClient
from rmqd.remoting.command import RemotingCommand, new_request
from rmqd.store.message import StoredMessage
from tests.features.msgfeat_helpers import Broker as _Broker
from tests.features.msgfeat_helpers import pull  # noqa: F401  (re-exported for the delay/timer/retry tests)
from tests.kit import clients

FAST_LEVELS = "1s 2s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s"


class Broker(_Broker):
    """``msgfeat_helpers.Broker`` with short delay levels and a fast delay-offset flush."""

    def __init__(self, store_dir: str, **properties: Any) -> None:
        props = dict(messageDelayLevel=FAST_LEVELS, flushDelayOffsetInterval=500)
        props.update(properties)
        super().__init__(store_dir, **props)


def props(**kv: Any) -> str:
    return "".join(f"{k}\x01{v}\x02" for k, v in kv.items())


def send(client: BlockingClient, topic: str, body: bytes = b"hello", queue_id: int = 0,
         properties: str = "", reconsume_times: int = 0, max_reconsume: Optional[int] = None,
         version: Optional[int] = None) -> RemotingCommand:
    return clients.send_v2(client, topic, body, queue_id, properties, version=version, reconsume_times=reconsume_times,
                           max_reconsume=max_reconsume)


def pull_all(client: BlockingClient, topic: str, queue_id: int = 0) -> list[StoredMessage]:
    """Every message of one queue (pages past the 32-per-pull transfer limit)."""
    out: list[StoredMessage] = []
    while True:
        page = pull(client, topic, queue_id, offset=len(out))
        if not page:
            return out
        out.extend(page)


def wait_messages(client: BlockingClient, topic: str, count: int, timeout: float, queue_ids=(0,),
                  interval: float = 0.02) -> list[StoredMessage]:
    """Poll queues until ``count`` messages are there (returns what was found at the deadline)."""
    deadline = time.monotonic() + timeout
    while True:
        got = [m for q in queue_ids for m in pull_all(client, topic, q)]
        if len(got) >= count or time.monotonic() > deadline:
            return got
        time.sleep(interval)


def send_back(client: BlockingClient, offset: int, group: str, delay_level: int = 0,
              max_reconsume: Optional[int] = None, version: Optional[int] = None) -> RemotingCommand:
    ext = {"offset": str(offset), "group": group, "delayLevel": str(delay_level)}
    if max_reconsume is not None:
        ext["maxReconsumeTimes"] = str(max_reconsume)
    req = new_request(36, ext)
    if version is not None:
        req.version = version
    return client.invoke(req)
