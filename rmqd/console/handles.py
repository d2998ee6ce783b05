"""What the in-process console reads, as narrow interfaces: the process's services (its broker and name server,
whether they are up), the broker's context and the few named handles outside it (its address, the access control
2.0 credentials, the plain ACL accounts, the lite and priority parts), and the name server's route table.

``rmqd.runtime.services.Services``, ``BrokerController`` and ``NameServer`` satisfy these structurally; the console never
sees the controller class.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Optional, Protocol

from rmqd.common.endpoint_services import EndpointServices

if TYPE_CHECKING:
    from rmqd.acl.handles import AclStateSource
    from rmqd.broker.context import BrokerContext
    from rmqd.namesrv.route_info import RouteInfoManager
    from rmqd.lite.subscriptions import LiteSubscriptionManager
    from rmqd.lite.config import LiteConfig, PriorityConfig
    from rmqd.lite.priority_selector import PriorityQueueSelector
    from rmqd.store.lite.index import LiteIndex


class InnerCredentials(Protocol):
    def inner_credentials(self) -> Optional[tuple[str, str]]:
        """(accessKey, secretKey) the broker signs its own requests with, if access control 2.0 has them."""
        ...


class AuthHandle(Protocol):
    @property
    def config(self) -> InnerCredentials: ...


class LiteIndexHolder(Protocol):
    @property
    def index(self) -> "LiteIndex": ...


class LitePriorityParts(Protocol):
    """The broker's Lite Mode and priority parts, as their feature pages read them."""

    @property
    def manager(self) -> Optional["LiteSubscriptionManager"]: ...

    @property
    def lite_store(self) -> LiteIndexHolder: ...

    @property
    def lite_config(self) -> "LiteConfig": ...

    @property
    def priority_config(self) -> "PriorityConfig": ...

    @property
    def queue_selector(self) -> "PriorityQueueSelector": ...


class ConsoleBroker(Protocol):
    """The in-process broker the console reads: its context and the named handles outside it."""

    @property
    def ctx(self) -> "BrokerContext": ...

    @property
    def address(self) -> str: ...

    @property
    def auth(self) -> AuthHandle: ...

    @property
    def acl_manager(self) -> Optional[AclStateSource]:
        """The plain ACL (plain_acl.yml) accounts."""

    @property
    def lite_priority(self) -> LitePriorityParts: ...


class LocalNameServer(Protocol):
    @property
    def address(self) -> str: ...

    @property
    def route_info(self) -> "RouteInfoManager": ...


class ConsoleServices(EndpointServices[ConsoleBroker], Protocol):
    """The process the console runs in: its broker and its name server, if any."""

    @property
    def namesrv(self) -> Optional[LocalNameServer]: ...
