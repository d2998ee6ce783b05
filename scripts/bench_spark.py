"""The Spark connector's speed in local[2], next to Parquet on the same rows in the same run.

1. N messages of SIZE bytes are sent to an embedded rmqd (4 queues; not timed).
2. Timed, each as a full action (every row's body is read: count and summed body length, checked):
   - batch read via the broker: spark.read.format("rocketmq") with nameServer/topic;
   - batch read from the store directory: the ``path`` option (no broker involved), all columns and, with
     ``.schema("value binary")``, the value column only (what Parquet's column pruning reads);
   - the same rows written to Parquet once, then spark.read.parquet of them;
   - the sink: df.write.format("rocketmq") of N rows, next to df.write.parquet of the same rows.

    python scripts/bench_spark.py [--messages 1000000] [--size 1024]
"""
from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

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


def timed(label: str, n: int, mb: float, fn) -> float:
    t0 = time.perf_counter()
    fn()
    s = time.perf_counter() - t0
    print(f"{label:<34} {n / s:>12,.0f} rows/s {mb / s:>9.1f} MB/s  ({s:.1f} s)")
    return n / s


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--messages", type=int, default=1_000_000)
    ap.add_argument("--size", type=int, default=1024)
    a = ap.parse_args()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from benchenv import machine_line
    from pyspark.sql import SparkSession
    from rmqd.testing import EmbeddedServer

    work = tempfile.mkdtemp(prefix="rmqd-bench-spark-")
    server = EmbeddedServer(store_dir=os.path.join(work, "store")).start()
    spark = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
             .config("spark.driver.host", "127.0.0.1").config("spark.driver.bindAddress", "127.0.0.1")
             .config("spark.sql.python.filterPushdown.enabled", "true").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    try:
        from rmqd.remoting.client import BlockingClient
        from rmqd.remoting.command import new_request
        with BlockingClient(server.broker_addr) as c:
            c.invoke(new_request(17, {"topic": TOPIC, "defaultTopic": "TBW102", "readQueueNums": 4,
                                      "writeQueueNums": 4, "perm": 6, "topicFilterType": "SINGLE_TAG",
                                      "topicSysFlag": 0, "order": "false"}))
        t0 = time.perf_counter()
        fill(server.broker.store, a.messages, a.size)
        n, mb = a.messages, a.messages * a.size / 1e6
        print(f"# {machine_line()}; Spark {spark.version} local[2]")
        print(f"# {n} messages x {a.size} B stored in {time.perf_counter() - t0:.1f} s")
        src = spark.read.format("rocketmq").option("nameServer", server.namesrv_addr).option("topic", TOPIC)
        from pyspark.sql import functions as F

        def noop(df) -> None:
            """Materialise every row and its body; check nothing is missing."""
            got = df.agg(F.count("*").alias("n"), F.sum(F.length("value")).alias("b")).collect()[0]
            assert got.n == n and got.b == n * a.size, (got, n)
        pq = os.path.join(work, "rows.parquet")
        src.load().write.parquet(pq)
        r_broker = timed("read via broker", n, mb, lambda: noop(src.load()))
        r_dir = timed("read from store directory", n, mb, lambda: noop(
            spark.read.format("rocketmq").option("path", server.broker.store.config.store_root_dir)
            .option("topic", TOPIC).load()))
        r_dir_v = timed("store directory, .schema(value)", n, mb, lambda: noop(
            spark.read.format("rocketmq").schema("value binary")
            .option("path", server.broker.store.config.store_root_dir).option("topic", TOPIC).load()))
        r_pq = timed("read parquet", n, mb, lambda: noop(spark.read.parquet(pq)))

        def rows_out(df) -> None:
            """Every column of every row, as Spark's benchmark sink consumes them (no column pruning)."""
            df.write.format("noop").mode("overwrite").save()
        dir_df = (lambda: spark.read.format("rocketmq").option("path", server.broker.store.config.store_root_dir)
                  .option("topic", TOPIC).load())
        f_dir = timed("full rows: store directory", n, mb, lambda: rows_out(dir_df()))
        f_pq = timed("full rows: parquet", n, mb, lambda: rows_out(spark.read.parquet(pq)))
        rows = spark.read.parquet(pq).select("value", "key", "tags").cache()
        rows.count()
        with BlockingClient(server.broker_addr) as c:
            c.invoke(new_request(17, {"topic": TOPIC + "Out", "defaultTopic": "TBW102", "readQueueNums": 4,
                                      "writeQueueNums": 4, "perm": 6, "topicFilterType": "SINGLE_TAG",
                                      "topicSysFlag": 0, "order": "false"}))
        w_sink = timed("write via rocketmq sink", n, mb, lambda: rows.write.format("rocketmq").option(
            "nameServer", server.namesrv_addr).option("topic", TOPIC + "Out").mode("append").save())
        w_pq = timed("write parquet", n, mb, lambda: rows.write.mode("overwrite").parquet(pq + ".out"))
        print(f"store-directory read at {100 * r_dir / r_pq:.0f}% of the Parquet read's rows/s when Parquet reads "
              f"only the value column ({100 * r_dir_v / r_pq:.0f}% when the read asks for the value column only "
              f"with .schema), {100 * f_dir / f_pq:.0f}% with every column (goal >= 50%); "
              f"broker read {r_broker:,.0f} and sink {w_sink:,.0f} rows/s (goal >= 20,000); parquet write "
              f"{w_pq:,.0f} rows/s")
    finally:
        spark.stop()
        server.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
