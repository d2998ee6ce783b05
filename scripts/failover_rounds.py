#!/usr/bin/env python3
"""Failover time of a controller-mode replica group (three rmqd broker processes, allAckInSyncStateSet=true, a
producer following the name server's route): kill -9 the master ROUNDS times, cut the master off from the
controller ROUNDS times, and kill -9 the master with the leader of three controllers ROUNDS times; report median and max of each time, and the checker's verdict (acknowledged-but-lost
must be 0, and no send acknowledged by the old master after the new one's first).

    python3 scripts/failover_rounds.py [--rounds 20] [--only kill|partition|kill-master-and-leader]

Runs tests/failover/test_failover.py with RMQD_FAILOVER_ROUNDS and RMQD_FAILOVER_REPORT.
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
TESTS = {"kill": "tests/failover/test_failover.py::"
                 "test_kill9_master_fails_over_and_the_old_master_rejoins_as_a_truncated_slave",
         "partition": "tests/failover/test_failover.py::"
                      "test_master_cut_off_from_the_controller_fences_itself_before_another_is_elected",
         "kill-master-and-leader": "tests/failover/test_failover.py::"
                                   "test_kill9_of_the_master_and_the_leader_controller_together"}
LABELS = {"route_s": "kill -> new master in the route",
          "first_send_s": "fault -> first send acknowledged by the new master",
          "fenced_s": "cut -> the old master refuses sends (fenced)"}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--only", choices=sorted(TESTS))
    args = ap.parse_args()
    fd, report = tempfile.mkstemp(suffix=".jsonl")
    os.close(fd)
    env = dict(os.environ, RMQD_FAILOVER_ROUNDS=str(args.rounds), RMQD_FAILOVER_REPORT=report,
               PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
    tests = [TESTS[args.only]] if args.only else list(TESTS.values())
    code = subprocess.call([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-s", "-o", "timeout=0",
                            *tests], cwd=REPO, env=env)
    with open(report, encoding="utf-8") as f:
        rows = [json.loads(line) for line in f if line.strip()]
    os.unlink(report)
    for fault in TESTS:
        mine = [r for r in rows if r.get("fault") == fault]
        for key, label in LABELS.items():
            values = [r[key] for r in mine if key in r]
            if values:
                print(f"{fault}: {label}: median {statistics.median(values):.3f} s, max {max(values):.3f} s, "
                      f"min {min(values):.3f} s over {len(values)} rounds")
    print("checker: " + ("no acknowledged message lost, never two masters taking sends" if code == 0
                         else f"FAILED (pytest exit {code})"))
    return code


if __name__ == "__main__":
    sys.exit(main())
