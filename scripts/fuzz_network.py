#!/usr/bin/env python
"""Network fuzz: mutated requests of every registered broker/name-server request code against a
live ``rmqd serve``; checks no crash, no hang, health afterwards, bounded RSS, bystander unharmed.

    .venv/bin/python scripts/fuzz_network.py --requests 50000
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))    # the repository: tests.*

from tests.faults.faultkit import ServerProcess, tail  # noqa: E402
from tests.faults.netfuzz import run_network_fuzz  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=20000)
    ap.add_argument("--rounds", type=int, default=5, help="seeds; the server is kept across rounds")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--rss-limit-mb", type=int, default=200)
    args = ap.parse_args()
    root = tempfile.mkdtemp(prefix="rmqd-netfuzz-")
    srv = ServerProcess(os.path.join(root, "store"), {}, os.path.join(root, "server.log")).start()
    first_rss = None
    failures = []
    try:
        for r in range(args.rounds):
            rep = run_network_fuzz(srv, args.requests // args.rounds, seed=args.seed * 100 + r)
            first_rss = first_rss or rep.rss_before_kb
            if not srv.alive():
                failures.append(f"round {r}: server died\n" + tail(srv.log_path, 30))
                break
            if rep.unanswered or not rep.healthy_after or rep.bystander_failures:
                failures.append(f"round {r}: unanswered {rep.unanswered[:5]} healthy {rep.healthy_after} "
                                f"bystander failures {rep.bystander_failures}")
            if rep.rss_after_kb - first_rss > args.rss_limit_mb * 1024:
                failures.append(f"round {r}: RSS grew {first_rss} -> {rep.rss_after_kb} KiB")
    finally:
        srv.stop()
    print(f"SUMMARY fuzz_network: requests={args.requests} rounds={args.rounds} failures={len(failures)} "
          f"rss_start_kb={first_rss} log={srv.log_path}")
    for f in failures:
        print("FAILURE", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
