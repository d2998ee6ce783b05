"""Message recall (RECALL_MESSAGE 370): the recall handle of a timer send, the recall itself, and Java's refusals.

The same behaviour is compared with the real Java 5.x broker by compat_tests/java5 (diff_probes5 and the
Remoting5Scenarios recall scenario); these pin rmqd's side in detail, restart included."""
from __future__ import annotations

import base64
import time

import pytest

from rmqd.processors.recall import RecallHandle, delete_key
from rmqd.remoting.command import new_request
from tests.features.sched_helpers import Broker, props, send, wait_messages

pytestmark = pytest.mark.timeout(90)


@pytest.fixture
def rb(tmp_path):
    b = Broker(str(tmp_path / "store"), recallMessageEnable="true").start()
    yield b
    b.stop()


def now_ms() -> int:
    return int(time.time() * 1000)


def recall(client, topic, handle, **extra):
    return client.invoke(new_request(370, {"topic": topic, "recallHandle": handle, "producerGroup": "PG", **extra}))


@pytest.mark.slow
def test_timer_send_answers_a_handle_and_recall_keeps_the_message_back(rb):
    c = rb.client
    due = now_ms() + 1500
    r = send(c, "RecallTopic", b"r1", properties=props(UNIQ_KEY="URC1", TIMER_DELIVER_MS=due))
    assert r.code == 0, r.remark
    handle = RecallHandle.decode(r.ext_fields["recallHandle"])
    assert handle == RecallHandle("RecallTopic", "broker-a", str(due + 1), "URC1")
    kept = send(c, "RecallTopic", b"r2", properties=props(UNIQ_KEY="URC2", TIMER_DELIVER_MS=due))
    answer = recall(c, "RecallTopic", r.ext_fields["recallHandle"])
    assert answer.code == 0, answer.remark
    assert answer.ext_fields["msgId"] == "URC1" and "MSG_REGION" in answer.ext_fields
    assert answer.remark == "not set any response code"             # Java's, kept on success
    got = wait_messages(c, "RecallTopic", 2, 3.5)
    assert [m.body for m in got] == [b"r2"], "the recalled message was delivered"
    assert kept.code == 0 and rb.broker.timer_message_service._deleted == set()


def test_only_timer_sends_get_a_handle(rb):
    c = rb.client
    assert "recallHandle" not in send(c, "RecallPlain", b"p").ext_fields
    assert "recallHandle" not in send(c, "RecallPlain", b"d", properties=props(DELAY=1)).ext_fields
    past = send(c, "RecallPlain", b"past", properties=props(TIMER_DELIVER_MS=now_ms() - 5))
    assert "recallHandle" not in past.ext_fields                # due already: stored as a plain message


@pytest.mark.slow
def test_recall_survives_a_restart(rb):
    c = rb.client
    r = send(c, "RecallRestart", b"gone", properties=props(UNIQ_KEY="URR1", TIMER_DELAY_MS=2500))
    send(c, "RecallRestart", b"stays", properties=props(UNIQ_KEY="URR2", TIMER_DELAY_MS=2500))
    assert recall(c, "RecallRestart", r.ext_fields["recallHandle"]).code == 0
    rb.restart()
    got = wait_messages(rb.client, "RecallRestart", 2, 5.0)
    assert [m.body for m in got] == [b"stays"]


def test_refusals_carry_javas_codes_and_remarks(rb):
    c = rb.client
    r = send(c, "RecallRefused", b"x", properties=props(UNIQ_KEY="URF1", TIMER_DELAY_SEC=30))
    good = r.ext_fields["recallHandle"]
    cases = [
        (recall(c, "RecallNoSuchTopic", good), 17, "recall failed, the topic[RecallNoSuchTopic] not exist"),
        (recall(c, "RecallRefused", "not base64 at all!"), 604, "recall handle is invalid"),
        (recall(c, "RecallRefused", ""), 604, "recall handle is invalid"),
        (recall(c, "RecallRefused", base64.urlsafe_b64encode(b"v2 a b c d").decode()), 604,
         "recall handle is invalid"),
        (recall(c, "RecallRefused", RecallHandle("RecallOther", "broker-a", "1", "u").encode()), 604,
         "recall failed, topic not match"),
        (recall(c, "RecallRefused", RecallHandle("RecallRefused", "broker-z", str(now_ms() + 9000), "u").encode()),
         604, "recall failed, broker service not available"),
        (recall(c, "RecallRefused", RecallHandle("RecallRefused", "broker-a", str(now_ms() - 1), "u").encode()),
         604, "recall failed, timestamp invalid"),
        (recall(c, "RecallRefused", RecallHandle("RecallRefused", "broker-a", "soon", "u").encode()),
         604, "recall failed, timestamp invalid"),
        (recall(c, "RecallRefused", RecallHandle("RecallRefused", "broker-a", str(now_ms() + 4 * 86400_000),
                                                 "u").encode()), 604, "recall failed, timestamp invalid"),
    ]
    for answer, code, remark in cases:
        assert (answer.code, answer.remark) == (code, remark)
        assert "MSG_REGION" in (answer.ext_fields or {})
    missing = c.invoke(new_request(370, {"recallHandle": good}))   # Java's topic lookup throws: a bare answer
    assert (missing.code, missing.remark, missing.ext_fields) == (1, "the custom field <topic> is null", None)
    no_handle = c.invoke(new_request(370, {"topic": "RecallRefused"}))  # an absent handle is an invalid one
    assert (no_handle.code, no_handle.remark) == (604, "recall handle is invalid")
    rb.broker.config.apply_runtime({"recallMessageEnable": "false"})
    off = recall(c, "RecallRefused", good)
    assert (off.code, off.remark) == (16, "recall failed, operation is forbidden")


def test_a_hand_made_delete_marker_whose_time_passed_is_refused(rb):
    key = delete_key("RecallTopic", "U")
    r = send(rb.client, "RecallTopic", b"m", properties=props(TIMER_DEL_UNIQKEY=key, TIMER_DELIVER_MS=now_ms() - 10))
    assert r.code == 13
