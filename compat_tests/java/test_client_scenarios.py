"""The Java 4.9.8 client against rmqd: what a Java user does, one JVM per scenario group
(``compat_tests/java/src/ClientScenarios.java``)."""
from __future__ import annotations

import pytest

from javakit import require_kit, run_java
from scenarios import create_topic

FAST_LEVELS = " ".join(["1s"] * 18)
BROKER = dict(messageDelayLevel=FAST_LEVELS, transactionCheckInterval=1000, transactionTimeOut=1000)
TOPICS = ["JSends", "JSql", "JOrder", "JBroadcast", "JDelay", "JRetry", "JTx", "JRequest", "JQuery"]


def scenarios(server, *names: str, timeout: float = 240) -> dict:
    require_kit()
    for t in TOPICS:
        create_topic(server.broker_addr, t, 4)
    res = run_java("ClientScenarios", server.namesrv_addr, *names, timeout=timeout)
    assert not res.timed_out, res.stderr[-3000:]
    got = {e["op"]: e for e in res.events}
    assert set(got) == set(names), (res.stdout[-2000:], res.stderr[-3000:])
    errors = {k: v["error"] for k, v in got.items() if "error" in v}
    assert not errors, errors
    return got


GROUP_1 = ("sends", "pushTags", "pushSql", "orderly", "broadcast", "litePull", "pullConsumer")


def check_group_1(got: dict, sql: bool = True) -> None:
    s = got["sends"]
    assert (s["sync"], s["async"], s["batch"], s["batchIds"]) == ("SEND_OK", "SEND_OK", "SEND_OK", 10)
    assert s["selectorQueues"] == [2] * 6
    assert got["pushTags"]["bodies"] == sorted(["sync", "async"] + [f"sel-{i}" for i in range(6)])
    if sql:
        assert got["pushSql"]["bodies"] == ["sql-7", "sql-8", "sql-9"]
    seq = got["orderly"]["sequences"]
    assert seq == {str(o): [0, 1, 2, 3, 4] for o in range(4)}
    assert got["broadcast"]["perConsumer"] == [5, 5]
    lite = got["litePull"]
    assert lite["offsetsFrom3"] == [3, 4, 5] and lite["afterSeekToBegin"] == 0
    pull = got["pullConsumer"]
    assert pull["status"] == "FOUND" and pull["found"] == pull["max"] == pull["next"] > 0


@pytest.mark.rmqd_broker(**BROKER)
def test_sends_subscriptions_and_pulls(rmqd_server):
    check_group_1(scenarios(rmqd_server, *GROUP_1))


def test_the_same_scenarios_give_the_same_facts_on_the_java_broker(reference_cluster):
    """Differential: the expectations above are the Java broker's behaviour, not rmqd's guesses. (SQL92 is
    left out: the Java broker's default is enablePropertyFilter=false, rmqd's local-dev default is true.)"""
    check_group_1(scenarios(reference_cluster, *(g for g in GROUP_1 if g != "pushSql")), sql=False)


@pytest.mark.rmqd_broker(**BROKER)
def test_delay_retry_dlq_transactions_request_reply_and_queries(rmqd_server):
    got = scenarios(rmqd_server, "delay", "retryDlq", "transaction", "requestReply", "query")
    assert 900 <= got["delay"]["lagMs"] < 10000
    assert got["retryDlq"]["attempts"][:3] == [0, 1, 2] and got["retryDlq"]["dlqMessages"] == 1
    tx = got["transaction"]
    assert tx["bodies"] == ["tx-checked", "tx-commit"] and tx["checks"] >= 1
    assert got["requestReply"]["reply"] == "re:ping"
    q = got["query"]
    assert q["byId"] == q["byOffsetId"] == "find me" and q["byKey"] == ["find me"]
