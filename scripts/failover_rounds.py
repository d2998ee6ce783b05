#!/usr/bin/env python3
"""Failover rounds of a controller-mode replica group (three rmqd broker processes, allAckInSyncStateSet=true, a
producer following the name server's route), ROUNDS rounds of each fault: kill -9 of the master, kill -9 of the
leader of three controllers, both together, the master cut off from the controller, SIGSTOP of the master,
SIGSTOP of an in-sync slave, a slow disk on the master (then a kill -9 of it); with ``--clients`` also the C++
clients (1.x and 2.x) and the 5.x gRPC Python client through one kill -9 (compat_tests/test_failover_clients.py).
Prints per fault the checker's verdict (acknowledged-but-lost must be 0), duplicates, and the time from the fault
to the first send acknowledged by the new master (median and max), and a markdown table for RELIABILITY.md.

    python3 scripts/failover_rounds.py [--rounds 20] [--only FAULT ...] [--clients]

Runs tests/failover/test_failover.py with RMQD_FAILOVER_ROUNDS and RMQD_FAILOVER_REPORT (SIGSTOP of the master
with RMQD_FAILOVER_SIGSTOP_ALLACK=true); each pytest run is bounded by --timeout seconds.
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
T = "tests/failover/test_failover.py::"
TESTS = {"kill": T + "test_kill9_master_fails_over_and_the_old_master_rejoins_as_a_truncated_slave",
         "kill-leader-controller": T + "test_kill9_of_the_master_and_the_leader_controller_together",
         "kill-master-and-leader": T + "test_kill9_of_the_master_and_the_leader_controller_together",
         "partition": T + "test_master_cut_off_from_the_controller_fences_itself_before_another_is_elected",
         "sigstop-master": T + "test_a_master_paused_past_its_lease_acknowledges_nothing_when_it_resumes",
         "sigstop-slave": T + "test_a_paused_slave_leaves_the_sync_state_set_and_rejoins_after_it_resumes",
         "slow-disk": T + "test_slow_disk_on_the_master_then_a_failover_loses_nothing_acknowledged"}
CLIENTS = "compat_tests/test_failover_clients.py"
LABELS = {"route_s": "fault -> new master in the route",
          "first_send_s": "fault -> first send acknowledged by the (new) master",
          "fenced_s": "cut -> the old master refuses sends (fenced)",
          "shrink_s": "SIGSTOP -> the slave out of the SyncStateSet",
          "rejoin_s": "SIGCONT -> the slave back in the SyncStateSet",
          "leader_s": "kill -> a new controller leader answers",
          "gap_s": "longest pause between acknowledged sends"}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--only", choices=sorted(TESTS), nargs="+")
    ap.add_argument("--clients", action="store_true",
                    help="also the C++ and gRPC clients through a kill -9 (one round)")
    ap.add_argument("--timeout", type=float, default=1800, help="seconds for each fault's pytest run")
    args = ap.parse_args()
    fd, report = tempfile.mkstemp(suffix=".jsonl")
    os.close(fd)
    env = dict(os.environ, RMQD_FAILOVER_ROUNDS=str(args.rounds), RMQD_FAILOVER_REPORT=report,
               RMQD_FAILOVER_SIGSTOP_ALLACK="true", RMQD_FAILOVER_CPP_CLIENTS="cpp1,cpp2",
               PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
    runs = []                               # the leader-alone rounds run inside the master-and-leader test
    for f in args.only or TESTS:
        if TESTS[f] not in [t for _, t in runs]:
            runs.append((f, TESTS[f]))
    if args.clients:
        runs.append(("clients", CLIENTS))
    failed = {}
    for fault, test in runs:
        try:
            code = subprocess.call([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-s", "-o",
                                    "timeout=0", test], cwd=REPO, env=env, timeout=args.timeout)
        except subprocess.TimeoutExpired:
            code = "timed out"
        if code != 0:
            failed[fault] = code
    with open(report, encoding="utf-8") as f:
        rows = [json.loads(line) for line in f if line.strip()]
    os.unlink(report)
    table = ["| fault | rounds | acknowledged | acknowledged but lost | duplicates | fault -> first send acknowledged "
             "(median / max) |", "|---|---|---|---|---|---|"]
    for fault in sorted({r["fault"] for r in rows}, key=lambda f: (list(TESTS) + [f]).index(f)):
        mine = [r for r in rows if r.get("fault") == fault and not r.get("summary")]
        for key, label in LABELS.items():
            values = [r[key] for r in mine if key in r]
            if values:
                print(f"{fault}: {label}: median {statistics.median(values):.3f} s, max {max(values):.3f} s, "
                      f"min {min(values):.3f} s over {len(values)} rounds")
        summary = [r for r in rows if r.get("fault") == fault and r.get("summary")]
        firsts = [r["first_send_s"] for r in mine + summary if "first_send_s" in r and (mine == [] or r in mine)]
        for r in summary:
            print(f"{fault}: checker: {r['acked']} acknowledged, {r['lost']} lost, {r['duplicates']} duplicates"
                  + (f", send answers {r['codes']}" if "codes" in r else ""))
        rounds = len(mine) or len(summary)
        acked = sum(r["acked"] for r in summary)
        lost = sum(r["lost"] for r in summary) if summary else "not checked"
        dups = sum(r["duplicates"] for r in summary) if summary else "-"
        times = (f"{statistics.median(firsts):.2f} s / {max(firsts):.2f} s" if firsts else "-")
        table.append(f"| {fault}{' (run failed)' if fault in failed else ''} | {rounds} | {acked} | {lost} | "
                     f"{dups} | {times} |")
    print("\n".join(table))
    print("checker: " + ("no acknowledged message lost in any run" if not failed
                         else f"FAILED runs: {failed}"))
    return 0 if not failed else 1


if __name__ == "__main__":
    sys.exit(main())
