"""Raw remoting helpers for the POP protocol tests (Java header names, blocking client)."""
from __future__ import annotations

import time
import uuid
from contextlib import contextmanager
from typing import Iterator

from rmqd.remoting.client import BlockingClient
from rmqd.remoting.command import RemotingCommand, new_request
from rmqd.store.message import decode_messages
from tests.kit import clients
from tests.kit.clients import create_group
from tests.kit.processes import READY, ServeProcess

__all__ = ["POP", "ACK", "PEEK", "CHANGE", "NOTIFICATION", "POLLING_INFO", "BATCH_ACK", "create_topic",
           "create_group", "send", "pop", "popped", "extra_info", "ack", "change_invisible", "start_serve"]

POP, ACK, PEEK, CHANGE, NOTIFICATION, POLLING_INFO, BATCH_ACK = 200050, 200051, 200052, 200053, 200054, 200055, 200151


def create_topic(c: BlockingClient, topic: str, queues: int = 1) -> None:
    """tests/kit/clients.py's create_topic with one queue unless told."""
    clients.create_topic(c, topic, queues)


def send(c: BlockingClient, topic: str, body: bytes, tags: str = "", queue_id: int = 0) -> str:
    uniq = uuid.uuid4().hex.upper()
    props = f"UNIQ_KEY\x01{uniq}\x02WAIT\x01true" + (f"\x02TAGS\x01{tags}" if tags else "")
    ext = {"producerGroup": "PG", "topic": topic, "defaultTopic": "TBW102", "defaultTopicQueueNums": "4",
           "queueId": str(queue_id), "sysFlag": "0", "bornTimestamp": str(int(time.time() * 1000)), "flag": "0",
           "properties": props, "reconsumeTimes": "0", "unitMode": "false", "batch": "false"}
    resp = c.invoke(new_request(10, ext, body), 5)
    assert resp.code == 0, resp.remark
    return uniq


def pop(c: BlockingClient, topic: str, group: str, queue_id: int = -1, max_nums: int = 32, invisible: int = 60000,
        poll: int = 0, init_mode: int = 0, exp: str | None = None, timeout: float = 10,
        order: bool = False) -> RemotingCommand:
    ext = {"consumerGroup": group, "topic": topic, "queueId": str(queue_id), "maxMsgNums": str(max_nums),
           "invisibleTime": str(invisible), "pollTime": str(poll), "bornTime": str(int(time.time() * 1000)),
           "initMode": str(init_mode)}
    if order:
        ext["order"] = "true"
    if exp is not None:
        ext.update(expType="TAG", exp=exp)
    return c.invoke(new_request(POP, ext), timeout)


def popped(resp: RemotingCommand):
    return decode_messages(resp.body_bytes()) if resp.body is not None else []


def extra_info(resp: RemotingCommand, msg, broker_name: str = "broker-a") -> str:
    """The client's POP_CK for one popped message (Java MQClientAPIImpl.processPopResponse)."""
    e = resp.ext_fields
    flag = "1" if msg.topic.startswith("%RETRY%") else "0"
    starts = {(s.split(" ")[0], int(s.split(" ")[1])): int(s.split(" ")[2]) for s in e["startOffsetInfo"].split(";")}
    ck = starts[(flag, msg.queue_id)]
    return (f"{ck} {e['popTime']} {e['invisibleTime']} {e['reviveQid']} {flag} {broker_name} {msg.queue_id} "
            f"{msg.queue_offset}")


def ack(c: BlockingClient, topic: str, group: str, extra: str, offset: int, queue_id: int = 0) -> RemotingCommand:
    ext = {"consumerGroup": group, "topic": topic, "queueId": str(queue_id), "extraInfo": extra, "offset": str(offset)}
    return c.invoke(new_request(ACK, ext), 5)


def change_invisible(c: BlockingClient, topic: str, group: str, extra: str, offset: int, invisible: int,
                     queue_id: int = 0) -> RemotingCommand:
    ext = {"consumerGroup": group, "topic": topic, "queueId": str(queue_id), "extraInfo": extra,
           "offset": str(offset), "invisibleTime": str(invisible)}
    return c.invoke(new_request(CHANGE, ext), 5)


def start_serve(store: str, timeout: float = 60.0) -> ServeProcess:
    """`rmqd serve` on free ports over ``store`` in its own session (``kill()`` is kill -9 of the whole group),
    started and ready (every listener up)."""
    return ServeProcess(store, None, None, "WARNING", ("--grpc-port", "0"), ready=READY, new_session=True).start(timeout)


@contextmanager
def serving(store: str, timeout: float = 60.0) -> Iterator[BlockingClient]:
    """:func:`start_serve` over ``store`` and a client of its broker; on the way out the client is closed and the
    process group killed (kill -9: the store is left as a crash leaves it)."""
    proc = start_serve(store, timeout)
    try:
        client = BlockingClient(proc.broker_addr)
        try:
            yield client
        finally:
            client.close()
    finally:
        proc.kill()
