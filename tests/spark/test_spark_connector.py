"""format("rocketmq") in a real local[2] Spark: batch reads (broker and store directory), pushdown,
streaming with restart, the sink, and errors that name the option."""
from __future__ import annotations

import json
import os
import random
import time

import pytest

from rmqd.remoting.client import BlockingClient
from rmqd.remoting.command import new_request
from tests.kit import clients
from tests.kit.clients import create_topic

pytestmark = pytest.mark.slow

pytest.importorskip("pyspark", reason="the spark extra (pip install -e '.[test]') is required")

COLS = ["partition", "offset", "key", "value", "tags", "topic"]


def send_many(addr: str, topic: str, n: int, queues: int = 4, seed: int = 7, tag_of=None) -> list[dict]:
    """Sends over the wire; returns what the broker acknowledged (queue, offset) with each message."""
    rnd = random.Random(seed)
    sent = []
    with BlockingClient(addr) as c:
        for i in range(n):
            body = rnd.randbytes(rnd.randint(0, 2000))
            tag = tag_of(i) if tag_of else ("TagA" if i % 3 == 0 else "TagB")
            props = f"KEYS\x01key-{i}\x02TAGS\x01{tag}\x02num\x01{i}\x02"
            r = clients.send_v2(c, topic, body, i % queues, props, group="PG_spark")
            assert r.code == 0, r.remark
            sent.append({"partition": int(r.ext_fields["queueId"]), "offset": int(r.ext_fields["queueOffset"]),
                         "key": f"key-{i}".encode(), "value": body, "tags": tag, "topic": topic, "num": str(i)})
    return sent


def rows(df, cols=COLS) -> list[tuple]:
    return sorted(tuple(bytes(v) if isinstance(v, (bytearray, memoryview)) else v for v in r)
                  for r in df.select(*cols).collect())


def expected(sent, cols=COLS) -> list[tuple]:
    return sorted(tuple(s[c] for c in cols) for s in sent)


@pytest.fixture(scope="module")
def loaded(broker):
    create_topic(broker.broker_addr, "SparkT1")
    sent = send_many(broker.broker_addr, "SparkT1", 1200)
    return broker, sent


def reader(spark, broker, **opts):
    r = spark.read.format("rocketmq").option("nameServer", broker.namesrv_addr)
    for k, v in opts.items():
        r = r.option(k, v)
    return r


def test_batch_read_from_the_broker_is_byte_for_byte_what_was_sent(spark, loaded):
    broker, sent = loaded
    df = reader(spark, broker, topic="SparkT1", maxRecordsPerPartition="100").load()
    assert df.rdd.getNumPartitions() >= 12
    assert rows(df) == expected(sent)
    one = df.where("offset = 0 and partition = 1").collect()[0]
    assert one.brokerName == "broker-a" and one.timestampType == 1 and len(one.msgId) == 32
    assert {h.key: bytes(h.value) for h in one.headers} == {"num": b"1"}
    assert one.timestamp is not None and one.bornTimestamp is not None and one.commitLogOffset >= 0


def test_offset_ranges_timestamps_and_filters(spark, loaded):
    broker, sent = loaded
    spec = json.dumps({"SparkT1": {"broker-a": {"0": 10, "1": -2, "2": -1, "3": 5}}})
    end = json.dumps({"SparkT1": {"broker-a": {"0": 20, "1": 3, "2": -1, "3": -1}}})
    got = rows(reader(spark, broker, topic="SparkT1", startingOffsets=spec, endingOffsets=end).load())
    want = [s for s in sent if (s["partition"] == 0 and 10 <= s["offset"] < 20) or
            (s["partition"] == 1 and s["offset"] < 3) or (s["partition"] == 3 and s["offset"] >= 5)]
    assert got == expected(want)
    tags = rows(reader(spark, broker, topic="SparkT1", subExpression="TagA").load())
    assert tags == expected([s for s in sent if s["tags"] == "TagA"])
    sql = rows(reader(spark, broker, topic="SparkT1", sql="num >= 1000 AND TAGS = 'TagB'").load())
    assert sql == expected([s for s in sent if int(s["num"]) >= 1000 and s["tags"] == "TagB"])
    future = str(int(time.time() * 1000) + 3_600_000)
    assert reader(spark, broker, topic="SparkT1", startingTimestamp=future).load().count() == 0


def test_topic_lists_patterns_latest_and_a_starting_timestamp_mid_data(spark, broker):
    create_topic(broker.broker_addr, "SparkOptA")
    create_topic(broker.broker_addr, "SparkOptB")
    a_early = send_many(broker.broker_addr, "SparkOptA", 20, seed=11)
    time.sleep(0.01)
    cut_ms = int(time.time() * 1000)                  # every earlier message was stored before it
    time.sleep(0.01)
    a_late = send_many(broker.broker_addr, "SparkOptA", 20, seed=12)
    b = send_many(broker.broker_addr, "SparkOptB", 30, seed=13)
    a_all = a_early + a_late
    both = expected(a_all + b)
    assert rows(reader(spark, broker, topic="SparkOptA, SparkOptB").load()) == both
    assert rows(reader(spark, broker, topicPattern="SparkOpt[AB]").load()) == both
    assert rows(reader(spark, broker, topicPattern="SparkOpt.*", endingOffsets="latest").load()) == both
    assert reader(spark, broker, topic="SparkOptA", startingOffsets="latest").load().count() == 0
    assert rows(reader(spark, broker, topic="SparkOptA", startingTimestamp=str(cut_ms)).load()) == expected(a_late)


def test_a_narrower_schema_reads_only_its_columns(spark, loaded):
    """The Python data source API has no column pruning: `.schema(...)` with a subset of the columns is how a job
    ships fewer columns from the Python worker; a column that is not the connector's fails naming it."""
    broker, sent = loaded
    store_dir = broker.broker.store.config.store_root_dir
    broker.broker.store.flush()
    for r in (reader(spark, broker, topic="SparkT1"),
              spark.read.format("rocketmq").option("path", store_dir).option("topic", "SparkT1")):
        df = r.schema("offset bigint, value binary, partition int").load()
        assert df.columns == ["offset", "value", "partition"]
        assert rows(df, ["partition", "offset", "value"]) == expected(sent, ["partition", "offset", "value"])
    with pytest.raises(Exception, match="schema: 'body' is not a column of format"):
        reader(spark, broker, topic="SparkT1").schema("body binary").load().collect()
    with pytest.raises(Exception, match="schema: column 'offset' is int64, not string"):
        reader(spark, broker, topic="SparkT1").schema("offset string").load().collect()


def test_store_directory_read_equals_broker_read_and_prunes_files(spark, loaded, tmp_path):
    broker, sent = loaded
    broker.broker.store.flush()
    store_dir = broker.broker.store.config.store_root_dir
    all_cols = ["partition", "offset", "key", "value", "tags", "topic", "msgId", "commitLogOffset", "timestamp",
                "bornTimestamp", "brokerName"]
    from_broker = rows(reader(spark, broker, topic="SparkT1").load(), all_cols)
    from_dir = rows(spark.read.format("rocketmq").option("path", store_dir).option("topic", "SparkT1").load(),
                    all_cols)
    assert from_dir == from_broker and len(from_dir) == len(sent)
    access = tmp_path / "opened.txt"
    df = (spark.read.format("rocketmq").option("path", store_dir).option("topic", "SparkT1")
          .option("filterPushdown", "true").option("fileAccessLog", str(access)).load()
          .where("partition = 2 AND offset >= 250"))
    got = rows(df)
    assert got == expected([s for s in sent if s["partition"] == 2 and s["offset"] >= 250])
    opened = set(access.read_text().split())
    cq_files = [f for f in opened if "/consumequeue/" in f]
    all_cq = sum(len(files) for _d, _s, files in os.walk(os.path.join(store_dir, "consumequeue", "SparkT1")))
    all_cl = len(os.listdir(os.path.join(store_dir, "commitlog")))
    assert cq_files and all("/consumequeue/SparkT1/2/" in f for f in cq_files)   # other queues pruned
    assert len(cq_files) < all_cq / 4 + 1
    assert len([f for f in opened if "/commitlog/" in f]) < all_cl


def test_store_directory_prunes_topics_and_store_times(spark, loaded, tmp_path):
    """`topic = ..` opens no file of another topic; `timestamp >= t` finds the first offset by binary search,
    so the CommitLog files before t's stay closed."""
    from pyspark.sql import functions as F
    broker, sent = loaded
    create_topic(broker.broker_addr, "SparkPrune")
    other = send_many(broker.broker_addr, "SparkPrune", 40, seed=5)
    broker.broker.store.flush()
    store_dir = broker.broker.store.config.store_root_dir
    commitlogs = sorted(os.listdir(os.path.join(store_dir, "commitlog")))

    df = (spark.read.format("rocketmq").option("path", store_dir).option("topicPattern", "SparkT1|SparkPrune")
          .option("filterPushdown", "true").option("fileAccessLog", str(tmp_path / "topic.txt")).load()
          .where("topic = 'SparkPrune'"))
    assert rows(df) == expected(other)
    opened = set((tmp_path / "topic.txt").read_text().split())
    assert opened and not [f for f in opened if "/consumequeue/" in f and "/consumequeue/SparkPrune/" not in f]
    assert os.path.join(store_dir, "commitlog", commitlogs[0]) not in opened     # SparkT1's first file

    stamps = sorted(r.timestamp for r in spark.read.format("rocketmq").option("path", store_dir)
                    .option("topic", "SparkT1").load().select("timestamp").collect())
    cut = stamps[len(stamps) * 2 // 3]
    df = (spark.read.format("rocketmq").option("path", store_dir).option("topic", "SparkT1")
          .option("filterPushdown", "true").option("fileAccessLog", str(tmp_path / "time.txt")).load()
          .where(F.col("timestamp") >= F.lit(cut)))
    got = df.select("timestamp", *COLS).collect()
    assert len(got) == sum(1 for t in stamps if t >= cut) and all(r.timestamp >= cut for r in got)
    by_key = {s["key"]: s for s in sent}
    assert all(by_key[bytes(r.key)]["value"] == bytes(r.value) for r in got)
    opened_cl = {f for f in (tmp_path / "time.txt").read_text().split() if "/commitlog/" in f}
    assert os.path.join(store_dir, "commitlog", commitlogs[0]) not in opened_cl
    assert len(opened_cl) < len(commitlogs) - 1


def test_streaming_available_now_restarts_without_gap_or_duplicate(spark, broker, tmp_path):
    create_topic(broker.broker_addr, "SparkStream")
    first = send_many(broker.broker_addr, "SparkStream", 400, seed=1)
    out, ckpt = str(tmp_path / "out"), str(tmp_path / "ckpt")

    def run_once():
        q = (spark.readStream.format("rocketmq").option("nameServer", broker.namesrv_addr)
             .option("topic", "SparkStream").option("startingOffsets", "earliest")
             .option("maxOffsetsPerTrigger", "150").option("group", "spark_stream_cg")
             .option("commitOffsets", "true").load()
             .writeStream.format("parquet").option("path", out).option("checkpointLocation", ckpt)
             .trigger(availableNow=True).start())
        assert q.awaitTermination(120)
        assert q.exception() is None
    run_once()
    assert rows(spark.read.parquet(out)) == expected(first)
    assert_group_progress(broker, "spark_stream_cg", "SparkStream", 400)
    second = send_many(broker.broker_addr, "SparkStream", 300, seed=2)
    run_once()
    assert rows(spark.read.parquet(out)) == expected(first + second)
    assert_group_progress(broker, "spark_stream_cg", "SparkStream", 700)
    # maxOffsetsPerTrigger=150, split over the 4 queues by backlog (150 * 100 // 400 = 37 each, then what is
    # left): the batches' end offsets in the checkpoint
    ends = [json.loads(open(os.path.join(ckpt, "offsets", str(b))).read().splitlines()[2])["SparkStream"]["broker-a"]
            for b in range(6)]
    assert not os.path.exists(os.path.join(ckpt, "offsets", "6"))
    per_queue = [[e[str(q)] - (ends[b - 1][str(q)] if b else 0) for q in range(4)] for b, e in enumerate(ends)]
    assert per_queue == [[37] * 4, [37] * 4, [26] * 4, [37] * 4, [37] * 4, [1] * 4]


def assert_group_progress(broker, group: str, topic: str, total: int) -> None:
    """Every batch of the AvailableNow run is committed when the query stops (the last one too), and the
    group is a registered pull consumer: its retry topic exists, so `rmqd admin consumerProgress -g` (as
    mqadmin's) lists each queue with no lag."""
    import contextlib
    import io
    from rmqd.admin.main import main as admin_cli
    with BlockingClient(broker.broker_addr) as c:
        committed = []
        for q in range(4):
            r = c.invoke(new_request(14, {"consumerGroup": group, "topic": topic, "queueId": str(q)}))
            mx = c.invoke(new_request(30, {"topic": topic, "queueId": str(q)}))
            assert r.code == 0 and int(r.ext_fields["offset"]) == int(mx.ext_fields["offset"]), (q, r.ext_fields)
            committed.append(int(r.ext_fields["offset"]))
    assert sum(committed) == total
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert admin_cli(["consumerProgress", "-n", broker.namesrv_addr, "-g", group]) == 0
    lines = [ln.split() for ln in out.getvalue().splitlines() if ln.startswith(topic)]
    assert sorted((int(f[2]), int(f[4]), int(f[5])) for f in lines) == \
        [(q, committed[q], 0) for q in range(4)], out.getvalue()


def test_fail_on_data_loss_after_retention_deleted_unread_messages(spark, tmp_path, caplog):
    """Real data loss: a stream read offsets 0..50, then retention (deleteExpiredCommitLog on 64 KB CommitLog
    files kept 0 hours) deleted the files holding the next ones. failOnDataLoss=true fails the query naming the
    option; false skips ahead to the broker's min offset with a warning; a pull that meets deleted offsets
    (PULL_OFFSET_MOVED) does the same."""
    import contextlib
    import io
    import logging
    from pyspark.errors import StreamingQueryException
    from rmqd.admin.main import main as admin_cli
    from rmqd.spark.remote import ConnectorError, QueueRef
    from rmqd.spark.source import QueueRange, StreamReader, read_from_broker
    from rmqd.testing import EmbeddedServer
    server = EmbeddedServer(store_dir=str(tmp_path / "store"), broker_properties=dict(
        mapedFileSizeCommitLog=64 * 1024, mapedFileSizeConsumeQueue=20 * 100, fileReservedTime=0,
        deleteWhen="99")).start()                       # retention only when asked
    try:
        create_topic(server.broker_addr, "SparkLoss", 1)
        first = send_many(server.broker_addr, "SparkLoss", 50, queues=1, seed=3)
        out, ckpt = str(tmp_path / "out"), str(tmp_path / "ckpt")

        def run(fail_on_data_loss: str):
            q = (spark.readStream.format("rocketmq").option("nameServer", server.namesrv_addr)
                 .option("topic", "SparkLoss").option("startingOffsets", "earliest")
                 .option("failOnDataLoss", fail_on_data_loss).load()
                 .writeStream.format("parquet").option("path", out).option("checkpointLocation", ckpt)
                 .trigger(availableNow=True).start())
            try:
                assert q.awaitTermination(120)
            except StreamingQueryException as exc:
                return exc
            return q.exception()
        assert run("true") is None
        later = send_many(server.broker_addr, "SparkLoss", 250, queues=1, seed=4)
        with contextlib.redirect_stdout(io.StringIO()):
            assert admin_cli(["deleteExpiredCommitLog", "-n", server.namesrv_addr]) == 0
        from rmqd.spark.remote import Cluster
        cluster = Cluster(server.namesrv_addr)
        ref = QueueRef("SparkLoss", "broker-a", 0)
        mn = cluster.min_offset(server.broker_addr, ref)
        cluster.clients.close()
        assert 50 < mn < 290                       # offsets 50..mn are gone
        err = run("true")
        assert err is not None and f"failOnDataLoss: SparkLoss/broker-a/0: offsets [50, {mn}) were deleted" in str(err)
        assert run("false") is None                # the same checkpoint: the failed batch again, skipping ahead
        assert rows(spark.read.parquet(out)) == expected(first + [m for m in later if m["offset"] >= mn])

        # the warning (logged on the driver's reader), and a pull meeting deleted offsets during a read
        base = {"nameServer": server.namesrv_addr, "topic": "SparkLoss", "failOnDataLoss": "false"}
        r = StreamReader(base)
        with caplog.at_level(logging.WARNING, logger="rmqd.spark.source"):
            (p,) = r.partitions({"SparkLoss": {"broker-a": {"0": 50}}}, {"SparkLoss": {"broker-a": {"0": 300}}})
        r.stop()
        assert (p.start, p.end) == (mn, 300)
        assert f"failOnDataLoss=false: SparkLoss/broker-a/0: offsets [50, {mn}) were deleted" in caplog.text
        caplog.clear()
        part = QueueRange("SparkLoss", "broker-a", server.broker_addr, 0, 10, 300, fail_on_data_loss=True)
        with pytest.raises(ConnectorError, match=rf"failOnDataLoss: .*offsets \[10, {mn}\) were deleted"):
            list(read_from_broker(part, "g", "TAG", "*"))
        part.fail_on_data_loss = False
        with caplog.at_level(logging.WARNING, logger="rmqd.spark.source"):
            got = [o for b in read_from_broker(part, "g", "TAG", "*") for o in b.column("offset").to_pylist()]
        assert got == list(range(mn, 300)) and f"offsets [10, {mn}) were deleted" in caplog.text
    finally:
        server.stop()


def test_sink_round_trip_and_the_cpp_client_reads_it(spark, broker, client_python_cpp1):
    from pyspark.sql import Row
    create_topic(broker.broker_addr, "SparkSink")
    data = [Row(value=(f"value-{i}-" * (i % 7 + 1)).encode(), key=f"k{i}", tags="TagS" if i % 2 else None,
                headers=[{"key": "origin", "value": b"spark"}]) for i in range(300)]
    df = spark.createDataFrame(data, "value binary, key string, tags string, "
                                     "headers array<struct<key:string,value:binary>>")
    df.repartition(2).write.format("rocketmq").option("nameServer", broker.namesrv_addr) \
        .option("topic", "SparkSink").mode("append").save()
    back = reader(spark, broker, topic="SparkSink").load()
    got = sorted((r.key.decode(), bytes(r.value), r.tags, tuple((h.key, bytes(h.value)) for h in r.headers))
                 for r in back.collect())
    assert got == sorted((d.key, d.value, d.tags, (("origin", b"spark"),)) for d in data)
    # the same key always lands in the same queue
    from pyspark.sql import functions as F
    assert back.groupBy("key").agg(F.countDistinct("partition").alias("n")).where("n > 1").count() == 0
    from scenarios import PULL_CONSUMER, run         # compat_tests/ (pyproject's pythonpath)
    res = run(client_python_cpp1, PULL_CONSUMER, broker.namesrv_addr,
              dict(topic="SparkSink", group="CG_spark_sink", expect=300, timeout=60), timeout=90)
    assert res.returncode == 0 and not res.timed_out, res.stderr[-2000:]
    assert sorted((e["keys"], e["body"]) for e in res.events_of("recv")) == \
        sorted((d.key, d.value.decode()) for d in data)


def test_streaming_sink_routes_rows_by_their_topic_column(spark, broker, tmp_path):
    """readStream -> writeStream.format("rocketmq"): each row goes to the topic its `topic` column names,
    with its key, tags and headers."""
    for t in ("SparkSinkSrc", "SparkSinkEven", "SparkSinkOdd"):
        create_topic(broker.broker_addr, t)
    sent = send_many(broker.broker_addr, "SparkSinkSrc", 60, seed=21)
    q = (spark.readStream.format("rocketmq").option("nameServer", broker.namesrv_addr)
         .schema("value binary, key binary, tags string, headers array<struct<key:string,value:binary>>, "
                 "partition int")                  # only the columns the sink needs leave the Python worker
         .option("topic", "SparkSinkSrc").option("startingOffsets", "earliest").load()
         .selectExpr("value", "key", "tags", "headers",
                     "IF(partition % 2 = 0, 'SparkSinkEven', 'SparkSinkOdd') AS topic")
         .writeStream.format("rocketmq").option("nameServer", broker.namesrv_addr)
         .option("checkpointLocation", str(tmp_path / "ckpt")).trigger(availableNow=True).start())
    assert q.awaitTermination(120) and q.exception() is None

    def read(topic):
        return sorted((bytes(r.key), bytes(r.value), r.tags, tuple((h.key, bytes(h.value)) for h in r.headers))
                      for r in reader(spark, broker, topic=topic).load().collect())

    def want(parity):
        return sorted((m["key"], m["value"], m["tags"], (("num", m["num"].encode()),)) for m in sent
                      if m["partition"] % 2 == parity)
    assert read("SparkSinkEven") == want(0) and read("SparkSinkOdd") == want(1)


def test_bad_rows_fail_the_task_naming_it_and_every_row_before_it_is_sent(spark, broker):
    """At-least-once, row by row: the task fails at the bad row (partition and row named), after sending every
    row before it (the error says how many), and sends neither it nor any row after it."""
    create_topic(broker.broker_addr, "SparkBad")
    create_topic(broker.broker_addr, "SparkBadNull")
    good = [f"good-{i}".encode() for i in range(300)]     # batches of 1000 bytes: some sent, some buffered
    data = [(v,) for v in good] + [(b"x" * 1001,)] + [(f"after-{i}".encode(),) for i in range(10)]
    df = spark.createDataFrame(data, "value binary").coalesce(1)
    with pytest.raises(Exception, match=r"partition 0, row 300: 'value' is 1001 bytes, over maxMessageSize 1000; "
                                        r"the 300 rows of this task before it were sent, it and the rows after"):
        df.write.format("rocketmq").option("nameServer", broker.namesrv_addr).option("topic", "SparkBad") \
            .option("maxMessageSize", "1000").mode("append").save()
    back = [bytes(r.value) for r in reader(spark, broker, topic="SparkBad").load().select("value").collect()]
    assert sorted(back) == sorted(good)
    # the bad row in the second task: its partition id comes from Spark's TaskContext
    rdd = spark.sparkContext.parallelize([(b"a",), (b"b",), (None,), (b"c",)], 2)
    with pytest.raises(Exception, match=r"partition 1, row 0: 'value' is null .*; the 0 rows of this task"):
        spark.createDataFrame(rdd, "value binary").write.format("rocketmq") \
            .option("nameServer", broker.namesrv_addr).option("topic", "SparkBadNull").mode("append").save()
    back = {bytes(r.value) for r in reader(spark, broker, topic="SparkBadNull").load().select("value").collect()}
    assert back <= {b"a", b"b"}                 # the first task may finish or be cancelled; "c" never goes


def test_a_kept_connection_the_broker_closed_is_replaced(broker):
    """The driver keeps its connections between triggers; the Java broker closes one idle for 120 s. The next
    request reconnects once instead of failing the query."""
    from rmqd.spark.remote import Cluster, QueueRef
    create_topic(broker.broker_addr, "SparkConn", 1)
    send_many(broker.broker_addr, "SparkConn", 3, queues=1)
    cluster = Cluster(broker.namesrv_addr)
    ref = QueueRef("SparkConn", "broker-a", 0)
    try:
        assert cluster.max_offset(broker.broker_addr, ref) == 3
        local = "%s:%d" % cluster.clients.get(broker.broker_addr).sock.getsockname()
        server = broker.broker.server
        (conn,) = [c for c in server.connections if c.remote_address == local]
        broker._loop.call_soon_threadsafe(conn.close)          # the broker hangs up, as on an idle timeout
        deadline = time.monotonic() + 10
        while conn in server.connections and time.monotonic() < deadline:
            time.sleep(0.05)
        assert conn not in server.connections
        assert cluster.max_offset(broker.broker_addr, ref) == 3
        assert cluster.clients.get(broker.broker_addr).sock.getsockname() != local
    finally:
        cluster.clients.close()


def test_a_streams_group_answers_consumer_running_info(broker):
    """`mqadmin consumerStatus -g` asks each client of the group for its ConsumerRunningInfo (307, relayed by
    the broker over the client's heartbeat connection). The stream's group answers as a Java pull consumer
    does, while the query runs and within a second; a connection the broker closed is replaced by the next
    heartbeat."""
    from rmqd.spark.group import GroupRegistration
    create_topic(broker.broker_addr, "SparkStatus", 2)
    reg = GroupRegistration("spark_status_cg", ["SparkStatus"], "TAG", "TagA || TagB",
                            lambda: [broker.broker_addr], interval=0.5).start()

    def running_info():
        with BlockingClient(broker.broker_addr) as c:
            t0 = time.monotonic()
            r = c.invoke(new_request(307, {"consumerGroup": "spark_status_cg", "clientId": reg.client_id,
                                           "jstackEnable": "false"}), timeout=10)
            return r, time.monotonic() - t0
    try:
        r, took = running_info()
        assert r.code == 0, (r.code, r.remark)
        assert took < 2.0, took
        info = json.loads(r.body_bytes())
        props = info["properties"]
        assert props["PROP_CONSUME_TYPE"] == "CONSUME_ACTIVELY" and props["consumerGroup"] == "spark_status_cg"
        assert int(props["PROP_CONSUMER_START_TIMESTAMP"]) == reg.start_ms
        (sub,) = info["subscriptionSet"]
        assert (sub["topic"], sub["subString"], sorted(sub["tagsSet"])) == ("SparkStatus", "TagA || TagB",
                                                                            ["TagA", "TagB"])
        assert info["mqTable"] == {}
        local = "%s:%d" % reg.clients.connected(broker.broker_addr).sock.getsockname()
        server = broker.broker.server
        (conn,) = [c for c in server.connections if c.remote_address == local]
        broker._loop.call_soon_threadsafe(conn.close)          # the broker hangs up
        def reconnected():
            c = reg.clients.connected(broker.broker_addr)
            return c is not None and "%s:%d" % c.sock.getsockname() != local
        deadline = time.monotonic() + 10
        while not reconnected() and time.monotonic() < deadline:   # the next heartbeat opens a new connection
            time.sleep(0.1)
        assert reconnected()
        time.sleep(0.3)
        r, _ = running_info()
        assert r.code == 0 and json.loads(r.body_bytes())["properties"]["consumerGroup"] == "spark_status_cg"
    finally:
        reg.close()
    r, _ = running_info()
    assert r.code != 0 and "not online" in r.remark, (r.code, r.remark)


def test_a_streams_group_refuses_what_a_java_pull_consumer_refuses():
    """Requests the driver has no answer for get the Java client's codes and remarks: another group's running
    info is SYSTEM_ERROR, any other two-way request REQUEST_CODE_NOT_SUPPORTED; a oneway one gets nothing."""
    from rmqd.remoting.command import RPC_ONEWAY, RemotingCommand
    from rmqd.spark.group import GroupRegistration

    class Conn:
        def __init__(self):
            self.server_requests, self.sent = [], []

        def send(self, cmd):
            self.sent.append(cmd)
    reg = GroupRegistration("spark_refuse_cg", ["T"], "TAG", "*", lambda: [])
    conn = Conn()
    conn.server_requests += [RemotingCommand(307, {"consumerGroup": "other_cg", "clientId": "x"}, None, None, 1, 0),
                             RemotingCommand(999, None, None, None, 2, 0),
                             RemotingCommand(40, None, None, None, 3, RPC_ONEWAY)]
    reg._answer(conn)
    assert conn.server_requests == []
    assert [(r.opaque, r.code, r.remark) for r in conn.sent] == [
        (1, 1, "The Consumer Group <other_cg> not exist in this consumer"),
        (2, 3, " request type 999 not supported")]


@pytest.mark.parametrize("opts,needle", [
    ({"topic": "NoSuchTopic"}, "option 'topic': topic 'NoSuchTopic' does not exist"),
    ({"topic": "SparkT1", "startingOffsets": "{not json"}, "option 'startingOffsets'"),
    ({"topic": "SparkT1", "nameServer": "127.0.0.1:1"}, "option 'nameServer': cannot reach"),
])
def test_errors_name_the_option(spark, loaded, opts, needle):
    broker, _ = loaded
    r = spark.read.format("rocketmq").option("nameServer", broker.namesrv_addr)
    for k, v in opts.items():
        r = r.option(k, v)
    with pytest.raises(Exception, match=needle.replace("(", r"\(").replace("{", r"\{")):
        r.load().collect()


def test_sink_save_modes_name_append(spark, broker):
    """Spark refuses its own default save mode (ErrorIfExists) for a Python data source before the sink is asked,
    naming Append; the sink refuses Overwrite (a topic cannot be overwritten) naming `.mode("append")`; append
    sends (the documented form)."""
    create_topic(broker.broker_addr, "SparkModes")
    df = spark.createDataFrame([(b"m",)], "value binary")

    def writer():
        return df.write.format("rocketmq").option("nameServer", broker.namesrv_addr).option("topic", "SparkModes")
    with pytest.raises(Exception, match=r'UNSUPPORTED_DATA_SOURCE_SAVE_MODE.*"Append"'):
        writer().save()
    with pytest.raises(Exception, match=r'only appends messages to a topic .*use \.mode\("append"\)'):
        writer().mode("overwrite").save()
    writer().mode("append").save()
    assert [bytes(r.value) for r in reader(spark, broker, topic="SparkModes").load().collect()] == [b"m"]
