"""A send loop that records what was acknowledged, and a reader of a broker (the kill -9 and failover tests;
their rmqd processes are tests/kit/processes.py's)."""
from __future__ import annotations

import threading

from rmqd.remoting.client import BlockingClient
from rmqd.remoting.codes import RequestCode, ResponseCode
from rmqd.remoting.command import new_request
from rmqd.store.message import decode_messages
from tests.kit.clients import send_keyed


def send_one(client: BlockingClient, topic: str, key: str, body: bytes, queue_id: int, timeout: float = 10):
    return send_keyed(client, topic, key, body, queue_id, timeout=timeout)


class SendLoop:
    """``threads`` producers sending to ``addr`` until stopped or the broker goes away; ``acked`` holds the keys
    answered SUCCESS (SEND_OK), ``stored`` those answered 11/12 (stored, not confirmed on a slave)."""

    def __init__(self, addr: str, topic: str, threads: int = 4, body_size: int = 1000) -> None:
        self.addr, self.topic, self.body = addr, topic, b"r" * body_size
        self.acked: set[str] = set()
        self.stored: set[str] = set()
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._threads = [threading.Thread(target=self._run, args=(t,), daemon=True) for t in range(threads)]

    def start(self) -> "SendLoop":
        for t in self._threads:
            t.start()
        return self

    def _run(self, n: int) -> None:
        try:
            client = BlockingClient(self.addr, timeout=10)
        except OSError as exc:
            self.errors.append(repr(exc))
            return
        i = 0
        try:
            while not self._stop.is_set():
                key = f"t{n}-{i}"
                try:
                    r = send_one(client, self.topic, key, self.body, i % 4)
                except (OSError, TimeoutError, ConnectionError) as exc:
                    self.errors.append(repr(exc))
                    return
                with self._lock:
                    if r.code == ResponseCode.SUCCESS:
                        self.acked.add(key)
                    elif r.code in (ResponseCode.SLAVE_NOT_AVAILABLE, ResponseCode.FLUSH_SLAVE_TIMEOUT):
                        self.stored.add(key)
                i += 1
        finally:
            client.close()

    def stop(self) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(15)


def read_all_keys(addr: str, topic: str, queues: int = 4, group: str = "ReadBackCG") -> set[str]:
    """Every message key of ``topic`` on the broker at ``addr`` (pulled from offset 0 to the queue's max)."""
    return set(read_key_counts(addr, topic, queues, group))


def read_key_counts(addr: str, topic: str, queues: int = 4, group: str = "ReadBackCG") -> dict[str, int]:
    """How many times each message key of ``topic`` is stored on the broker at ``addr`` (duplicates > 1)."""
    keys: dict[str, int] = {}
    client = BlockingClient(addr, timeout=10)
    try:
        for q in range(queues):
            offset = 0
            while True:
                ext = {"consumerGroup": group, "topic": topic, "queueId": str(q), "queueOffset": str(offset),
                       "maxMsgNums": "32", "sysFlag": "4", "commitOffset": "0", "suspendTimeoutMillis": "0",
                       "subVersion": "0", "subscription": "*", "expressionType": "TAG"}
                r = client.invoke(new_request(RequestCode.PULL_MESSAGE, ext), 10)
                if r.code != ResponseCode.SUCCESS:
                    break
                for m in decode_messages(r.body_bytes()):
                    key = m.properties.get("KEYS") or m.properties_str
                    keys[key] = keys.get(key, 0) + 1
                offset = int(r.ext_fields["nextBeginOffset"])
    finally:
        client.close()
    return keys
