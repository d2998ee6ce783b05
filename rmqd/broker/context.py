"""BrokerContext: the collaborators of one broker, handed explicitly to its processors and services.

``BrokerController`` builds every part (config, store, metadata managers, client tables, metrics,
statistics) and then one context of them; a processor takes the context, or only the parts it uses,
and never the controller.  What the broker learns only when it binds (its address, the msgId prefix,
the event loop) is in :class:`BrokerIdentity`, set once by ``BrokerController.start``.  The role is
owned by replication's :class:`~rmqd.replicas.role_manager.RoleManager` (it changes at runtime: a slave
promoted, a master demoted); ``ctx.role`` reads it on every use.

Java: the fields ``BrokerController`` hands to its processors (``getBrokerConfig()``,
``getMessageStore()``, ``getTopicConfigManager()``...), here collected in one typed object.
"""
from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import TYPE_CHECKING, Optional

from rmqd.config import BrokerConfig, BrokerRole

if TYPE_CHECKING:
    from rmqd.broker.client_manager import ConsumerManager, ProducerManager
    from rmqd.broker.stats import BrokerStatsManager
    from rmqd.metrics.recorders import BrokerMetrics
    from rmqd.replicas.role_manager import RoleManager
    from rmqd.replicas.wiring import Replication
    from rmqd.store.api import MessageStoreAPI
    from rmqd.store.metadata import (ConsumerOffsetManager, DelayOffsetManager, SubscriptionGroupManager,
                                     TopicConfigManager)


@dataclass
class BrokerIdentity:
    """Where this broker answers, known once it has bound its port (``BrokerController.start``)."""

    store_host: tuple[str, int]
    address: str = ""                   # "ip:port" registered with the name servers
    msg_id_prefix: str = ""             # hex of the packed store host: how every msgId starts
    loop: Optional[asyncio.AbstractEventLoop] = None
    call_client_timeout_s: float = 10.0  # broker -> client calls (consumer running info, direct consume)


@dataclass(frozen=True)
class BrokerContext:
    """What processors and broker services may use; every field is built by ``BrokerController``."""

    config: BrokerConfig
    store: "MessageStoreAPI"
    topics: "TopicConfigManager"
    groups: "SubscriptionGroupManager"
    offsets: "ConsumerOffsetManager"
    delay_offsets: "DelayOffsetManager"
    consumers: "ConsumerManager"
    producers: "ProducerManager"
    metrics: "BrokerMetrics"
    stats: "BrokerStatsManager"
    identity: BrokerIdentity
    replication: "Replication"

    @property
    def role_manager(self) -> "RoleManager":
        return self.replication.role

    @property
    def role(self) -> BrokerRole:
        return self.replication.role.role

    @property
    def store_host(self) -> tuple[str, int]:
        return self.identity.store_host


class ContextProcessor:
    """Base of the request processors that use the broker context: the handles all of them read."""

    def __init__(self, ctx: BrokerContext) -> None:
        self.ctx = ctx
        self.config = ctx.config
        self.store = ctx.store
        self.topics = ctx.topics
        self.groups = ctx.groups
