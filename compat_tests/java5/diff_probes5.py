"""The raw requests the 5.x differential sends to rmqd and to the Java 5.x broker: every request code RocketMQ
added after 4.9.8 (RequestCode of the 5.5.0 jars; :data:`CODES_AFTER_498`), each with valid input on the state
``differential.prepare`` + :func:`prepare5` leave, and with bad input: no header, missing header fields, wrong
types, unknown topics and groups, malformed bodies.

The probes are in order: some change state that later ones read (a forbidden group, a request mode, a created
topic list). Outcomes are compared with :func:`differential.classified` (remark classes, not exception texts).
"""
from __future__ import annotations

import base64
import time

import orjson

from differential import CLIENT_ID, GROUP, ONLINE_GROUP, TOPIC, UNKNOWN_GROUP, UNKNOWN_TOPIC, Probe

from rmqd.remoting.client import BlockingClient
from rmqd.remoting.command import new_request

# RequestCode values of the 5.5.0 jars absent from 4.9.8's (javap -constants on both; see test_every_new_code_is_probed)
CODES_AFTER_498 = frozenset({
    18, 47, 60, 61, 217, 225, 343, 345, 351, 352, 353, 354, 355, 361, 370, 400, 401, 402, 513,
    *range(901, 909), *range(1001, 1014), *range(2001, 2005), *range(3001, 3011), 5001,
    *range(200050, 200057), *range(200070, 200080), 200151})

POP_GROUP, POP_MODE_TOPIC, POP_MODE_GROUP = "Diff5PopGroup", "Diff5ModeTopic", "Diff5ModeGroup"
LIST_TOPICS = ("Diff5ListA", "Diff5ListB")
LIST_GROUPS = ("Diff5GroupA", "Diff5GroupB")
LITE_TOPIC, LITE_GROUP = "Diff5Lite", "Diff5LiteGroup"
# a recall handle for a message nobody sent, due in ten minutes: both brokers store a delete marker for it
_FUTURE = str(int(time.time() * 1000) + 600_000)


def handle(topic: str = TOPIC, broker: str = "broker-a", ts: str = _FUTURE, msg_id: str = "7F0000010000DIFF5") -> str:
    return base64.urlsafe_b64encode(f"v1 {topic} {broker} {ts} {msg_id}".encode()).decode()


def prepare5(broker_addr: str) -> None:
    """The 5.x state beyond ``differential.prepare``: recall enabled (recallMessageEnable, off by default on
    both), as an operator enables it (UPDATE_BROKER_CONFIG); a LITE topic and a lite group bound to it."""
    with BlockingClient(broker_addr) as c:
        r = c.invoke(new_request(25, None, b"recallMessageEnable=true\n"))
        assert r.code == 0, r.remark
        r = c.invoke(new_request(17, {"topic": LITE_TOPIC, "defaultTopic": "TBW102", "readQueueNums": "4",
                                      "writeQueueNums": "4", "perm": "6", "topicFilterType": "SINGLE_TAG",
                                      "topicSysFlag": "0", "order": "false", "attributes": "+message.type=LITE"}))
        assert r.code == 0, r.remark
        r = c.invoke(new_request(200, None, orjson.dumps({
            "groupName": LITE_GROUP, "consumeEnable": True, "retryQueueNums": 1, "retryMaxTimes": 16,
            "attributes": {"+lite.bind.topic": LITE_TOPIC}})))
        assert r.code == 0, r.remark


def _topic_list(*configs: dict) -> bytes:
    return orjson.dumps({"topicConfigList": list(configs)})


def _tc(name: str, **over: object) -> dict:
    return {"topicName": name, "readQueueNums": 4, "writeQueueNums": 4, "perm": 6, "topicFilterType": "SINGLE_TAG",
            "topicSysFlag": 0, "order": False, "attributes": {}, **over}


def _group_list(*names: str) -> bytes:
    return orjson.dumps({"groupConfigList": [{"groupName": n, "consumeEnable": True, "retryQueueNums": 1,
                                              "retryMaxTimes": 16} for n in names]})


def _pull(**changes: str | None) -> dict:
    h = {"consumerGroup": GROUP, "topic": TOPIC, "queueId": "0", "queueOffset": "0", "maxMsgNums": "32",
         "sysFlag": "4", "commitOffset": "0", "suspendTimeoutMillis": "0", "subscription": "*", "subVersion": "0",
         "expressionType": "TAG"}
    for k, v in changes.items():
        if v is None:
            h.pop(k, None)
        else:
            h[k] = v
    return h


def _pop(**changes: str | None) -> dict:
    h = {"consumerGroup": POP_GROUP, "topic": TOPIC, "queueId": "-1", "maxMsgNums": "1", "invisibleTime": "60000",
         "pollTime": "0", "bornTime": "0", "initMode": "0", "expType": "TAG", "exp": "*", "order": "false"}
    for k, v in changes.items():
        if v is None:
            h.pop(k, None)
        else:
            h[k] = v
    return h


_EXTRA = "0 1700000000000 60000 0 0 broker-a 0 0"       # ckOffset popTime invisible reviveQid retry broker qid offset


def _ack(**changes: str | None) -> dict:
    h = {"consumerGroup": POP_GROUP, "topic": TOPIC, "queueId": "0", "extraInfo": _EXTRA, "offset": "0"}
    for k, v in changes.items():
        if v is None:
            h.pop(k, None)
        else:
            h[k] = v
    return h


def _batch_ack(topic: str = TOPIC, so: int = 0, bits: str = "AQ==", **over: object) -> bytes:
    ack = {"c": POP_GROUP, "t": topic, "r": "0", "so": so, "q": 0, "rq": 0, "pt": 1700000000000, "it": 60000,
           "b": bits, **over}
    return orjson.dumps({"brokerName": "broker-a", "acks": [ack]})


def _assignment(**over: object) -> bytes:
    return orjson.dumps({"topic": TOPIC, "consumerGroup": ONLINE_GROUP, "clientId": CLIENT_ID,
                         "strategyName": "AVG", "messageModel": "CLUSTERING", **over})


ADMIN = [
    # 18 UPDATE_AND_CREATE_TOPIC_LIST
    Probe("topic list: create two topics", 18, body=_topic_list(*(_tc(t) for t in LIST_TOPICS))),
    Probe("topic list: the same again", 18, body=_topic_list(*(_tc(t) for t in LIST_TOPICS))),
    Probe("topic list: no body", 18),
    Probe("topic list: a body that is not JSON", 18, body=b"not json"),
    Probe("topic list: an illegal name", 18, body=_topic_list(_tc("Diff5 Bad!"))),
    Probe("topic list: a system topic", 18, body=_topic_list(_tc("TBW102"))),
    Probe("topic list: a MIXED message type", 18, body=_topic_list(_tc("Diff5Mixed",
                                                                        attributes={"+message.type": "MIXED"}))),
    # 351 GET_TOPIC_CONFIG
    Probe("topic config", 351, {"topic": TOPIC}),
    Probe("topic config of a listed topic", 351, {"topic": LIST_TOPICS[0]}),
    Probe("topic config with its static mapping", 351, {"topic": TOPIC, "lo": "true"}),
    Probe("topic config of an unknown topic", 351, {"topic": UNKNOWN_TOPIC}),
    Probe("topic config without a topic", 351, {"lo": "true"}),
    Probe("topic config without a header", 351),
    # 225 UPDATE_AND_CREATE_SUBSCRIPTIONGROUP_LIST, 352 GET_SUBSCRIPTIONGROUP_CONFIG
    Probe("group list: create two groups", 225, body=_group_list(*LIST_GROUPS)),
    Probe("group list: no body", 225),
    Probe("group list: a body that is not JSON", 225, body=b"{not json"),
    Probe("group list: an illegal name", 225, body=_group_list("Diff5 Bad!")),
    Probe("group list: a blank name", 225, body=_group_list("")),
    Probe("group config", 352, {"group": GROUP}),
    Probe("group config of a listed group", 352, {"group": LIST_GROUPS[1]}),
    Probe("group config of an unknown group (auto-created)", 352, {"group": "Diff5AutoGroup"}),
    Probe("group config without a group", 352, {"topic": TOPIC}),
    Probe("group config without a header", 352),
    # 343 QUERY_TOPICS_BY_CONSUMER, 345 QUERY_SUBSCRIPTION_BY_CONSUMER
    Probe("topics by consumer", 343, {"group": GROUP}),
    Probe("topics by an unknown consumer", 343, {"group": UNKNOWN_GROUP}),
    Probe("topics by consumer without a group", 343, {"topic": TOPIC}),
    Probe("subscription of an online consumer", 345, {"group": ONLINE_GROUP, "topic": TOPIC}),
    Probe("subscription of an offline consumer", 345, {"group": GROUP, "topic": TOPIC}),
    Probe("subscription of an online consumer for an unknown topic", 345, {"group": ONLINE_GROUP,
                                                                           "topic": UNKNOWN_TOPIC}),
    Probe("subscription by consumer without a group", 345, {"topic": TOPIC}),
    # 353 UPDATE_AND_GET_GROUP_FORBIDDEN (and the pull it forbids)
    Probe("group forbidden: read", 353, {"group": ONLINE_GROUP, "topic": TOPIC}),
    Probe("group forbidden: forbid reading", 353, {"group": ONLINE_GROUP, "topic": TOPIC, "readable": "false"}),
    Probe("lite pull by a forbidden group", 361, _pull(consumerGroup=ONLINE_GROUP, sysFlag="0")),
    Probe("group forbidden: allow again", 353, {"group": ONLINE_GROUP, "topic": TOPIC, "readable": "true"}),
    Probe("lite pull by a group allowed again", 361, _pull(consumerGroup=ONLINE_GROUP, sysFlag="0"),
          stable=("nextBeginOffset", "minOffset", "maxOffset")),
    Probe("group forbidden without a topic", 353, {"group": GROUP}),
    Probe("group forbidden with a readable that is not a boolean", 353, {"group": GROUP, "topic": TOPIC,
                                                                         "readable": "perhaps"}),
    Probe("group forbidden: allow the offline group again", 353, {"group": GROUP, "topic": TOPIC, "readable": "true"}),
    # 354 CHECK_ROCKSDB_CQ_WRITE_PROGRESS, 355 EXPORT_ROCKSDB_CONFIG_TO_JSON
    Probe("rocksdb consume queue check", 354, {"topic": TOPIC, "checkStoreTime": "0"}),
    Probe("export rocksdb config", 355, {"configType": "topics;subscriptionGroups;consumerOffsets"}),
    Probe("export rocksdb config of an unknown type", 355, {"configType": "topics;nonsense"}),
    Probe("export rocksdb config without a type", 355, {"topic": TOPIC}),
    # 60 / 61 timer, 2001-2004 cold data flow control and read-ahead, 5001 timer engine, 513 static topics
    Probe("timer check point", 60),
    Probe("timer metrics", 61),
    Probe("cold data flow control: update", 2001, body=b"consumerGroup=DiffGroup\nthreshold=1024\n"),
    Probe("cold data flow control: remove", 2002, body=b"DiffGroup"),
    Probe("cold data flow control: info", 2003),
    Probe("commit log read mode: random", 2004, {"READ_AHEAD_MODE": "1"}),
    Probe("commit log read mode", 2004, {"READ_AHEAD_MODE": "0"}),
    Probe("commit log read mode of another value", 2004, {"READ_AHEAD_MODE": "3"}),
    Probe("commit log read mode that is not a number", 2004, {"READ_AHEAD_MODE": "fast"}),
    Probe("commit log read mode with a misnamed field", 2004, {"mode": "0"}),
    Probe("commit log read mode without a mode", 2004),
    Probe("switch timer engine to the RocksDB timeline", 5001, {"E_T": "R"}),
    Probe("switch timer engine to the time wheel", 5001, {"E_T": "F"}),
    Probe("switch timer engine of another type", 5001, {"E_T": "X"}),
    Probe("switch timer engine with a misnamed field", 5001, {"engineType": "R"}),
    Probe("switch timer engine without a header", 5001),
    Probe("static topic", 513, {"topic": "Diff5Static"}, body=b"{}"),
    Probe("static topic without a header", 513),
    # 47 GET_CLIENT_CONFIG (the proxy's; a broker does not serve it)
    Probe("client config", 47, {"topic": TOPIC}),
]

CLIENT = [
    # 361 LITE_PULL_MESSAGE
    Probe("lite pull", 361, _pull(), stable=("nextBeginOffset", "minOffset", "maxOffset", "suggestWhichBrokerId")),
    Probe("lite pull from a queue beyond the topic's", 361, _pull(queueId="99")),
    Probe("lite pull of an unknown topic", 361, _pull(topic=UNKNOWN_TOPIC)),
    Probe("lite pull without a queue offset", 361, _pull(queueOffset=None)),
    Probe("lite pull with a non-numeric offset", 361, _pull(queueOffset="x1")),
    # 370 RECALL_MESSAGE
    Probe("recall of a message nobody sent", 370, {"topic": TOPIC, "recallHandle": handle(),
                                                   "producerGroup": "DiffPG"}, stable=("msgId",)),
    Probe("recall with a handle that is not base64", 370, {"topic": TOPIC, "recallHandle": "%%%"}),
    Probe("recall with a handle of another version", 370, {
        "topic": TOPIC, "recallHandle": base64.urlsafe_b64encode(b"v9 a b c d").decode()}),
    Probe("recall with a handle of another topic", 370, {"topic": TOPIC, "recallHandle": handle(topic="Other")}),
    Probe("recall with a handle of another broker", 370, {"topic": TOPIC, "recallHandle": handle(broker="nobody")}),
    Probe("recall of a message already due", 370, {"topic": TOPIC, "recallHandle": handle(ts="1700000000000")}),
    Probe("recall with a timestamp that is not a number", 370, {"topic": TOPIC, "recallHandle": handle(ts="soon")}),
    Probe("recall beyond the longest delay", 370, {"topic": TOPIC,
                                                   "recallHandle": handle(ts=str(int(_FUTURE) + 4 * 86400_000))}),
    Probe("recall on an unknown topic", 370, {"topic": UNKNOWN_TOPIC, "recallHandle": handle(topic=UNKNOWN_TOPIC)}),
    Probe("recall without a handle", 370, {"topic": TOPIC}),
    Probe("recall without a header", 370),
    # 400 QUERY_ASSIGNMENT, 401 SET_MESSAGE_REQUEST_MODE, 402 GET_ALL_MESSAGE_REQUEST_MODE
    Probe("assignment of an online consumer", 400, body=_assignment()),
    Probe("assignment of a client not online", 400, body=_assignment(clientId="127.0.0.1@nobody")),
    Probe("assignment of an unknown topic", 400, body=_assignment(topic=UNKNOWN_TOPIC)),
    Probe("assignment for broadcasting", 400, body=_assignment(messageModel="BROADCASTING")),
    Probe("assignment without a body", 400),
    Probe("assignment with a body that is not JSON", 400, body=b"nope"),
    Probe("request mode: set POP", 401, body=orjson.dumps({"topic": TOPIC, "consumerGroup": POP_MODE_GROUP,
                                                           "mode": "POP", "popShareQueueNum": 0})),
    Probe("request mode: of an unknown topic", 401, body=orjson.dumps({
        "topic": POP_MODE_TOPIC, "consumerGroup": POP_MODE_GROUP, "mode": "POP", "popShareQueueNum": 0})),
    Probe("request mode: of a retry topic", 401, body=orjson.dumps({
        "topic": "%RETRY%" + POP_MODE_GROUP, "consumerGroup": POP_MODE_GROUP, "mode": "POP", "popShareQueueNum": 0})),
    Probe("request mode: without a body", 401),
    Probe("request mode: all", 402),
    # 200050-200056 POP
    Probe("pop", 200050, _pop()),
    Probe("pop of an unknown topic", 200050, _pop(topic=UNKNOWN_TOPIC)),
    Probe("pop from a queue beyond the topic's", 200050, _pop(queueId="99")),
    Probe("pop of more than 32", 200050, _pop(maxMsgNums="33")),
    Probe("pop without an invisible time", 200050, _pop(invisibleTime=None)),
    Probe("pop with a non-numeric queue id", 200050, _pop(queueId="q")),
    Probe("pop with only a group and a topic", 200050, {"consumerGroup": POP_GROUP, "topic": TOPIC}),
    Probe("pop without a header", 200050),
    Probe("ack of an offset beyond the queue", 200051, _ack(offset="99999")),
    Probe("ack of an unknown topic", 200051, _ack(topic=UNKNOWN_TOPIC)),
    Probe("ack with an extra info that is not one", 200051, _ack(extraInfo="garbage")),
    Probe("ack without an offset", 200051, _ack(offset=None)),
    Probe("ack without a header", 200051),
    Probe("peek", 200052, {"consumerGroup": "Diff5PeekGroup", "topic": TOPIC, "queueId": "0", "maxMsgNums": "1"}),
    Probe("peek of an unknown topic", 200052, {"consumerGroup": POP_GROUP, "topic": UNKNOWN_TOPIC, "queueId": "0",
                                               "maxMsgNums": "1"}),
    Probe("peek without a header", 200052),
    Probe("change invisible time of an offset beyond the queue", 200053, {**_ack(offset="99999"),
                                                                         "invisibleTime": "1000"}),
    Probe("change invisible time with an extra info that is not one", 200053, {**_ack(extraInfo="garbage"),
                                                                              "invisibleTime": "1000"}),
    Probe("change invisible time without a header", 200053),
    Probe("notification", 200054, {"consumerGroup": POP_GROUP, "topic": TOPIC, "queueId": "-1", "pollTime": "0",
                                    "bornTime": "0"}),
    Probe("notification of an unknown topic", 200054, {"consumerGroup": POP_GROUP, "topic": UNKNOWN_TOPIC,
                                                       "queueId": "-1", "pollTime": "0", "bornTime": "0"}),
    Probe("notification without a header", 200054),
    Probe("polling info", 200055, {"consumerGroup": POP_GROUP, "topic": TOPIC, "queueId": "0"}),
    Probe("polling info of an unknown topic", 200055, {"consumerGroup": POP_GROUP, "topic": UNKNOWN_TOPIC,
                                                       "queueId": "0"}),
    Probe("polling info without a header", 200055),
    Probe("pop rollback", 200056),
    # 200151 BATCH_ACK_MESSAGE
    Probe("batch ack of a checkpoint nobody popped", 200151, body=_batch_ack()),
    Probe("batch ack of an unknown topic", 200151, body=_batch_ack(topic=UNKNOWN_TOPIC)),
    Probe("batch ack of offsets beyond the queue", 200151, body=_batch_ack(so=99999)),
    Probe("batch ack without a body", 200151),
    Probe("batch ack without acks", 200151, body=b'{"brokerName":"broker-a","acks":[]}'),
    Probe("batch ack with a body that is not JSON", 200151, body=b"not json"),
    Probe("batch ack with acks that are not a list", 200151, body=b'{"acks":7}'),
    # 200070-200079 Lite Mode (a topic that is not LITE: the checks before any lite state)
    Probe("lite pop of a topic that is not lite", 200070, {
        "clientId": CLIENT_ID, "consumerGroup": POP_GROUP, "topic": TOPIC, "maxMsgNum": "1", "invisibleTime": "60000",
        "pollTime": "0", "bornTime": "0"}),
    Probe("lite pop of an unknown topic", 200070, {
        "clientId": CLIENT_ID, "consumerGroup": POP_GROUP, "topic": UNKNOWN_TOPIC, "maxMsgNum": "1",
        "invisibleTime": "60000", "pollTime": "0", "bornTime": "0"}),
    Probe("lite pop without a header", 200070),
    Probe("lite subscription control without a body", 200071),
    Probe("lite subscription control with an empty set", 200071, body=b'{"subscriptionSet":[]}'),
    Probe("ack lite message (broker to client only)", 200072),
    Probe("notify unsubscribe lite (broker to client only)", 200073),
    Probe("broker lite info", 200074),
    Probe("parent topic info without a topic", 200075, {"group": GROUP}),
    Probe("parent topic info of a topic that is not lite", 200075, {"topic": TOPIC}),
    Probe("parent topic info of an unknown topic", 200075, {"topic": UNKNOWN_TOPIC}),
    Probe("lite topic info of a topic that is not lite", 200076, {"parentTopic": TOPIC, "liteTopic": "l1"}),
    Probe("lite topic info of an unknown topic", 200076, {"parentTopic": UNKNOWN_TOPIC, "liteTopic": "l1"}),
    Probe("lite topic info without a header", 200076),
    Probe("lite client info without a header", 200077),
    Probe("lite group info without a header", 200078),
    Probe("trigger lite dispatch without a header", 200079),
]

HA = [
    # 901-908 broker container / slave-acting-master / HA (brokers talk to each other and to name servers)
    Probe("add broker", 902, {"configPath": "/nonexistent"}),
    Probe("remove broker", 903, {"brokerClusterName": "DefaultCluster", "brokerName": "broker-z", "brokerId": "1"}),
    Probe("notify min broker id change without a header", 905),
    Probe("exchange broker HA info", 906),
    Probe("broker HA status", 907),
    Probe("reset master flush offset", 908, {"masterFlushOffset": "0"}),
]

NAMESRV = [
    Probe("name server: broker member group", 901, {"clusterName": "DefaultCluster", "brokerName": "broker-a"},
          target="namesrv"),
    Probe("name server: member group of an unknown broker", 901, {"clusterName": "DefaultCluster",
                                                                 "brokerName": "broker-z"}, target="namesrv"),
    Probe("name server: broker member group without a broker name", 901, {"clusterName": "DefaultCluster"},
          target="namesrv"),
    Probe("name server: heartbeat of an unregistered broker", 904, {
        "clusterName": "DefaultCluster", "brokerAddr": "127.0.0.1:1", "brokerName": "broker-z"}, target="namesrv"),
    Probe("name server: broker heartbeat without a header", 904, target="namesrv"),
    Probe("name server: register a topic", 217, {"topic": "Diff5NsTopic"}, orjson.dumps({"queueDatas": [
        {"brokerName": "broker-a", "readQueueNums": 1, "writeQueueNums": 1, "perm": 6, "topicSysFlag": 0}]}),
        target="namesrv"),
    Probe("name server: register a topic without a body", 217, {"topic": "Diff5NsTopic2"}, target="namesrv"),
    Probe("name server: register a topic without a topic", 217, {"cluster": "DefaultCluster"}, target="namesrv"),
]

# Controller codes (1001-1013): served by a controller (rmqd.controller; its own differential), refused by a
# broker and by a name server without enableControllerInNamesrv, as both Javas refuse them.
CONTROLLER = [Probe(f"controller code {code} to the broker", code) for code in range(1001, 1014)] + \
    [Probe(f"controller code {code} to the name server", code, target="namesrv") for code in range(1001, 1014)]

# ACL 2.0 (3001-3010) with authentication and authorization off (both brokers' default).
ACL2 = [
    Probe("acl2: create a user without a name", 3001, body=b"{}"),
    Probe("acl2: create a user", 3001, {"username": "diff5user"}, orjson.dumps({
        "username": "diff5user", "password": "diff5pass", "userType": "Normal"})),
    Probe("acl2: update a user", 3002, {"username": "diff5user"}, orjson.dumps({
        "username": "diff5user", "password": "other", "userType": "Normal"})),
    Probe("acl2: get a user", 3004, {"username": "diff5user"}),
    Probe("acl2: get a user without a name", 3004),
    Probe("acl2: list users", 3005),
    Probe("acl2: delete a user", 3003, {"username": "diff5user"}),
    Probe("acl2: create an acl", 3006, {"subject": "User:diff5user"}, orjson.dumps({
        "subject": "User:diff5user", "policies": []})),
    Probe("acl2: update an acl", 3007, {"subject": "User:diff5user"}, orjson.dumps({
        "subject": "User:diff5user", "policies": []})),
    Probe("acl2: delete an acl", 3008, {"subject": "User:diff5user"}),
    Probe("acl2: get an acl", 3009, {"subject": "User:diff5user"}),
    Probe("acl2: list acls", 3010),
]

ALL = ADMIN + CLIENT + HA + NAMESRV + CONTROLLER + ACL2


def probed_codes() -> set[int]:
    """The 5.x codes :data:`ALL` sends (``name server: route ...`` and the pulls are 4.9.8 codes)."""
    return {p.code for p in ALL} & CODES_AFTER_498
