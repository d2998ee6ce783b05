"""The RocketMQ 5 Node.js client (npm rocketmq-client-nodejs 1.0.8) runs the same scenarios against the Java 5.x
proxy and against rmqd (node5_differential.js, one process per side running every section at once); what each
section reported is normalised (test_grpc5_python.normalise) and compared. Lite sections go to the Java side's
cluster-mode proxy (``proxy5``)."""
from __future__ import annotations

import concurrent.futures
import json
import os
import subprocess
from pathlib import Path

import pytest

from differential5 import create_on, sides_of, Target, assert_same, group_cmd, topic_cmd
from test_grpc5_python import normalise

pytestmark = pytest.mark.timeout(900)

SCRIPT = Path(__file__).with_name("node5_differential.js")
# (FIFO and change-invisible-duration are the Java and Python clients' part, to keep the run short)
SECTIONS = ("normal", "delay", "tx", "push", "dlq", "recall", "priority", "lite", "litenew")


def admin_commands(suffix: str = "") -> list[tuple]:
    n = lambda kind: f"N5D{kind}{suffix}"      # noqa: E731
    return [topic_cmd(n("Normal")), topic_cmd(n("Delay"), "DELAY"), topic_cmd(n("Tx"), "TRANSACTION"),
            topic_cmd(n("Push")), topic_cmd(n("Dlq")), topic_cmd(n("Recall"), "DELAY"),
            topic_cmd(n("Prio"), "PRIORITY", 8), topic_cmd(n("Lite"), "LITE"),
            group_cmd(n("NormalG")), group_cmd(n("DelayG")), group_cmd(n("TxG")), group_cmd(n("PushG")),
            group_cmd(n("DlqG"), 1), group_cmd(n("DlqReader")), group_cmd(n("RecallG")), group_cmd(n("PrioG")),
            group_cmd(n("LiteG"), None, False, f"lite.bind.topic={n('Lite')}")]


def run_side(node5_dir: str, side: Target, suffix: str = "") -> list[dict]:
    env = dict(os.environ, ENDPOINT=side.grpc_addr, LITE_ENDPOINT=side.lite_addr, SUFFIX=suffix,
               SECTIONS=",".join(SECTIONS), NODE_PATH=str(Path(node5_dir) / "node_modules"))
    r = subprocess.run(["node", str(SCRIPT)], env=env, capture_output=True, text=True, timeout=240)
    assert r.returncode == 0, (side.name, r.stdout[-2000:], r.stderr[-3000:])
    return [json.loads(line) for line in r.stdout.splitlines() if line.startswith("{")]


@pytest.fixture(scope="module")
def sides(reference5, proxy5, mqadmin5_pair, grpc_server) -> dict[str, Target]:
    out = sides_of(reference5, grpc_server, proxy5)
    create_on(out, mqadmin5_pair, *admin_commands())
    return out


def test_node_client_scenarios(node5_dir, sides):
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        runs = dict(zip(sides, pool.map(lambda side: run_side(node5_dir, side), sides.values())))
    got = {name: normalise(events, SECTIONS) for name, events in runs.items()}
    assert_same(got["java"], got["rmqd"], "Node.js client 1.0.8")
    rmqd = got["rmqd"]
    assert [m["body"] for m in rmqd["normal"][-1]["messages"]] == ["n0", "n1"]
    assert [m["body"] for m in rmqd["priority"][-1]["messages"]][:2] == ["high0", "high1"]
