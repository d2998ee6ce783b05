"""The requests the differential tests send to rmqd and to the Java 4.9.8 broker (see differential.py):
ordinary admin and client requests on a known state, and bad input of every kind."""
from __future__ import annotations

import orjson

from differential import (CLIENT_ID, GROUP, ONLINE_GROUP, TOPIC, UNKNOWN_GROUP, UNKNOWN_TOPIC, Probe, frame,
                          json_header, send_header)

MAX_BODY = 4 * 1024 * 1024          # maxMessageSize, both brokers' default


def _pull(**changes: str | None) -> dict:
    h = {"consumerGroup": GROUP, "topic": TOPIC, "queueId": "0", "queueOffset": "0", "maxMsgNums": "32",
         "sysFlag": "0", "commitOffset": "0", "suspendTimeoutMillis": "0", "subscription": "*", "subVersion": "0",
         "expressionType": "TAG"}
    for k, v in changes.items():
        if v is None:
            h.pop(k, None)
        else:
            h[k] = v
    return h


def _topic_create(topic: str, **changes: str) -> dict:
    h = {"topic": topic, "defaultTopic": "TBW102", "readQueueNums": "4", "writeQueueNums": "4", "perm": "6",
         "topicFilterType": "SINGLE_TAG", "topicSysFlag": "0", "order": "false"}
    h.update(changes)
    return h


NOW_RANGE = {"beginTimestamp": "0", "endTimestamp": "9999999999999"}

ORDINARY = [
    Probe("runtime info", 28),
    Probe("broker config", 26),
    Probe("all topic config", 21),
    Probe("all subscription groups", 201),
    Probe("topic stats", 202, {"topic": TOPIC}),
    Probe("consume stats", 208, {"consumerGroup": GROUP, "topic": TOPIC}),
    Probe("consume stats of every topic", 208, {"consumerGroup": GROUP}),
    Probe("consumer connections", 203, {"consumerGroup": ONLINE_GROUP}),
    Probe("consumer list by group", 38, {"consumerGroup": ONLINE_GROUP}),
    Probe("producer connections", 204, {"producerGroup": "DiffPG"}),
    Probe("all producers", 328),
    Probe("query consumer offset", 14, {"consumerGroup": GROUP, "topic": TOPIC, "queueId": "0"}, stable=("offset",)),
    Probe("max offset", 30, {"topic": TOPIC, "queueId": "0"}, stable=("offset",)),
    Probe("min offset", 31, {"topic": TOPIC, "queueId": "0"}, stable=("offset",)),
    Probe("earliest store time", 32, {"topic": TOPIC, "queueId": "0"}),
    Probe("search offset by time", 29, {"topic": TOPIC, "queueId": "0", "timestamp": "0"}, stable=("offset",)),
    Probe("query message by key", 12, {"topic": TOPIC, "key": "dk1", "maxNum": "32", **NOW_RANGE}),
    Probe("pull", 11, _pull(), stable=("nextBeginOffset", "minOffset", "maxOffset", "suggestWhichBrokerId")),
    Probe("who consumes the topic", 300, {"topic": TOPIC}),
    Probe("consume time span", 303, {"topic": TOPIC, "group": GROUP}),
    Probe("broker consume stats", 317, {"isOrder": "false", "timeoutMillis": "5000"}),
    Probe("consume queue", 321, {"topic": TOPIC, "queueId": "0", "index": "0", "count": "2",
                                 "consumerGroup": GROUP}),
    Probe("system topics of the broker", 305),
    Probe("delete expired commit log", 329),           # 72 h retention on both brokers: nothing to delete
    Probe("clean expired consume queues", 306),        # nothing expired on either broker: nothing to drop
    Probe("lock batch", 41, body=orjson.dumps({"consumerGroup": GROUP, "clientId": CLIENT_ID, "mqSet": [
        {"topic": TOPIC, "brokerName": "broker-a", "queueId": 0}]})),
    Probe("all consumer offsets", 43),
    Probe("all delay offsets", 45),
    Probe("stats data", 315, {"statsName": "TOPIC_PUT_NUMS", "statsKey": TOPIC}),
    Probe("heartbeat", 34, body=orjson.dumps({"clientID": "127.0.0.1@diff-hb", "consumerDataSet": [],
                                              "producerDataSet": [{"groupName": "DiffHbPG"}]})),
    Probe("send (ROCKETMQ serialize type)", 310, send_header(), b"binary-header", serialize_type=1,
          stable=("queueId",)),
    # name server
    Probe("route", 105, {"topic": TOPIC}, target="namesrv"),
    Probe("cluster info", 106, target="namesrv"),
    Probe("all topics", 206, target="namesrv"),
    Probe("topics of the cluster", 224, {"cluster": "DefaultCluster"}, target="namesrv"),
    Probe("system topics of the name server", 304, target="namesrv"),
    Probe("unit topics", 311, target="namesrv"),
    Probe("kv put", 100, {"namespace": "DiffNs", "key": "k", "value": "v"}, target="namesrv"),
    Probe("kv get", 101, {"namespace": "DiffNs", "key": "k"}, target="namesrv", stable=("value",)),
    Probe("kv list", 219, {"namespace": "DiffNs"}, target="namesrv"),
    Probe("name server config", 319, target="namesrv"),
]

UNKNOWN = [
    Probe("broker: unknown request code", 9999),
    Probe("name server: unknown request code", 9999, target="namesrv"),
    Probe("topic stats of an unknown topic", 202, {"topic": UNKNOWN_TOPIC}),
    Probe("consume stats of an unknown group", 208, {"consumerGroup": UNKNOWN_GROUP, "topic": TOPIC}),
    Probe("consume stats of an unknown topic", 208, {"consumerGroup": GROUP, "topic": UNKNOWN_TOPIC}),
    Probe("consumer connections of an unknown group", 203, {"consumerGroup": UNKNOWN_GROUP}),
    Probe("consumer list of an unknown group", 38, {"consumerGroup": UNKNOWN_GROUP}),
    Probe("producer connections of an unknown group", 204, {"producerGroup": UNKNOWN_GROUP}),
    Probe("offset of an unknown group", 14, {"consumerGroup": UNKNOWN_GROUP, "topic": TOPIC, "queueId": "0"}),
    Probe("max offset of an unknown topic", 30, {"topic": UNKNOWN_TOPIC, "queueId": "0"}, stable=("offset",)),
    Probe("max offset of a queue beyond the topic's", 30, {"topic": TOPIC, "queueId": "99"}, stable=("offset",)),
    Probe("earliest store time of an unknown topic", 32, {"topic": UNKNOWN_TOPIC, "queueId": "0"}),
    Probe("pull of an unknown topic", 11, _pull(topic=UNKNOWN_TOPIC)),
    Probe("pull for an unknown group", 11, _pull(consumerGroup=UNKNOWN_GROUP),
          stable=("nextBeginOffset", "minOffset", "maxOffset")),
    Probe("pull from a queue beyond the topic's", 11, _pull(queueId="99")),
    Probe("pull with a bad SQL92 expression", 11, _pull(expressionType="SQL92", subscription="a >>> 1")),
    Probe("query by key of an unknown topic", 12, {"topic": UNKNOWN_TOPIC, "key": "dk1", "maxNum": "32",
                                                   **NOW_RANGE}),
    Probe("query by a key nobody sent", 12, {"topic": TOPIC, "key": "nobody", "maxNum": "32", **NOW_RANGE}),
    Probe("view message at a bad offset", 33, {"offset": "987654321"}),
    Probe("delete an unknown group", 207, {"groupName": UNKNOWN_GROUP}),
    Probe("delete an unknown topic", 215, {"topic": UNKNOWN_TOPIC}),
    Probe("clone offsets of an unknown group", 314, {"srcGroup": UNKNOWN_GROUP, "destGroup": "DiffDest",
                                                     "topic": TOPIC, "offline": "true"}),
    Probe("running info of an unknown client", 307, {"consumerGroup": GROUP, "clientId": "nobody",
                                                     "jstackEnable": "false"}),
    Probe("stats of an unknown key", 315, {"statsName": "NO_SUCH_STATS", "statsKey": "x"}),
    Probe("consume queue of an unknown topic", 321, {"topic": UNKNOWN_TOPIC, "queueId": "0", "index": "0",
                                                     "count": "2", "consumerGroup": GROUP}),
    Probe("who consumes an unknown topic", 300, {"topic": UNKNOWN_TOPIC}),
    Probe("reset offset of an unknown topic", 222, {"topic": UNKNOWN_TOPIC, "group": GROUP,
                                                    "timestamp": "0", "isForce": "true"}),
    Probe("route of an unknown topic", 105, {"topic": UNKNOWN_TOPIC}, target="namesrv"),
    Probe("topics of an unknown cluster", 224, {"cluster": "NoSuchCluster"}, target="namesrv"),
    Probe("kv get of an unknown key", 101, {"namespace": "DiffNs", "key": "nope"}, target="namesrv"),
    Probe("delete an unknown topic on the name server", 216, {"topic": UNKNOWN_TOPIC}, target="namesrv"),
    Probe("wipe write perm of an unknown broker", 205, {"brokerName": "broker-zz"}, target="namesrv",
          stable=("wipeTopicCount",)),
]

MISSING_FIELDS = [
    Probe("send without a topic", 310, send_header(b=None), b"x"),
    Probe("send without a queue id", 310, send_header(e=None), b"x"),
    Probe("send without a producer group", 310, send_header(a=None), b"x", stable=("queueId",)),
    Probe("send without a header", 310, None, b"x"),
    Probe("pull without a queue offset", 11, _pull(queueOffset=None)),
    Probe("max offset without a queue id", 30, {"topic": TOPIC}),
    Probe("query offset without a group", 14, {"topic": TOPIC, "queueId": "0"}),
    Probe("create a topic without a name", 17, {k: v for k, v in _topic_create("x").items() if k != "topic"}),
    Probe("route without a topic", 105, None, target="namesrv"),
    Probe("kv put without a value", 100, {"namespace": "DiffNs", "key": "k"}, target="namesrv"),
    Probe("heartbeat without a body", 34),
    Probe("create a group without a body", 200),
    Probe("lock batch without a body", 41),
]

WRONG_TYPES = [
    Probe("send with a non-numeric queue id", 310, send_header(e="abc"), b"x"),
    Probe("send with a non-numeric born time", 310, send_header(g="yesterday"), b"x"),
    Probe("max offset with a non-numeric queue id", 30, {"topic": TOPIC, "queueId": "abc"}),
    Probe("pull with a non-numeric offset", 11, _pull(queueOffset="x1")),
    Probe("query offset with an out-of-range queue id", 14, {"consumerGroup": GROUP, "topic": TOPIC,
                                                             "queueId": "99999999999"}),
    Probe("heartbeat with a body that is not JSON", 34, body=b"not json at all"),
    Probe("create a group with a body of the wrong shape", 200, body=b"[1,2,3]"),
    Probe("lock batch with a body of the wrong shape", 41, body=b"{\"mqSet\": 7}"),
    Probe("kv put with a number as the value (JSON number on the wire)", 100,
          {"namespace": "DiffNs", "key": "n", "value": 5}, target="namesrv"),
]

ILLEGAL_NAMES = [
    Probe("create a topic with an illegal character", 17, _topic_create("Diff Topic!")),
    Probe("create a topic with a name too long", 17, _topic_create("T" * 128)),
    Probe("create a topic named like the cluster", 17, _topic_create("DefaultCluster")),
    Probe("create the default topic TBW102", 17, _topic_create("TBW102")),
    Probe("send to a topic with an illegal character", 310, send_header(b="Diff Topic!"), b"x"),
    Probe("send to a topic with a name too long", 310, send_header(b="T" * 128), b"x"),
    Probe("send to the default topic TBW102", 310, send_header(b="TBW102"), b"x"),
    Probe("send to a queue beyond the topic's", 310, send_header(e="99"), b"x", stable=("queueId",)),
    Probe("send a message with an empty body", 310, send_header(), b""),
    Probe("create a group with an illegal name", 200, body=orjson.dumps({"groupName": "Diff Group!"})),
    Probe("update a black-listed name server property", 318, body=b"kvConfigPath=/tmp/elsewhere\n",
          target="namesrv"),
    Probe("update a black-listed broker property", 25, body=b"brokerConfigPath=/tmp/elsewhere\n"),
]

OVERSIZE = [
    Probe("send a body one byte over maxMessageSize", 310, send_header(), b"x" * (MAX_BODY + 1), timeout=20),
    Probe("send properties over 32767 bytes", 310, send_header(i="KEYS\u0001" + "k" * 40000 + "\u0002"), b"x",
          timeout=20),
]

MALFORMED_FRAMES = [
    Probe("a header that is not JSON", frame=frame(b"{not json")),
    Probe("a JSON header that is an array", frame=frame(b"[1,2,3]")),
    Probe("an unknown serialize type", frame=frame(json_header(105), serialize_type=7)),
    Probe("a header length beyond the frame", frame=frame(b"{}", length=4 + 1)),
    Probe("a frame over 16 MiB", frame=frame(json_header(105), length=16 * 1024 * 1024 + 1)),
    Probe("a JSON header without a code", frame=frame(b'{"flag":0,"opaque":1,"language":"JAVA","version":409}')),
    Probe("a JSON header whose code is a string",
          frame=frame(b'{"code":"abc","flag":0,"opaque":1,"language":"JAVA","version":409}')),
    Probe("a ROCKETMQ header cut short", frame=frame(b"\x00\x69\x00", serialize_type=1)),
]

ALL = ORDINARY + UNKNOWN + MISSING_FIELDS + WRONG_TYPES + ILLEGAL_NAMES + OVERSIZE + MALFORMED_FRAMES
