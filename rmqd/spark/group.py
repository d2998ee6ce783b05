"""The stream's consumer group as the brokers see it (``group`` + ``commitOffsets=true``).

A Java ``DefaultMQPullConsumer`` makes its group known with HEART_BEAT (34): its consumer data
(CONSUME_ACTIVELY, CLUSTERING, one subscription per topic), sent to every broker of its topics at
start and every 30 s (``heartbeatBrokerInterval``). The broker then creates the group's retry topic
``%RETRY%<group>`` and registers it with the name servers, which is what ``mqadmin consumerProgress
-g`` looks up first; without it the tool fails with "No topic route info ... %RETRY%<group>". On stop
the client sends UNREGISTER_CLIENT (35). :class:`GroupRegistration` does the same from the driver, and
answers the broker's GET_CONSUMER_RUNNING_INFO (307, what ``mqadmin consumerStatus`` asks for) as a pull
consumer does: its properties and subscriptions, no process queues.
"""
from __future__ import annotations

import logging
import os
import select
import threading
import time
from typing import Callable, Iterable, Optional

import orjson

from rmqd.filter.tags import parse_tag_expression
from rmqd.remoting.client import BlockingClient
from rmqd.remoting.codes import RequestCode, ResponseCode
from rmqd.remoting.command import RPC_ONEWAY, RemotingCommand, error_response, new_response, prepare_reply
from rmqd.spark.remote import Clients, ConnectorError

log = logging.getLogger(__name__)

HEARTBEAT_INTERVAL_S = 30.0            # the Java client's heartbeatBrokerInterval
POLL_S = 0.5                           # longest wait between looks at the brokers' requests


def subscription_data(topic: str, expr_type: str, expression: str, sub_version: int) -> dict[str, object]:
    """One SubscriptionData as the Java client serializes it (tags and their String.hashCode values)."""
    tags: tuple[str, ...] = ()
    codes: tuple[int, ...] = ()
    sub_string = expression
    if expr_type == "TAG":
        sub = parse_tag_expression(expression)
        sub_string, tags, codes = sub.sub_string, sub.tags, sub.codes
    return {"classFilterMode": False, "codeSet": list(codes), "expressionType": expr_type,
            "subString": sub_string, "subVersion": sub_version, "tagsSet": list(tags), "topic": topic}


def heartbeat_body(client_id: str, group: str, topics: Iterable[str], expr_type: str, expression: str,
                   sub_version: int) -> bytes:
    """HeartbeatData of one pull consumer (no producer)."""
    return orjson.dumps({
        "clientID": client_id,
        "consumerDataSet": [{
            "consumeFromWhere": "CONSUME_FROM_LAST_OFFSET", "consumeType": "CONSUME_ACTIVELY",
            "groupName": group, "messageModel": "CLUSTERING",
            "subscriptionDataSet": [subscription_data(t, expr_type, expression, sub_version)
                                    for t in sorted(set(topics))],
            "unitMode": False}],
        "producerDataSet": []})


def running_info_body(group: str, subscriptions: list[dict[str, object]], start_ms: int) -> bytes:
    """ConsumerRunningInfo of a pull consumer, as the Java client's DefaultMQPullConsumerImpl and
    MQClientInstance fill it: properties (PROP_CONSUME_TYPE and PROP_CONSUMER_START_TIMESTAMP are what
    mqadmin's analysis reads) and the subscriptions; a pull consumer has no process queues."""
    return orjson.dumps({
        "properties": {"consumerGroup": group, "messageModel": "CLUSTERING",
                       "PROP_CONSUME_TYPE": "CONSUME_ACTIVELY", "PROP_CONSUMER_START_TIMESTAMP": str(start_ms),
                       "PROP_CLIENT_VERSION": "rmqd-spark"},
        "subscriptionSet": subscriptions, "mqTable": {}, "statusTable": {}})


class GroupRegistration:
    """Heartbeats ``group`` to the brokers ``addrs()`` names, now and every ``interval`` seconds from a
    daemon thread, until :meth:`close` (which unregisters the client). Uses its own connections."""

    def __init__(self, group: str, topics: list[str], expr_type: str, expression: str,
                 addrs: Callable[[], Iterable[str]], interval: float = HEARTBEAT_INTERVAL_S) -> None:
        self.group, self.topics = group, list(topics)
        self.expr_type, self.expression = expr_type, expression
        self.addrs = addrs
        self.interval = interval
        self.clients = Clients()
        self.client_id: Optional[str] = None
        self.sub_version = self.start_ms = int(time.time() * 1000)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None
        self._registered: set[str] = set()

    def start(self) -> "GroupRegistration":
        """The first heartbeat (a failure here fails the query), then the periodic ones."""
        self.beat()
        self._thread = threading.Thread(target=self._loop, name=f"rmqd-heartbeat-{self.group}", daemon=True)
        self._thread.start()
        return self

    def _id(self, addr: str) -> str:
        if self.client_id is None:          # clientIP@instance, as the Java client names itself
            ip = self.clients.get(addr).sock.getsockname()[0]
            self.client_id = f"{ip}@spark_rmqd_{os.getpid()}"
        return self.client_id

    def beat(self) -> None:
        with self._lock:
            for addr in sorted(set(self.addrs())):
                try:
                    body = heartbeat_body(self._id(addr), self.group, self.topics, self.expr_type,
                                          self.expression, self.sub_version)
                    r = self.clients.invoke(addr, RequestCode.HEART_BEAT, body=body)
                except (OSError, TimeoutError) as exc:
                    raise ConnectorError(f"option 'group': heartbeat of {self.group} to {addr} failed: "
                                         f"{exc}") from exc
                if (c := self.clients.connected(addr)) is not None:
                    self._answer(c)                            # requests read while waiting for the reply
                if r.code != ResponseCode.SUCCESS:
                    raise ConnectorError(f"option 'group': heartbeat of {self.group} to {addr} refused: "
                                         f"{r.code} {r.remark}")
                self._registered.add(addr)

    def _loop(self) -> None:
        """Answer the brokers' requests as they come; heartbeat every ``interval`` seconds."""
        next_beat = time.monotonic() + self.interval
        while not self._stop.is_set():
            self._serve(min(POLL_S, max(0.0, next_beat - time.monotonic())))
            if time.monotonic() >= next_beat:
                try:
                    self.beat()
                except Exception:                # the next beat retries; the query itself goes on
                    log.warning("consumer group %s: heartbeat failed", self.group, exc_info=True)
                next_beat = time.monotonic() + self.interval

    def _serve(self, wait: float) -> None:
        """Wait up to ``wait`` seconds for a broker's request on the heartbeat connections and answer it."""
        with self._lock:
            clients = {c.sock: (addr, c) for addr in self._registered
                       if (c := self.clients.connected(addr)) is not None}
        if not clients:
            self._stop.wait(wait)
            return
        try:
            readable, _, _ = select.select(list(clients), [], [], wait)
        except (OSError, ValueError):            # a socket closed meanwhile (close() or a failed beat)
            return
        with self._lock:
            for sock in readable:
                addr, c = clients[sock]
                if self.clients.connected(addr) is not c:
                    continue
                try:
                    c.read_some(0.05)
                    self._answer(c)
                except OSError as exc:           # the broker closed it: the next beat reconnects
                    log.info("consumer group %s: connection to %s lost (%s)", self.group, addr, exc)
                    self.clients.drop(addr)

    def _answer(self, client: BlockingClient) -> None:
        """Reply to the requests ``client`` has read from its broker (caller holds the lock)."""
        pending = client.server_requests[:]
        client.server_requests.clear()
        for req in pending:
            if req.code == RequestCode.GET_CONSUMER_RUNNING_INFO and not req.flag & RPC_ONEWAY:
                client.send(prepare_reply(req, self._running_info(req)))
            elif not req.flag & RPC_ONEWAY:     # two-way requests a pull consumer has no answer for
                client.send(prepare_reply(req, error_response(
                    ResponseCode.REQUEST_CODE_NOT_SUPPORTED, f" request type {req.code} not supported")))

    def _running_info(self, req: RemotingCommand) -> RemotingCommand:
        group = (req.ext_fields or {}).get("consumerGroup")
        if group != self.group:
            return error_response(ResponseCode.SYSTEM_ERROR, f"The Consumer Group <{group}> not exist in this consumer")
        subs = [subscription_data(t, self.expr_type, self.expression, self.sub_version)
                for t in sorted(set(self.topics))]
        return new_response(ResponseCode.SUCCESS, body=running_info_body(self.group, subs, self.start_ms))

    def close(self) -> None:
        """Stop the heartbeats and UNREGISTER_CLIENT on every broker (a failure is logged)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        with self._lock:
            for addr in sorted(self._registered):
                try:
                    self.clients.invoke(addr, RequestCode.UNREGISTER_CLIENT,
                                        {"clientID": self.client_id, "consumerGroup": self.group})
                except (OSError, TimeoutError) as exc:
                    log.warning("consumer group %s: unregistering from %s failed: %s", self.group, addr, exc)
            self._registered.clear()
            self.clients.close()
