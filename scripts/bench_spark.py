"""The Spark connector's speed in local[2], next to Parquet on the same rows in the same run.

1. N messages of SIZE bytes are sent to an embedded rmqd (4 queues; not timed).
2. Timed, each as a full action (every row's body is read: count and summed body length, checked):
   - batch read via the broker: spark.read.format("rocketmq") with nameServer/topic;
   - batch read from the store directory: the ``path`` option (no broker involved), all columns and, with
     ``.schema("value binary")``, the value column only (what Parquet's column pruning reads);
   - the same rows written to Parquet once, then spark.read.parquet of them;
   - "full rows": every column of every row into Spark's ``noop`` sink (no column pruning on either side);
   - the transport ceiling: a Python data source that decodes one real batch of these rows once and yields it
     again and again (no decoding at all), so what is left is Spark's Python data source path itself;
   - the sink: df.write.format("rocketmq") of N rows, next to df.write.parquet of the same rows.
   The reads run once cold (the first query of each kind in a fresh JVM, as a one-off job meets them) and then
   ROUNDS more times; the median of those warm runs is reported beside the cold one (the JVM's JIT favours
   Parquet's reader once warm).

    python scripts/bench_spark.py [--messages 1000000] [--size 1024] [--rounds 3]
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from typing import Callable, Iterator

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition  # noqa: E402

TOPIC = "BenchSpark"


def fill(store, n: int, size: int) -> None:
    from rmqd.store.message import MessageToStore
    body = os.urandom(size)
    batch = []
    for i in range(n):
        batch.append(MessageToStore.create(TOPIC, i % 4, body, {"KEYS": f"k{i}", "TAGS": "T"}))
        if len(batch) == 256:
            for q in range(4):
                store.put_messages([m for m in batch if m.queue_id == q])
            batch = []
    for q in range(4):
        part = [m for m in batch if m.queue_id == q]
        if part:
            store.put_messages(part)
    store.flush()


class _Share(InputPartition):
    def __init__(self, rows: int) -> None:
        self.rows = rows


class _ReplayReader(DataSourceReader):
    """Decodes the first 4096 rows of queue 0 once per task, then yields that batch until the task's share of
    rows is out: Spark's cost of moving these rows from a Python source into the JVM, with no decoding."""

    def __init__(self, options: dict, value_only: bool) -> None:
        self.options, self.value_only = options, value_only

    def partitions(self) -> list:
        n, parts = int(self.options["rows"]), int(self.options["partitions"])
        return [_Share(n // parts + (i < n % parts)) for i in range(parts)]

    def read(self, partition: _Share) -> Iterator:
        from rmqd.spark.source import StoreRange, read_from_store
        batch = next(read_from_store(StoreRange(root=self.options["path"], topic=self.options["topic"],
                                                broker="broker-a", queue_id=0, start=0, end=4096), None, None))
        if self.value_only:
            batch = batch.select(["value"])
        left = partition.rows
        while left > 0:
            out = batch if left >= batch.num_rows else batch.slice(0, left)
            left -= out.num_rows
            yield out


class ReplaySource(DataSource):
    """``format("rmqd_replay")``: the transport ceiling (see ``_ReplayReader``); same schema as the connector."""

    @classmethod
    def name(cls) -> str:
        return "rmqd_replay"

    def schema(self) -> str:
        from rmqd.spark.arrow import DDL
        return DDL

    def reader(self, schema) -> _ReplayReader:
        return _ReplayReader(self.options, len(schema.fields) == 1)


def timed(label: str, n: int, mb: float, fn: Callable[[], None], rounds: int = 0) -> float:
    """Run ``fn`` once cold and ``rounds`` times warm; print both, return the warm median (cold if no rounds)."""
    def once() -> float:
        t0 = time.perf_counter()
        fn()
        return time.perf_counter() - t0
    cold = once()
    warm = [once() for _ in range(rounds)]
    line = f"{label:<38} cold {n / cold:>10,.0f} rows/s {mb / cold:>7.1f} MB/s ({cold:.2f} s)"
    if warm:
        w = statistics.median(warm)
        line += f"   warm {n / w:>10,.0f} rows/s {mb / w:>7.1f} MB/s (median of {rounds}: {w:.2f} s)"
    print(line, flush=True)
    return n / (statistics.median(warm) if warm else cold), n / cold


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--messages", type=int, default=1_000_000)
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--rounds", type=int, default=3, help="warm runs of each read after the cold one")
    a = ap.parse_args()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from benchenv import machine_line
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F
    from rmqd.remoting.client import BlockingClient
    from rmqd.remoting.command import new_request
    from rmqd.testing import EmbeddedServer

    work = tempfile.mkdtemp(prefix="rmqd-bench-spark-")
    server = EmbeddedServer(store_dir=os.path.join(work, "store")).start()
    spark = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
             .config("spark.driver.host", "127.0.0.1").config("spark.driver.bindAddress", "127.0.0.1")
             .config("spark.sql.python.filterPushdown.enabled", "true").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    spark.dataSource.register(ReplaySource)

    def create_topic(name: str) -> None:
        with BlockingClient(server.broker_addr) as c:
            c.invoke(new_request(17, {"topic": name, "defaultTopic": "TBW102", "readQueueNums": 4,
                                      "writeQueueNums": 4, "perm": 6, "topicFilterType": "SINGLE_TAG",
                                      "topicSysFlag": 0, "order": "false"}))
    try:
        create_topic(TOPIC)
        t0 = time.perf_counter()
        fill(server.broker.store, a.messages, a.size)
        n, mb, root = a.messages, a.messages * a.size / 1e6, server.broker.store.config.store_root_dir
        print(f"# {machine_line()}; Spark {spark.version} local[2]")
        print(f"# {n} messages x {a.size} B stored in {time.perf_counter() - t0:.1f} s")

        def counted(df) -> None:
            """Materialise every row and its body; check nothing is missing."""
            got = df.agg(F.count("*").alias("n"), F.sum(F.length("value")).alias("b")).collect()[0]
            assert got.n == n and got.b == n * a.size, (got, n)

        def rows_out(df) -> None:
            """Every column of every row, as Spark's benchmark sink consumes them (no column pruning)."""
            df.write.format("noop").mode("overwrite").save()

        broker = lambda: spark.read.format("rocketmq").option("nameServer", server.namesrv_addr).option("topic", TOPIC)  # noqa: E731
        store = lambda: spark.read.format("rocketmq").option("path", root).option("topic", TOPIC)  # noqa: E731
        replay = lambda: spark.read.format("rmqd_replay").options(path=root, topic=TOPIC, rows=str(n), partitions="4")  # noqa: E731
        pq = os.path.join(work, "rows.parquet")
        broker().load().write.parquet(pq)
        r = a.rounds
        r_broker, _ = timed("read via broker", n, mb, lambda: counted(broker().load()))
        r_dir, c_dir = timed("read from store directory", n, mb, lambda: counted(store().load()), r)
        r_dir_v, c_dir_v = timed("store directory, .schema(value)", n, mb,
                                 lambda: counted(store().schema("value binary").load()), r)
        r_rep_v, _ = timed("ceiling (replay), .schema(value)", n, mb,
                           lambda: counted(replay().schema("value binary").load()), r)
        r_pq, c_pq = timed("read parquet", n, mb, lambda: counted(spark.read.parquet(pq)), r)
        f_dir, cf_dir = timed("full rows: store directory", n, mb, lambda: rows_out(store().load()), r)
        f_rep, _ = timed("full rows: ceiling (replay)", n, mb, lambda: rows_out(replay().load()), r)
        f_pq, cf_pq = timed("full rows: parquet", n, mb, lambda: rows_out(spark.read.parquet(pq)), r)
        rows = spark.read.parquet(pq).select("value", "key", "tags").cache()
        rows.count()
        create_topic(TOPIC + "Out")
        w_sink, _ = timed("write via rocketmq sink", n, mb, lambda: rows.write.format("rocketmq").option(
            "nameServer", server.namesrv_addr).option("topic", TOPIC + "Out").mode("append").save())
        w_pq, _ = timed("write parquet", n, mb, lambda: rows.write.mode("overwrite").parquet(pq + ".out"))
        pct = lambda x, y: f"{100 * x / y:.0f}%"  # noqa: E731
        print(f"store-directory read vs Parquet (goal >= 50%), cold / warm: count+sum(length(value)) "
              f"{pct(c_dir, c_pq)} / {pct(r_dir, r_pq)}; with .schema(value) {pct(c_dir_v, c_pq)} / "
              f"{pct(r_dir_v, r_pq)}; every column {pct(cf_dir, cf_pq)} / {pct(f_dir, f_pq)}")
        print(f"transport ceiling (a source that decodes nothing) vs Parquet, warm: .schema(value) "
              f"{pct(r_rep_v, r_pq)}, every column {pct(f_rep, f_pq)}; the store-directory read reaches "
              f"{pct(r_dir_v, r_rep_v)} and {pct(f_dir, f_rep)} of it")
        print(f"broker read {r_broker:,.0f} and sink {w_sink:,.0f} rows/s (goal >= 20,000); "
              f"parquet write {w_pq:,.0f} rows/s")
    finally:
        spark.stop()
        server.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
