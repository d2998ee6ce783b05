"""5.x timer messages (TIMER_DELIVER_MS / TIMER_DELAY_SEC / TIMER_DELAY_MS) through rmq_sys_wheel_timer."""
from __future__ import annotations

import random
import time

import pytest

from rmqd.broker.timer import TIMER_TOPIC
from tests.features.sched_helpers import pull_all, props, send, wait_messages

pytestmark = pytest.mark.timeout(90)


def now_ms() -> int:
    return int(time.time() * 1000)


def test_deliver_ms_on_time_and_properties(rb):
    c = rb.client
    due = now_ms() + 700
    r = send(c, "TimerTopic", b"t1", queue_id=1,
             properties=props(TAGS="TagT", UNIQ_KEY="UT1", TIMER_DELIVER_MS=due, WAIT="true"))
    assert r.code == 0, r.remark
    (parked,) = pull_all(c, TIMER_TOPIC)
    assert parked.properties["TIMER_OUT_MS"] == str(due)
    assert parked.properties["REAL_TOPIC"] == "TimerTopic" and parked.properties["REAL_QID"] == "1"
    assert pull_all(c, "TimerTopic", 1) == []
    (m,) = wait_messages(c, "TimerTopic", 1, 3.0, queue_ids=(1,))
    assert abs(m.store_timestamp - due) <= 200, m.store_timestamp - due
    assert m.properties["TIMER_OUT_MS"] == str(due) and m.properties["TAGS"] == "TagT"
    # as 5.5's delivered timer records: REAL_TOPIC/REAL_QID kept, no WAIT added
    assert m.properties["UNIQ_KEY"] == "UT1" and m.properties["REAL_TOPIC"] == "TimerTopic"
    assert m.properties["REAL_QID"] == "1" and "WAIT" not in m.properties
    assert int(m.properties["TIMER_DEQUEUE_MS"]) >= due


def test_delay_sec_and_delay_ms(rb):
    c = rb.client
    t0 = now_ms()
    send(c, "TimerRel", b"sec", properties=props(TIMER_DELAY_SEC=1))
    send(c, "TimerRel", b"ms", properties=props(TIMER_DELAY_MS=400))
    got = wait_messages(c, "TimerRel", 2, 3.0)
    assert [m.body for m in got] == [b"ms", b"sec"]
    assert 400 - 50 <= got[0].store_timestamp - t0 <= 400 + 250
    assert 1000 - 50 <= got[1].store_timestamp - t0 <= 1000 + 250
    assert all("TIMER_DELAY_SEC" not in m.properties and "TIMER_DELAY_MS" not in m.properties for m in got)


def test_past_due_is_stored_directly_and_bad_values_rejected(rb):
    c = rb.client
    assert send(c, "TimerPast", b"p", properties=props(TIMER_DELIVER_MS=now_ms() - 10)).code == 0
    assert [m.body for m in pull_all(c, "TimerPast")] == [b"p"]
    assert send(c, "TimerPast", b"x", properties=props(TIMER_DELAY_SEC="abc")).code == 13
    r = send(c, "TimerPast", b"x", properties=props(TIMER_DELAY_SEC=4 * 24 * 3600))
    assert r.code == 13 and "max delay" in r.remark
    # a delay level wins over timer properties (Java checkIfTimerMessage)
    assert send(c, "TimerPast", b"lvl", properties=props(DELAY=1, TIMER_DELAY_SEC=30)).code == 0
    got = wait_messages(c, "TimerPast", 2, 3.0)
    assert got[1].body == b"lvl" and "TIMER_DELAY_SEC" not in got[1].properties


@pytest.mark.slow
def test_many_random_timers_delivered_in_due_order(rb):
    c = rb.client
    base = now_ms() + 500
    rnd = random.Random(7)
    dues = [base + rnd.randrange(0, 1500) for _ in range(200)]
    for i, due in enumerate(dues):
        assert send(c, "TimerMany", b"%d" % i, properties=props(TIMER_DELIVER_MS=due)).code == 0
    got = wait_messages(c, "TimerMany", 200, 5.0)
    assert len(got) == 200
    delivered_dues = [dues[int(m.body)] for m in got]
    assert delivered_dues == sorted(delivered_dues)
    lateness = [m.store_timestamp - dues[int(m.body)] for m in got]
    assert max(lateness) <= 200 and min(lateness) >= 0, (min(lateness), max(lateness))


@pytest.mark.slow
def test_pending_timers_survive_restart_without_duplicates(rb):
    c = rb.client
    now = now_ms()
    send(c, "TimerRestart", b"late", properties=props(TIMER_DELIVER_MS=now + 2500))
    send(c, "TimerRestart", b"early", properties=props(TIMER_DELIVER_MS=now + 300))
    send(c, "TimerRestart", b"mid", properties=props(TIMER_DELIVER_MS=now + 2000))
    wait_messages(c, "TimerRestart", 1, 2.0)
    rb.restart()
    svc = rb.broker.timer_message_service
    deadline = time.monotonic() + 2
    while svc.pending < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert svc.pending == 2
    got = wait_messages(rb.client, "TimerRestart", 3, 4.0)
    assert [m.body for m in got] == [b"early", b"mid", b"late"]
    rb.restart()
    time.sleep(0.3)
    assert rb.broker.timer_message_service.pending == 0
    assert [m.body for m in pull_all(rb.client, "TimerRestart")] == [b"early", b"mid", b"late"]


@pytest.mark.slow
def test_thousands_of_pending_timers(rb):
    c = rb.client
    base = now_ms() + 5000
    n = 3000
    for i in range(n):
        due = base + (i * 7919) % 1000
        assert send(c, "TimerBulk", b"%d" % i, queue_id=i % 4, properties=props(TIMER_DELIVER_MS=due)).code == 0
    svc = rb.broker.timer_message_service
    deadline = time.monotonic() + 2
    while svc.pending < n and time.monotonic() < deadline:
        time.sleep(0.01)
    assert svc.pending == n and svc.delivered == 0      # all parked in the heap, none due yet
    t0 = time.monotonic()
    got = wait_messages(c, "TimerBulk", n, 10.0, queue_ids=(0, 1, 2, 3))
    assert len(got) == n and len({m.body for m in got}) == n
    late = [m.store_timestamp - (base + (int(m.body) * 7919) % 1000) for m in got]
    assert max(late) <= 300, max(late)
    assert time.monotonic() - t0 < 8
