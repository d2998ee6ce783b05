"""Controller fault rounds at full count: three ``rmqd controller`` processes on loopback, fake brokers of one
replica group, and per round one of: the master's heartbeat stops (hung master), kill -9 of the leader
controller, the leader controller's Raft links cut (partition).  Each round checks that state survives and
that elections go on; the table gives the time to recover.

    python scripts/controller_faults.py --rounds 10

Bounded: every wait has a deadline, every process and proxy is stopped at the end.  The same rounds run once
each in the test suite (tests/controller/test_cluster.py; RMQD_CONTROLLER_FAULT_ROUNDS=N runs N there).
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))    # the repository: tests.*

from tests.controller.ctlkit import (  # noqa: E402
    ControllerCluster,
    FakeBroker,
    Heartbeater,
    find_leader,
    kill_leader_round,
    master_expiry_round,
    partition_leader_round,
)

CLUSTER, GROUP = "DefaultCluster", "broker-a"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=10, help="rounds of each fault (default 10)")
    ap.add_argument("--dir", help="where the controllers' stores and logs go (default: a temporary directory)")
    args = ap.parse_args()
    root = args.dir or tempfile.mkdtemp(prefix="rmqd-controller-faults-")
    cluster = ControllerCluster(root)
    brokers = [FakeBroker(CLUSTER, GROUP, epoch=1, max_offset=100 * (i + 1), priority=1) for i in range(3)]
    heartbeater = Heartbeater(cluster.addrs, brokers)
    times: dict[str, list[float]] = {"master heartbeat stops -> new master": [],
                                     "kill -9 leader controller -> new leader": [],
                                     "leader controller partitioned -> new leader": []}
    try:
        t0 = time.monotonic()
        cluster.start()
        leader = find_leader(cluster.addrs, 30)
        print(f"3 controllers up and a leader in {time.monotonic() - t0:.1f}s (logs in {root})", flush=True)
        for b in brokers:
            b.join(leader)
        heartbeater.start()
        heartbeater.beat_once()
        assert brokers[0].elect(leader).code == 0
        for i in range(args.rounds):
            for name, run in (
                    ("master heartbeat stops -> new master", lambda: master_expiry_round(cluster, brokers, GROUP,
                                                                                         heartbeater)),
                    ("kill -9 leader controller -> new leader", lambda: kill_leader_round(cluster, CLUSTER, GROUP,
                                                                                          [1, 2, 3])),
                    ("leader controller partitioned -> new leader",
                     lambda: partition_leader_round(cluster, CLUSTER, GROUP, [1, 2, 3]))):
                seconds = run()
                times[name].append(seconds)
                print(f"round {i + 1}: {name}: {seconds:.2f}s", flush=True)
    finally:
        heartbeater.stop()
        for b in brokers:
            b.close()
        cluster.stop()
    print()
    print("| fault | rounds | median s | max s |")
    print("|---|---|---|---|")
    for name, values in times.items():
        if values:
            print(f"| {name} | {len(values)} | {statistics.median(values):.2f} | {max(values):.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
