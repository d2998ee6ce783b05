"""The JSON bodies of the admin codes the console reads (the shapes Java's and rmqd's brokers answer with), as
TypedDicts: the console reads them with ``.get`` (a field a broker leaves out is absent), so every field is
optional.  ``RemoteCluster._answer`` is where a decoded body is taken to have its code's shape.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Mapping, TypedDict

from rmqd.admin.bodies import BrokerData as BrokerDataBody  # noqa: F401 (the answers admin reads too)
from rmqd.admin.bodies import ClusterInfo as ClusterInfoBody  # noqa: F401
from rmqd.admin.bodies import ConsumeStats as ConsumeStatsBody  # noqa: F401
from rmqd.admin.bodies import GroupList as GroupListBody  # noqa: F401
from rmqd.admin.bodies import HaStatus as HaStatusBody  # noqa: F401
from rmqd.admin.bodies import OffsetWrapper as OffsetWrapperBody  # noqa: F401
from rmqd.admin.bodies import ProducerConnection as ProducerConnectionBody  # noqa: F401
from rmqd.admin.bodies import QueueData as QueueDataBody  # noqa: F401
from rmqd.admin.bodies import ReplicaIdentity as ReplicaMemberBody  # noqa: F401
from rmqd.admin.bodies import ReplicasInfo as ReplicasInfoBody  # noqa: F401
from rmqd.admin.bodies import RuntimeInfo as RuntimeInfoBody  # noqa: F401
from rmqd.admin.bodies import SyncStateData as SyncStateDataBody  # noqa: F401
from rmqd.admin.bodies import TopicList as TopicListBody  # noqa: F401
from rmqd.admin.bodies import TopicOffset as TopicOffsetBody  # noqa: F401
from rmqd.admin.bodies import TopicRoute as RouteBody  # noqa: F401
from rmqd.admin.bodies import TopicStats as TopicStatsBody  # noqa: F401
from rmqd.admin.bodies import TierStatusBody  # noqa: F401
from rmqd.remoting.fastjson import MessageQueue

if TYPE_CHECKING:
    # ``rmqdReplicaStatus`` of rmqd's GET_BROKER_HA_STATUS (``Replication.replica_status``)
    from rmqd.replicas.wiring import ReplicaStatus as ReplicaStatusBody  # noqa: F401


class SubscriptionGroupsBody(TypedDict, total=False):
    """GET_ALL_SUBSCRIPTIONGROUP_CONFIG."""

    subscriptionGroupTable: dict[str, dict[str, object]]


class ConsumerConnectionBody(TypedDict, total=False):
    """GET_CONSUMER_CONNECTION_LIST, as the console reads and (for its own broker) makes it: the connections and
    subscriptions as plain JSON objects."""

    connectionSet: list[Mapping[str, object]]
    consumeType: str
    messageModel: str
    consumeFromWhere: str
    subscriptionTable: dict[str, Mapping[str, object]]      # topic -> SubscriptionData
