#!/usr/bin/env python3
"""What the metrics cost on the send path: the same send load against a baseline tree (main, no
metrics counting) and this tree (counting in the send lane and the dispatcher), alternating runs.

Each run starts `rmqd serve` from the given tree (PYTHONPATH = that tree, its own built extensions),
creates the topic and drives it with the native closed-loop sender (scripts/loadgen.py: 1 KB sync
sends, N senders on one connection); in this tree a scraper GETs /metrics every second under load
(Prometheus scrapes every 15-60 s). Prints sends/s per run and the medians.

The baseline is a tree without the metrics, extensions built in place: this tree with the send lane's
counting compiled out (LaneMetrics.on_put and end_read returning at once: what the metrics add to a plain
send), or a tree from before the metrics (commit f7ee4a5^, which also lacks everything added since):
  git worktree add --detach /tmp/base-metrics f7ee4a5^ && (cd /tmp/base-metrics && python setup.py build_ext -i)
Usage: flock /tmp/rmqd-bench.lock python scripts/bench_metrics.py --baseline /tmp/base-metrics [--runs 5]
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
import threading
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
TREE = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(HERE, "..", "compat_tests"))
sys.path.insert(0, os.path.join(HERE, ".."))                  # tests.kit (compat_tests' modules import it)
from benchenv import machine_line  # noqa: E402
from scenarios import create_topic  # noqa: E402

ADDR = re.compile(r"listening on (127\.0\.0\.1:\d+)")
METRICS_URL = re.compile(r"metrics on (http://\S+/metrics)")


class Scraper(threading.Thread):
    """GET /metrics every ``every_s`` seconds (as Prometheus does), timing each scrape."""

    def __init__(self, url: str, every_s: float) -> None:
        super().__init__(daemon=True)
        self.url, self.every_s = url, every_s
        self.scrapes: list[float] = []
        self._halt = threading.Event()

    def run(self) -> None:
        while not self._halt.wait(self.every_s):
            t0 = time.perf_counter()
            with urllib.request.urlopen(self.url, timeout=10) as resp:
                resp.read()
            self.scrapes.append((time.perf_counter() - t0) * 1000)

    def stop(self) -> None:
        self._halt.set()
        self.join(15)


def one_run(tree: str, threads: int, seconds: float, metrics: bool, scrape_every: float = 1.0) -> float:
    store = tempfile.mkdtemp(prefix="rmqd-bench-metrics-")
    env = dict(os.environ, PYTHONPATH=tree, PYTHONUNBUFFERED="1")
    args = [sys.executable, "-m", "rmqd.runtime.cli", "--log-level", "WARNING", "serve", "--namesrv-port", "0",
            "--broker-port", "0", "--store-dir", store]
    if os.path.isdir(os.path.join(tree, "rmqd", "console")):     # a tree that has them: other endpoints off
        args += ["--console-port", "0", "--grpc-port", "0"]
    if metrics:
        args += ["--metrics-port", "0"]
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
        scraper = None
        if metrics:
            url = None
            while url is None:
                line = proc.stdout.readline()
                if not line:
                    raise RuntimeError("server printed no metrics address")
                m = METRICS_URL.search(line)
                url = m.group(1) if m else None
            scraper = Scraper(url, every_s=scrape_every)
        create_topic(broker, "BenchTopic", 8)
        if scraper is not None:
            scraper.start()
        out = subprocess.run([sys.executable, os.path.join(HERE, "loadgen.py"), "--broker", broker,
                              "--topic", "BenchTopic", "--threads", str(threads), "--seconds", str(seconds)],
                             capture_output=True, text=True, timeout=seconds + 60, cwd=TREE,
                             env=dict(os.environ, PYTHONPATH=TREE))
        tps = json.loads(out.stdout.strip().splitlines()[-1])["tps"]
        if scraper is not None:
            scraper.stop()
            if not scraper.scrapes:
                raise RuntimeError("no /metrics scrape completed under load")
            print(f"  {len(scraper.scrapes)} scrapes under load, median {statistics.median(scraper.scrapes):.1f} ms",
                  flush=True)
        return tps
    finally:
        proc.terminate()
        proc.wait(20)
        subprocess.run(["rm", "-rf", store])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--baseline", required=True, help="a tree without the metrics counting, extensions built (see above)")
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
