"""The official Go remoting client (github.com/apache/rocketmq-client-go/v2, compat_tests/go/cmd/remoting2) against
rmqd and against the Java 5.5 reference broker (the session's ``reference5``), outcomes compared.

Topics and groups are made with 5.x mqadmin on both, as an operator does; then every scenario runs against both
systems at once (gokit.run_go_all): sync/async/oneway/batch sends, tag and SQL92 filters, ordered sends with a queue
selector and an orderly push consumer, delay level and delivery time, transactions with check-back, retry to the DLQ
(read with a pull consumer), the lite pull consumer with PullFrom, and the v2 admin API. Each test checks the facts of
its scenario on both systems (so the scenario itself is proven on Java) and compares the normalised outcomes
(go_outcomes: ids, times, offsets and hosts masked; the explained version differences applied by name)."""
from __future__ import annotations

import pytest

from go_outcomes import as_rmqd_stores, assert_same, by_body, distinct, masked, of, ok, without
from gokit import BUILD_TIMEOUT, run_go_all
from java5kit import START_TIMEOUT
from javakit import REFERENCE_BROKER_PROPERTIES, SHELL_START_TIMEOUT
from mqadmin_setup import BUSY_MACHINE, broker_settings, create_groups, create_topics, wait_routes

RUN_TIMEOUT = 150.0      # the longest scenario (retry: the client looks up %RETRY% routes every 30 s) takes ~60 s
pytestmark = pytest.mark.timeout(BUILD_TIMEOUT + START_TIMEOUT + SHELL_START_TIMEOUT + RUN_TIMEOUT + 120)

# scenario -> (topic, {group: updateSubGroup options})
SCENARIOS = {
    "sends": ("GoSends", {"go-sends": ()}),
    "filter": ("GoFilter", {"go-filter": (), "go-filter-sql": ()}),
    "orderly": ("GoOrderly", {"go-orderly": ("-o", "true")}),
    "delay": ("GoDelay", {"go-delay": ()}),
    "transaction": ("GoTx", {"go-tx": ()}),
    "retry": ("GoRetry", {"go-retry": (), "go-retry-dlq": ()}),
    "pull": ("GoPull", {"go-pull": ()}),
    "admin": ("GoAdmin", {"go-admin": ("-r", "3")}),
}
SYSTEMS = ("java", "rmqd")


@pytest.fixture(scope="module")
def rmqd_remoting(tmp_path_factory):
    """One rmqd (name server + broker) for the module, with the reference's fast delay levels, 1 s transaction
    check-back and SQL92 filtering (javakit.REFERENCE_BROKER_PROPERTIES)."""
    from rmqd.testing import EmbeddedServer

    server = EmbeddedServer(store_dir=str(tmp_path_factory.mktemp("go-remoting")),
                            broker_properties=REFERENCE_BROKER_PROPERTIES).start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def runs(reference5, mqadmin5, rmqd_remoting):
    """Every scenario run against both systems at once: {(system, scenario): JavaRun}."""
    targets = {"java": (reference5.namesrv_addr, reference5.broker_addr),
               "rmqd": (rmqd_remoting.namesrv_addr, rmqd_remoting.broker_addr)}
    jobs = {}
    with broker_settings(mqadmin5, [namesrv for namesrv, _ in targets.values()], BUSY_MACHINE):
        for system, (namesrv, broker) in targets.items():
            create_topics(mqadmin5, namesrv, {topic: () for topic, _ in SCENARIOS.values()})
            create_groups(mqadmin5, namesrv, {g: o for _, groups in SCENARIOS.values() for g, o in groups.items()})
            wait_routes(namesrv, [topic for topic, _ in SCENARIOS.values()])
            for name, (topic, groups) in SCENARIOS.items():
                jobs[(system, name)] = ["remoting2", "-ns", namesrv, "-broker", broker, "-topic", topic,
                                        "-group", next(iter(groups)), "-wait", "90", name]
        return run_go_all(jobs, RUN_TIMEOUT)


def both(runs, scenario: str) -> dict:
    for system in SYSTEMS:
        ok(runs[(system, scenario)], f"{scenario} on {system}")
    return {system: runs[(system, scenario)] for system in SYSTEMS}


def recvs(run, op: str = "recv", **match) -> list[dict]:
    """The deliveries of distinct messages (a send retried after a timeout stores a second copy, same msgId)."""
    return distinct([e for e in of(run, op) if all(e.get(k) == v for k, v in match.items())], "msgId")


def received(run, op: str = "recv", **match) -> dict[str, dict]:
    return by_body(recvs(run, op, **match))


def message_view(e: dict) -> dict:
    return {"topic": e["topic"], "tags": e["tags"], "keys": e["keys"], "reconsume": e["reconsume"],
            "props": masked(e["props"])}


def expected_rmqd_view(java_event: dict, batch: bool = False) -> dict:
    return dict(message_view(java_event), props=as_rmqd_stores(java_event["props"], batch))


def compare_messages(java: dict[str, dict], rmqd: dict[str, dict], what: str, batch=frozenset()) -> None:
    assert_same({b: expected_rmqd_view(e, b in batch) for b, e in java.items()},
                {b: message_view(e) for b, e in rmqd.items()}, what)


def test_sync_async_oneway_and_batch_sends(runs):
    r = both(runs, "sends")
    for system, run in r.items():
        sends = {e["kind"]: e for e in of(run, "send")}
        assert {k: e["status"] for k, e in sends.items()} == dict.fromkeys(("sync", "async", "oneway", "batch"),
                                                                           "SEND_OK"), system
        got = received(run)
        assert sorted(got) == ["async", "batch-0", "batch-1", "batch-2", "oneway", "sync"], (system, got)
        assert len(recvs(run)) == 6, system                            # nothing twice
        assert got["sync"]["props"]["src"] == "go" and got["sync"]["keys"] == "k-sync"
        assert got["batch-1"]["tags"] == "TagB" and got["batch-1"]["keys"] == "k-batch-1"
    assert_same({k: without(e, ("msgId", "offsetMsgId", "queueOffset", "queue")) for k, e in
                 ((e["kind"], e) for e in of(r["java"], "send"))},
                {k: without(e, ("msgId", "offsetMsgId", "queueOffset", "queue")) for k, e in
                 ((e["kind"], e) for e in of(r["rmqd"], "send"))}, "send results")
    compare_messages(received(r["java"]), received(r["rmqd"]), "messages received",
                     batch=frozenset({"batch-0", "batch-1", "batch-2"}))


def test_tag_and_sql92_filters(runs):
    r = both(runs, "filter")
    for system, run in r.items():
        assert sorted(received(run, consumer="tag")) == ["f-0", "f-1", "f-3", "f-4", "f-6", "f-7"], system
        # a >= 4 AND TAGS <> 'TagB': f-5 (TagC), f-6 (TagA), f-8 (TagC)
        assert sorted(received(run, consumer="sql")) == ["f-5", "f-6", "f-8"], system
        assert len(recvs(run)) == 9, system
    for consumer in ("tag", "sql"):
        compare_messages(received(r["java"], consumer=consumer), received(r["rmqd"], consumer=consumer),
                         f"{consumer} consumer")


def test_ordered_sends_with_a_selector_and_an_orderly_consumer(runs):
    r = both(runs, "orderly")
    for system, run in r.items():
        steps: dict[str, list[int]] = {}
        queues: dict[str, set[int]] = {}
        for e in recvs(run):
            steps.setdefault(e["props"]["order"], []).append(int(e["props"]["step"]))
            queues.setdefault(e["props"]["order"], set()).add(e["queue"])
        assert steps == {str(o): [0, 1, 2, 3, 4] for o in range(4)}, (system, steps)
        assert queues == {str(o): {o} for o in range(4)}, (system, queues)    # the selector's queue, each order
        assert [e["queue"] for e in of(run, "send")] == [o for _ in range(5) for o in range(4)]
    compare_messages(received(r["java"]), received(r["rmqd"]), "ordered messages")


def test_delay_level_and_delivery_time(runs):
    r = both(runs, "delay")
    for system, run in r.items():
        got = received(run)
        assert sorted(got) == ["level-2", "timestamp-2s"], system
        sent = {e["kind"]: e["sentTs"] for e in of(run, "send")}
        # level 2 is 1 s on both brokers (REFERENCE_BROKER_PROPERTIES); the store time is the delivery
        assert got["level-2"]["storeTs"] - sent["delayLevel"] >= 900, (system, got["level-2"])
        # the timer wheel's precision is 1 s on Java (it delivers in the second the time falls in)
        assert got["timestamp-2s"]["storeTs"] - sent["deliverTime"] >= 1000, (system, got["timestamp-2s"])
        assert got["level-2"]["props"]["DELAY"] == "2" and "WAIT" not in got["level-2"]["props"]
        assert got["timestamp-2s"]["props"]["REAL_TOPIC"] == "GoDelay"
    compare_messages(received(r["java"]), received(r["rmqd"]), "delayed messages")


CHECK_TIMES = "TRANSACTION_CHECK_TIMES"


def uncounted(events: dict[str, dict]) -> dict[str, dict]:
    """The events without their TRANSACTION_CHECK_TIMES property."""
    return {b: dict(e, props={k: v for k, v in e["props"].items() if k != CHECK_TIMES}) for b, e in events.items()}


def test_transaction_commit_rollback_and_check_back(runs):
    """Java 5.x writes the op records of ended transactions in batches (transactionOpBatchInterval, 3 s): with the
    reference's 1 s check interval and timeout it checks back transactions already committed or rolled back, and an
    unknown one is committed (and delivered) once per check. rmqd writes the op record at once: one check, one
    delivery. So the distinct outcomes are compared: what was committed, what was checked back."""
    r = both(runs, "transaction")
    for system, run in r.items():
        states = {e["body"]: (e["status"], e["state"]) for e in of(run, "send")}
        assert states == {"tx-commit": ("SEND_OK", "COMMIT_MESSAGE"), "tx-rollback": ("SEND_OK", "ROLLBACK_MESSAGE"),
                          "tx-unknown": ("SEND_OK", "UNKNOW")}, system
        assert set(received(run)) == {"tx-commit", "tx-unknown"}, system
        assert "tx-unknown" in received(run, "check"), system
        # how many check-backs went out before the producer's answer (its first heartbeat, the check interval on a
        # loaded machine): timing, a positive count on both, compared as such
        for e in (received(run)["tx-unknown"], received(run, "check")["tx-unknown"]):
            assert int(e["props"][CHECK_TIMES]) >= 1, (system, e["props"])
    compare_messages(*(uncounted(received(r[s])) for s in ("java", "rmqd")), "committed messages")
    java_check, rmqd_check = (uncounted(received(r[s], "check"))["tx-unknown"] for s in ("java", "rmqd"))
    assert_same(as_rmqd_stores(java_check["props"]), masked(rmqd_check["props"]), "the check-back message")


def test_retry_later_redelivers_then_the_dlq(runs):
    r = both(runs, "retry")
    views = {}
    for system, run in r.items():
        poison = [e for e in recvs(run) if e["body"] == "poison"]
        assert [e["reconsume"] for e in poison] == [0, 1, 2], system          # maxReconsumeTimes 2
        assert [e["topic"] for e in poison] == ["GoRetry"] * 3, system       # the client restores the topic
        assert [e["body"] for e in recvs(run)].count("fine") == 1, system
        (dlq,) = of(run, "dlq")
        assert (dlq["body"], dlq["topic"], dlq["reconsume"]) == ("poison", "%DLQ%go-retry", 3), system
        assert of(run, "dlqPull")[-1]["status"] == "FOUND", system
        views[system] = {f"{e['body']}#{e['reconsume']}": e for e in [*recvs(run), dlq]}
    compare_messages(views["java"], views["rmqd"], "deliveries and the DLQ message")


def test_lite_pull_consumer_and_pull_from(runs):
    r = both(runs, "pull")
    for system, run in r.items():
        assert sorted(received(run)) == [f"pull-{i}" for i in range(5)], system
        (pf,) = of(run, "pullFrom")
        assert pf["status"] == "FOUND" and pf["bodies"] and pf["nextBeginOffset"] == len(pf["bodies"]), system
    compare_messages(received(r["java"]), received(r["rmqd"]), "polled messages")
    assert_same(without(of(r["java"], "pullFrom")[0], ("queue",)), without(of(r["rmqd"], "pullFrom")[0], ("queue",)),
                "PullFrom")


def test_admin_api(runs):
    r = both(runs, "admin")
    expected = [("createTopic", {"ok": True}), ("topicListed", {"listed": True}),
                ("publishQueues", {"ok": True, "queues": 2}),
                ("group", {"found": True, "retryMaxTimes": 3, "consumeEnable": True, "retryQueueNums": 1,
                           "consumeBroadcastEnable": False}),
                ("deleteTopic", {"ok": True}), ("topicGone", {"gone": True})]
    for system, run in r.items():
        got = [(e["op"], without(e, ("op",))) for e in run.events if e["op"] != "done"]
        assert got == expected, (system, got)
