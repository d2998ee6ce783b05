"""Java consumers that come and go (issue 12): two consumers share a topic's queues, the survivor takes all
of them when one stops, a restarted consumer resumes from its committed offset without loss, mqadmin
resetOffsetByTime makes a live consumer re-consume, and a producer and a consumer carry on across a broker
restart. One JVM for the whole group (ConsumerLifecycle.java, driven through its stdin)."""
from __future__ import annotations

import json
import time

import pytest

from javakit import SETUP_BUDGET, JavaProcess
from scenarios import create_topic

TOPIC, GROUP = "JLifecycle", "js_lifecycle_cg"
# Every wait of the test comes out of one budget (each also has its own bound), so the whole scenario is
# bounded by BUDGET and fails with the step that ran out, before pytest-timeout would kill it.
BUDGET = 600.0
pytestmark = pytest.mark.timeout(SETUP_BUDGET + BUDGET + 120)   # + mqadmin resetOffsetByTime (60 s) and the stops


class Clients:
    def __init__(self, proc: JavaProcess, budget: float = BUDGET) -> None:
        self.proc = proc
        self.answered = 1                               # the "ready" line
        self.deadline = time.monotonic() + budget

    def left(self, timeout: float, what: str) -> float:
        """``timeout`` or what is left of the budget, whichever is less; fails when nothing is left."""
        left = min(timeout, self.deadline - time.monotonic())
        assert left > 0, f"{what}: the scenario's {BUDGET:.0f} s budget is spent"
        return left

    def do(self, cmd: str, timeout: float = 60, **kw) -> dict:
        self.proc.send(json.dumps({"cmd": cmd, **kw}))
        want = self.answered + 1
        self.proc.wait_for(lambda ev: len(ev) >= want, self.left(timeout, cmd), f"answer to {cmd}")
        self.answered = want
        ev = self.proc.events[want - 1]
        assert "error" not in ev, ev
        return ev

    def until(self, predicate, timeout: float, what: str) -> dict:
        """Poll the consumers' report until ``predicate(report)`` holds (bounded)."""
        deadline = time.monotonic() + self.left(timeout, what)
        while True:
            report = self.do("report")["consumers"]
            if predicate(report):
                return report
            assert time.monotonic() < deadline, f"{what}: {json.dumps(report)[:3000]}"
            time.sleep(0.2)


def _bodies(report: dict, name: str, prefix: str = "") -> list[str]:
    return [b for b in report.get(name, {}).get("bodies", []) if b.startswith(prefix)]


def test_rebalance_restart_reset_and_broker_restart(rmqd_server, mqadmin_shell):
    create_topic(rmqd_server.broker_addr, TOPIC, 4)
    with JavaProcess("ConsumerLifecycle", rmqd_server.namesrv_addr) as proc:
        c = Clients(proc)
        proc.wait_for(lambda ev: ev and ev[0].get("op") == "ready", c.left(90, "start"), "lifecycle JVM")
        c.do("start", name="c1", group=GROUP, topic=TOPIC)
        c.do("start", name="c2", group=GROUP, topic=TOPIC)
        c.until(lambda r: len(r["c1"]["queues"]) == len(r["c2"]["queues"]) == 2
                and sorted(r["c1"]["queues"] + r["c2"]["queues"]) == [0, 1, 2, 3], 90, "2 queues each")
        # both see their share: the messages of their own queues, every message once between them
        assert c.do("produce", topic=TOPIC, count=40, prefix="a")["failed"] == 0
        r = c.until(lambda r: len(set(_bodies(r, "c1", "a") + _bodies(r, "c2", "a"))) == 40, 90, "c1 and c2 share")
        assert _bodies(r, "c1", "a") and _bodies(r, "c2", "a")
        assert not set(_bodies(r, "c1", "a")) & set(_bodies(r, "c2", "a"))
        # c2 stops: c1 takes every queue and gets what is sent next
        c.do("stop", name="c2")
        c.until(lambda r: r["c1"]["queues"] == [0, 1, 2, 3], 60, "c1 takes all queues")
        assert c.do("produce", topic=TOPIC, count=20, prefix="b")["failed"] == 0
        c.until(lambda r: len(set(_bodies(r, "c1", "b"))) == 20, 60, "c1 receives the b messages")
        # c1 stops (its offsets are committed); a restarted consumer resumes there: the c batch, nothing older
        c.do("stop", name="c1")
        assert c.do("produce", topic=TOPIC, count=10, prefix="c")["failed"] == 0
        c.do("start", name="c3", group=GROUP, topic=TOPIC)
        r = c.until(lambda r: len(set(_bodies(r, "c3", "c"))) == 10, 60, "c3 resumes from the committed offset")
        time.sleep(2)
        r = c.do("report")["consumers"]
        assert not _bodies(r, "c3", "a") and not _bodies(r, "c3", "b"), r["c3"]["bodies"][:20]
        # resetOffsetByTime to before the c batch: the live consumer re-consumes it
        before_c = int(time.time() * 1000)
        time.sleep(1.1)
        assert c.do("produce", topic=TOPIC, count=5, prefix="d")["failed"] == 0
        c.until(lambda r: len(set(_bodies(r, "c3", "d"))) == 5, 60, "c3 receives the d messages")
        out = mqadmin_shell.run("resetOffsetByTime", "-n", rmqd_server.namesrv_addr, "-g", GROUP, "-t", TOPIC,
                                "-s", str(before_c), "-f", "true").stdout
        assert "Exception" not in out and "rollback consumer offset" in out, out[-2000:]
        c.until(lambda r: len(_bodies(r, "c3", "d")) >= 10, 60, "c3 re-consumes from the reset time")
        # the broker restarts: the producer's sends get through again and the consumer gets them
        rmqd_server.restart()
        assert c.do("produce", topic=TOPIC, count=10, prefix="e", timeout=400)["failed"] == 0
        r = c.until(lambda r: len(set(_bodies(r, "c3", "e"))) == 10, 90, "c3 receives after the broker restart")
        assert r["c3"]["queues"] == [0, 1, 2, 3]
