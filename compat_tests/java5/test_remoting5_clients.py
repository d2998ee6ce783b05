"""5.5's remoting client (rocketmq-client 5.5.0) against rmqd and against the real Java 5.x broker, the same
scenarios (java5/remoting/Remoting5Scenarios.java), the facts compared: POP consumption by a push consumer of a
group in POP mode, POP through the client API with BATCH_ACK_MESSAGE, DefaultLitePullConsumer (LITE_PULL_MESSAGE),
server-side assignment (QUERY_ASSIGNMENT, SET_MESSAGE_REQUEST_MODE), recall of a timer message (RECALL_MESSAGE and
the send's recall handle), heartbeat v2 and server-side offset reset.

As an operator would, the topics and groups are made with 5.x mqadmin first, the POP group switched with
``setConsumeMode`` and recall enabled with ``updateBrokerConfig`` (Java's default is off), on both.
"""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

from java5kit import FETCH_TIMEOUT, REFERENCE5_BROKER_PROPERTIES, START_TIMEOUT, run_java5

from rmqd.testing import EmbeddedServer

# the kit and the session's reference when this module opens the session, then two runs of at most 240 s
pytestmark = pytest.mark.timeout(FETCH_TIMEOUT + START_TIMEOUT + 540)

PREFIX = "R5"
SCENARIOS = ("pop", "batchAck", "litePull", "assignment", "recall", "heartbeatV2", "resetOffset")
TOPICS = {"Pop": 4, "BatchAck": 1, "LitePull": 4, "Assign": 4, "Recall": 4, "HbV2": 4, "Reset": 4}

# What every scenario must show on the Java broker (the scenario itself proven) and on rmqd alike.
EXPECTED = {
    "pop": {"sent": [f"pop-{i}:SEND_OK" for i in range(6)], "received": [f"pop-{i}" for i in range(6)],
            "receivedByPop": 6},
    "batchAck": {"firstPop": ["ba-0", "ba-1", "ba-2", "ba-3"], "batchAck": "OK", "afterInvisibleTime": ["ba-3:1"]},
    "litePull": {"received": [f"lp-{i}" for i in range(8)], "committedTotal": 8},
    "assignment": {"assignedSizes": [2, 2], "eachConsumed": True, "received": [f"as-{i}" for i in range(8)],
                   "popModeAssignment": ["-1:POP"], "retryTopicMode": "refused 16"},
    "recall": {"timerHandles": True, "levelHandle": "null", "plainHandle": "null", "recalledIdIsTheMessageId": True,
               "received": ["keep-me", "level", "plain"],
               "recallAfterTheTime": "604 recall failed, timestamp invalid",
               "recallOfGarbage": "MQClientException"},          # the client refuses a handle it cannot decode
    "heartbeatV2": {"received": ["hb-a", "hb-c"], "subscriptions": {"%RETRY%R5HbV2Group": "*", "R5HbV2": "TagA"},
                    "connections": 1},
    "resetOffset": {"beforeReset": 4, "resetQueues": 4, "resetOffsetsTotal": 0,
                    "timesReceived": {**{f"rs-{i}": 2 for i in range(4)}, **{f"wake-{q}": 1 for q in range(4)}}},
}


def _setup(mqadmin5, namesrv: str) -> None:
    def run(*args: str) -> str:
        res = mqadmin5.run(*args, "-n", namesrv, timeout=60)
        assert not res.timed_out and res.returncode == 0, (args, res.stdout[-1500:])
        return res.stdout

    for name, queues in TOPICS.items():
        out = run("updateTopic", "-c", "DefaultCluster", "-t", PREFIX + name, "-r", str(queues), "-w", str(queues))
        assert "success" in out, out
        assert "success" in run("updateSubGroup", "-c", "DefaultCluster", "-g", f"{PREFIX}{name}Group")
    out = run("setConsumeMode", "-c", "DefaultCluster", "-t", PREFIX + "Pop", "-g", PREFIX + "PopGroup", "-m", "POP",
              "-q", "0")
    assert "success" in out.lower(), out
    assert "success" in run("updateBrokerConfig", "-c", "DefaultCluster", "-k", "recallMessageEnable", "-v", "true")


def _facts(namesrv: str) -> dict:
    res = run_java5("remoting", "Remoting5Scenarios", namesrv, PREFIX, *SCENARIOS, timeout=240)
    assert not res.timed_out and res.returncode == 0, (res.stdout[-3000:], res.stderr[-3000:])
    facts = {e["op"]: {k: v for k, v in e.items() if k not in ("op", "ms")} for e in res.events}
    assert set(facts) == set(SCENARIOS), res.stdout[-3000:]
    print(f"{namesrv}: " + ", ".join(f"{e['op']} {e.get('ms')} ms" for e in res.events))   # shown with -s
    return facts


@pytest.fixture(scope="module")
def both_facts(reference5, mqadmin5, tmp_path_factory) -> dict:
    """The scenarios' facts on the Java broker and on rmqd (an embedded one with the reference's settings)."""
    ours = EmbeddedServer(store_dir=str(tmp_path_factory.mktemp("remoting5")),
                          broker_properties=REFERENCE5_BROKER_PROPERTIES).start()
    try:
        namesrvs = {"java": reference5.namesrv_addr, "rmqd": ours.namesrv_addr}
        for namesrv in namesrvs.values():              # one mqadmin JVM: one sub-command at a time
            _setup(mqadmin5, namesrv)
        # both runs at once: the scenarios mostly wait (quiet periods, rebalances, timers), so together they take
        # about as long as the longer one
        with ThreadPoolExecutor(max_workers=2) as pool:
            futures = {name: pool.submit(_facts, namesrv) for name, namesrv in namesrvs.items()}
            return {name: f.result() for name, f in futures.items()}
    finally:
        ours.stop()


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_remoting5_client_scenario_matches_java(both_facts, scenario: str) -> None:
    java, ours = both_facts["java"][scenario], both_facts["rmqd"][scenario]
    assert java == EXPECTED[scenario], f"the scenario itself, on the Java broker: {java}"
    assert ours == java
