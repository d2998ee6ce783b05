#!/usr/bin/env python3
"""Send throughput of a controller-mode group of three rmqd broker processes with and without
allAckInSyncStateSet, side by side in one run: THREADS synchronous producers (rmqd's client, 1 KiB bodies) for
SECONDS each, sends/s and latency percentiles.

    python3 scripts/bench_failover_ack.py [--seconds 10] [--threads 4]
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import threading
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

from tests.failover.kit import FailoverGroup  # noqa: E402
from tests.replication.procs import BlockingClient, send_one  # noqa: E402

TOPIC = "BenchAckTopic"


def run(all_ack: bool, seconds: float, threads: int) -> dict:
    with tempfile.TemporaryDirectory(prefix="rmqd-bench-ack-") as root:
        group = FailoverGroup(root, allAckInSyncStateSet=str(all_ack).lower(), checkSyncStateSetPeriod=5000)
        try:
            group.start_all()
            master = group.wait_group(TOPIC, 3)["masterAddress"]
            lat: list[float] = []
            errors = [0]
            lock = threading.Lock()
            stop = time.monotonic() + seconds

            def worker(n: int) -> None:
                c = BlockingClient(master, timeout=10)
                body, mine, i = b"b" * 1024, [], 0
                while time.monotonic() < stop:
                    t0 = time.perf_counter()
                    r = send_one(c, TOPIC, f"k{n}-{i}", body, i % 4)
                    i += 1
                    if r.code == 0:
                        mine.append(time.perf_counter() - t0)
                    else:
                        errors[0] += 1
                c.close()
                with lock:
                    lat.extend(mine)
            ts = [threading.Thread(target=worker, args=(n,)) for n in range(threads)]
            for t in ts:
                t.start()
            for t in ts:
                t.join()
            lat.sort()
            return {"sends_s": len(lat) / seconds, "p50_ms": lat[len(lat) // 2] * 1000,
                    "p99_ms": lat[int(len(lat) * 0.99)] * 1000, "errors": errors[0]}
        finally:
            group.stop()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=10)
    ap.add_argument("--threads", type=int, default=4)
    a = ap.parse_args()
    for all_ack in (False, True):
        r = run(all_ack, a.seconds, a.threads)
        print(f"allAckInSyncStateSet={str(all_ack).lower():5s}  {r['sends_s']:8.0f} sends/s  p50 {r['p50_ms']:.2f} ms  "
              f"p99 {r['p99_ms']:.2f} ms  errors {r['errors']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
