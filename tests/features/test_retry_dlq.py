"""CONSUMER_SEND_MSG_BACK (36) and the SEND path's retry → DLQ rule (README §3.2, §6.6)."""
from __future__ import annotations

import dataclasses

import pytest

from rmqd.remoting.client import BlockingClient
from rmqd.remoting.command import new_request
from rmqd.store.message import decode_offset_msg_id
from rmqd.store.message_store import SCHEDULE_TOPIC
from tests.features.sched_helpers import Broker, pull_all, props, send, send_back, wait_messages

pytestmark = pytest.mark.timeout(60)


def phys_of(resp) -> int:
    assert resp.code == 0, resp.remark
    return decode_offset_msg_id(resp.ext_fields["msgId"])[2]


def set_group(rb, group: str, **changes) -> None:
    mgr = rb.broker.subscription_group_manager
    mgr.update(dataclasses.replace(mgr.find(group), **changes))


def test_send_back_goes_to_retry_topic_with_delay_3_plus_n(rb):
    c = rb.client
    r = send(c, "OrderTopic", b"fail-me", queue_id=1, properties=props(TAGS="TagA", KEYS="k", UNIQ_KEY="U1"))
    off = phys_of(r)
    assert send_back(c, off, "CG_R").code == 0
    tc = rb.broker.topic_config_manager.get("%RETRY%CG_R")
    assert tc is not None and tc.read_queue_nums == 1 and tc.perm == 6
    (s,) = pull_all(c, SCHEDULE_TOPIC, 2)                     # level 3 = 3 + reconsumeTimes(0)
    assert s.properties["DELAY"] == "3" and s.properties["REAL_TOPIC"] == "%RETRY%CG_R"
    (m,) = wait_messages(c, "%RETRY%CG_R", 1, 3.0)
    assert m.reconsume_times == 1 and m.body == b"fail-me"
    assert m.properties["RETRY_TOPIC"] == "OrderTopic"
    assert m.properties["ORIGIN_MESSAGE_ID"] == r.ext_fields["msgId"]
    assert m.properties["WAIT"] == "false" and m.properties["TAGS"] == "TagA"
    # the delivered retry keeps DELAY=3, as Java's records do (4.9.8 and 5.5, seen with the Go client)
    assert m.properties["UNIQ_KEY"] == "U1" and m.properties["DELAY"] == "3"
    # second failure: level 4, reconsumeTimes 2, origin id and retry topic kept
    assert send_back(c, m.commit_log_offset, "CG_R").code == 0
    (s2,) = pull_all(c, SCHEDULE_TOPIC, 3)
    assert s2.properties["DELAY"] == "4" and s2.reconsume_times == 2
    assert s2.properties["ORIGIN_MESSAGE_ID"] == r.ext_fields["msgId"]
    assert s2.properties["RETRY_TOPIC"] == "OrderTopic"
    # an explicit delay level is used as is
    assert send_back(c, off, "CG_R", delay_level=2).code == 0
    assert len(pull_all(c, SCHEDULE_TOPIC, 1)) == 1


def test_retry_topic_is_routable_at_once(rb):
    c = rb.client
    off = phys_of(send(c, "RouteTopic", b"x"))
    assert send_back(c, off, "CG_ROUTE").code == 0
    with BlockingClient(rb.server.namesrv_addr) as ns:
        resp = ns.invoke(new_request(105, {"topic": "%RETRY%CG_ROUTE"}))
    assert resp.code == 0, resp.remark


@pytest.mark.slow
def test_dlq_after_group_retry_max_times(rb):
    c = rb.client
    rb.broker.subscription_group_manager.find("CG_D")
    set_group(rb, "CG_D", retry_max_times=2)
    off = phys_of(send(c, "DlqTopic", b"poison", properties=props(TAGS="T")))
    for expected in (1, 2):
        assert send_back(c, off, "CG_D", version=63).code == 0       # 1.x: no maxReconsumeTimes
        (m,) = wait_messages(c, "%RETRY%CG_D", expected, 3.0)[expected - 1:]
        assert m.reconsume_times == expected
        off = m.commit_log_offset
    assert send_back(c, off, "CG_D", version=63).code == 0
    (d,) = pull_all(c, "%DLQ%CG_D")
    # Java's send back to the DLQ sets delay level 0: the record shows DELAY=0
    assert d.reconsume_times == 3 and d.body == b"poison" and d.properties["DELAY"] == "0"
    assert d.properties["RETRY_TOPIC"] == "DlqTopic"
    tc = rb.broker.topic_config_manager.get("%DLQ%CG_D")
    assert tc.read_queue_nums == 1 and tc.write_queue_nums == 1 and tc.perm == 6


def test_dlq_by_header_max_and_negative_delay(rb):
    c = rb.client
    off = phys_of(send(c, "DlqHdr", b"a"))
    # version >= 121: the header wins over the group's 16
    assert send_back(c, off, "CG_H", max_reconsume=0).code == 0
    assert len(pull_all(c, "%DLQ%CG_H")) == 1
    # version < 121: the header is ignored → retry
    assert send_back(c, off, "CG_H", max_reconsume=0, version=63).code == 0
    assert len(pull_all(c, "%DLQ%CG_H")) == 1 and len(pull_all(c, SCHEDULE_TOPIC, 2)) == 1
    # delayLevel < 0 → straight to the DLQ
    assert send_back(c, off, "CG_H", delay_level=-1).code == 0
    assert len(pull_all(c, "%DLQ%CG_H")) == 2


def test_send_back_errors(tmp_path):
    b = Broker(str(tmp_path / "s"), autoCreateSubscriptionGroup=False).start()
    try:
        c = b.client
        off = phys_of(send(c, "ErrTopic", b"x"))
        r = send_back(c, off, "NoSuchGroup")
        assert r.code == 26 and "subscription group not exist" in r.remark
        b.broker.subscription_group_manager.update(
            dataclasses.replace(b.broker.subscription_group_manager.table["TOOLS_CONSUMER"], group_name="CG_E"))
        r = send_back(c, 99_999_999, "CG_E")
        assert r.code == 1 and r.remark == "look message by offset failed, 99999999"
        r = c.invoke(new_request(36, {"group": "CG_E", "delayLevel": "0"}))
        assert r.code == 1 and "offset" in r.remark
        # retryQueueNums 0: accepted and dropped
        b.broker.subscription_group_manager.update(
            dataclasses.replace(b.broker.subscription_group_manager.table["CG_E"], group_name="CG_Z",
                                retry_queue_nums=0))
        assert send_back(c, off, "CG_Z").code == 0
        assert b.broker.topic_config_manager.get("%RETRY%CG_Z") is None
        assert pull_all(c, SCHEDULE_TOPIC, 2) == []
    finally:
        b.stop()


def test_send_path_retry_and_dlq_like_client_fallback(rb):
    """The client's fallback: a new message sent to %RETRY%<group> with reconsumeTimes /
    maxReconsumeTimes in the header and DELAY=3+n in the properties."""
    c = rb.client
    rb.broker.subscription_group_manager.find("CG_F")
    fallback = props(RETRY_TOPIC="OrigT", ORIGIN_MESSAGE_ID="ABC", DELAY="3", UNIQ_KEY="UF")
    r = send(c, "%RETRY%CG_F", b"fb", properties=fallback, reconsume_times=1, max_reconsume=16)
    assert r.code == 0, r.remark
    (m,) = wait_messages(c, "%RETRY%CG_F", 1, 3.0)
    assert m.reconsume_times == 1 and m.properties["RETRY_TOPIC"] == "OrigT"
    assert pull_all(c, SCHEDULE_TOPIC, 2)                          # it went through level 3
    r = send(c, "%RETRY%CG_F", b"fb2", properties=fallback, reconsume_times=16, max_reconsume=16)
    assert r.code == 0, r.remark
    (d,) = pull_all(c, "%DLQ%CG_F")
    assert d.body == b"fb2" and "DELAY" not in d.properties and d.reconsume_times == 16
    # old clients (version < 121): the group's retryMaxTimes (16) applies
    r = send(c, "%RETRY%CG_F", b"fb3", properties=fallback, reconsume_times=2, max_reconsume=1, version=63)
    assert r.code == 0 and len(pull_all(c, "%DLQ%CG_F")) == 1
