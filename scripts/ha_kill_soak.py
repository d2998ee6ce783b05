#!/usr/bin/env python
"""HA kill soak: kill -9 a SYNC_MASTER in the middle of a 4-thread send loop, ROUNDS times, each with a fresh
rmqd group (name server, master, slave processes); every send answered SEND_OK must be on the slave.

It runs the suite's test (tests/replication/test_ha_crash.py) with ``RMQD_HA_KILL_ROUNDS``: the suite runs one round.

    python scripts/ha_kill_soak.py --rounds 20
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=20)
    args = ap.parse_args()
    env = dict(os.environ, RMQD_HA_KILL_ROUNDS=str(args.rounds),
               PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH", "")])))
    return subprocess.call([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                            "tests/replication/test_ha_crash.py::"
                            "test_kill9_slave_resumes_then_kill9_master_loses_nothing_acknowledged",
                            "-o", "addopts=", "--timeout", str(120 + 60 * args.rounds)], cwd=REPO, env=env)


if __name__ == "__main__":
    sys.exit(main())
