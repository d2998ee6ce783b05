"""What the gRPC MessagingService needs from the brokers behind it: :class:`MessagingBackend`.

Two implementations: :class:`rmqd.grpc.local_backend.LocalBackend` (the broker in this process, the 5.x proxy's
LOCAL mode) and :class:`rmqd.proxy.backend.RemoteBackend` (brokers anywhere over remoting, its CLUSTER mode, for
``rmqd proxy``). The service does the proxy's part (request checks, message conversion, answers and codes,
client sessions, auto-renew bookkeeping); a backend does the brokers' part and answers in the brokers' terms:
remoting responses (:class:`RemotingCommand`) for sends, transaction ends, DLQ forwards; :class:`PopError` for
refused acks and invisible-time changes; :class:`rmqd.pop.frontend.Busy` when its executor is full.
"""
from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Callable, Hashable, Optional, Protocol, Sequence, TypeVar, TypeVarTuple, Unpack

from rmqd.config import BrokerConfig
from rmqd.grpc.routes import Address, TopicRoute
from rmqd.pop.extra_info import ExtraInfo, ReceiptHandle
from rmqd.remoting.command import RemotingCommand
from rmqd.store.metadata import SubscriptionGroupConfig, TopicConfig

if TYPE_CHECKING:
    from rmqd.broker.client_manager import SubscriptionData
    import grpc.aio

    from rmqd.acl.plain_acl import PlainAclManager
    from rmqd.auth.guard import AuthGuard
    from rmqd.grpc.clients import GrpcChannel, GrpcClientManager
    from rmqd.grpc.pb import definition_pb2 as d
    from rmqd.grpc.pb import service_pb2 as s
    from rmqd.store.api import MessageFilter

    #: the call context grpc.aio hands each MessagingService RPC
    RpcContext = grpc.aio.ServicerContext[object, object]

T = TypeVar("T")
Ts = TypeVarTuple("Ts")



@dataclasses.dataclass
class Received:
    """What a receive found: the messages as 5.x messages, how the pop ended (``found``, ``timeout``, ``full``)
    and, per message, (match key, renew key) for auto-renew (:meth:`MessagingBackend.handle_key`,
    :meth:`MessagingBackend.renew`)."""

    messages: list[d.Message]
    state: str
    holds: list[tuple[Hashable, Hashable]] = dataclasses.field(default_factory=list)


@dataclasses.dataclass(frozen=True)
class ReceiveRequest:
    """One ReceiveMessage, checked: ``broker`` is the broker the client's queue names ('' for any)."""

    client_id: str
    group: SubscriptionGroupConfig
    topic: TopicConfig
    broker: str
    batch: int
    invisible_ms: int
    poll_ms: int
    filter_type: str                 # "TAG" or "SQL92"
    expression: str
    message_filter: Optional[MessageFilter]   # the parsed filter (rmqd.filter), None for every message
    host: str                        # the client's "ip:port"
    namespace: str
    auto_renew: bool = False         # a push consumer's: the endpoint keeps its messages invisible while held


class ClientRegistry(Protocol):
    """Where 5.x clients are registered as producers and consumers (the broker's client managers, or the brokers
    behind a proxy through heartbeats): admin views list them, a transaction check-back finds a producer."""

    def register_producer(self, group: str, channel: GrpcChannel) -> None: ...

    def register_consumer(self, group: str, channel: GrpcChannel, subscriptions: list[SubscriptionData]) -> None: ...

    def release(self, channel: GrpcChannel) -> list[str]:
        """Drop the channel's registrations; the consumer groups it was in."""


class LiteService(Protocol):
    """5.5 Lite Mode as the service delegates it (:class:`rmqd.grpc.lite.LiteGrpc` locally)."""

    async def sync(self, request: s.SyncLiteSubscriptionRequest, context: RpcContext, client_id: str,
                   peer: str) -> s.SyncLiteSubscriptionResponse: ...

    def fill_settings(self, settings: d.Settings, group_config: Optional[SubscriptionGroupConfig]) -> None: ...

    async def receive(self, rr: ReceiveRequest) -> Received: ...

    async def queue_of(self, topic: str, lite: Optional[str], handle: ReceiptHandle) -> str: ...

    def client_gone(self, client_id: str, why: str) -> None: ...


class Access(Protocol):
    """Who may call (the service's request checks, :mod:`rmqd.grpc.call_checks`)."""

    @property
    def guard(self) -> Optional[AuthGuard]:
        """Access control 2.0 (rmqd.auth), None when off."""

    @property
    def acl_manager(self) -> Optional[PlainAclManager]:
        """ACL 1.0 (rmqd.acl), None when off."""


class Metadata(Protocol):
    """Topics, groups and routes."""

    async def topic(self, name: str) -> Optional[TopicConfig]:
        """The topic's config; None when no broker has it."""

    async def group(self, name: str, create: bool = True) -> Optional[SubscriptionGroupConfig]:
        """The group's config; ``create``: made where the brokers auto-create groups. None when there is none."""

    async def route(self, topic: str, topic_config: Optional[TopicConfig]) -> Optional[TopicRoute]:
        """The topic's route (every broker); None when nothing serves it."""

    async def endpoints(self, route: TopicRoute, asked: Sequence[Address]) -> dict[tuple[str, int], list[Address]]:
        """Where clients reach each (brokerName, brokerId) of ``route`` (``asked``: the addresses they used)."""


class Producing(Protocol):
    """The producers' part: sends, transaction ends, recalls."""

    async def send(self, topic_config: TopicConfig, request: RemotingCommand, key: str,
                   peer: tuple[str, int]) -> tuple[RemotingCommand, Optional[str]]:
        """A SEND_MESSAGE request (queue -1) to the topic: the queue of ``key`` (a message group or lite topic,
        '' for none), else any; (the broker's answer, the broker name a transaction id must carry or None)."""

    async def end_transaction(self, ext: dict[str, str], broker: Optional[str],
                              peer: tuple[str, int]) -> Optional[RemotingCommand]:
        """An END_TRANSACTION request's header to the broker that holds the half message."""

    async def recall(self, topic: str, handle: str, producer_group: str, peer: tuple[str, int]) -> str:
        """Recall a delay message; its message id. Raises rmqd.processors.recall.RecallError."""


class Consuming(Protocol):
    """The consumers' part: receive, auto-renew, ack, invisible time, DLQ."""

    async def receive(self, rr: ReceiveRequest) -> Received: ...

    def handle_key(self, group: str, handle: ReceiptHandle) -> Hashable:
        """The key a held (auto-renewed) message is known by, from the handle the client holds."""

    async def renew(self, keys: list[Hashable], invisible_ms: int, within_ms: int) -> list[Hashable]:
        """Keep held messages invisible; the keys still held."""

    async def ack(self, group: str, queue: str, handle: ReceiptHandle, inline: bool = False) -> None:
        """Ack one message (``queue``: the topic, or a lite message's LMQ). Raises PopError."""

    async def change_invisible(self, group: str, queue: str, handle: ReceiptHandle, invisible_ms: int,
                               suspend: bool) -> ExtraInfo:
        """The message's new extraInfo. Raises PopError."""

    async def send_back(self, ext: dict[str, str], handle: ReceiptHandle, peer: tuple[str, int]) -> RemotingCommand:
        """A CONSUMER_SEND_MSG_BACK (to the DLQ) for the message of ``handle``."""


class OffsetAccess(Protocol):
    """Consumer offsets (the pull-style RPCs)."""

    async def get_offset(self, group: str, topic: str, queue_id: int, broker: str) -> int: ...

    async def update_offset(self, client: str, group: str, topic: str, queue_id: int, broker: str,
                            offset: int) -> None: ...

    async def query_offset(self, topic: str, queue_id: int, broker: str, policy: str, timestamp_ms: int) -> int:
        """``policy``: BEGINNING, END or TIMESTAMP."""


class MessagingBackend(Access, Metadata, Producing, Consuming, OffsetAccess, Protocol):
    """The brokers' side of every MessagingService RPC (each part of the service is given only the interfaces
    above that it uses)."""

    @property
    def config(self) -> BrokerConfig:
        """The limits and switches the service reads (the proxy's settings)."""

    @property
    def registry(self) -> ClientRegistry: ...

    @property
    def inline_acks(self) -> bool:
        """Whether an ack may run on the loop (a memory copy)."""

    @property
    def max_lite_topic_size(self) -> int:
        """maxLiteTopicSize (bytes of a lite topic name)."""

    def lite(self, clients: GrpcClientManager) -> LiteService:
        """The Lite Mode part of a service whose clients are ``clients`` (it reaches their Telemetry streams)."""

    def start(self) -> None: ...

    def close(self) -> None: ...

    async def run(self, fn: Callable[[Unpack[Ts]], T], *args: Unpack[Ts]) -> T:
        """Run blocking work off the loop in the backend's bounded executor (Busy when full)."""
