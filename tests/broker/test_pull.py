"""PULL_MESSAGE: status table, subscriptions from heartbeat vs request, TAG/SQL92, long polling,
commit-offset piggyback (README §3.3, §6.1)."""
from __future__ import annotations

import threading
import time

from tests.broker.helpers import heartbeat, invoke_raw, messages, pull, send_v2, sub

SUB = 4        # PullSysFlag.SUBSCRIPTION
SUSPEND = 2
COMMIT = 1


def _fill(client, topic, n, tags=("TagA",), queue_id=0):
    for i in range(n):
        tag = tags[i % len(tags)]
        r = send_v2(client, topic, f"m{i}".encode(), queue_id=queue_id,
                    properties=f"TAGS\x01{tag}\x02color\x01{'red' if i % 2 else 'blue'}\x02n\x01{i}")
        assert r.code == 0


def test_status_table(broker, client):
    # unknown topic
    r = pull(client, "NoTopic", sys_flag=SUB, subscription="*")
    assert r.code == 17
    send_v2(client, "T1", queue_id=1)          # creates T1 with 4 queues; queue 0 stays empty
    r = pull(client, "T1", queue_id=0, offset=0, sys_flag=SUB, subscription="*")
    assert r.code == 19 and r.ext_fields["nextBeginOffset"] == "0"
    r = pull(client, "T1", queue_id=0, offset=5, sys_flag=SUB, subscription="*")
    assert r.code == 21 and r.ext_fields["nextBeginOffset"] == "0"
    r = pull(client, "T1", queue_id=9, sys_flag=SUB, subscription="*")
    assert r.code == 1 and "queueId[9] is illegal" in r.remark
    _fill(client, "T1", 3)
    r = pull(client, "T1", offset=0, sys_flag=SUB, subscription="*")
    assert r.code == 0 and r.remark == "FOUND"
    assert r.ext_fields == {"suggestWhichBrokerId": "0", "nextBeginOffset": "3", "minOffset": "0",
                            "maxOffset": "3"}
    assert [m.body for m in messages(r)] == [b"m0", b"m1", b"m2"]
    assert [m.queue_offset for m in messages(r)] == [0, 1, 2]
    r = pull(client, "T1", offset=1, max_nums=1, sys_flag=SUB, subscription="*")
    assert r.code == 0 and len(messages(r)) == 1 and r.ext_fields["nextBeginOffset"] == "2"
    r = pull(client, "T1", offset=3, sys_flag=SUB, subscription="*")
    assert r.code == 19 and r.remark == "OFFSET_OVERFLOW_ONE" and r.ext_fields["nextBeginOffset"] == "3"
    r = pull(client, "T1", offset=10, sys_flag=SUB, subscription="*")
    assert r.code == 21 and r.ext_fields["nextBeginOffset"] == "3"


def test_tag_filter_and_no_match(broker, client):
    _fill(client, "T2", 4, tags=("TagA", "TagB"))
    r = pull(client, "T2", sys_flag=SUB, subscription="TagB")
    assert r.code == 0 and [m.tags for m in messages(r)] == ["TagB", "TagB"]
    assert r.ext_fields["nextBeginOffset"] == "4"
    r = pull(client, "T2", sys_flag=SUB, subscription="TagC")
    assert r.code == 20 and r.ext_fields["nextBeginOffset"] == "4"
    r = pull(client, "T2", sys_flag=SUB, subscription="TagA || TagB")
    assert len(messages(r)) == 4


def test_sql92_via_subscription_flag_and_heartbeat(broker, client):
    _fill(client, "T3", 6)
    r = pull(client, "T3", sys_flag=SUB, subscription="color = 'red' AND n > 2", expression_type="SQL92")
    assert r.code == 0 and [m.body for m in messages(r)] == [b"m3", b"m5"]
    r = pull(client, "T3", sys_flag=SUB, subscription="color = = 'red'", expression_type="SQL92")
    assert r.code == 23
    assert heartbeat(client, "c1", "SQLG", [sub("T3", "n < 2", "SQL92", 5)]).code == 0
    r = pull(client, "T3", group="SQLG", sub_version=5)
    assert r.code == 0 and [m.body for m in messages(r)] == [b"m0", b"m1"]
    r = pull(client, "T3", group="SQLG", sub_version=6)
    assert r.code == 25


def test_sql92_disabled(harness):
    harness.start(enablePropertyFilter=False)
    c = harness.client()
    _fill(c, "T3", 1)
    r = pull(c, "T3", sys_flag=SUB, subscription="n > 0", expression_type="SQL92")
    assert r.code == 1 and "SQL92" in r.remark


def test_subscription_not_exist_before_heartbeat(broker, client):
    _fill(client, "T4", 1)
    r = pull(client, "T4", group="HG")
    assert r.code == 24
    heartbeat(client, "c1", "HG", [sub("OtherTopic")])
    r = pull(client, "T4", group="HG")
    assert r.code == 24 and "subscription not exist" in r.remark
    heartbeat(client, "c1", "HG", [sub("T4", "TagA", version=2)])
    r = pull(client, "T4", group="HG", sub_version=2)
    assert r.code == 0 and len(messages(r)) == 1


SHORT_SUSPEND = (b'"suspendTimeoutMillis":"15000"', b'"suspendTimeoutMillis":"00300"')


def test_cpp_pull_frames(broker, client):
    """C++ pulls carry SUSPEND|SUBSCRIPTION (6, or 7 with COMMIT_OFFSET): held when empty."""
    invoke_raw(client, "007_")          # consumer heartbeat of group CG
    t0 = time.monotonic()
    r = invoke_raw(client, "013_")      # TopicTest q0 offset 0, TagA, sysFlag 6 (no suspend)
    assert r.code == 17                 # topic not created yet
    invoke_raw(client, "002_")          # C++ send to TopicTest q0 with TagA
    r = invoke_raw(client, "013_")
    assert r.code == 0 and [m.tags for m in messages(r)] == ["TagA"]
    t0 = time.monotonic()
    r = invoke_raw(client, "016_", replace=SHORT_SUSPEND)   # offset 1, sysFlag 7: commit 1, held
    assert r.code == 19 and 0.25 < time.monotonic() - t0 < 2
    assert broker.consumer_offset_manager.query_offset("CG", "TopicTest", 0) == 1
    r = invoke_raw(client, "010_", replace=SHORT_SUSPEND)   # %RETRY%CG made by the heartbeat, empty
    assert r.code == 19


def test_long_polling_wakes_on_send(broker, harness, client):
    send_v2(client, "T5")
    heartbeat(client, "c1", "LG", [sub("T5", "TagA")])
    result = {}

    def parked_pull():
        result["r"] = pull(client, "T5", group="LG", offset=1, sys_flag=SUSPEND, suspend_ms=5000)
        result["t"] = time.monotonic()

    th = threading.Thread(target=parked_pull)
    th.start()
    time.sleep(0.3)
    assert broker.pull_hold_service.hold_count == 1
    other = harness.client()
    send_v2(other, "T5", b"not-matching", properties="TAGS\x01TagB")    # filtered: stays parked
    time.sleep(0.2)
    assert "r" not in result
    sent = time.monotonic()
    send_v2(other, "T5", b"wake", properties="TAGS\x01TagA")
    th.join(5)
    r = result["r"]
    assert r.code == 0 and [m.body for m in messages(r)] == [b"wake"]
    assert result["t"] - sent < 0.1


def test_long_polling_timeout(broker, client):
    send_v2(client, "T6")
    t0 = time.monotonic()
    r = pull(client, "T6", offset=1, sys_flag=SUSPEND | SUB, subscription="*", suspend_ms=300)
    elapsed = time.monotonic() - t0
    assert r.code == 19 and 0.25 < elapsed < 2


def test_short_polling(harness):
    harness.start(longPollingEnable=False, shortPollingTimeMills=200)
    c = harness.client()
    send_v2(c, "T6")
    t0 = time.monotonic()
    r = pull(c, "T6", offset=1, sys_flag=SUSPEND | SUB, subscription="*", suspend_ms=5000)
    assert r.code == 19 and 0.15 < time.monotonic() - t0 < 2


def test_commit_offset_piggyback(broker, client):
    _fill(client, "T7", 2)
    r = pull(client, "T7", offset=0, sys_flag=COMMIT | SUB, subscription="*", commit_offset=1)
    assert r.code == 0
    assert broker.consumer_offset_manager.query_offset("CG", "T7", 0) == 1
    # a parked pull commits on its first pass only
    t = threading.Thread(target=pull, args=(client, "T7"), kwargs=dict(
        offset=2, sys_flag=COMMIT | SUB | SUSPEND, subscription="*", commit_offset=2, suspend_ms=200))
    t.start()
    t.join(5)
    assert broker.consumer_offset_manager.query_offset("CG", "T7", 0) == 2


def test_group_consume_disabled(broker, client):
    _fill(client, "T8", 1)
    sg = broker.subscription_group_manager.find("OffG")
    sg.consume_enable = False
    assert pull(client, "T8", group="OffG", sys_flag=SUB, subscription="*").code == 16
