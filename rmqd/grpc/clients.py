"""5.x client sessions: settings, Telemetry streams and the broker's view of gRPC clients.

Each client (``x-mq-client-id``) gets a :class:`GrpcChannel`, a stand-in for a remoting connection,
registered through the backend's :class:`rmqd.grpc.backend.ClientRegistry` (the broker's producer and consumer
managers, like a 4.x client's channel; or the brokers behind a proxy, by heartbeats): so admin
views list 5.x clients, idle ones expire (no request for ``grpcClientIdleTimeMills``), a Telemetry stream
that ends without NotifyClientTermination releases the client's registrations, and the
transaction check service reaches a 5.x producer through the same ``invoke_oneway`` — the channel
turns a CHECK_TRANSACTION_STATE into a RecoverOrphanedTransactionCommand on the client's Telemetry
stream.  A transactional 5.x message carries the producer group :func:`producer_group_of` its topic.
"""
from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING, Callable, Optional

from rmqd.grpc.convert import to_grpc_message
from rmqd.grpc.pb import definition_pb2 as d
from rmqd.grpc.pb import service_pb2 as s
from rmqd.remoting.codes import RequestCode
from rmqd.store.message import decode_message

if TYPE_CHECKING:
    from rmqd.broker.client_manager import SubscriptionData
    import grpc

    from rmqd.grpc.backend import ClientRegistry
    from rmqd.remoting.command import RemotingCommand

log = logging.getLogger(__name__)

MAX_PENDING_COMMANDS = 1024


def producer_group_of(topic: str) -> str:
    """The producer group (``PGROUP``) of 5.x transactional messages of ``topic``."""
    return f"CID_RMQ_SYS_GRPC_{topic}"


def transaction_id_of(commit_log_offset: int, queue_offset: int, msg_id: str, broker: Optional[str] = None) -> str:
    """What rmqd hands a 5.x producer as a transaction id: enough to end the transaction later, on any endpoint
    (behind ``rmqd proxy``, the broker that holds the half message is named too: the proxy keeps no state)."""
    tid = f"{commit_log_offset:x}:{queue_offset:x}:{msg_id}"
    return f"{tid}:{broker}" if broker else tid


def parse_transaction_id(text: str) -> tuple[int, int, str, Optional[str]]:
    """(commit-log offset, half queue offset, message id, broker name or None); ValueError if not one of ours."""
    cl, qo, rest = text.split(":", 2)
    msg_id, _, broker = rest.partition(":")
    return int(cl, 16), int(qo, 16), msg_id, broker or None


class TelemetryFailed(Exception):
    """A Telemetry command refused: queued on the stream's outbox, it ends the call with this gRPC status (the
    proxy's ``onError``)."""

    def __init__(self, code: grpc.StatusCode, details: str) -> None:
        super().__init__(details)
        self.code, self.details = code, details


#: what a Telemetry stream's outbox holds: a command for the client, the status that ends the call, or None (the end)
Outgoing = Optional["s.TelemetryCommand | TelemetryFailed"]


class GrpcChannel:
    """One 5.x client as the broker's client managers see it."""

    def __init__(self, client_id: str, peer: str, loop: asyncio.AbstractEventLoop) -> None:
        self.client_id = client_id
        host, _, port = peer.rpartition(":")
        self.peer_host = host.strip("[]") or "127.0.0.1"
        self.peer_port = int(port) if port.isdigit() else 0
        self.remote_address = f"{self.peer_host}:{self.peer_port}"
        self.loop = loop
        self.closed = False
        self.settings: Optional[d.Settings] = None
        self.language = "JAVA"
        self.language_header = "JAVA"                     # x-mq-language of its Telemetry stream
        # the open Telemetry stream's outgoing commands (None ends the stream)
        self.outbox: Optional[asyncio.Queue[Outgoing]] = None
        self.last_seen = time.monotonic()
        self.on_close: Optional[Callable[[GrpcChannel], None]] = None     # the manager forgets it
        self.broker_name: Optional[str] = None           # behind a proxy: the broker a check-back came from

    def send_command(self, cmd: s.TelemetryCommand) -> bool:
        """Queue a TelemetryCommand for the client (any thread); False when it has no stream."""
        box = self.outbox
        if box is None or self.closed:
            return False

        def put() -> None:
            if box.qsize() < MAX_PENDING_COMMANDS:
                box.put_nowait(cmd)
            else:
                log.warning("gRPC client %s: telemetry backlog full, dropping a command", self.client_id)

        try:
            self.loop.call_soon_threadsafe(put)
        except RuntimeError:
            return False
        return True

    # --- the remoting-connection surface the broker's managers use ------------------------------
    def invoke_oneway(self, request: RemotingCommand) -> None:
        if request.code == RequestCode.CHECK_TRANSACTION_STATE:
            self.recover_orphaned(request)
        # NOTIFY_CONSUMER_IDS_CHANGED and friends mean nothing to a 5.x client (it asks QueryAssignment)

    async def invoke(self, request: RemotingCommand, timeout: float = 3.0) -> RemotingCommand:
        """Remoting calls to a client (running info, consume directly, status) have no gRPC equivalent here."""
        raise RuntimeError(f"the RocketMQ 5 gRPC client {self.client_id} does not answer request code {request.code}")

    def recover_orphaned(self, request: RemotingCommand, broker: Optional[str] = None) -> None:
        """A broker's CHECK_TRANSACTION_STATE as a RecoverOrphanedTransactionCommand on the Telemetry stream
        (``broker``: the broker that asks, named in the transaction id behind a proxy)."""
        if request.body is None:
            raise TypeError(f"CHECK_TRANSACTION_STATE for {self.client_id} without the message")
        m = decode_message(bytes(request.body))
        ext = request.ext_fields or {}
        tid = transaction_id_of(int(ext["commitLogOffset"]), int(ext["tranStateTableOffset"]),
                                m.properties.get("UNIQ_KEY") or ext.get("msgId", ""), broker)
        cmd = s.TelemetryCommand(recover_orphaned_transaction_command=s.RecoverOrphanedTransactionCommand(
            message=to_grpc_message(m), transaction_id=tid))
        if not self.send_command(cmd):
            log.warning("transaction check of %s: gRPC client %s has no telemetry stream", tid, self.client_id)

    def close(self) -> None:
        """Expired (no heartbeat) or terminated: end its Telemetry stream and forget it."""
        self.closed = True
        if self.on_close is not None:
            self.on_close(self)
        box = self.outbox
        if box is not None:
            try:
                self.loop.call_soon_threadsafe(box.put_nowait, None)      # ends the Telemetry stream
            except RuntimeError:
                pass


class GrpcClientManager:
    """client id -> GrpcChannel, kept in step with the backend's client registry."""

    def __init__(self, registry: ClientRegistry) -> None:
        self.registry = registry
        self.channels: dict[str, GrpcChannel] = {}

    def channel(self, client_id: str, peer: str) -> GrpcChannel:
        ch = self.channels.get(client_id)
        if ch is None or ch.closed:
            ch = self.channels[client_id] = GrpcChannel(client_id, peer, asyncio.get_running_loop())
            ch.on_close = self._forget
        ch.last_seen = time.monotonic()
        return ch

    def on_settings(self, ch: GrpcChannel, settings: d.Settings) -> None:
        """A client's Settings: remember them and register it as a producer or consumer."""
        ch.settings = settings
        ch.language = d.Language.Name(settings.user_agent.language) if settings.user_agent.language else "JAVA"
        self.touch(ch)

    def touch(self, ch: GrpcChannel) -> None:
        """Heartbeat: refresh the client's registrations (blocking-free, in memory)."""
        st = ch.settings
        if st is None:
            return
        if st.HasField("publishing"):
            for t in st.publishing.topics:
                self.registry.register_producer(producer_group_of(t.name), ch)
        elif st.HasField("subscription") and st.subscription.group.name:
            subs: list[SubscriptionData] = []
            for e in st.subscription.subscriptions:
                etype = "SQL92" if e.expression.type == d.SQL else "TAG"
                subs.append({"topic": e.topic.name, "subString": e.expression.expression or "*",
                             "expressionType": etype, "tagsSet": [], "codeSet": [], "classFilterMode": False,
                             "subVersion": int(time.time() * 1000)})
            try:
                self.registry.register_consumer(st.subscription.group.name, ch, subs)
            except Exception:
                log.exception("registering gRPC consumer %s of %s failed", ch.client_id, st.subscription.group.name)

    def seen(self, client_id: str) -> None:
        """Any request of a known client shows it is alive."""
        ch = self.channels.get(client_id)
        if ch is not None:
            ch.last_seen = time.monotonic()

    def release(self, ch: GrpcChannel) -> None:
        """The client's Telemetry stream ended without NotifyClientTermination: drop its producer and consumer
        registrations (a transaction check or a consumer list no longer names it). Its settings are kept, so
        a live client's next heartbeat or Settings registers it again."""
        if ch.settings is None:              # never registered (its Settings never came or were refused)
            self._forget(ch)
            return
        groups = self.registry.release(ch)
        log.info("gRPC client %s: telemetry stream ended without termination; registrations released%s",
                 ch.client_id, f" (consumer groups {groups})" if groups else "")

    def expire_idle(self, idle_s: float) -> list[str]:
        """Let go of clients not heard from for ``idle_s`` (``grpcClientIdleTimeMills``): registrations
        dropped, Telemetry stream ended. Returns their ids."""
        limit = time.monotonic() - idle_s
        gone = [cid for cid, ch in self.channels.items() if ch.last_seen < limit]
        for cid in gone:
            log.info("gRPC client %s: idle for more than %.0f s, let go", cid, idle_s)
            self.terminate(cid)
        return gone

    def _forget(self, ch: GrpcChannel) -> None:
        if self.channels.get(ch.client_id) is ch:
            del self.channels[ch.client_id]

    def terminate(self, client_id: str) -> None:
        ch = self.channels.pop(client_id, None)
        if ch is None:
            return
        self.registry.release(ch)
        ch.close()

    def close_all(self) -> None:
        for cid in list(self.channels):
            self.terminate(cid)

    def notify_unsubscribe_lite(self, client_id: str, lite: str) -> None:
        """NotifyUnsubscribeLite on the client's Telemetry stream (an Exclusive group evicted it from ``lite``)."""
        ch = self.channels.get(client_id)
        cmd = s.TelemetryCommand(notify_unsubscribe_lite_command=s.NotifyUnsubscribeLiteCommand(lite_topic=lite))
        if ch is None or not ch.send_command(cmd):
            log.info("lite: NotifyUnsubscribeLite(%s) to %s: no telemetry stream", lite, client_id)
