"""The JSON bodies of the answers ``rmqd admin`` reads, as TypedDicts (the shapes Java's and rmqd's name servers
and brokers answer with). A body is taken to have its code's shape where it is decoded
(:meth:`rmqd.admin.client.AdminClient.answer`); fields a server may leave out are read with ``.get``.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Optional, TypedDict

from rmqd.remoting.fastjson import MessageQueue

if TYPE_CHECKING:
    from rmqd.store.compaction.adopt import AdoptResult as CompactionAdoptResult
    from rmqd.store.compaction.store import QueueStatus as CompactionQueueStatus
    from rmqd.store.ha.service import HAConnectionInfo
    from rmqd.store.tier.index.adopt import AdoptResult as IndexAdoptResult
    from rmqd.store.tier.index.service import IndexFileStatus
    from rmqd.store.tier.store import TierQueueStatus


class BrokerData(TypedDict, total=False):
    """A broker group of a route or of the cluster info (Java's BrokerData)."""
    cluster: str
    brokerName: str
    brokerAddrs: dict[int | str, str]            # brokerId -> address (fastjson writes the ids as numbers)
    zoneName: str
    enableActingMaster: bool


class ClusterInfo(TypedDict, total=False):
    """GET_BROKER_CLUSTER_INFO."""
    brokerAddrTable: dict[str, BrokerData]
    clusterAddrTable: dict[str, list[str]]


class QueueData(TypedDict, total=False):
    brokerName: str
    readQueueNums: int
    writeQueueNums: int
    perm: int
    topicSysFlag: int


class TopicRoute(TypedDict, total=False):
    """GET_ROUTEINFO_BY_TOPIC (Java's TopicRouteData)."""
    orderTopicConf: str
    queueDatas: list[QueueData]
    brokerDatas: list[BrokerData]
    filterServerTable: dict[str, list[str]]


class TopicList(TypedDict, total=False):
    """GET_ALL_TOPIC_LIST_FROM_NAMESERVER (and the other topic lists)."""
    topicList: list[str]


class GroupList(TypedDict, total=False):
    """QUERY_TOPIC_CONSUME_BY_WHO."""
    groupList: list[str]


class TopicConfig(TypedDict, total=False):
    topicName: str
    readQueueNums: int
    writeQueueNums: int
    perm: int
    topicFilterType: str
    topicSysFlag: int
    order: bool
    attributes: dict[str, str]


class TopicConfigTable(TypedDict, total=False):
    """GET_ALL_TOPIC_CONFIG (Java's TopicConfigSerializeWrapper)."""
    topicConfigTable: dict[str, TopicConfig]


class OffsetWrapper(TypedDict, total=False):
    brokerOffset: int
    consumerOffset: int
    pullOffset: int
    lastTimestamp: int


class ConsumeStats(TypedDict, total=False):
    """GET_CONSUME_STATS."""
    offsetTable: dict[MessageQueue, OffsetWrapper]
    consumeTps: float


class TopicOffset(TypedDict, total=False):
    minOffset: int
    maxOffset: int
    lastUpdateTimestamp: int


class TopicStats(TypedDict, total=False):
    """GET_TOPIC_STATS_INFO."""
    offsetTable: dict[MessageQueue, TopicOffset]


class ResetOffsetEntry(TypedDict):
    """One queue of a reset answered as a list (``{topic, brokerName, queueId, offset}``)."""
    topic: str
    brokerName: str
    queueId: int
    offset: int


class ResetOffsetBody(TypedDict, total=False):
    """INVOKE_BROKER_TO_RESET_OFFSET: the new offset per queue, as a map or as a list."""
    offsetTable: dict[MessageQueue, int] | list[ResetOffsetEntry]


class HaClientRuntime(TypedDict, total=False):
    """A slave's HA client runtime info (rmqd.store.ha.client.HAClientRuntimeInfo, read with defaults)."""
    masterAddr: str
    maxOffset: int
    transferredByteInSecond: int
    lastReadTimestamp: int
    lastWriteTimestamp: int
    masterFlushOffset: int


class HaStatus(TypedDict, total=False):
    """GET_BROKER_HA_STATUS (Java's HARuntimeInfo; rmqd's is rmqd.store.ha.service.HARuntimeInfo)."""
    master: bool
    masterCommitLogMaxOffset: int
    inSyncSlaveNums: int
    haConnectionInfo: list[HAConnectionInfo]
    haClientRuntimeInfo: HaClientRuntime


class RuntimeInfo(TypedDict, total=False):
    """GET_BROKER_RUNTIME_INFO (KVTable): every figure is a string."""
    table: dict[str, str]


class Connection(TypedDict, total=False):
    """One client connection of a group (Java's Connection)."""
    clientId: str
    clientAddr: str
    language: str
    version: int


class SubscriptionData(TypedDict, total=False):
    topic: str
    subString: str
    expressionType: str


class ConsumerConnection(TypedDict, total=False):
    """GET_CONSUMER_CONNECTION_LIST."""
    connectionSet: list[Connection]
    subscriptionTable: dict[str, SubscriptionData]
    consumeType: str
    messageModel: str
    consumeFromWhere: str


class ProducerConnection(TypedDict, total=False):
    """GET_PRODUCER_CONNECTION_LIST."""
    connectionSet: list[Connection]


class ConsumeQueueUnit(TypedDict, total=False):
    """One unit of QUERY_CONSUME_QUEUE's answer (Java's ConsumeQueueData)."""
    physicOffset: int
    physicSize: int
    tagsCode: int
    extendDataJson: str
    bitMap: str
    eval: bool
    msg: str


class ConsumeQueueBody(TypedDict, total=False):
    """QUERY_CONSUME_QUEUE (Java's QueryConsumeQueueResponseBody)."""
    subscriptionData: SubscriptionData
    filterData: str
    queueData: list[ConsumeQueueUnit]
    maxQueueIndex: int
    minQueueIndex: int


# ---------------------------------------------------------------- rmqd's own storage codes (9001-9006)
class CompactRun(TypedDict, total=False):
    """One queue's run in the answer of 9001 (compactTopic): the queue and the compactor's RunResult."""
    queueId: int
    checkpoint: int
    rounds: int
    records_in: int
    records_out: int
    bytes_in: int
    bytes_out: int
    segments_rewritten: int
    duration_s: float


class CompactRuns(TypedDict, total=False):
    """9001 (compactTopic)."""
    runs: list[CompactRun]


class CompactionStatus(TypedDict, total=False):
    """9002 (compactionStatus)."""
    queues: list[CompactionQueueStatus]


class CompactionAdoptions(TypedDict, total=False):
    """9005 (adoptCompaction)."""
    results: list[CompactionAdoptResult]


class IndexAdoptions(TypedDict, total=False):
    """9006 (adoptTierIndex)."""
    results: list[IndexAdoptResult]


class TierStatusBody(TypedDict, total=False):
    """9003 (tierStatus): rmqd.store.tier.store.TierStatus as admin reads it."""
    backend: str
    level: str
    queues: list[TierQueueStatus]
    indexFiles: list[IndexFileStatus]
    copied: int
    lastError: str


class CommitTierBody(TypedDict, total=False):
    """9004 (commitTier): rmqd.store.tier.store.CommitResult."""
    copied: int
    indexSteps: int


class StatsItem(TypedDict, total=False):
    sum: int
    tps: float
    avgpt: float


class BrokerStatsData(TypedDict, total=False):
    """VIEW_BROKER_STATS_DATA."""
    statsMinute: StatsItem
    statsHour: StatsItem
    statsDay: StatsItem


class ConsumeStatsList(TypedDict, total=False):
    """GET_BROKER_CONSUME_STATS: per entry, group -> the group's ConsumeStats on each topic."""
    consumeStatsList: list[dict[str, list[ConsumeStats]]]
    brokerAddr: str
    totalDiff: int


# ---------------------------------------------------------------- access control 2.0 (3001-3010)
class UserInfo(TypedDict, total=False):
    """A user (AUTH_GET_USER, AUTH_LIST_USER; the body of AUTH_CREATE_USER / AUTH_UPDATE_USER)."""
    username: str
    password: str
    userType: str
    userStatus: str


class AclEntry(TypedDict, total=False):
    resource: str
    actions: list[str]
    sourceIps: list[str]
    decision: str


class AclPolicy(TypedDict, total=False):
    policyType: Optional[str]
    entries: list[AclEntry]


class AclInfo(TypedDict, total=False):
    """A subject's ACL (AUTH_GET_ACL, AUTH_LIST_ACL; the body of AUTH_CREATE_ACL / AUTH_UPDATE_ACL)."""
    subject: Optional[str]
    policies: list[AclPolicy]


# ---------------------------------------------------------------- the 5.x controller
class ReplicaIdentity(TypedDict, total=False):
    brokerName: str
    brokerId: int
    brokerAddress: str
    alive: bool


class ReplicasInfo(TypedDict, total=False):
    masterBrokerId: int
    masterAddress: str
    masterEpoch: int
    syncStateSetEpoch: int
    inSyncReplicas: list[ReplicaIdentity]
    notInSyncReplicas: list[ReplicaIdentity]


class SyncStateData(TypedDict, total=False):
    """CONTROLLER_GET_SYNC_STATE_DATA (Java's BrokerReplicasInfo)."""
    replicasInfoTable: dict[str, ReplicasInfo]


class ElectMasterBody(TypedDict, total=False):
    """CONTROLLER_ELECT_MASTER's body (Java's ElectMasterResponseBody)."""
    brokerMemberGroup: BrokerData


class EpochEntry(TypedDict, total=False):
    epoch: int
    startOffset: int
    endOffset: int


class EpochCache(TypedDict, total=False):
    """GET_BROKER_EPOCH_CACHE (Java's EpochEntryCache)."""
    clusterName: str
    brokerName: str
    brokerId: int
    epochList: list[EpochEntry]
    maxOffset: int
