#!/usr/bin/env python
"""Crash soak: SIGKILL ``rmqd serve`` at random moments under producer load, restart, verify.

Every send acknowledged with SUCCESS (across all trials, on one store) must read back with
PULL_MESSAGE with the same body, properties and commit-log offset; every queue must read back
contiguous with valid body CRCs; consumer offsets may go back at most one persist interval.

    .venv/bin/python scripts/crash_soak.py --trials 20 --flush SYNC_FLUSH
"""
from __future__ import annotations

import argparse
import os
import random
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))    # the repository: tests.*

from tests.faults.faultkit import crash_trials, offset_trial  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=20)
    ap.add_argument("--flush", default="SYNC_FLUSH", choices=["SYNC_FLUSH", "ASYNC_FLUSH", "both"])
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--offset-rounds", type=int, default=5)
    ap.add_argument("--dir", help="work directory (default: a new temp dir)")
    args = ap.parse_args()
    root = args.dir or tempfile.mkdtemp(prefix="rmqd-crash-")
    failures = 0
    t0 = time.monotonic()
    for flush in (["SYNC_FLUSH", "ASYNC_FLUSH"] if args.flush == "both" else [args.flush]):
        d = os.path.join(root, flush)
        os.makedirs(d, exist_ok=True)
        res = crash_trials(d, args.trials, flush, seed=args.seed, run_s=(0.2, 2.0))
        bad = [r for r in res if r.problems]
        failures += len(bad)
        print(f"SUMMARY crash {flush}: trials={len(res)} failures={len(bad)} "
              f"acked={sum(r.acked for r in res)} sent={sum(r.sent for r in res)} "
              f"worst_recovery_s={max(r.recovery_s for r in res):.2f} "
              f"mean_recovery_s={sum(r.recovery_s for r in res) / len(res):.2f}")
    problems = offset_trial(root, persist_ms=1000, rounds=args.offset_rounds, rnd=random.Random(args.seed))
    failures += len(problems)
    print(f"SUMMARY offsets: rounds={args.offset_rounds} failures={len(problems)} {problems[:3]}")
    print(f"SUMMARY total failures={failures} elapsed_s={time.monotonic() - t0:.0f} dir={root}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
