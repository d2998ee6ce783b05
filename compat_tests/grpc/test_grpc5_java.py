"""The 5.x gRPC Java client (rocketmq-client-java 5.2.0) runs the same scenarios against the Java 5.x proxy and
against rmqd (compat_tests/java5/grpc/Grpc5Scenario.java, one JVM per side running every section at once); what
each section reported is normalised and compared: sends and their refusals (codes), what each consumer received
with its tag, keys, properties, group, lite topic, priority and delivery attempt, in order where order is
promised, retries, the DLQ, recall, transactions with the broker's check-back, and Lite Mode (the Java side's lite
sections go to the cluster-mode proxy, ``proxy5``)."""
from __future__ import annotations

import concurrent.futures
from typing import Any

import pytest

from differential5 import create_on, sides_of, Target, assert_same, group_cmd, topic_cmd
from java5kit import run_java5

pytestmark = pytest.mark.timeout(900)

SECTIONS = ("normal", "fifo", "delay", "tx", "priority", "change", "push", "dlq", "recall", "lite", "litenew")
SUFFIX = ""


def admin_commands(suffix: str = SUFFIX) -> list[tuple]:
    n = lambda kind: f"J5{kind}{suffix}"      # noqa: E731
    return [topic_cmd(n("Normal")), topic_cmd(n("Fifo"), "FIFO"), topic_cmd(n("Delay"), "DELAY"),
            topic_cmd(n("Tx"), "TRANSACTION"), topic_cmd(n("Prio"), "PRIORITY", 8), topic_cmd(n("Change")),
            topic_cmd(n("Push")), topic_cmd(n("Dlq")), topic_cmd(n("Recall"), "DELAY"), topic_cmd(n("Lite"), "LITE"),
            group_cmd(n("NormalG")), group_cmd(n("FifoG"), None, True), group_cmd(n("DelayG")),
            group_cmd(n("TxG")), group_cmd(n("PrioG")), group_cmd(n("ChangeG")), group_cmd(n("PushG")),
            group_cmd(n("DlqG"), 1), group_cmd(n("DlqReader")), group_cmd(n("RecallG")),
            group_cmd(n("LiteG"), None, False, f"lite.bind.topic={n('Lite')}")]


def run_side(side: Target, suffix: str = SUFFIX, timeout: float = 240) -> list[dict]:
    res = run_java5("grpc", "Grpc5Scenario", side.grpc_addr, side.lite_addr, suffix, *SECTIONS, timeout=timeout)
    assert res.returncode == 0 and not res.timed_out, (side.name, res.stdout[-3000:], res.stderr[-3000:])
    return res.events


def _messages(e: dict, order: str = "body") -> list:
    msgs = e["messages"]
    if order == "body":
        return sorted(msgs, key=lambda m: (m["body"], m["attempt"]))
    return msgs


def normalise(events: list[dict]) -> dict[str, Any]:
    """Per section, what it reported, in order; receive order kept where the server promises one (FIFO per
    message group, priority), else sorted."""
    out: dict[str, list] = {s: [] for s in SECTIONS}
    for e in events:
        section = e.get("section")
        if section not in out or e["op"] == "done":
            continue
        e = {k: v for k, v in e.items() if k != "section"}
        if section == "tx":          # how often the broker checked depends on timing; the id is the message's
            for m in e.get("messages", []):
                m["props"].pop("TRANSACTION_CHECK_TIMES", None)
                if "__transactionId__" in m["props"]:
                    m["props"]["__transactionId__"] = "<id>"
        if section == "tx" and "messages" in e:      # a 1 s check-back racing the client's own end can commit a
            seen: set = set()                         # half message twice on a loaded Java broker: once is the fact
            e["messages"] = [m for m in e["messages"] if (m["id"], m["attempt"]) not in seen
                             and not seen.add((m["id"], m["attempt"]))]
        if e["op"] == "dlq":                 # a loaded Java broker may forward a message to the DLQ twice (its
            first: dict = {}                 # proxy's attempts filter and the revive): the message is the fact
            for m in sorted(e["messages"], key=lambda m: m["attempt"]):
                first.setdefault(m["id"], m)
            e["messages"] = list(first.values())
        if "messages" in e:
            if section == "fifo":
                by_group: dict = {}
                for m in e["messages"]:
                    by_group.setdefault(m["group"], []).append(m)
                e["messages"] = by_group
            elif section != "priority":
                e["messages"] = _messages(e)
        out[section].append(e)
    return out


# explained differences (docs/compatibility.md, "5.x gRPC clients")
EXPLAINED = {
    "litenew": "a LitePushConsumer of a group that does not exist: both refuse it at start (the proxy ends its "
               "Telemetry stream); the Java client 5.2.0 reports it differently on a cluster-mode proxy",
}


@pytest.fixture(scope="module")
def sides(reference5, proxy5, mqadmin5_pair, grpc_server) -> dict[str, Target]:
    out = sides_of(reference5, grpc_server, proxy5)
    create_on(out, mqadmin5_pair, *admin_commands())
    return out


def test_java_client_scenarios(sides):
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        runs = dict(zip(sides, pool.map(run_side, sides.values())))
    got = {name: normalise(events) for name, events in runs.items()}
    assert_same(got["java"], got["rmqd"], "Java client 5.2.0")
    rmqd = got["rmqd"]
    # the facts themselves, on rmqd (the comparison alone would let a shared mistake through)
    assert [m["body"] for m in rmqd["normal"][-1]["messages"]] == ["n0", "n1", "n2"]
    assert [m["body"] for m in rmqd["priority"][-1]["messages"]][:3] == ["high0", "high1", "high2"]
    fifo = rmqd["fifo"][-1]["messages"]
    assert [m["body"] for m in fifo["order-0"]] == [f"g0-{i}" for i in range(4)]
