#!/usr/bin/env python
"""Corruption soak: N random trials of byte flips / truncations in the last commit-log segment, a
consume-queue file, an index file or a JSON metadata file of a populated store; each trial starts
``rmqd serve`` on the damaged copy and checks every intact message is served (and new ones too).

    .venv/bin/python scripts/corruption_soak.py --trials 100
"""
from __future__ import annotations

import argparse
import collections
import os
import random
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))    # the repository: tests.*

from tests.faults.faultkit import CORRUPTION_TARGETS, corruption_trial, populate_store  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=100)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--dir")
    args = ap.parse_args()
    root = args.dir or tempfile.mkdtemp(prefix="rmqd-corrupt-")
    t0 = time.monotonic()
    snapshots = []
    for i, clean in enumerate((True, False)):   # one cleanly stopped store, one SIGKILLed
        d = os.path.join(root, f"populated{i}")
        os.makedirs(d, exist_ok=True)
        snapshots.append((os.path.join(d, "store"), populate_store(d, 500, clean_stop=clean, seed=i)))
    rnd = random.Random(args.seed)
    failures, worst = [], 0.0
    per_target = collections.Counter()
    for i in range(args.trials):
        target = rnd.choice(CORRUPTION_TARGETS)
        snap, acked = rnd.choice(snapshots)
        res = corruption_trial(snap, os.path.join(root, "work"), acked, target, rnd)
        per_target[target] += 1
        worst = max(worst, res.recovery_s)
        status = "ok" if res.started and not res.problems else "FAIL"
        print(f"trial {i}: {res.what} -> {status} start {res.recovery_s:.2f}s "
              f"{res.problems[:3] if res.problems else ''} {res.logged[:1]}", flush=True)
        if status == "FAIL":
            failures.append((i, res.what, res.problems[:5]))
    print(f"SUMMARY corruption: trials={args.trials} failures={len(failures)} worst_recovery_s={worst:.2f} "
          f"targets={dict(per_target)} elapsed_s={time.monotonic() - t0:.0f} dir={root}")
    for f in failures:
        print("FAILURE", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
