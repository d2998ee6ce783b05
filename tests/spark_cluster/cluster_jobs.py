"""The driver program of the cluster tests (tests/spark_cluster): ``rmqd pipeline`` jobs and the connector on a
Spark standalone cluster, in one Spark application.

    python cluster_jobs.py SPEC.json                                  # rmqd installed; SPEC has "master"
    spark-submit --master URL --py-files rmqd-...zip cluster_jobs.py SPEC.json     # rmqd only in the zip

Only the standard library, pyspark and rmqd are imported (in the zip mode rmqd comes from the archive).
The pipeline jobs go through ``rmqd.pipeline.cli.main`` with the arguments of the command line (plus
``--master`` when not under spark-submit), so this is ``rmqd pipeline <job> --master <url>`` with one
SparkSession for all of them. SPEC lists what to run; the results go to SPEC["result"] as JSON.

The SparkSession is made first, with SPEC["conf"] (``rmqd.pipeline.runner.spark_session``, as the CLI makes
it), so every job finds it. A step with ``"executors": n`` first waits until n executors are registered. A
step with ``"hold": true`` (the fault test: the executors' environment has ``RMQD_PIPELINE_TEST_HOLD`` =
SPEC["hold"]) starts with the hold file in place, which makes its tasks wait after their first output file,
and the program prints ``BEGIN <name> <hold file or ->`` / ``END <name>`` around every step, so the test can
kill an executor while a held job's tasks wait, then remove the file.
"""
from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import sys
import time


def log(msg: str) -> None:
    print(msg, flush=True)


def pipeline(job: str, args: list, master: str | None) -> dict:
    """``rmqd pipeline <job> <args> [--master URL] --json``: its exit code and JSON summary."""
    from rmqd.pipeline.cli import main
    argv = [job] + list(args) + (["--master", master] if master else []) + ["--json"]
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(argv)
    lines = [ln for ln in out.getvalue().splitlines() if ln.startswith("{")]
    return {"exitCode": code, "summary": json.loads(lines[-1]) if lines else None}


def where_rmqd_runs(spark) -> list:
    """(location, rmqd's file, orjson's file) in each of a few tasks: which executors ran, from where. Run
    once both executors are registered and no task of an earlier job (a cancelled one's) holds a slot; each
    task takes a moment, so both executors get some."""
    def probe(_):
        import orjson

        import rmqd
        from rmqd.spark.executor import location
        time.sleep(0.5)
        return [(location(), rmqd.__file__, orjson.__file__, os.getpid())]
    wait_executors(spark, 2)
    deadline = time.monotonic() + 120
    while spark.sparkContext.statusTracker().getActiveStageIds() and time.monotonic() < deadline:
        time.sleep(0.2)
    return spark.sparkContext.parallelize(range(8), 8).mapPartitions(probe).collect()


def wait_executors(spark, count: int, timeout: float = 600.0) -> int:
    """Wait until ``count`` executors are registered (after a kill the Worker starts a replacement)."""
    deadline = time.monotonic() + timeout
    while True:
        n = spark.sparkContext._jsc.sc().getExecutorMemoryStatus().size() - 1      # minus the driver
        if n >= count or time.monotonic() > deadline:
            return n
        time.sleep(0.2)


def digest(b) -> str:
    return hashlib.sha1(bytes(b) if b is not None else b"").hexdigest()


def connector(spark, c: dict) -> dict:
    """Batch read (broker and store directory), AvailableNow stream, the sink, the stream restarted."""
    from rmqd.spark.executor import location
    ns, topic = c["nameServer"], c["topic"]
    res: dict = {}
    df = (spark.read.format("rocketmq").option("nameServer", ns).option("topic", topic)
          .option("maxRecordsPerPartition", "50").load())
    res["batch"] = sorted([r.partition, r.offset, digest(r.value), bytes(r.key).decode() if r.key else None]
                          for r in df.select("partition", "offset", "value", "key").collect())

    def where(it):
        return [(location(), sum(1 for _ in it))]
    res["batchPartitions"] = df.rdd.mapPartitions(where).collect()
    pdf = spark.read.format("rocketmq").option("path", c["storePath"]).option("topic", topic).load()
    res["pathRead"] = sorted([r.partition, r.offset, digest(r.value)]
                             for r in pdf.select("partition", "offset", "value").collect())

    def stream() -> None:
        q = (spark.readStream.format("rocketmq").option("nameServer", ns).option("topic", topic)
             .option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", str(c["perTrigger"]))
             .load().select("partition", "offset", "value", "key")
             .writeStream.format("parquet").option("path", c["streamOut"])
             .option("checkpointLocation", c["checkpoint"]).trigger(availableNow=True).start())
        if not q.awaitTermination(300):
            q.stop()
            raise RuntimeError("the AvailableNow query did not finish in 300 s")
        if q.exception() is not None:
            raise RuntimeError(f"the stream failed: {q.exception()}")
    stream()
    res["streamFirstRun"] = spark.read.parquet(c["streamOut"]).count()
    rows = [(f"sink-{i}".encode(), f"sk-{i}") for i in range(c["sinkRows"])]
    (spark.createDataFrame(rows, "value binary, key string").repartition(4)
     .write.format("rocketmq").option("nameServer", ns).option("topic", topic).mode("append").save())
    stream()                                  # restarted from the checkpoint: only what the sink added
    return res


def main() -> int:
    with open(sys.argv[1]) as f:
        spec = json.load(f)
    master = spec.get("master")
    results: dict = {"pid": os.getpid(), "python": sys.executable}
    import rmqd
    results["driverRmqd"] = rmqd.__file__
    from rmqd.pipeline.runner import spark_session
    t0 = time.monotonic()
    spark = spark_session(master, list(spec.get("conf", {}).items()), app="rmqd cluster tests")
    results["sessionSeconds"] = round(time.monotonic() - t0, 2)
    for step in spec["steps"]:
        job, name = step["job"], step.get("name", step["job"])
        hold = spec["hold"] if step.get("hold") else None
        if step.get("executors"):
            results.setdefault("executorsBefore", {})[name] = wait_executors(spark, step["executors"])
        if hold:
            with open(hold, "w") as f:
                f.write(name)                  # the tasks' "holding on <hold> (<name>)" lines say which job
        log(f"BEGIN {name} {hold or '-'}")
        t0 = time.monotonic()
        if job == "connector":
            results[name] = connector(spark, step["connector"])
        else:
            results[name] = pipeline(job, step["args"], master)
        results[name]["wallSeconds"] = round(time.monotonic() - t0, 2)
        if hold:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(hold)
        log(f"END {name}")
    results["where"] = where_rmqd_runs(spark)
    results["applicationId"] = spark.sparkContext.applicationId
    with open(spec["result"], "w") as f:
        json.dump(results, f)
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
