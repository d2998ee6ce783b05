"""The JSON bodies of the admin codes the console reads (the shapes Java's and rmqd's brokers answer with), as
TypedDicts: the console reads them with ``.get`` (a field a broker leaves out is absent), so every field is
optional.  ``RemoteCluster._answer`` is where a decoded body is taken to have its code's shape.
"""
from __future__ import annotations

from typing import Mapping, TypedDict

from rmqd.remoting.fastjson import MessageQueue


class BrokerDataBody(TypedDict, total=False):
    cluster: str
    brokerName: str
    brokerAddrs: dict[int | str, str]            # brokerId -> address


class ClusterInfoBody(TypedDict, total=False):
    """GET_BROKER_CLUSTER_INFO."""

    brokerAddrTable: dict[str, BrokerDataBody]
    clusterAddrTable: dict[str, list[str]]


class QueueDataBody(TypedDict, total=False):
    brokerName: str
    readQueueNums: int
    writeQueueNums: int
    perm: int


class RouteBody(TypedDict, total=False):
    """GET_ROUTEINFO_BY_TOPIC."""

    brokerDatas: list[BrokerDataBody]
    queueDatas: list[QueueDataBody]


class RuntimeInfoBody(TypedDict, total=False):
    """GET_BROKER_RUNTIME_INFO: every figure is a string."""

    table: dict[str, str]


class HaConnectionBody(TypedDict, total=False):
    addr: str
    slaveAckOffset: int
    diff: int
    lagMillis: int


class HaStatusBody(TypedDict, total=False):
    """GET_BROKER_HA_STATUS."""

    haConnectionInfo: list[HaConnectionBody]
    inSyncSlaveNums: int


class TopicOffsetBody(TypedDict, total=False):
    minOffset: int
    maxOffset: int
    lastUpdateTimestamp: int


class TopicStatsBody(TypedDict, total=False):
    """GET_TOPIC_STATS_INFO."""

    offsetTable: dict[MessageQueue, TopicOffsetBody]


class GroupListBody(TypedDict, total=False):
    """QUERY_TOPIC_CONSUME_BY_WHO."""

    groupList: list[str]


class TopicListBody(TypedDict, total=False):
    """GET_SYSTEM_TOPIC_LIST_FROM_NS."""

    topicList: list[str]


class SubscriptionGroupsBody(TypedDict, total=False):
    """GET_ALL_SUBSCRIPTIONGROUP_CONFIG."""

    subscriptionGroupTable: dict[str, dict[str, object]]


class OffsetWrapperBody(TypedDict, total=False):
    brokerOffset: int
    consumerOffset: int
    lastTimestamp: int


class ConsumeStatsBody(TypedDict, total=False):
    """GET_CONSUME_STATS."""

    consumeTps: float
    offsetTable: dict[MessageQueue, OffsetWrapperBody]


class ConsumerConnectionBody(TypedDict, total=False):
    """GET_CONSUMER_CONNECTION_LIST."""

    connectionSet: list[Mapping[str, object]]
    consumeType: str
    messageModel: str
    consumeFromWhere: str
    subscriptionTable: dict[str, Mapping[str, object]]      # topic -> SubscriptionData


class ProducerConnectionBody(TypedDict, total=False):
    """GET_PRODUCER_CONNECTION_LIST."""

    connectionSet: list[Mapping[str, object]]


class TierQueueBody(TypedDict, total=False):
    topic: str
    queueId: int
    minOffset: int
    maxOffset: int
    committedOffset: int
    bytes: int
    commitLogBytes: int
    consumeQueueBytes: int
    segments: int


class TierIndexFileBody(TypedDict, total=False):
    beginTs: int
    state: str
    items: int
    beginTime: int
    endTime: int
    bytes: int


class TierStatusBody(TypedDict, total=False):
    """rmqd's GET_TIER_STATUS (9003), and ``TieredStore.status()`` in-process."""

    backend: str
    level: str
    queues: list[TierQueueBody]
    indexFiles: list[TierIndexFileBody]
    copied: int
    lastError: str


class LastSwitchBody(TypedDict, total=False):
    time_ms: int
    cause: str


class ReplicaStatusBody(TypedDict, total=False):
    """``rmqdReplicaStatus`` of rmqd's GET_BROKER_HA_STATUS (``Replication.replica_status``)."""

    controllerMode: bool
    role: str
    controllerBrokerId: int
    masterEpoch: int
    syncStateSet: list[int]
    syncStateSetEpoch: int
    fenced: bool
    lastSwitch: LastSwitchBody | None
    switchCounts: dict[str, int]
    controllerAddrs: list[str]


class ReplicaMemberBody(TypedDict, total=False):
    brokerId: int
    brokerAddress: str
    alive: bool


class ReplicasInfoBody(TypedDict, total=False):
    """A group of CONTROLLER_GET_SYNC_STATE_DATA's ``replicasInfoTable``."""

    masterBrokerId: int
    masterAddress: str
    masterEpoch: int
    syncStateSetEpoch: int
    inSyncReplicas: list[ReplicaMemberBody]
    notInSyncReplicas: list[ReplicaMemberBody]


class SyncStateDataBody(TypedDict, total=False):
    """CONTROLLER_GET_SYNC_STATE_DATA."""

    replicasInfoTable: dict[str, ReplicasInfoBody]
