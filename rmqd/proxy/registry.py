"""The proxy's 5.x clients as the brokers see them: heartbeats, and the brokers' requests relayed to the clients.

As the 5.x proxy in cluster mode, ``rmqd proxy`` is one remoting client of every broker: it heartbeats (HEART_BEAT)
the producer groups of its producers' topics to the masters and its consumer groups (CONSUME_POP, their
subscriptions) to every broker, at once when a group appears and every :data:`HEARTBEAT_INTERVAL_S`; a group whose
last client left is unregistered (UNREGISTER_CLIENT). A broker's transaction check-back (CHECK_TRANSACTION_STATE)
arrives on the proxy's connection to it and goes to one of that producer group's clients with an open Telemetry
stream, as a RecoverOrphanedTransactionCommand naming the broker in its transaction id (any proxy instance can
then end it). Lite notices (NOTIFY_UNSUBSCRIBE_LITE) go to the client they name.
"""
from __future__ import annotations

import asyncio
import logging
import os
import random
import socket
import uuid
from typing import TYPE_CHECKING, Callable, Coroutine, Optional

import orjson

from rmqd.proxy.brokers import CALL_TIMEOUT_S, CONNECT_ERRORS, BrokerDirectory
from rmqd.grpc.routes import MASTER_ID
from rmqd.remoting.codes import RequestCode
from rmqd.remoting.command import RemotingCommand, new_request
from rmqd.store.message import decode_message

if TYPE_CHECKING:
    from rmqd.broker.client_manager import SubscriptionData
    from rmqd.grpc.clients import GrpcChannel
    from rmqd.remoting.connection import Connection

log = logging.getLogger(__name__)

HEARTBEAT_INTERVAL_S = 10.0


def proxy_client_id() -> str:
    """This proxy instance's client id with the brokers (distinct per instance, as a Java client's)."""
    host = socket.gethostname()
    return f"rmqd-proxy@{host}@{os.getpid()}@{uuid.uuid4().hex[:8]}"


class ProxyRegistry:
    """:class:`rmqd.grpc.backend.ClientRegistry` over heartbeats to the brokers behind the proxy."""

    def __init__(self, directory: BrokerDirectory, client_id: Optional[str] = None) -> None:
        self.directory = directory
        self.client_id = client_id or proxy_client_id()
        self.producers: dict[str, set[GrpcChannel]] = {}    # producer group -> channels
        # consumer group -> channel -> subscriptions
        self.consumers: dict[str, dict[GrpcChannel, list[SubscriptionData]]] = {}
        self.lite_notice: Optional[Callable[[str, str], None]] = None   # (client id, lite topic) -> None
        self._task: Optional[asyncio.Task[None]] = None
        self._soon: Optional[asyncio.Task[None]] = None

    # ------------------------------------------------------------------ ClientRegistry
    def register_producer(self, group: str, channel: GrpcChannel) -> None:
        chans = self.producers.setdefault(group, set())
        if channel not in chans:
            chans.add(channel)
            if len(chans) == 1:
                self._heartbeat_soon()

    def register_consumer(self, group: str, channel: GrpcChannel, subscriptions: list[SubscriptionData]) -> None:
        chans = self.consumers.setdefault(group, {})
        new = channel not in chans
        chans[channel] = subscriptions
        if new and len(chans) == 1:
            self._heartbeat_soon()

    def release(self, channel: GrpcChannel) -> list[str]:
        gone: list[tuple[str, str]] = []
        groups: list[str] = []
        for group, chans in list(self.producers.items()):
            if channel in chans:
                chans.discard(channel)
                if not chans:
                    del self.producers[group]
                    gone.append(("producerGroup", group))
        for group, subs in list(self.consumers.items()):
            if subs.pop(channel, None) is not None:
                groups.append(group)
                if not subs:
                    del self.consumers[group]
                    gone.append(("consumerGroup", group))
        if gone:
            asyncio.ensure_future(self._unregister(gone))
        return groups

    # ------------------------------------------------------------------ heartbeats
    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name="proxy-heartbeat")

    def close(self) -> None:
        for task in (self._task, self._soon):
            if task is not None:
                task.cancel()

    def _heartbeat_soon(self) -> None:
        if self._soon is None or self._soon.done():
            try:
                self._soon = asyncio.get_running_loop().create_task(self.heartbeat())
            except RuntimeError:            # no loop (a unit test registering by hand)
                pass

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(HEARTBEAT_INTERVAL_S)
            try:
                await self.heartbeat()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("proxy: heartbeat round failed")

    def heartbeat_body(self, with_producers: bool, with_consumers: bool) -> bytes:
        producers = [{"groupName": g} for g in sorted(self.producers)] if with_producers else []
        consumers: list[dict[str, object]] = []
        if with_consumers:
            for group, chans in sorted(self.consumers.items()):
                subs: dict[object, SubscriptionData] = {}     # topic -> its subscription
                for entries in chans.values():
                    for e in entries:
                        subs[e["topic"]] = e
                consumers.append({"groupName": group, "consumeType": "CONSUME_POP", "messageModel": "CLUSTERING",
                                  "consumeFromWhere": "CONSUME_FROM_LAST_OFFSET", "unitMode": False,
                                  "subscriptionDataSet": list(subs.values())})
        return orjson.dumps({"clientID": self.client_id, "producerDataSet": producers,
                             "consumerDataSet": consumers})

    async def heartbeat(self) -> None:
        """One HEART_BEAT to each broker: producers to masters, consumers to every broker."""
        if not self.producers and not self.consumers:
            return
        brokers = await self.directory.cluster()
        calls: list[Coroutine[None, None, None]] = []
        for name, addrs in brokers.items():
            for bid, addr in addrs.items():
                master = bid == MASTER_ID
                if not master and not self.consumers:
                    continue
                body = self.heartbeat_body(master, True)
                calls.append(self._send(addr, new_request(RequestCode.HEART_BEAT, {}, body)))
        await asyncio.gather(*calls)

    async def _send(self, addr: str, request: RemotingCommand) -> None:
        try:
            resp = await self.directory.client.invoke(addr, request, CALL_TIMEOUT_S)
            if resp.code != 0:
                log.warning("proxy: broker %s refused a heartbeat: %s %s", addr, resp.code, resp.remark)
        except (*CONNECT_ERRORS, asyncio.TimeoutError) as exc:
            log.debug("proxy: heartbeat to %s failed: %r", addr, exc)

    async def _unregister(self, gone: list[tuple[str, str]]) -> None:
        brokers = await self.directory.cluster()
        calls = [self._send(addr, new_request(RequestCode.UNREGISTER_CLIENT, {"clientID": self.client_id, key: group}))
                 for key, group in gone for addrs in brokers.values() for addr in addrs.values()]
        await asyncio.gather(*calls)

    # ------------------------------------------------------------------ the brokers' requests
    def check_transaction(self, conn: Connection, request: RemotingCommand) -> None:
        """CHECK_TRANSACTION_STATE from a broker: to a client of the message's producer group (oneway)."""
        try:
            group = decode_message(bytes(request.body or b"")).properties.get("PGROUP", "")
        except ValueError as exc:
            log.warning("proxy: unreadable transaction check from %s: %s", conn.remote_address, exc)
            return None
        broker = self.directory.name_of(conn.remote_address)
        if broker is None:
            log.warning("proxy: transaction check from %s, a broker the name servers do not list", conn.remote_address)
            return None
        chans = [ch for ch in self.producers.get(group, ()) if ch.outbox is not None and not ch.closed]
        if not chans:
            log.info("proxy: transaction check of %s from %s: no producer of %s has a telemetry stream",
                     (request.ext_fields or {}).get("msgId"), broker, group)
            return None
        random.choice(chans).recover_orphaned(request, broker)
        return None

    def notify_unsubscribe_lite(self, conn: Connection, request: RemotingCommand) -> None:
        ext = request.ext_fields or {}
        if self.lite_notice is not None:
            self.lite_notice(ext.get("clientId", ""), ext.get("liteTopic", ""))
        return None
