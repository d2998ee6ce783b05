"""The RocketMQ 5 Node.js client (npm rocketmq-client-nodejs 1.0.8) against rmqd, unchanged.

One client program (node5_scenario.js) runs every section concurrently: normal/tagged/keyed sends and a
SimpleConsumer with redelivery, a PushConsumer, a delay message, transactions (commit, rollback and an
orphan the broker checks back), changeInvisibleDuration, the DLQ after the max attempts, and FIFO on
message groups."""
from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from rmqd.store.message import decode_message

SCENARIO = Path(__file__).with_name("node5_scenario.js")


def _run_scenario(node5_dir: str, grpc_server) -> list[dict]:
    for topic in ("N5Push", "N5Change", "N5Dlq"):
        grpc_server.create_topic(topic)
    # N5Topic carries normal messages and one of a message group: a MIXED topic (a NORMAL one refuses the FIFO
    # message, as the 5.x proxy's enableTopicMessageTypeCheck does)
    grpc_server.create_topic("N5Topic", message_type="MIXED")
    grpc_server.create_topic("N5Delay", message_type="DELAY")
    grpc_server.create_topic("N5Tx", message_type="TRANSACTION")
    grpc_server.create_topic("N5Fifo", message_type="FIFO")
    grpc_server.create_group("N5DlqGroup", retry_max_times=1)
    grpc_server.create_group("N5FifoGroup", fifo=True)
    env = dict(os.environ, ENDPOINT=grpc_server.grpc_addr, NODE_PATH=str(Path(node5_dir) / "node_modules"))
    r = subprocess.run(["node", str(SCENARIO)], env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-3000:]
    return [json.loads(line) for line in r.stdout.splitlines() if line.startswith("{")]


def test_node_client_end_to_end(node5_dir, grpc_server):
    events = _run_scenario(node5_dir, grpc_server)
    of = lambda op: [e for e in events if e["op"] == op]  # noqa: E731
    assert {e["name"] for e in of("section")} == {"basics", "push", "delay", "transactions", "changeInvisible",
                                                  "deadLetter", "fifo"}

    # normal, tagged, keyed sends; SimpleConsumer; redelivery with attempt + 1
    sent = of("sent")[0]["ids"]
    got = {e["id"]: e for e in of("got")}
    assert set(got) == set(sent)
    for mid, i in sent.items():
        e = got[mid]
        # the 5.x proxy shows every property outside MessageConst.STRING_HASH_SET, __SHARDINGKEY included
        user = {"source": "node", **({"__SHARDINGKEY": "grp-1"} if i == 2 else {})}
        assert e["body"] == f"node-{i}" and e["props"] == user and e["attempt"] == 1
        assert e["tag"] == ["TagA", "TagB", None][i] and e["keys"] == (["nk1", "nk2"], [], [])[i]
        assert e["group"] == [None, None, "grp-1"][i]
    red = of("redelivered")[0]
    assert [m["id"] for m in red["first"]] == [red["id"]] and [m["attempt"] for m in red["first"]] == [1]
    assert [m["id"] for m in red["second"]] == [red["id"]] and [m["attempt"] for m in red["second"]] == [2]

    # PushConsumer
    assert of("pushed")[0]["bodies"] == [f"push-{i}" for i in range(5)]

    # delay message: not before its time (3 s, less a small margin for the clocks)
    (delayed,) = of("delayed")
    assert delayed["id"] == delayed["sent_id"] and delayed["body"] == "later"
    assert delayed["age_ms"] >= 2500, delayed

    # transactions: commit delivered, rollback never, the orphan after the broker's check-back
    ids = of("tx_sent")[0]["ids"]
    assert sorted(e["body"] for e in of("tx_got")) == ["commit", "orphan"]
    assert {e["id"] for e in of("tx_got")} == {ids["commit"], ids["orphan"]}
    checks = of("check")
    assert checks and {c["id"] for c in checks} == {ids["orphan"]}

    # changeInvisibleDuration: the new 4 s holds, not the first 1 s
    (late,) = of("late")
    assert late["n"] == 1 and late["same"] and late["attempt"] == 2 and late["after_ms"] >= 3500, late

    # DLQ after retryMaxTimes + 1 deliveries, found in the store
    (dlq,) = of("dlq")
    assert dlq["attempts"] == [1, 2] and set(dlq["ids"]) == {dlq["id"]} and dlq["after"] == 0, dlq
    res = grpc_server.broker.store.get_messages("%DLQ%N5DlqGroup", 0, 0, 10)
    stored = [decode_message(bytes(b)) for b in res.buffers]
    assert [(m.properties["UNIQ_KEY"], m.body) for m in stored] == [(dlq["id"], b"poison")]

    # FIFO: each message group consumed in order, each message once, from one queue
    log = of("fifo")
    for g in (0, 1):
        got = [(e["body"], e["attempt"]) for e in log if e["group"] == f"fifo-{g}"]
        assert got == [(f"g{g}-{i}", 1) for i in range(5)], (g, got)
    stored = sorted(grpc_server.broker.store.get_max_offset("N5Fifo", q) for q in range(4))
    assert sum(stored) == 10 and all(n in (0, 5, 10) for n in stored), stored
