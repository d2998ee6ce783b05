"""5.x remoting behaviours of the broker, byte-exact: server-side offset reset (useServerSideResetOffset),
heartbeat v2 (fingerprints, heartbeats without subscriptions), a group forbidden to read a topic, and
LITE_PULL_MESSAGE. The same behaviours are compared with the real Java 5.x broker by compat_tests/java5."""
from __future__ import annotations

import time

import orjson

from rmqd.remoting import fastjson
from rmqd.remoting.command import new_request
from tests.broker.helpers import heartbeat, messages, pull, send_v2, sub


def _create(client, topic, queues=1):
    r = client.invoke(new_request(17, {"topic": topic, "defaultTopic": "TBW102", "readQueueNums": str(queues),
                                       "writeQueueNums": str(queues), "perm": "6", "topicFilterType": "SINGLE_TAG",
                                       "topicSysFlag": "0", "order": "false"}))
    assert r.code == 0, r.remark


def _reset(client, topic, group, timestamp, **extra):
    return client.invoke(new_request(222, {"topic": topic, "group": group, "timestamp": str(timestamp),
                                           "isForce": "true", **extra}))


def _query(client, topic, group, qid=0):
    return client.invoke(new_request(14, {"consumerGroup": group, "topic": topic, "queueId": str(qid)}))


def _commit(client, topic, group, offset, qid=0):
    return client.invoke(new_request(15, {"consumerGroup": group, "topic": topic, "queueId": str(qid),
                                          "commitOffset": str(offset)}))


def test_server_side_reset_moves_the_next_pull_and_holds_off_old_commits(broker, client):
    _create(client, "SsrT")
    for i in range(3):
        assert send_v2(client, "SsrT", b"m%d" % i).code == 0
    client.invoke(new_request(200, None, orjson.dumps({"groupName": "SsrG"})))
    assert _commit(client, "SsrT", "SsrG", 3).code == 0
    r = _reset(client, "SsrT", "SsrG", 0)                     # to the start: no consumer needs to be online
    assert r.code == 0, r.remark
    assert fastjson.loads_lenient(r.body_bytes())["offsetTable"] == {fastjson.MessageQueue("SsrT", "broker-a", 0): 0}
    assert _query(client, "SsrT", "SsrG").ext_fields["offset"] == "0"
    stale = _commit(client, "SsrT", "SsrG", 3)                 # a client that has not pulled since
    assert (stale.code, stale.remark) == (0, "Offset has been previously reset")
    moved = pull(client, "SsrT", "SsrG", offset=3, sys_flag=4, subscription="*", suspend_ms=0)
    assert (moved.code, moved.remark, moved.ext_fields["nextBeginOffset"]) == (21, "OFFSET_RESET", "0")
    assert [m.body for m in messages(pull(client, "SsrT", "SsrG", sys_flag=4, subscription="*"))] == \
        [b"m0", b"m1", b"m2"]                                 # the reset was taken: pulls read again
    assert _commit(client, "SsrT", "SsrG", 2).code == 0 and _query(client, "SsrT", "SsrG").ext_fields["offset"] == "2"


def test_server_side_reset_refusals_are_javas(broker, client):
    _create(client, "SsrR")
    r = _reset(client, "SsrNoSuchTopic", "SsrG", 0)
    assert (r.code, r.remark) == (17, "Topic SsrNoSuchTopic does not exist")
    r = _reset(client, "SsrR", "SsrNoSuchGroup", 0)
    assert (r.code, r.remark) == (26, "Group SsrNoSuchGroup does not exist")
    client.invoke(new_request(200, None, orjson.dumps({"groupName": "SsrG2"})))
    r = _reset(client, "SsrR", "SsrG2", 0, queueId="0", offset="9")
    assert (r.code, r.remark) == (1, "Target offset 9 not in consume queue range [0-0]")


def test_heartbeat_v2_keeps_the_subscriptions_a_heartbeat_leaves_out(broker, client):
    _create(client, "HbT")

    def beat(fingerprint, without_sub, subs):
        body = {"clientID": "10.0.0.9@hb", "heartbeatFingerprint": fingerprint, "withoutSub": without_sub,
                "consumerDataSet": [{"groupName": "HbG", "consumeType": "CONSUME_PASSIVELY",
                                     "messageModel": "CLUSTERING", "consumeFromWhere": "CONSUME_FROM_LAST_OFFSET",
                                     "subscriptionDataSet": subs, "unitMode": False}], "producerDataSet": []}
        return client.invoke(new_request(34, None, orjson.dumps(body)))

    r = heartbeat(client, "10.0.0.9@hb", "HbG", [sub("HbT", "TagA")])        # v1: always "changed"
    assert r.ext_fields == {"IS_SUPPORT_HEART_BEAT_V2": "true", "IS_SUB_CHANGE": "true"}
    assert beat(77, False, [sub("HbT", "TagA")]).ext_fields["IS_SUB_CHANGE"] == "true"   # the v1 fingerprint was 0
    assert beat(77, True, []).ext_fields["IS_SUB_CHANGE"] == "false"
    info = broker.consumer_manager.get("HbG")
    assert info.subscriptions["HbT"].data["subString"] == "TagA"           # kept although none came
    assert beat(78, True, []).ext_fields["IS_SUB_CHANGE"] == "true"         # another fingerprint: ask for them
    broker.consumer_manager.get("HbG").subscriptions.clear()                # as after a restart
    assert beat(78, True, []).ext_fields["IS_SUB_CHANGE"] == "true"         # rmqd: none held, ask for them


def test_heartbeat_v2_asks_again_for_subscriptions_older_than_a_pull(broker, client):
    """The 5.x client's rebalance bumps subVersion and sends its subscriptions with the lock-taking heartbeat,
    which it skips when its periodic heartbeat holds the lock; the fingerprint leaves subVersion out, so its next
    heartbeats carry none. A pull naming the newer subVersion is refused SUBSCRIPTION_NOT_LATEST (as Java) and the
    next heartbeat without subscriptions is answered IS_SUB_CHANGE (Java: "false", the pulls stay refused)."""
    _create(client, "HbLateT")

    def beat(without_sub, subs):
        body = {"clientID": "10.0.0.7@hb", "heartbeatFingerprint": 91, "withoutSub": without_sub,
                "consumerDataSet": [{"groupName": "HbLateG", "consumeType": "CONSUME_PASSIVELY",
                                     "messageModel": "CLUSTERING", "consumeFromWhere": "CONSUME_FROM_LAST_OFFSET",
                                     "subscriptionDataSet": subs, "unitMode": False}], "producerDataSet": []}
        return client.invoke(new_request(34, None, orjson.dumps(body))).ext_fields["IS_SUB_CHANGE"]

    beat(False, [sub("HbLateT", "TagA", version=100)])
    assert beat(True, []) == "false"
    assert pull(client, "HbLateT", "HbLateG", sub_version=100, suspend_ms=0).code == 19      # PULL_NOT_FOUND
    r = pull(client, "HbLateT", "HbLateG", sub_version=200, suspend_ms=0)
    assert (r.code, r.remark) == (25, "the consumer's subscription not latest")
    assert beat(True, []) == "true"                                      # send them again
    assert beat(False, [sub("HbLateT", "TagA", version=200)]) == "false"
    assert pull(client, "HbLateT", "HbLateG", sub_version=200, suspend_ms=0).code == 19
    assert beat(True, []) == "false"


def test_forbidden_group_and_lite_pull(broker, client):
    _create(client, "FbT", 2)
    assert send_v2(client, "FbT", b"x").code == 0
    heartbeat(client, "10.0.0.8@fb", "FbG", [sub("FbT")])
    r = client.invoke(new_request(353, {"group": "FbG", "topic": "FbT", "readable": "false"}))
    assert (r.code, r.remark, orjson.loads(r.body_bytes())) == (0, "", {"group": "FbG", "readable": False,
                                                                       "topic": "FbT"})
    lite = {"consumerGroup": "FbG", "topic": "FbT", "queueId": "0", "queueOffset": "0", "maxMsgNums": "32",
            "sysFlag": "0", "commitOffset": "0", "suspendTimeoutMillis": "0", "subVersion": "0"}
    r = client.invoke(new_request(361, lite))
    assert (r.code, r.remark, r.ext_fields) == (16, "the consumer group[FbG] is forbidden for topic[FbT]",
                                                {"forbiddenType": "5"})
    assert pull(client, "FbT", "FbG", suspend_ms=0).code == 16
    assert "forbiddenTable" in (broker.subscription_group_manager.encode())
    client.invoke(new_request(353, {"group": "FbG", "topic": "FbT", "readable": "true"}))
    assert "forbiddenTable" not in broker.subscription_group_manager.encode()
    r = client.invoke(new_request(361, lite))
    assert r.code == 0 and [m.body for m in messages(r)] == [b"x"]
    assert (r.ext_fields["topicSysFlag"], r.ext_fields["groupSysFlag"]) == ("0", "0")
    r = client.invoke(new_request(361, {**lite, "queueId": "5"}))
    assert r.code == 29 and r.remark.startswith("queueId[5] is illegal")
    broker.config.apply_runtime({"litePullMessageEnable": "false"})
    r = client.invoke(new_request(361, lite))
    assert (r.code, r.ext_fields) == (16, {"forbiddenType": "1"})


def test_server_side_reset_by_time_is_5x_lower_bound(broker, client):
    """5.x's getOffsetInQueueByTime (LOWER): a time after every message is the queue's end (4.9.8's search
    gives the last message), a time between two messages the later one."""
    _create(client, "SsrTime")
    assert send_v2(client, "SsrTime", b"early").code == 0
    time.sleep(0.05)
    between = int(time.time() * 1000)
    time.sleep(0.05)
    assert send_v2(client, "SsrTime", b"late").code == 0
    client.invoke(new_request(200, None, orjson.dumps({"groupName": "SsrTimeG"})))
    assert _commit(client, "SsrTime", "SsrTimeG", 0).code == 0
    table = lambda r: fastjson.loads_lenient(r.body_bytes())["offsetTable"]      # noqa: E731
    now = int(time.time() * 1000) + 10
    assert table(_reset(client, "SsrTime", "SsrTimeG", now))[fastjson.MessageQueue("SsrTime", "broker-a", 0)] == 2
    assert table(_reset(client, "SsrTime", "SsrTimeG", between))[
        fastjson.MessageQueue("SsrTime", "broker-a", 0)] == 1
