"""The Java 4.9.8 client against rmqd: what a Java user does, one JVM per scenario group
(``compat_tests/java/src/ClientScenarios.java``). Every group also runs against the Java broker (the
session's reference cluster, whose conf has the same fast delay levels, transaction check-back and SQL92
filtering as the rmqd broker here: javakit.REFERENCE_BROKER_PROPERTIES), and the same facts must hold there:
the expectations are the Java broker's behaviour, not rmqd's guesses."""
from __future__ import annotations

import pytest

from javakit import REFERENCE_BROKER_PROPERTIES, SETUP_BUDGET, require_kit, run_java
from scenarios import create_topic

SCENARIO_TIMEOUT = 240.0       # one JVM runs a whole group; each scenario waits at most 30 s (WAIT_MS)
pytestmark = pytest.mark.timeout(SETUP_BUDGET + SCENARIO_TIMEOUT + 60)

TOPICS = ["JSends", "JSql", "JOrder", "JBroadcast", "JDelay", "JRetry", "JTx", "JRequest", "JQuery"]


def scenarios(server, *names: str) -> dict:
    require_kit()
    for t in TOPICS:
        create_topic(server.broker_addr, t, 4)
    res = run_java("ClientScenarios", server.namesrv_addr, *names, timeout=SCENARIO_TIMEOUT)
    assert not res.timed_out, res.stderr[-3000:]
    got = {e["op"]: e for e in res.events}
    assert set(got) == set(names), (res.stdout[-2000:], res.stderr[-3000:])
    errors = {k: v["error"] for k, v in got.items() if "error" in v}
    assert not errors, errors
    return got


GROUP_1 = ("sends", "pushTags", "pushSql", "orderly", "broadcast", "litePull", "pullConsumer")
GROUP_2 = ("delay", "retryDlq", "transaction", "requestReply", "query")


def check_group_1(got: dict) -> None:
    s = got["sends"]
    assert (s["sync"], s["async"], s["batch"], s["batchIds"]) == ("SEND_OK", "SEND_OK", "SEND_OK", 10)
    assert s["selectorQueues"] == [2] * 6
    tags = got["pushTags"]
    assert tags["bodies"] == sorted(["sync", "async"] + [f"sel-{i}" for i in range(6)])
    assert tags["tagB"] == sorted(["oneway"] + [f"batch-{i}" for i in range(10)])     # the oneway send arrived
    assert got["pushSql"]["bodies"] == ["sql-7", "sql-8", "sql-9"]
    seq = got["orderly"]["sequences"]
    assert seq == {str(o): [0, 1, 2, 3, 4] for o in range(4)}
    assert got["broadcast"]["perConsumer"] == [5, 5]
    lite = got["litePull"]
    assert lite["beforeSeek"][:1] == [0] and lite["beforeSeek"] == sorted(lite["beforeSeek"])
    assert lite["offsetsFrom3"] == [3, 4, 5] and lite["afterSeekToBegin"] == 0
    polled = lite["polled"]
    assert polled == list(range(3, 3 + len(polled))), polled
    # commitSync stored the offset after the last message polled (what the broker answers QUERY_CONSUMER_OFFSET)
    assert lite["committedAfterCommitSync"] == polled[-1] + 1, lite
    pull = got["pullConsumer"]
    assert pull["status"] == "FOUND" and pull["found"] == pull["max"] == pull["next"] > 0


def check_group_2(got: dict) -> None:
    assert 900 <= got["delay"]["lagMs"] < 10000
    assert got["retryDlq"]["attempts"][:3] == [0, 1, 2] and got["retryDlq"]["dlqMessages"] == 1
    tx = got["transaction"]
    assert tx["bodies"] == ["tx-checked", "tx-commit"] and tx["checks"] >= 1
    assert got["requestReply"]["reply"] == "re:ping"
    q = got["query"]
    assert q["byId"] == q["byOffsetId"] == "find me" and q["byKey"] == ["find me"]


@pytest.mark.rmqd_broker(**REFERENCE_BROKER_PROPERTIES)
def test_sends_subscriptions_and_pulls(rmqd_server):
    check_group_1(scenarios(rmqd_server, *GROUP_1))


@pytest.mark.rmqd_broker(**REFERENCE_BROKER_PROPERTIES)
def test_delay_retry_dlq_transactions_request_reply_and_queries(rmqd_server):
    check_group_2(scenarios(rmqd_server, *GROUP_2))


def test_the_same_scenarios_give_the_same_facts_on_the_java_broker(reference_cluster):
    """Both groups in one JVM against the Java broker: every fact asserted for rmqd above holds there."""
    got = scenarios(reference_cluster, *GROUP_1, *GROUP_2)
    check_group_1(got)
    check_group_2(got)
