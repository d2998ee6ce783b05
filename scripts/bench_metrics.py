#!/usr/bin/env python3
"""What the metrics cost on the send path: the same send load against a baseline tree (main, no
metrics counting) and this tree (counting in the send lane and the dispatcher), alternating runs.

Each run starts `rmqd serve` from the given tree (PYTHONPATH = that tree, its own built extensions),
creates the topic and drives it with the native closed-loop sender (scripts/loadgen.py: 1 KB sync
sends, N senders on one connection), then also scrapes /metrics once under load in this tree.
Prints sends/s per run and the medians.

Usage: flock /tmp/rmqd-bench.lock python scripts/bench_metrics.py --baseline /work/main [--runs 5]
       [--seconds 5] [--threads 16]
"""
from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
TREE = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(HERE, "..", "compat_tests"))
from benchenv import machine_line  # noqa: E402
from scenarios import create_topic  # noqa: E402

ADDR = re.compile(r"listening on (127\.0\.0\.1:\d+)")


def one_run(tree: str, threads: int, seconds: float, metrics: bool) -> float:
    store = tempfile.mkdtemp(prefix="rmqd-bench-metrics-")
    env = dict(os.environ, PYTHONPATH=tree, PYTHONUNBUFFERED="1")
    args = [sys.executable, "-m", "rmqd.cli", "--log-level", "WARNING", "serve", "--namesrv-port", "0",
            "--broker-port", "0", "--store-dir", store]
    if metrics:
        args += ["--console-port", "0", "--metrics-port", "0"]
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, text=True, env=env, cwd=tree)
    try:
        addrs = []
        while len(addrs) < 2:
            line = proc.stdout.readline()
            if not line:
                raise RuntimeError("server did not start")
            m = ADDR.search(line)
            if m:
                addrs.append(m.group(1))
        broker = addrs[1]
        create_topic(broker, "BenchTopic", 8)
        out = subprocess.run([sys.executable, os.path.join(HERE, "loadgen.py"), "--broker", broker,
                              "--topic", "BenchTopic", "--threads", str(threads), "--seconds", str(seconds)],
                             capture_output=True, text=True, timeout=seconds + 60, cwd=TREE,
                             env=dict(os.environ, PYTHONPATH=TREE))
        return json.loads(out.stdout.strip().splitlines()[-1])["tps"]
    finally:
        proc.terminate()
        proc.wait(20)
        subprocess.run(["rm", "-rf", store])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--baseline", required=True, help="a tree without the metrics (e.g. /work/main)")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--threads", type=int, default=16)
    a = ap.parse_args()
    print(machine_line(), flush=True)
    base, mine = [], []
    for i in range(a.runs):
        base.append(one_run(a.baseline, a.threads, a.seconds, False))
        mine.append(one_run(TREE, a.threads, a.seconds, True))
        print(f"run {i + 1}: baseline {base[-1]:.0f}/s, metrics {mine[-1]:.0f}/s", flush=True)
    mb, mm = statistics.median(base), statistics.median(mine)
    print(f"median sends/s: baseline {mb:.0f}, with metrics {mm:.0f} ({(mm - mb) / mb * 100:+.1f}%)")


if __name__ == "__main__":
    main()
