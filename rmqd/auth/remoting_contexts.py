"""What a remoting request touches, as 5.x's ``DefaultAuthorizationContextBuilder.build(ctx, RemotingCommand)``.

The sends, pulls, heartbeats and the other client codes have cases of their own (:func:`contexts_of`); every
other code is read off :data:`ANNOTATED`, 5.x's ``@RocketMQAction`` / ``@RocketMQResource`` annotations of its
request header class (``RequestHeaderRegistry``): each non-null resource field (split by its splitter) is one
context with the header's actions; a retry topic in a topic field is its group; a header of the Cluster type with
no such field is ``Cluster:<brokerClusterName>``. A code without an entry touches nothing (any authenticated user
may send it: 5.5 has no header annotation for UPDATE_BROKER_CONFIG, UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
GET_BROKER_CONFIG and others). compat_tests checks :data:`ANNOTATED` against the 5.5.0 jars.

A request 5.x cannot read (a heartbeat body that is not JSON, ...) is refused: "parse authorization context
error." (:class:`~rmqd.auth.errors.AuthorizationError`).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Mapping, Optional, Union

import orjson

from rmqd.auth.authorization import AuthContext
from rmqd.auth.errors import AuthorizationError
from rmqd.auth.model import Action, Resource, ResourcePattern, ResourceType, is_retry_topic, json_objects

PUB, SUB, GET, LIST = Action.PUB, Action.SUB, Action.GET, Action.LIST
CREATE, UPDATE, DELETE = Action.CREATE, Action.UPDATE, Action.DELETE
UNKNOWN, CLUSTER = ResourceType.UNKNOWN, ResourceType.CLUSTER
TOPIC, GROUP = ResourceType.TOPIC, ResourceType.GROUP

if TYPE_CHECKING:
    from rmqd.remoting.command import BodyPart

PARSE_ERROR = "parse authorization context error."

#: A header's resource field: (ext field, resource type[, splitter]).
ResourceField = Union[tuple[str, ResourceType], tuple[str, ResourceType, str]]
#: A request header's annotation: (its resource type, its actions, its resource fields).
HeaderAnnotation = tuple[ResourceType, tuple[Action, ...], tuple[ResourceField, ...]]

# code: (the header's resource type, its actions, its resource fields: (ext field, type[, splitter]))
ANNOTATED: dict[int, HeaderAnnotation] = {
    10: (UNKNOWN, (PUB,), (('topic', TOPIC),)),  # SendMessage
    11: (UNKNOWN, (SUB,), (('consumerGroup', GROUP), ('topic', TOPIC))),  # PullMessage
    12: (UNKNOWN, (SUB, GET), (('topic', TOPIC),)),  # QueryMessage
    14: (UNKNOWN, (GET,), (('consumerGroup', GROUP), ('topic', TOPIC))),  # QueryConsumerOffset
    15: (UNKNOWN, (SUB,), (('consumerGroup', GROUP), ('topic', TOPIC))),  # UpdateConsumerOffset
    17: (UNKNOWN, (CREATE,), (('topic', TOPIC),)),  # CreateTopic
    18: (UNKNOWN, (CREATE,), ()),  # CreateTopicList
    21: (TOPIC, (GET,), ()),  # GetAllTopicConfig
    29: (UNKNOWN, (GET,), (('topic', TOPIC),)),  # SearchOffset
    30: (UNKNOWN, (GET,), (('topic', TOPIC),)),  # GetMaxOffset
    31: (UNKNOWN, (GET,), (('topic', TOPIC),)),  # GetMinOffset
    32: (UNKNOWN, (GET,), (('topic', TOPIC),)),  # GetEarliestMsgStoretime
    33: (UNKNOWN, (GET,), (('topic', TOPIC),)),  # ViewMessage
    34: (GROUP, (PUB, SUB), ()),  # Heartbeat
    35: (UNKNOWN, (PUB, SUB), (('consumerGroup', GROUP),)),  # UnregisterClient
    36: (UNKNOWN, (SUB,), (('group', GROUP), ('originTopic', TOPIC))),  # ConsumerSendMsgBack
    37: (UNKNOWN, (PUB,), (('topic', TOPIC),)),  # EndTransaction
    38: (UNKNOWN, (SUB,), (('consumerGroup', GROUP),)),  # GetConsumerListByGroup
    39: (UNKNOWN, (PUB,), (('topic', TOPIC),)),  # CheckTransactionState
    40: (UNKNOWN, (SUB,), (('consumerGroup', GROUP),)),  # NotifyConsumerIdsChanged
    41: (UNKNOWN, (SUB,), ()),  # LockBatchMq
    42: (UNKNOWN, (SUB,), ()),  # UnlockBatchMq
    100: (CLUSTER, (UPDATE,), ()),  # PutKVConfig
    101: (CLUSTER, (GET,), ()),  # GetKVConfig
    102: (CLUSTER, (UPDATE,), ()),  # DeleteKVConfig
    103: (CLUSTER, (UPDATE,), (('clusterName', CLUSTER),)),  # RegisterBroker
    104: (CLUSTER, (UPDATE,), (('clusterName', CLUSTER),)),  # UnRegisterBroker
    105: (CLUSTER, (GET,), ()),  # GetRouteInfo
    201: (GROUP, (LIST,), ()),  # GetAllSubscriptionGroupResponse
    202: (UNKNOWN, (GET,), (('topic', TOPIC),)),  # GetTopicStatsInfo
    203: (UNKNOWN, (GET,), (('consumerGroup', GROUP),)),  # GetConsumerConnectionList
    204: (CLUSTER, (GET,), ()),  # GetProducerConnectionList
    205: (CLUSTER, (UPDATE,), ()),  # WipeWritePermOfBroker
    207: (UNKNOWN, (DELETE,), (('groupName', GROUP),)),  # DeleteSubscriptionGroup
    208: (UNKNOWN, (GET,), (('consumerGroup', GROUP), ('topic', TOPIC), ('topicList', TOPIC, ';'))),
    215: (UNKNOWN, (DELETE,), (('topic', TOPIC),)),  # DeleteTopic
    216: (CLUSTER, (UPDATE,), (('clusterName', CLUSTER),)),  # DeleteTopicFromNamesrv
    217: (CLUSTER, (UPDATE,), ()),  # RegisterTopic
    219: (CLUSTER, (GET,), ()),  # GetKVListByNamespace
    222: (UNKNOWN, (UPDATE,), (('group', GROUP), ('topic', TOPIC))),  # ResetOffset
    223: (UNKNOWN, (GET,), (('topic', TOPIC), ('group', GROUP))),  # GetConsumerStatus
    224: (TOPIC, (LIST,), ()),  # GetTopicsByCluster
    300: (UNKNOWN, (GET,), (('topic', TOPIC),)),  # QueryTopicConsumeByWho
    303: (UNKNOWN, (GET,), (('topic', TOPIC), ('group', GROUP))),  # QueryConsumeTimeSpan
    307: (UNKNOWN, (GET,), (('consumerGroup', GROUP),)),  # GetConsumerRunningInfo
    308: (UNKNOWN, (GET,), (('filterGroups', GROUP, ','), ('compareGroup', GROUP), ('topic', TOPIC))),
    309: (UNKNOWN, (SUB,), (('consumerGroup', GROUP), ('topic', TOPIC))),  # ConsumeMessageDirectlyResult
    310: (UNKNOWN, (PUB,), (('b', TOPIC),)),  # SendMessageV2
    314: (UNKNOWN, (UPDATE,), (('destGroup', GROUP), ('topic', TOPIC))),  # CloneGroupOffset
    315: (CLUSTER, (GET,), ()),  # ViewBrokerStatsData
    317: (CLUSTER, (GET,), ()),  # GetConsumeStatsInBroker
    321: (UNKNOWN, (GET,), (('topic', TOPIC), ('consumerGroup', GROUP))),  # QueryConsumeQueue
    322: (CLUSTER, (GET,), (('clusterName', CLUSTER),)),  # QueryDataVersion
    323: (UNKNOWN, (UPDATE,), (('topic', TOPIC),)),  # ResumeCheckHalfMessage
    326: (UNKNOWN, (SUB,), (('producerGroup', GROUP), ('topic', TOPIC))),  # ReplyMessage
    327: (CLUSTER, (UPDATE,), ()),  # AddWritePermOfBroker
    328: (CLUSTER, (GET,), ()),  # GetAllProducerInfo
    343: (UNKNOWN, (GET,), (('group', GROUP),)),  # QueryTopicsByConsumer
    345: (UNKNOWN, (GET,), (('group', GROUP), ('topic', TOPIC))),  # QuerySubscriptionByConsumer
    351: (UNKNOWN, (GET,), (('topic', TOPIC),)),  # GetTopicConfig
    352: (UNKNOWN, (GET,), (('group', GROUP),)),  # GetSubscriptionGroupConfig
    353: (UNKNOWN, (UPDATE,), (('group', GROUP), ('topic', TOPIC))),  # UpdateGroupForbidden
    354: (UNKNOWN, (GET,), (('topic', TOPIC),)),  # CheckRocksdbCqWriteProgress
    355: (CLUSTER, (GET,), ()),  # ExportRocksDBConfigToJson
    370: (UNKNOWN, (PUB,), (('topic', TOPIC),)),  # RecallMessage
    901: (UNKNOWN, (GET,), (('clusterName', CLUSTER),)),  # GetBrokerMemberGroup
    902: (CLUSTER, (UPDATE,), ()),  # AddBroker
    903: (CLUSTER, (UPDATE,), (('brokerClusterName', CLUSTER),)),  # RemoveBroker
    904: (CLUSTER, (UPDATE,), (('clusterName', CLUSTER),)),  # BrokerHeartbeat
    905: (CLUSTER, (UPDATE,), ()),  # NotifyMinBrokerIdChange
    906: (CLUSTER, (UPDATE,), ()),  # ExchangeHAInfo
    908: (CLUSTER, (UPDATE,), ()),  # ResetMasterFlushOffset
    1001: (CLUSTER, (UPDATE,), ()),  # AlterSyncStateSet
    1002: (CLUSTER, (UPDATE,), (('clusterName', CLUSTER),)),  # ElectMaster
    1003: (CLUSTER, (UPDATE,), (('clusterName', CLUSTER),)),  # RegisterBrokerToController
    1004: (CLUSTER, (GET,), ()),  # GetReplicaInfo
    1008: (CLUSTER, (UPDATE,), ()),  # NotifyBrokerRoleChanged
    1011: (CLUSTER, (UPDATE,), (('clusterName', CLUSTER),)),  # CleanControllerBrokerData
    1012: (CLUSTER, (GET,), (('clusterName', CLUSTER),)),  # GetNextBrokerId
    1013: (CLUSTER, (UPDATE,), (('clusterName', CLUSTER),)),  # ApplyBrokerId
    3001: (CLUSTER, (UPDATE,), ()),  # CreateUser
    3002: (CLUSTER, (UPDATE,), ()),  # UpdateUser
    3003: (CLUSTER, (UPDATE,), ()),  # DeleteUser
    3004: (CLUSTER, (GET,), ()),  # GetUser
    3005: (CLUSTER, (GET,), ()),  # ListUsers
    3006: (CLUSTER, (UPDATE,), ()),  # CreateAcl
    3007: (CLUSTER, (UPDATE,), ()),  # UpdateAcl
    3008: (CLUSTER, (UPDATE,), ()),  # DeleteAcl
    3009: (CLUSTER, (GET,), ()),  # GetAcl
    3010: (CLUSTER, (GET,), ()),  # ListAcls
    200050: (UNKNOWN, (SUB,), (('consumerGroup', GROUP), ('topic', TOPIC))),  # PopMessage
    200051: (UNKNOWN, (SUB,), (('consumerGroup', GROUP), ('topic', TOPIC))),  # AckMessage
    200052: (UNKNOWN, (SUB,), (('topic', TOPIC), ('consumerGroup', GROUP))),  # PeekMessage
    200053: (UNKNOWN, (SUB,), (('consumerGroup', GROUP), ('topic', TOPIC))),  # ChangeInvisibleTime
    200054: (UNKNOWN, (SUB,), (('consumerGroup', GROUP), ('topic', TOPIC))),  # Notification
    200055: (UNKNOWN, (GET,), (('consumerGroup', GROUP), ('topic', TOPIC))),  # PollingInfo
    200073: (UNKNOWN, (SUB,), (('consumerGroup', GROUP),)),  # NotifyUnsubscribeLite
}


def _split(value: str, splitter: str) -> list[str]:
    """commons-lang ``StringUtils.split(value, chars)``: split on any of the chars, empty tokens dropped."""
    tokens: list[str] = []
    cur: list[str] = []
    for ch in value:
        if ch in splitter:
            if cur:
                tokens.append("".join(cur))
                cur = []
        else:
            cur.append(ch)
    if cur:
        tokens.append("".join(cur))
    return tokens


def _annotated(code: int, ext: Mapping[str, str], cluster: str) -> list[AuthContext]:
    row = ANNOTATED.get(code)
    if row is None:
        return []
    rtype, actions, fields = row
    out: list[AuthContext] = []
    for f in fields:
        raw = ext.get(f[0])
        if raw is None:
            continue
        value = raw if isinstance(raw, str) else str(raw)
        for v in (_split(value, f[2]) if len(f) == 3 else [value]):
            if f[1] is TOPIC and is_retry_topic(v):
                out.append(AuthContext(Resource.group(v), actions))
            else:
                out.append(AuthContext(Resource(f[1], v, ResourcePattern.LITERAL), actions))
    if not out and rtype is CLUSTER:
        out.append(AuthContext(Resource.cluster(cluster), actions))
    return out


def _json(body: Optional[BodyPart]) -> Mapping[str, object]:
    """The body as a JSON object (ValueError for anything else: the caller's parse error)."""
    if body is None:
        raise ValueError("no body")
    return _object(orjson.loads(bytes(body)))


def _object(value: object) -> Mapping[str, object]:
    if not isinstance(value, dict):
        raise ValueError(f"expected a JSON object, got {type(value).__name__}")
    return value


def _name(value: object) -> Optional[str]:
    """A topic or group name of a JSON body (null: none)."""
    if value is None or isinstance(value, str):
        return value
    raise ValueError(f"expected a JSON string, got {type(value).__name__}")


def _queue_contexts(data: Mapping[str, object], out: list[AuthContext]) -> None:
    """LOCK_BATCH_MQ / UNLOCK_BATCH_MQ bodies: the group, then each queue's topic (retry topics skipped)."""
    out.append(AuthContext(Resource.group(_name(data.get("consumerGroup"))), (SUB,)))
    for mq in json_objects(data.get("mqSet")):
        topic = _name(mq.get("topic"))
        if not is_retry_topic(topic):
            out.append(AuthContext(Resource.topic(topic), (SUB,)))


def send_contexts(topic: Optional[str], group: Optional[str]) -> list[AuthContext]:
    """SEND_MESSAGE(_V2) / SEND_BATCH_MESSAGE: Pub on the topic; a retry topic is Sub on the group (named by
    the group field, else by the topic)."""
    if is_retry_topic(topic):
        return [AuthContext(Resource.group(group if group and group.strip() else topic), (SUB,))]
    return [AuthContext(Resource.topic(topic), (PUB,))]


def contexts_of(code: int, ext: Optional[Mapping[str, str]], body: Optional[BodyPart],
                cluster: str) -> list[AuthContext]:
    """The contexts of one request (raises AuthorizationError "parse authorization context error.")."""
    if not ext:
        return []
    get = ext.get
    try:
        if code == 310 or code == 320:
            return send_contexts(get("b"), get("a"))
        if code == 10:
            return send_contexts(get("topic"), get("group"))
        if code == 11:                                         # PULL_MESSAGE
            out = [] if is_retry_topic(get("topic")) else [AuthContext(Resource.topic(get("topic")), (SUB,))]
            out.append(AuthContext(Resource.group(get("consumerGroup")), (SUB,)))
            return out
        if code == 34:                                         # HEART_BEAT
            out = []
            for consumer in json_objects(_json(body).get("consumerDataSet")):
                out.append(AuthContext(Resource.group(_name(consumer.get("groupName"))), (SUB,)))
                for sub in json_objects(consumer.get("subscriptionDataSet")):
                    topic = _name(sub.get("topic"))
                    if not is_retry_topic(topic):
                        out.append(AuthContext(Resource.topic(topic), (SUB,)))
            return out
        if code == 105:                                        # GET_ROUTEINFO_BY_TOPIC
            topic = get("topic")
            if is_retry_topic(topic):
                return [AuthContext(Resource.group(topic), (SUB, GET))]
            return [AuthContext(Resource.topic(topic), (PUB, SUB, GET))]
        if code == 370:                                        # RECALL_MESSAGE
            return [AuthContext(Resource.topic(get("topic")), (PUB,))]
        if code == 37:                                         # END_TRANSACTION
            topic = get("topic")
            return [AuthContext(Resource.topic(topic), (PUB,))] if topic and topic.strip() else []
        if code == 36:                                         # CONSUMER_SEND_MSG_BACK
            return [AuthContext(Resource.group(get("group")), (SUB,))]
        if code == 12:                                         # QUERY_MESSAGE
            return [AuthContext(Resource.topic(get("topic")), (SUB, GET))]
        if code == 35:                                         # UNREGISTER_CLIENT
            group = get("consumerGroup")
            return [AuthContext(Resource.group(group), (SUB,))] if group and group.strip() else []
        if code == 38:                                         # GET_CONSUMER_LIST_BY_GROUP
            return [AuthContext(Resource.group(get("consumerGroup")), (SUB, GET))]
        if code == 14 or code == 15:                           # QUERY / UPDATE_CONSUMER_OFFSET
            actions = (SUB, GET) if code == 14 else (SUB, UPDATE)
            out = [] if is_retry_topic(get("topic")) else [AuthContext(Resource.topic(get("topic")), actions)]
            out.append(AuthContext(Resource.group(get("consumerGroup")), actions))
            return out
        if code == 41 or code == 42:                           # LOCK_BATCH_MQ / UNLOCK_BATCH_MQ
            out = []
            _queue_contexts(_json(body), out)
            return out
        return _annotated(code, ext, cluster)
    except AuthorizationError:
        raise
    except Exception:
        raise AuthorizationError(PARSE_ERROR) from None
