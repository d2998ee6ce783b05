#!/usr/bin/env python3
"""Failover time of a controller-mode replica group: kill -9 the master ROUNDS times (in one group of three rmqd
broker processes with allAckInSyncStateSet=true and a producer following the name server's route) and report the
time from the kill to the new master in the route and to the first send it acknowledges, median and max, plus
the checker's verdict (acknowledged-but-lost must be 0).

    python3 scripts/failover_rounds.py [--rounds 20]

Runs tests/failover/test_failover.py::test_kill9_master... with RMQD_FAILOVER_ROUNDS and RMQD_FAILOVER_REPORT.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TEST = "tests/failover/test_failover.py::test_kill9_master_fails_over_and_the_old_master_rejoins_as_a_truncated_slave"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=20)
    args = ap.parse_args()
    fd, report = tempfile.mkstemp(suffix=".jsonl")
    os.close(fd)
    env = dict(os.environ, RMQD_FAILOVER_ROUNDS=str(args.rounds), RMQD_FAILOVER_REPORT=report,
               PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
    code = subprocess.call([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-s", "-o", "timeout=0",
                            TEST], cwd=REPO, env=env)
    with open(report, encoding="utf-8") as f:
        rows = [json.loads(line) for line in f if line.strip()]
    os.unlink(report)
    if rows:
        for key, label in (("route_s", "kill -> new master in the route"),
                           ("first_send_s", "kill -> first send acknowledged by the new master")):
            values = [r[key] for r in rows]
            print(f"{label}: median {statistics.median(values):.3f} s, max {max(values):.3f} s, "
                  f"min {min(values):.3f} s over {len(values)} rounds")
    print("checker: " + ("no acknowledged message lost" if code == 0 else f"FAILED (pytest exit {code})"))
    return code


if __name__ == "__main__":
    sys.exit(main())
