"""Helpers for the transaction / queue-lock / query / reply tests: an embedded broker that can be
restarted on the same store, and byte-exact requests built with our codec."""
from __future__ import annotations

import time
from typing import Any, Optional

import orjson

from rmqd.remoting.client import BlockingClient
from rmqd.remoting.command import RemotingCommand, new_request
from rmqd.store.message import StoredMessage, decode_messages
from rmqd.testing.embedded import EmbeddedServer
from tests.kit import clients


class Broker:
    """An EmbeddedServer (name server + broker) and blocking clients to its broker port."""

    def __init__(self, store_dir: str, **properties: Any) -> None:
        self.properties = dict(properties)
        self.server = EmbeddedServer(store_dir=store_dir, broker_properties=self.properties)
        self.clients: list[BlockingClient] = []
        self.client: Optional[BlockingClient] = None

    def start(self) -> "Broker":
        self.server.start()
        self.client = self.new_client()
        return self

    def new_client(self) -> BlockingClient:
        c = BlockingClient(self.server.broker_addr, timeout=5.0)
        self.clients.append(c)
        return c

    def stop(self) -> None:
        for c in self.clients:
            c.close()
        self.clients.clear()
        self.client = None
        self.server.stop()

    def restart(self) -> "Broker":
        self.stop()
        return self.start()

    @property
    def broker(self):
        return self.server.broker


def props(**kv: Any) -> str:
    return "\x02".join(f"{k}\x01{v}" for k, v in kv.items())


def now_ms() -> int:
    return int(time.time() * 1000)


def send(client: BlockingClient, topic: str, body: bytes = b"hello", queue_id: int = 0,
         properties: str = "", group: str = "PG", sys_flag: int = 0, born_ts: Optional[int] = None,
         code: int = 310) -> RemotingCommand:
    return clients.send_v2(client, topic, body, queue_id, properties, code=code, group=group, sys_flag=sys_flag,
                           born_ms=born_ts)


def pull(client: BlockingClient, topic: str, queue_id: int = 0, offset: int = 0, group: str = "CG_TEST",
         max_nums: int = 32) -> list[StoredMessage]:
    ext = {"consumerGroup": group, "topic": topic, "queueId": str(queue_id), "queueOffset": str(offset),
           "maxMsgNums": str(max_nums), "sysFlag": "4", "commitOffset": "0", "suspendTimeoutMillis": "0",
           "subVersion": "0", "subscription": "*"}
    resp = client.invoke(new_request(11, ext))
    if resp.code != 0 or resp.body is None:
        return []
    return decode_messages(resp.body_bytes())


def heartbeat_producer(client: BlockingClient, client_id: str, group: str) -> RemotingCommand:
    body = {"clientID": client_id, "consumerDataSet": [], "producerDataSet": [{"groupName": group}]}
    return client.invoke(new_request(34, None, orjson.dumps(body)))


def heartbeat_consumer(client: BlockingClient, client_id: str, group: str, topic: str) -> RemotingCommand:
    body = {"clientID": client_id, "producerDataSet": [], "consumerDataSet": [{
        "consumeFromWhere": "CONSUME_FROM_LAST_OFFSET", "consumeType": "CONSUME_PASSIVELY", "groupName": group,
        "messageModel": "CLUSTERING", "unitMode": False,
        "subscriptionDataSet": [{"classFilterMode": False, "codeSet": [], "expressionType": "TAG",
                                 "subString": "*", "subVersion": 1, "tagsSet": [], "topic": topic}]}]}
    return client.invoke(new_request(34, None, orjson.dumps(body)))


def wait_server_requests(client: BlockingClient, code: int, count: int = 1,
                         timeout: float = 5.0) -> list[RemotingCommand]:
    """Read from ``client`` until ``count`` server-pushed requests with ``code`` arrived; pops them."""
    deadline = time.monotonic() + timeout
    while True:
        got = [r for r in client.server_requests if r.code == code]
        if len(got) >= count:
            for r in got:
                client.server_requests.remove(r)
            return got
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise AssertionError(f"expected {count} server requests with code {code}, got {len(got)}")
        client.read_some(min(remaining, 0.2))


def no_server_request(client: BlockingClient, code: int, wait: float = 0.3) -> bool:
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline:
        client.read_some(0.05)
    return not any(r.code == code for r in client.server_requests)
