"""The official Go gRPC client (github.com/apache/rocketmq-clients/golang/v5 5.1.4, compat_tests/go/cmd/grpc5)
against rmqd's gRPC endpoint and against the Java 5.5 reference's proxy, outcomes compared.

Topics (with the message.type a scenario needs: FIFO, DELAY, TRANSACTION, PRIORITY, LITE) and groups (a FIFO group
with -o true, a lite group bound with --attributes +lite.bind.topic=<topic>, a DLQ group with -r 1) are made with
5.x mqadmin on both, and the broker settings Lite Mode and recall need are switched on with updateBrokerConfig
(enableLmq, enableMultiDispatch, recallMessageEnable), as an operator does. Then every scenario runs against both
at once: normal sends and a simple consumer, ChangeInvisibleDuration, a push consumer with a tag filter, FIFO per
message group, a delivery timestamp, transactions with check-back, priorities, a LitePushConsumer, recall, and the
DLQ after the group's max attempts. 5.5.0's local-mode proxy cannot serve Lite Mode (java5kit.ClusterProxy5, the session's proxy5), so the
Java side of the lite scenario goes through a cluster-mode proxy of the same reference broker."""
from __future__ import annotations

import pytest

from go_outcomes import as_rmqd_stores, assert_same, by_body, distinct, masked, of, ok, without
from gokit import BUILD_TIMEOUT, run_go_all
from java5kit import START_TIMEOUT
from javakit import SHELL_START_TIMEOUT
from mqadmin_setup import BUSY_MACHINE, broker_settings, create_groups, create_topics, wait_routes

RUN_TIMEOUT = 150.0
pytestmark = pytest.mark.timeout(BUILD_TIMEOUT + 2 * START_TIMEOUT + SHELL_START_TIMEOUT + RUN_TIMEOUT + 120)

# scenario -> (topic, updateTopic options, {group: updateSubGroup options})
SCENARIOS = {
    "normal": ("G5Normal", (), {"g5-normal": ()}),
    "invisible": ("G5Invisible", (), {"g5-invisible": ()}),
    "push": ("G5Push", (), {"g5-push": ()}),
    "fifo": ("G5Fifo", ("-a", "+message.type=FIFO"), {"g5-fifo": ("-o", "true")}),
    "delay": ("G5Delay", ("-a", "+message.type=DELAY"), {"g5-delay": ()}),
    "transaction": ("G5Tx", ("-a", "+message.type=TRANSACTION"), {"g5-tx": ()}),
    "priority": ("G5Prio", ("-a", "+message.type=PRIORITY"), {"g5-prio": ()}),
    "lite": ("G5Lite", ("-a", "+message.type=LITE"), {"g5-lite": ("--attributes", "+lite.bind.topic=G5Lite")}),
    "recall": ("G5Recall", ("-a", "+message.type=DELAY"), {"g5-recall": ()}),
    "dlq": ("G5Dlq", (), {"g5-dlq": ("-r", "1"), "g5-dlq-dlq": ()}),
}
# what Lite Mode (LMQ dispatch) and recall need switched on; Java's defaults again afterwards (shared reference)
BROKER_SETTINGS = {"enableLmq": "true", "enableMultiDispatch": "true", "recallMessageEnable": "true"}
SYSTEMS = ("java", "rmqd")


@pytest.fixture(scope="module")
def runs(reference5, mqadmin5, grpc_server, proxy5):
    """Every scenario run against both systems at once: {(system, scenario): JavaRun}."""
    namesrvs = {"java": reference5.namesrv_addr, "rmqd": grpc_server.server.namesrv_addr}
    jobs = {}
    with broker_settings(mqadmin5, namesrvs.values(), {**BROKER_SETTINGS, **BUSY_MACHINE}):
        for system, namesrv in namesrvs.items():
            create_topics(mqadmin5, namesrv, {topic: opts for topic, opts, _ in SCENARIOS.values()})
            create_groups(mqadmin5, namesrv, {g: o for _, _, groups in SCENARIOS.values() for g, o in groups.items()})
            wait_routes(namesrv, [topic for topic, _, _ in SCENARIOS.values()])
            for name, (topic, _, groups) in SCENARIOS.items():
                endpoint = grpc_server.grpc_addr if system == "rmqd" else \
                    proxy5.grpc_addr if name == "lite" else reference5.grpc_addr
                jobs[(system, name)] = ["grpc5", "-endpoint", endpoint, "-topic", topic, "-group", next(iter(groups)),
                                        "-wait", "60", name]
        yield run_go_all(jobs, RUN_TIMEOUT)


def run_of(runs, system: str, scenario: str):
    run = runs[(system, scenario)]
    ok(run, f"{scenario} on {system}")
    return run


def both(runs, scenario: str) -> dict:
    return {system: run_of(runs, system, scenario) for system in SYSTEMS}


def recvs(run, op: str = "recv") -> list[dict]:
    """The deliveries of distinct messages (a send retried after a timeout stores a second copy, same message id)."""
    return distinct(of(run, op), "messageId")


def received(run, op: str = "recv") -> dict[str, dict]:
    return by_body(recvs(run, op))


def view(e: dict) -> dict:
    return {k: e.get(k) for k in ("topic", "tag", "keys", "attempt", "group", "liteTopic")} | \
        {"props": masked(e.get("props"))}


def compare_views(java: dict[str, dict], rmqd: dict[str, dict], what: str, drop_props: tuple = ()) -> None:
    """rmqd's deliveries against Java's, the explained differences applied (go_outcomes); ``drop_props`` are not
    compared."""
    def props(p: dict | None) -> dict:
        return {k: v for k, v in (p or {}).items() if k not in drop_props}

    assert_same({b: dict(view(e), props=props(as_rmqd_stores(e.get("props")))) for b, e in java.items()},
                {b: dict(view(e), props=props(view(e)["props"])) for b, e in rmqd.items()}, what)


def sends(run) -> dict[str, dict]:
    return {e["body"]: without(e, ("messageId", "sentTs", "op")) for e in of(run, "send")}


def test_normal_sends_and_simple_consumer(runs):
    r = both(runs, "normal")
    for system, run in r.items():
        assert all("error" not in e and e["receipts"] == 1 for e in of(run, "send")), system
        got = received(run)
        assert sorted(got) == ["normal-0", "normal-2", "normal-async"], system      # the TagA filter
        assert len(recvs(run)) == 3 and not of(run, "receiveError"), system
        assert got["normal-0"]["keys"] == ["k0", "shared"] and got["normal-0"]["props"] == {"src": "go"}
    assert_same(sends(r["java"]), sends(r["rmqd"]), "send receipts")
    compare_views(received(r["java"]), received(r["rmqd"]), "messages received")


def test_change_invisible_duration(runs):
    r = both(runs, "invisible")
    for system, run in r.items():
        assert sorted(received(run)) == ["ack-me", "hide-me"], system
        assert [(e["body"], e["ok"]) for e in of(run, "changeInvisible")] == [("hide-me", True)], system
        (again,) = of(run, "again")
        assert again["body"] == "hide-me" and again["attempt"] == 2, system
        assert again["afterChangeMs"] >= 1800, (system, again)         # not before the 2 s it was hidden for
        assert all(e["ok"] for e in of(run, "ack")) and {e["body"] for e in of(run, "ack")} == {"ack-me", "hide-me"}
    compare_views(received(r["java"], "again"), received(r["rmqd"], "again"), "the redelivered message")


def test_push_consumer_with_a_tag_filter(runs):
    r = both(runs, "push")
    for system, run in r.items():
        assert sorted(received(run)) == ["push-0", "push-2", "push-3", "push-5"], system
        assert len(recvs(run)) == 4, system
    compare_views(received(r["java"]), received(r["rmqd"]), "messages pushed")


def test_fifo_order_per_message_group(runs):
    r = both(runs, "fifo")
    for system, run in r.items():
        per_group: dict[str, list[str]] = {}
        for e in recvs(run):
            per_group.setdefault(e["group"], []).append(e["body"])
        assert per_group == {f"group-{g}": [f"g{g}-s{s}" for s in range(5)] for g in range(3)}, (system, per_group)
    compare_views(received(r["java"]), received(r["rmqd"]), "FIFO messages")


def test_delivery_timestamp(runs):
    r = both(runs, "delay")
    for system, run in r.items():
        (sent,) = of(run, "send")
        (got,) = recvs(run)
        assert got["body"] == "delayed-2s" and abs(got["deliveryTs"] - sent["sentTs"] - 2000) < 100, (system, got)
        # Java's timer wheel has a 1 s precision: it delivers in the second the time falls in
        assert got["recvTs"] - sent["sentTs"] >= 1000, (system, got)
    compare_views(received(r["java"]), received(r["rmqd"]), "the delayed message")


def test_transactions_commit_rollback_and_check_back(runs):
    """As with the remoting client: Java 5.x batches its op records (3 s), so with the 1 s check interval it also
    checks back ended transactions and commits the open one once per check; the distinct outcomes are compared."""
    r = both(runs, "transaction")
    for system, run in r.items():
        assert {e["body"]: e["ok"] for e in of(run, "end")} == {"tx-commit": True, "tx-rollback": True}, system
        assert all(e["hasTransactionId"] for e in of(run, "send")), system
        assert set(received(run)) == {"tx-commit", "tx-open"}, system
        assert "tx-open" in received(run, "check"), system
    # TRANSACTION_CHECK_TIMES is on a committed message when a check-back renewed its half message before the
    # producer's commit arrived: a matter of timing for the transactions the producer ends itself
    compare_views({b: e for b, e in received(r["java"]).items() if b == "tx-commit"},
                  {b: e for b, e in received(r["rmqd"]).items() if b == "tx-commit"}, "the committed message",
                  drop_props=("TRANSACTION_CHECK_TIMES",))
    compare_views({"tx-open": received(r["java"])["tx-open"]}, {"tx-open": received(r["rmqd"])["tx-open"]},
                  "the message committed by the check-back")
    compare_views({"tx-open": received(r["java"], "check")["tx-open"]},
                  {"tx-open": received(r["rmqd"], "check")["tx-open"]}, "the check-back message")


def test_priority_backlog_highest_first(runs):
    r = both(runs, "priority")
    for system, run in r.items():
        assert [e["body"][:2] for e in recvs(run)] == ["p3", "p3", "p2", "p2", "p1", "p1", "p0", "p0"], system
    compare_views(received(r["java"]), received(r["rmqd"]), "priority messages")


def test_lite_push_consumer(runs):
    r = both(runs, "lite")
    for system, run in r.items():
        assert [e["ok"] for e in of(run, "subscribeLite")] == [True, True], (system, of(run, "subscribeLite"))
        per_lite: dict[str, list[str]] = {}
        for e in recvs(run):
            per_lite.setdefault(e["liteTopic"], []).append(e["body"])
        assert per_lite == {lt: [f"{lt}-{i}" for i in range(3)] for lt in ("chat-a", "chat-b")}, (system, per_lite)
        assert of(run, "unsubscribeLite")[0]["ok"], system
    compare_views(received(r["java"]), received(r["rmqd"]), "lite messages")


def test_recall_of_a_delay_message(runs):
    r = both(runs, "recall")
    for system, run in r.items():
        assert all(e["hasRecallHandle"] for e in of(run, "send")), system
        (recall,) = of(run, "recall")
        assert recall["ok"] and recall["messageId"] == of(run, "send")[0]["messageId"], (system, recall)
        assert not of(run, "recallBad")[0].get("ok"), (system, of(run, "recallBad"))   # a handle that is none
        assert [e["body"] for e in recvs(run)] == ["keep-me"], system                   # the recalled one never comes
    assert_same(without(of(r["java"], "recallBad")[0], ("op",)), without(of(r["rmqd"], "recallBad")[0], ("op",)),
                "the answer to a recall handle that is none")
    compare_views(received(r["java"]), received(r["rmqd"]), "the delay message not recalled")


def test_dlq_after_max_attempts(runs):
    r = both(runs, "dlq")
    for system, run in r.items():
        assert [e["attempt"] for e in recvs(run)] == [1, 2], system           # retryMaxTimes 1: two deliveries
        (dlq,) = of(run, "dlq")
        assert (dlq["body"], dlq["topic"], dlq["keys"], dlq["attempt"]) == ("poison", "%DLQ%g5-dlq", ["k-poison"], 4), \
            system
    # a DLQ reader sees attempt retryMaxTimes + 3 on both: the DLQ copy is stored one reconsume further than the
    # last delivery (5.x's send back; rmqd's revive does the same)
    compare_views(received(r["java"], "dlq"), received(r["rmqd"], "dlq"), "the DLQ message")
