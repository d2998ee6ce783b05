"""rmqd pipeline archive and index on Spark local[2] and on a 2-Worker standalone cluster (1 core each), side by
side in the same run: rows/s and the ratio, i.e. what distribution costs on one machine, and the rate per
executor core to plan bigger clusters.

1. Setup (not timed): MESSAGES messages of SIZE bytes (key ``k<i>``, 4 queues) in a store with SEGMENT-MB
   CommitLog files (all but the last sealed), and the same count copied into a Posix tier without the index
   (scripts/bench_pipeline.py's fill_store / fill_tier); a Python with rmqd installed (this tree) for the
   drivers and executors of both masters; a standalone cluster from pyspark's spark-class (one Master, two
   Workers of one core each, bound to 127.0.0.1; tests/spark_cluster/standalone.py, docs/spark-cluster.md).
2. Timed, ROUNDS rounds, each: ``rmqd pipeline archive`` then ``rmqd pipeline index`` with ``--master
   local[2]``, then the same with ``--master spark://...`` (the order alternates between rounds). Each is a
   fresh command (its own driver JVM and executors), as a user runs it; rows/s is over the job's own time (the
   summary's ``seconds``, without the JVM's start), and the command's wall time is printed beside it. Between
   runs the archive output and the index job's output are removed, so every run does the whole work.

    python scripts/bench_pipeline_cluster.py [--messages 1000000] [--size 1024] [--segment-mb 128]
                                             [--rounds 2] [--executor-memory 1g] [--quick]

``--quick``: a smoke run of 20,000 messages and one round; its figures mean nothing.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, REPO)
sys.path.insert(0, HERE)


def run_job(py: str, args: list[str], master: str, env: dict, conf: list[str]) -> tuple[dict, float]:
    """One ``rmqd pipeline`` command: (its JSON summary, wall seconds)."""
    cmd = [py, "-m", "rmqd.runtime.cli", "pipeline"] + args + ["--master", master, "--json", "--log-level", "WARNING"]
    for c in conf:
        cmd += ["--conf", c]
    t = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=tempfile.gettempdir())
    wall = time.perf_counter() - t
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith("{")]
    if r.returncode != 0 or not lines:
        raise RuntimeError(f"{' '.join(cmd)} exited {r.returncode}:\n{r.stderr[-3000:]}")
    return json.loads(lines[-1]), wall


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--messages", type=int, default=1_000_000)
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--segment-mb", type=int, default=128)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--executor-memory", default="1g", help="per executor, and local[2]'s driver gets twice it")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--keep", action="store_true", help="keep the work directory (printed)")
    a = ap.parse_args()
    if a.quick:
        a.messages, a.rounds, a.segment_mb = 20_000, 1, 4
    from bench_pipeline import fill_store, fill_tier, in_child
    from benchenv import machine_line
    from tests.spark_cluster.standalone import (StandaloneCluster, clean_env, make_venv, requirement_closure)

    work = tempfile.mkdtemp(prefix="rmqd-bench-cluster-")
    cluster = None
    try:
        print(f"# {machine_line()}; load average {os.getloadavg()[0]:.1f} at the start")
        store, istore = os.path.join(work, "store"), os.path.join(work, "istore")
        t0 = time.perf_counter()
        in_child(fill_store, store, a.messages, a.size, a.segment_mb << 20)
        in_child(fill_tier, istore, a.messages, a.size)
        print(f"# {a.messages:,} messages x {a.size} B: archive store ({a.segment_mb} MB segments) and a Posix tier "
              f"(1 GB-class flat CommitLog) made in {time.perf_counter() - t0:.0f} s")
        dists = [n for n in requirement_closure(["rmqd[spark]"]) if n != "rmqd"]
        py = make_venv(os.path.join(work, "python"), dists, pth=[REPO])
        mem_mb = int(a.executor_memory.rstrip("gGmM")) * (1024 if a.executor_memory[-1] in "gG" else 1)
        cluster = StandaloneCluster(os.path.join(work, "cluster"), workers=2, cores=1,
                                    memory=f"{mem_mb + 256}m").start()
        print(f"# cluster {cluster.master_url}: 2 Workers x 1 core, executors {a.executor_memory}; local[2] driver "
              f"{2 * mem_mb}m")
        env = clean_env({"PYSPARK_PYTHON": py})
        masters = {"local[2]": ["spark.driver.memory=%dm" % (2 * mem_mb)],
                   "cluster": ["spark.executor.memory=%s" % a.executor_memory]}
        results: dict = {}
        for rnd in range(a.rounds):
            order = list(masters) if rnd % 2 == 0 else list(masters)[::-1]
            for name in order:
                url = "local[2]" if name == "local[2]" else cluster.master_url
                out = os.path.join(work, "archive")
                s, wall = run_job(py, ["archive", "--store", store, "--out", out], url, env, masters[name])
                results.setdefault(("archive", name), []).append((s["rows"], s["seconds"], wall))
                shutil.rmtree(out)
                s, wall = run_job(py, ["index", "--store", istore], url, env, masters[name])
                results.setdefault(("index", name), []).append((s["rows"], s["seconds"], wall))
                outputs = os.path.join(istore, "tiered_index_file", "pipeline")
                for n in os.listdir(outputs):                # not adopted: the next run indexes it all again
                    if os.path.isdir(os.path.join(outputs, n)):
                        shutil.rmtree(os.path.join(outputs, n))
                for job in ("archive", "index"):
                    rows, secs, w = results[(job, name)][-1]
                    print(f"round {rnd + 1}: {job:<8} {name:<9} {rows:>10,} rows in {secs:6.1f} s "
                          f"= {rows / secs:>9,.0f} rows/s   (command wall {w:.1f} s)", flush=True)
        print()
        print(f"{'job':<8} {'master':<9} {'rows/s (best)':>14} {'rows/s (mean)':>14} {'per core':>10}")
        for job in ("archive", "index"):
            best = {}
            for name in masters:
                rates = [rows / secs for rows, secs, _w in results[(job, name)]]
                best[name] = max(rates)
                print(f"{job:<8} {name:<9} {max(rates):>14,.0f} {sum(rates) / len(rates):>14,.0f} "
                      f"{max(rates) / 2:>10,.0f}")
            print(f"{job:<8} cluster / local[2]: {best['cluster'] / best['local[2]']:.2f}")
        print(f"# load average {os.getloadavg()[0]:.1f} at the end")
    finally:
        if cluster is not None:
            left = cluster.stop()
            if left:
                print(f"# had to kill {len(left)} cluster process(es)")
        if a.keep:
            print(f"# kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
