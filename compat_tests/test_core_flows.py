"""Core produce/consume flows through the official C++ client (1.x wheel and 2.x), against rmqd.

Every test runs once per client generation (``client`` fixture) on a fresh embedded server on
free loopback ports (``rmqd_server`` from rmqd's own pytest plugin).
"""
from __future__ import annotations

import collections
import json
import time

from scenarios import (PULL_CONSUMER, PUSH_CONSUMER, Background, consume_until_committed, create_topic,
                       group_caught_up, produce, run, wait_for)

from rmqd.remoting.client import BlockingClient
from rmqd.remoting.command import new_request

PROPS = ["seq", "origin"]


def consumer_ids(broker_addr: str, group: str) -> list[str]:
    with BlockingClient(broker_addr) as c:
        resp = c.invoke(new_request(38, {"consumerGroup": group}))
        if resp.code != 0:
            return []
        return json.loads(resp.body_bytes())["consumerIdList"]


def bodies(run_result, op="recv"):
    return [e["body"] for e in run_result.events_of(op)]


def consume(python, namesrv, topic, group, expect, timeout=40, linger=1.5, **extra):
    res = run(python, PUSH_CONSUMER, namesrv,
              dict(topic=topic, group=group, expect=expect, timeout=timeout, linger=linger, props=PROPS, **extra),
              timeout=timeout + 30)
    assert not res.timed_out, f"consumer hung: {res.client_log[-3000:]}"
    return res


def consume_committed(python, server, topic, group, expect, tmp_path):
    """A push consumer that gets ``expect`` messages and stops once its offsets are committed on the broker
    (instead of lingering a fixed 7 s, more than the client's 5 s commit period)."""
    res = consume_until_committed(python, server.namesrv_addr, server.broker_addr, tmp_path,
                                  dict(topic=topic, group=group, expect=expect, timeout=40, props=PROPS))
    assert not res.timed_out, f"consumer hung: {res.client_log[-3000:]}"
    return res


def test_sync_async_oneway_send_and_push_consumer_gets_each_once(client, rmqd_server):
    name, python = client
    ns = rmqd_server.namesrv_addr
    topic = f"CompatSend_{name}"          # never seen before: auto-created from TBW102
    sync = produce(python, ns, topic, 10, "sync", prefix="s", tag="TagA")
    asyn = produce(python, ns, topic, 10, "async", prefix="a", tag="TagA")
    produce(python, ns, topic, 10, "oneway", prefix="o", tag="TagA")
    for res in (sync, asyn):
        sends = res.events_of("send")
        assert len(sends) == 10 and all(s["status"] == 0 for s in sends)
        assert len({s["msg_id"] for s in sends}) == 10
    res = consume(python, ns, topic, f"CG_send_{name}", expect=30)
    received = res.events_of("recv")
    got = collections.Counter(e["body"] for e in received)
    expected = {f"{p}-{i}" for p in "sao" for i in range(10)}
    assert set(got) == expected and all(n == 1 for n in got.values()), got
    for e in received:
        prefix, i = e["body"].split("-")
        assert e["topic"] == topic and e["tags"] == "TagA" and e["keys"] == f"key-{prefix}-{i}"
        assert e["props"] == {"seq": i, "origin": "compat"}


def test_ordered_send_with_selector_keeps_per_key_order(client, rmqd_server):
    name, python = client
    ns = rmqd_server.namesrv_addr
    topic = f"CompatOrder_{name}"
    keys = [i % 3 for i in range(30)]
    sent = produce(python, ns, topic, 30, "orderly", prefix="o", keys=keys)
    assert all(s["status"] == 0 for s in sent.events_of("send"))
    res = consume(python, ns, topic, f"CG_order_{name}", expect=30, orderly=True)
    by_key = collections.defaultdict(list)
    for e in res.events_of("recv"):
        i = int(e["body"].split("-")[1])
        by_key[i % 3].append((i, e["queue_id"]))
    assert sorted(i for lst in by_key.values() for i, _ in lst) == list(range(30))
    for key, lst in by_key.items():
        assert len({q for _, q in lst}) == 1, f"key {key} spread over queues {lst}"
        assert [i for i, _ in lst] == sorted(i for i, _ in lst), f"key {key} out of order: {lst}"


def test_pull_consumer_reads_everything(client, rmqd_server):
    name, python = client
    ns = rmqd_server.namesrv_addr
    topic = f"CompatPull_{name}"
    produce(python, ns, topic, 20, "sync", prefix="p", tag="TagP")
    res = run(python, PULL_CONSUMER, ns, dict(topic=topic, group=f"CG_pull_{name}", expect=20, timeout=30), timeout=60)
    assert not res.timed_out
    assert sorted(bodies(res)) == sorted(f"p-{i}" for i in range(20))
    assert all(e["tags"] == "TagP" for e in res.events_of("recv"))


def test_two_consumers_split_queues_and_one_takes_over(client, rmqd_server, tmp_path):
    name, python = client
    ns, broker = rmqd_server.namesrv_addr, rmqd_server.broker_addr
    topic, group = f"CompatSplit_{name}", f"CG_split_{name}"
    produce(python, ns, topic, 1, "sync", prefix="warm")         # create the topic (4 queues)
    # B starts first and A joins once B is in the group, so A never holds a queue it later gives
    # back. The C++ 2.1.0 client keeps one pull callback per queue bound to the first PullRequest
    # it made: a consumer that drops a queue and takes it again later gets every new pull answer
    # routed to the dropped request ("has been set as dropped. Will NOT pull this queue any
    # more") and never consumes that queue again, whatever the broker does.
    # B runs until the test creates stop_b: once the "one-" batch is consumed and committed by A and B
    # (at most 60 s)
    stop_b = tmp_path / "stop-b"
    b = Background(python, PUSH_CONSUMER, ns, dict(topic=topic, group=group, expect=10**6, timeout=60,
                                                   stop_file=str(stop_b), instance="B", props=PROPS), timeout=100)
    wait_for(lambda: len(consumer_ids(broker, group)) == 1, 20, what="B registered")
    # A runs until it has every "two-" message (B's queues included, after the takeover).
    a = Background(python, PUSH_CONSUMER, ns, dict(topic=topic, group=group, expect=40, expect_prefix="two-",
                                                   timeout=110, linger=1, instance="A", props=PROPS), timeout=130)
    wait_for(lambda: len(consumer_ids(broker, group)) == 2, 20, what="two consumers registered")
    first = produce(python, ns, topic, 40, "sync", prefix="one")
    assert len(first.events_of("send")) == 40
    wait_for(lambda: group_caught_up(broker, topic, group), 45, interval=0.5, what="the one- batch consumed")
    stop_b.touch()
    rb = b.result(100)
    wait_for(lambda: len(consumer_ids(broker, group)) == 1, 30, what="B gone from the group")
    produce(python, ns, topic, 40, "sync", prefix="two")
    ra = a.result(130)
    a_first = {x for x in bodies(ra) if x.startswith("one-")}
    b_first = {x for x in bodies(rb) if x.startswith("one-")}
    assert a_first and b_first, "both consumers should have had a share of the queues"
    assert a_first | b_first == {f"one-{i}" for i in range(40)}
    assert not {q for q in (e["queue_id"] for e in ra.events_of("recv") if e["body"].startswith("one-"))} & \
        {q for q in (e["queue_id"] for e in rb.events_of("recv") if e["body"].startswith("one-"))}
    assert {x for x in bodies(ra) if x.startswith("two-")} == {f"two-{i}" for i in range(40)}


def test_restarted_consumer_resumes_after_committed_offset(client, rmqd_server, tmp_path):
    name, python = client
    ns = rmqd_server.namesrv_addr
    topic, group = f"CompatResume_{name}", f"CG_resume_{name}"
    produce(python, ns, topic, 10, "sync", prefix="first")
    r1 = consume_committed(python, rmqd_server, topic, group, 10, tmp_path)
    assert sorted(bodies(r1)) == sorted(f"first-{i}" for i in range(10))
    produce(python, ns, topic, 10, "sync", prefix="second")
    r2 = consume(python, ns, topic, group, expect=10, linger=3)
    assert sorted(bodies(r2)) == sorted(f"second-{i}" for i in range(10))


def test_broker_restart_keeps_messages_and_offsets(client, rmqd_server, tmp_path):
    name, python = client
    topic, group = f"CompatRestart_{name}", f"CG_restart_{name}"
    produce(python, rmqd_server.namesrv_addr, topic, 10, "sync", prefix="before")
    r1 = consume_committed(python, rmqd_server, topic, group, 10, tmp_path)
    assert len(bodies(r1)) == 10
    rmqd_server.restart()
    ns = rmqd_server.namesrv_addr
    produce(python, ns, topic, 5, "sync", prefix="after")
    r2 = consume(python, ns, topic, group, expect=5, linger=3)
    assert sorted(bodies(r2)) == sorted(f"after-{i}" for i in range(5))
    r3 = consume(python, ns, topic, f"{group}_new", expect=15, linger=1)
    assert sorted(bodies(r3)) == sorted([f"before-{i}" for i in range(10)] + [f"after-{i}" for i in range(5)])


def test_broadcast_consumers_each_get_every_message(client, rmqd_server):
    name, python = client
    ns, broker = rmqd_server.namesrv_addr, rmqd_server.broker_addr
    topic, group = f"CompatBroadcast_{name}", f"CG_bcast_{name}"
    create_topic(broker, topic)
    consumers = [Background(python, PUSH_CONSUMER, ns, dict(topic=topic, group=group, expect=20, timeout=40,
                                                            instance=i, broadcast=True, linger=1, props=PROPS))
                 for i in ("A", "B")]
    wait_for(lambda: len(consumer_ids(broker, group)) == 2, 20, what="two broadcast consumers registered")
    time.sleep(3)                           # let both rebalance onto every queue
    produce(python, ns, topic, 20, "sync", prefix="b")
    for bg in consumers:
        assert sorted(bodies(bg.result(90))) == sorted(f"b-{i}" for i in range(20))
