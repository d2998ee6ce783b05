"""5.4 priority and 5.5 Lite Mode with the npm Node.js client 1.0.8 (LitePushConsumer with OffsetOption,
Exclusive eviction with NotifyUnsubscribeLite, the broker's subscription limit, priority refusals)."""
from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import orjson

from rmqd.remoting.command import new_request

SCENARIO = Path(__file__).with_name("node5_lite.js")


def test_node_lite_and_priority(node5_dir, make_grpc_server):
    server = make_grpc_server(maxLiteSubscriptionCount="3")
    server.create_topic("NL", queues=2, message_type="LITE")
    server.create_topic("NP", queues=8, message_type="PRIORITY")
    body = orjson.dumps({"groupName": "NXG", "consumeEnable": True, "retryMaxTimes": 16,
                         "attributes": {"+lite.bind.topic": "NL", "+lite.sub.model": "Exclusive"}})
    assert server.admin.invoke(new_request(200, None, body), 10).code == 0
    env = dict(os.environ, ENDPOINT=server.grpc_addr, NODE_PATH=str(Path(node5_dir) / "node_modules"))
    r = subprocess.run(["node", str(SCENARIO)], env=env, capture_output=True, text=True, timeout=90)
    assert r.returncode == 0, r.stderr[-3000:]
    events = {e["op"]: e for e in (json.loads(line) for line in r.stdout.splitlines() if line.startswith("{"))}
    # the route says NL takes LITE only and the Settings say validate_message_type (as the proxy's do): the client
    # refuses it itself
    refused = events["priority_on_lite"]
    assert refused["code"] is None and "not match" in refused["error"], refused
    ex = events["exclusive"]
    assert ex["a"] == [["room", f"room-{i}"] for i in range(3)]     # MIN: from the first message
    # Exclusive: the broker sent NotifyUnsubscribeLite (telemetry command case 9) to the evicted client; 1.0.8's
    # TelemetrySession logs it as unrecognized instead of passing it on, so its local set keeps the name
    assert "Receive unrecognized command from remote" in r.stderr and " 9 " in r.stderr
    assert ex["bSet"] == ["room"]
    assert ex["b"] == [["room", f"room-{i}"] for i in range(3, 6)]  # the newcomer gets what follows
    assert events["quota"]["code"] == 42902
    stored = server.broker.store.get_max_offset("NP", 5)
    assert stored == 1                                               # priority 5 -> queue 5
