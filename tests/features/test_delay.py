"""Delay levels (README §6.7): divert to SCHEDULE_TOPIC_XXXX, on-time delivery, restart progress."""
from __future__ import annotations

import json
import os
import time

import pytest

from rmqd.broker.schedule import divert_delay_level, edit_properties
from rmqd.remoting.command import new_request
from rmqd.store.message import MessageToStore
from rmqd.store.message_store import SCHEDULE_TOPIC
from tests.features.sched_helpers import pull, pull_all, props, send, wait_messages

pytestmark = pytest.mark.timeout(60)


def test_divert_rewrites_topic_queue_and_clamps():
    m = MessageToStore("T", 3, b"x", "TAGS\x01a\x02DELAY\x0199\x02")
    assert divert_delay_level(m, 18)
    assert (m.topic, m.queue_id) == (SCHEDULE_TOPIC, 17)
    assert m.properties == "TAGS\x01a\x02DELAY\x0118\x02REAL_TOPIC\x01T\x02REAL_QID\x013"
    half = MessageToStore("T", 0, b"x", "DELAY\x012", sys_flag=0x4)
    assert not divert_delay_level(half, 18) and half.topic == "T"
    assert not divert_delay_level(MessageToStore("T", 0, b"x", "DELAY\x010"), 18)
    assert edit_properties("A\x011\x02B\x012\x02", remove=("A",), put={"B": "3", "C": "4"}) == "B\x013\x02C\x014"


def test_level1_delivered_on_time_with_real_topic_and_properties(rb):
    c = rb.client
    p = props(TAGS="TagA", KEYS="k1 k2", UNIQ_KEY="UNIQ1", DELAY="1", WAIT="true", user="v")
    r = send(c, "DelayTopic", b"delayed", queue_id=2, properties=p)
    assert r.code == 0, r.remark
    assert r.ext_fields["queueId"] == "2"
    (sched,) = pull(c, SCHEDULE_TOPIC, 0)
    assert sched.properties["REAL_TOPIC"] == "DelayTopic" and sched.properties["REAL_QID"] == "2"
    assert pull(c, "DelayTopic", 2) == []
    (m,) = wait_messages(c, "DelayTopic", 1, 3.0, queue_ids=(2,))
    lateness = m.store_timestamp - (sched.store_timestamp + 1000)
    assert -200 <= lateness <= 200, lateness
    assert m.topic == "DelayTopic" and m.queue_id == 2 and m.body == b"delayed"
    # as Java's delivered records (4.9.8 and 5.5, seen with the Go client): DELAY kept, no WAIT added
    assert m.properties["DELAY"] == "1" and "WAIT" not in m.properties
    assert m.properties["TAGS"] == "TagA" and m.properties["KEYS"] == "k1 k2"
    assert m.properties["UNIQ_KEY"] == "UNIQ1" and m.properties["user"] == "v"
    assert m.properties["REAL_TOPIC"] == "DelayTopic" and m.properties["REAL_QID"] == "2"
    assert m.born_timestamp == sched.born_timestamp and m.born_host == sched.born_host
    assert m.commit_log_offset != sched.commit_log_offset
    # the delivered message's consume-queue tagsCode is the TAGS hash again: a tag pull matches it
    ext = {"consumerGroup": "CG", "topic": "DelayTopic", "queueId": "2", "queueOffset": "0",
           "maxMsgNums": "32", "sysFlag": "4", "commitOffset": "0", "suspendTimeoutMillis": "0",
           "subVersion": "0", "subscription": "TagA"}
    assert c.invoke(new_request(11, ext)).code == 0
    ext["subscription"] = "TagB"
    assert c.invoke(new_request(11, ext)).code != 0


@pytest.mark.slow
def test_levels_are_independent_and_fifo(rb):
    c = rb.client
    t0 = time.time()
    send(c, "DelayOrder", b"L2", properties=props(DELAY="2"))      # 2 s
    send(c, "DelayOrder", b"L1a", properties=props(DELAY="1"))     # 1 s
    send(c, "DelayOrder", b"L1b", properties=props(DELAY="1"))
    send(c, "DelayOrder", b"L99", properties=props(DELAY="99"))    # clamped to 18 (1 s)
    got = wait_messages(c, "DelayOrder", 3, 3.0)
    assert [m.body for m in got[:2]] == [b"L1a", b"L1b"]
    assert time.time() - t0 < 1.9
    got = wait_messages(c, "DelayOrder", 4, 3.0)
    assert [m.body for m in got] == [b"L1a", b"L1b", b"L99", b"L2"]


def test_many_level1_messages_all_within_tolerance(rb):
    c = rb.client
    for i in range(40):
        assert send(c, "DelayMany", b"m%d" % i, properties=props(DELAY="1")).code == 0
    sched = {m.body: m for m in pull_all(c, SCHEDULE_TOPIC, 0)}
    got = wait_messages(c, "DelayMany", 40, 4.0)
    assert sorted(m.body for m in got) == sorted(b"m%d" % i for i in range(40))
    late = [m.store_timestamp - (sched[m.body].store_timestamp + 1000) for m in got]
    assert all(-200 <= d <= 200 for d in late), late


@pytest.mark.slow
def test_delay_offset_progress_survives_restart(rb):
    c = rb.client
    send(c, "DelayRestart", b"first", properties=props(DELAY="1"))
    wait_messages(c, "DelayRestart", 1, 3.0)
    send(c, "DelayRestart", b"pending", properties=props(DELAY="2"))
    rb.restart()
    cfg = os.path.join(rb.server.store_dir, "config", "delayOffset.json")
    table = json.load(open(cfg))["offsetTable"]
    assert table["1"] == 1
    c = rb.client
    got = wait_messages(c, "DelayRestart", 2, 4.0)
    assert [m.body for m in got] == [b"first", b"pending"]
    time.sleep(0.5)
    rb.restart()                     # nothing delivered twice after another clean restart
    time.sleep(1.2)
    assert [m.body for m in pull(rb.client, "DelayRestart")] == [b"first", b"pending"]


def test_schedule_topic_is_not_sendable(rb):
    r = send(rb.client, SCHEDULE_TOPIC, b"x")
    assert r.code == 16
