"""format("rocketmq") with the real Java side: the Java 4.9.8 broker as a source (what the Java producer sent
is exactly what Spark reads), and a stream's consumer group as the kit's mqadmin sees it, on the Java broker
and on rmqd. Java tests are core tests: without Java or the kit they fail (javakit.require_kit), never skip."""
from __future__ import annotations

import base64
import re
import time

import pytest

from javakit import require_kit, run_java
from scenarios import create_topic, wait_for

pytest.importorskip("pyspark", reason="the spark extra (pip install -e '.[test]') is required")

pytestmark = pytest.mark.timeout(300)      # a Spark job's first run on a loaded 2-core host

COLS = ["partition", "offset", "key", "value", "tags", "msgId", "commitLogOffset", "num"]


def send_known(ns: str, topic: str, count: int, queues: int = 4) -> list[dict]:
    """The Java producer sends ``count`` known messages (KnownMessages.java); returns what it sent and where."""
    res = run_java("KnownMessages", ns, topic, str(count), str(queues), timeout=120)
    sent = res.events_of("sent")
    assert res.returncode == 0 and len(sent) == count, res.stderr[-3000:]
    assert all(e["status"] == "SEND_OK" for e in sent), sent[:3]
    return sent


def expected(sent: list[dict]) -> list[tuple]:
    return sorted((e["queue"], e["offset"], e["keys"].encode(), base64.b64decode(e["body"]), e["tags"], e["msgId"],
                   int(e["offsetMsgId"][-16:], 16), str(e["i"])) for e in sent)


def spark_rows(df) -> list[tuple]:
    got = []
    for r in df.collect():
        headers = {h.key: bytes(h.value).decode() for h in r.headers}
        got.append((r.partition, r.offset, bytes(r.key), bytes(r.value), r.tags, r.msgId, r.commitLogOffset,
                    headers.pop("num", None)))
        assert set(headers) <= {"CLUSTER"}, headers          # the Java broker stamps its cluster name
    return sorted(got)


def progress(shell, ns: str, group: str, topic: str) -> dict[int, tuple[int, int]]:
    """queueId -> (broker offset, consumer offset) as `mqadmin consumerProgress -g` prints them."""
    res = shell.run("consumerProgress", "-n", ns, "-g", group)
    rows = {}
    for line in res.stdout.splitlines():
        f = line.split()
        if f and f[0] == topic:
            rows[int(f[2])] = (int(f[3]), int(f[4]))
    return rows


def stream_group(spark, ns: str, topic: str, group: str, ckpt: str, shell, want: dict[int, int]) -> tuple[str, str]:
    """A running stream (1 s trigger) with ``group`` + commitOffsets: waits until mqadmin shows the group
    online as a pull consumer and every queue consumed up to ``want``; stops it; returns the output of
    consumerConnection and consumerStatus seen while it ran."""
    q = (spark.readStream.format("rocketmq").option("nameServer", ns).option("topic", topic)
         .option("startingOffsets", "earliest").option("group", group).option("commitOffsets", "true")
         .option("subExpression", "TagA || TagB").load()
         .writeStream.format("noop").option("checkpointLocation", ckpt).trigger(processingTime="1 second").start())

    def caught_up():
        assert q.exception() is None, q.exception()
        now = progress(shell, ns, group, topic)
        return now if {k: c for k, (_b, c) in now.items()} == want else None
    try:
        got = wait_for(caught_up, 120, interval=1.0, what=f"mqadmin consumerProgress -g {group} at {want}")
        assert all(b == c for b, c in got.values()), got                       # no lag left
        conn = shell.run("consumerConnection", "-n", ns, "-g", group).stdout
        status = shell.run("consumerStatus", "-n", ns, "-g", group)
    finally:
        q.stop()
    return conn, status.stdout + status.stderr


def assert_pull_consumer(seen: tuple[str, str], topic: str) -> None:
    conn, status = seen
    assert "ConsumeType: CONSUME_ACTIVELY" in conn and "MessageModel: CLUSTERING" in conn, conn
    assert "spark_rmqd_" in conn, conn                                            # the driver's client id
    assert re.search(rf"^{topic}\s+TagA \|\| TagB$", conn, re.M), conn          # its subscription
    # consumerStatus got the driver's ConsumerRunningInfo (relayed by the broker) and analysed it
    assert re.search(r"^1\s+\S+@spark_rmqd_\d+\s+V\d", status, re.M), status
    assert "Same subscription in the same group of consumer" in status and "Rebalance OK" in status, status
    assert "Exception" not in status, status


def test_java_broker_is_a_source_and_shows_the_streams_group(spark, reference_cluster, mqadmin_shell, tmp_path):
    require_kit()
    ns, topic, group = reference_cluster.namesrv_addr, "SparkFromJava", "spark_java_cg"
    create_topic(reference_cluster.broker_addr, topic, 4)
    sent = send_known(ns, topic, 240)
    df = spark.read.format("rocketmq").option("nameServer", ns).option("topic", topic).load()
    assert spark_rows(df) == expected(sent)
    assert {r.brokerName for r in df.select("brokerName").distinct().collect()} == {"broker-a"}

    per_queue = {q: sum(1 for e in sent if e["queue"] == q) for q in range(4)}
    seen = stream_group(spark, ns, topic, group, str(tmp_path / "ckpt"), mqadmin_shell, per_queue)
    assert_pull_consumer(seen, topic)
    time.sleep(0.5)
    after = mqadmin_shell.run("consumerConnection", "-n", ns, "-g", group).stdout
    assert "CONSUME_ACTIVELY" not in after, after                       # stop() unregistered the client


def test_kit_mqadmin_shows_the_streams_group_on_rmqd(spark, rmqd_server, mqadmin_shell, tmp_path):
    ns, topic, group = rmqd_server.namesrv_addr, "SparkProgress", "spark_rmqd_cg"
    create_topic(rmqd_server.broker_addr, topic, 4)
    sent = send_known(ns, topic, 40)
    per_queue = {q: sum(1 for e in sent if e["queue"] == q) for q in range(4)}
    seen = stream_group(spark, ns, topic, group, str(tmp_path / "ckpt"), mqadmin_shell, per_queue)
    assert_pull_consumer(seen, topic)
