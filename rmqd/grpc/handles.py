"""The broker's parts the gRPC endpoint uses, as narrow interfaces (what :class:`rmqd.grpc.local_backend.LocalParts`
holds): each Protocol names only the calls the endpoint makes, so the endpoint is typed against them and never
against the broker controller.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Awaitable, Callable, Optional, Protocol

from rmqd.common.endpoint_services import EndpointServices

if TYPE_CHECKING:
    from rmqd.acl.plain_acl import PlainAclManager
    from rmqd.auth.guard import AuthGuard
    from rmqd.broker.client_manager import ClientChannelInfo, SubscriptionData
    from rmqd.broker.handles import ClientConnection
    from rmqd.processors.handles import RequestPeer
    from rmqd.config import BrokerConfig
    from rmqd.pop.frontend import PopExecutor
    from rmqd.lite.subscriptions import LiteSubscriptionManager
    from rmqd.lite.config import LiteConfig
    from rmqd.pop.service import PopService
    from rmqd.remoting.command import RemotingCommand
    from rmqd.store.api import MessageStoreAPI
    from rmqd.store.metadata import SubscriptionGroupConfig, TopicConfig

#: signs a request the broker sends on its own behalf (``RemotingClient``'s ``signer``)
Signer = Callable[["RemotingCommand"], None]


class Topics(Protocol):
    """The topic configs (``TopicConfigManager``)."""

    def get(self, topic: str) -> Optional[TopicConfig]: ...


class Groups(Protocol):
    """The subscription group configs (``SubscriptionGroupManager``)."""

    @property
    def table(self) -> dict[str, SubscriptionGroupConfig]: ...

    @property
    def auto_create(self) -> bool: ...

    def find(self, group: str) -> Optional[SubscriptionGroupConfig]:
        """The group's config, made when groups are auto-created (writes subscriptionGroup.json: blocking)."""


class Offsets(Protocol):
    """The consumer offsets (``ConsumerOffsetManager``)."""

    def query_offset(self, group: str, topic: str, queue_id: int) -> int: ...

    def commit_offset(self, client_host: str, group: str, topic: str, queue_id: int, offset: int) -> None: ...


class Producers(Protocol):
    """The producer registrations (``ProducerManager``)."""

    def register(self, group: str, channel: ClientChannelInfo) -> None: ...

    def do_channel_close(self, conn: ClientConnection) -> None: ...


class Consumers(Protocol):
    """The consumer registrations (``ConsumerManager``)."""

    def register(self, group: str, channel: ClientChannelInfo, consume_type: str, message_model: str,
                 consume_from_where: str, subscriptions: Optional[list[SubscriptionData]],
                 notify: bool = True) -> bool: ...

    def do_channel_close(self, conn: ClientConnection) -> list[str]: ...


class RequestProcessor(Protocol):
    """A remoting request handler the endpoint calls directly (end transaction, send back)."""

    def process(self, conn: RequestPeer, request: RemotingCommand) -> Optional[RemotingCommand]: ...


class SendProcessor(RequestProcessor, Protocol):
    """The broker's SEND_MESSAGE handler: ``process_inline`` answers on the loop, or returns
    :data:`rmqd.remoting.dispatch.TO_POOL` when the send may block (then ``process`` in an executor)."""

    def process_inline(self, conn: RequestPeer, request: RemotingCommand) -> object: ...


class Recaller(Protocol):
    """Recalls a delay message (``rmqd.processors.recall.Recaller``)."""

    def recall(self, topic: Optional[str], handle_text: Optional[str], producer_group: Optional[str] = None,
               born_host: tuple[str, int] = ("127.0.0.1", 0)) -> str: ...


class ReplicaRole(Protocol):
    """The broker's replication role (``RoleManager``): whether it is a slave now, and its master."""

    @property
    def is_slave(self) -> bool: ...

    @property
    def master_addr(self) -> Optional[str]: ...


class LiteParts(Protocol):
    """Lite Mode's registry and settings (``LitePriority``); ``manager`` is set once the broker installed it."""

    @property
    def lite_config(self) -> LiteConfig: ...

    @property
    def manager(self) -> Optional[LiteSubscriptionManager]: ...


class Auth(Protocol):
    """Access control 2.0 (``rmqd.auth.setup.BrokerAuth``): the request guard (None when off) and the signer of the
    broker's own requests."""

    @property
    def guard(self) -> Optional[AuthGuard]: ...

    def request_signer(self) -> Optional[Signer]: ...


class NamesrvClient(Protocol):
    """The broker's remoting client to the name servers."""

    async def invoke(self, addr: str, request: RemotingCommand, timeout: float) -> RemotingCommand: ...


class BrokerParts(Protocol):
    """What :meth:`rmqd.grpc.local_backend.LocalParts.of` and the endpoint read from the broker of this process
    (the one place the endpoint is given the broker; everything else gets a handle)."""

    @property
    def config(self) -> BrokerConfig: ...

    @property
    def store(self) -> MessageStoreAPI: ...

    @property
    def topic_config_manager(self) -> Topics: ...

    @property
    def subscription_group_manager(self) -> Groups: ...

    @property
    def consumer_offset_manager(self) -> Offsets: ...

    @property
    def producer_manager(self) -> Producers: ...

    @property
    def consumer_manager(self) -> Consumers: ...

    @property
    def pop_service(self) -> PopService: ...

    @property
    def pop_executor(self) -> PopExecutor: ...

    @property
    def send_processor(self) -> SendProcessor: ...

    @property
    def end_transaction_processor(self) -> RequestProcessor: ...

    @property
    def send_back_processor(self) -> RequestProcessor: ...

    @property
    def recaller(self) -> Recaller: ...

    @property
    def role_manager(self) -> ReplicaRole: ...

    @property
    def lite_priority(self) -> LiteParts: ...

    @property
    def auth(self) -> Auth: ...

    @property
    def acl_manager(self) -> Optional[PlainAclManager]: ...

    @property
    def namesrv_client(self) -> Optional[NamesrvClient]:
        """Made when the broker starts."""

    @property
    def address(self) -> str: ...


def namesrv_invoke(broker: BrokerParts) -> Callable[[str, RemotingCommand, float], Awaitable[RemotingCommand]]:
    """Requests to the name servers over the broker's client (ConnectionError before the broker made it)."""
    async def invoke(addr: str, request: RemotingCommand, timeout: float) -> RemotingCommand:
        client = broker.namesrv_client
        if client is None:
            raise ConnectionError("the broker has no name server client yet (not started)")
        return await client.invoke(addr, request, timeout)
    return invoke


__all__ = ["Auth", "BrokerParts", "Consumers", "Groups", "LiteParts", "NamesrvClient", "Offsets", "Producers",
           "Recaller", "ReplicaRole", "RequestProcessor", "SendProcessor", "Signer", "Topics",
           "namesrv_invoke"]


#: The process the gRPC endpoint joins: its broker, if any.
GrpcServices = EndpointServices[BrokerParts]
