"""The RocketMQ 5 Node.js client (npm rocketmq-client-nodejs 1.0.8) against rmqd, unchanged."""
from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

SCENARIO = Path(__file__).with_name("node5_scenario.js")


def test_node_client_producer_simple_and_push_consumer(node5_dir, grpc_server):
    grpc_server.create_topic("N5Topic")
    grpc_server.create_topic("N5Push")
    env = dict(os.environ, ENDPOINT=grpc_server.grpc_addr, NODE_PATH=str(Path(node5_dir) / "node_modules"))
    r = subprocess.run(["node", str(SCENARIO)], env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-3000:]
    events = [json.loads(line) for line in r.stdout.splitlines() if line.startswith("{")]
    sent = next(e for e in events if e["op"] == "sent")["ids"]
    got = {e["id"]: e for e in events if e["op"] == "got"}
    assert set(got) == set(sent)
    for mid, i in sent.items():
        e = got[mid]
        assert e["body"] == f"node-{i}" and e["props"] == {"source": "node"} and e["attempt"] == 1
        assert e["tag"] == ["TagA", "TagB", None][i] and e["keys"] == (["nk1", "nk2"], [], [])[i]
        assert e["group"] == [None, None, "grp-1"][i]
    red = next(e for e in events if e["op"] == "redelivered")
    assert [m["id"] for m in red["first"]] == [red["id"]] and [m["attempt"] for m in red["first"]] == [1]
    assert [m["id"] for m in red["second"]] == [red["id"]] and [m["attempt"] for m in red["second"]] == [2]
    assert next(e for e in events if e["op"] == "pushed")["bodies"] == [f"push-{i}" for i in range(5)]
