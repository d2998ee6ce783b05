#!/usr/bin/env python3
"""Fault rounds on mixed rmqd / Java 5.x controller-mode groups at full count, with the Java-only group as the
reference column measured in the same run: ROUNDS rounds of each fault (compat_tests/fault_rounds.py) on each mix
(compat_tests/mixed_group.py), every server on a host of its own (network namespaces, compat_tests/netkit.py).
Prints per fault and mix the checker's verdict (acknowledged, lost, duplicates) and the time from the fault to the
first acknowledged send after it (median / max), then the kill -9 comparison (rmqd-only against Java-only), and a
markdown table for RELIABILITY.md.

    python3 scripts/mixed_rounds.py [--rounds 20] [--mixes rmqd-only java-only ...] [--faults kill9 ...]
                                    [--burst 5] [--pause 60] [--report FILE]

Each mix runs in its own pytest run of compat_tests/test_mixed_faults.py (RMQD_MIXED_ROUNDS, RMQD_MIXED_MIXES,
RMQD_MIXED_FAULTS, RMQD_MIXED_REPORT), in bursts of ``--burst`` rounds with ``--pause`` seconds between them
(the machine is shared); every pytest run is bounded by ``--timeout`` seconds. ``--table-only FILE`` rebuilds the
table from an earlier report.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "compat_tests"))
sys.path.insert(0, REPO)                           # tests.kit, tests.failover (mixed_group imports them)

from fault_rounds import FAULTS  # noqa: E402
from mixed_group import MIXES, REFERENCE_MIX  # noqa: E402

TEST = "compat_tests/test_mixed_faults.py"


def load(path: str) -> list[dict]:
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def fmt_times(values: list[float]) -> str:
    return f"{statistics.median(values):.2f} s / {max(values):.2f} s" if values else "-"


def table(rows: list[dict], mixes: list[str], faults: list[str]) -> list[str]:
    """One row per fault, one column per mix: rounds, acknowledged, lost, duplicates, first send median / max."""
    rounds = [r for r in rows if "fault" in r and not r.get("summary")]
    summaries = [r for r in rows if r.get("summary")]       # one per round tag and burst (tags repeat per burst)
    head = "| fault | " + " | ".join(f"{m}{' (reference)' if m == REFERENCE_MIX else ''}" for m in mixes) + " |"
    out = [head, "|---" * (len(mixes) + 1) + "|"]
    for fault in faults:
        cells = []
        for mix in mixes:
            mine = [r for r in rounds if r["mix"] == mix and r["fault"] == fault]
            if not mine:
                cells.append("–")
                continue
            judged = [c for c in summaries if c["mix"] == mix and c["tag"].startswith(f"{fault}.")]
            acked = sum(c.get("acked", 0) for c in judged)
            lost = sum(c.get("lost", 0) for c in judged) if judged else "not judged"
            dups = sum(c.get("duplicates", 0) for c in judged) if judged else "-"
            restarts = sum(bool(r.get("java_restarted")) for r in mine)
            cell = (f"{len(mine)} rounds, {acked} acked, {lost} lost, {dups} dup, "
                    f"{fmt_times([r['first_send_s'] for r in mine])}")
            if restarts:
                cell += f", {restarts} Java restart(s)"
            cells.append(cell)
        out.append(f"| {fault} | " + " | ".join(cells) + " |")
    return out


def faults_with_switchover(faults: list[str]) -> list[str]:
    """The slow-disk round first moves the master with a planned switchover, recorded as a round of its own."""
    return faults + (["switchover"] if "slow-disk" in faults else [])


def kill_comparison(rows: list[dict]) -> str:
    def times(mix: str) -> list[float]:
        return [r["first_send_s"] for r in rows if r.get("mix") == mix and r.get("fault") == "kill9"
                and not r.get("summary")]
    ours, ref = times("rmqd-only"), times(REFERENCE_MIX)
    if not ours or not ref:
        return "kill -9 comparison: not both rmqd-only and java-only measured"
    m_ours, m_ref = statistics.median(ours), statistics.median(ref)
    verdict = "met" if m_ours <= m_ref / 2 else "NOT met"
    return (f"kill -9 of the master, fault -> first acknowledged send: rmqd-only median {m_ours:.2f} s over "
            f"{len(ours)} rounds, java-only median {m_ref:.2f} s over {len(ref)} rounds: ratio "
            f"{m_ours / m_ref:.2f} (target <= 0.5: {verdict})")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--mixes", nargs="+", choices=sorted(MIXES), default=list(MIXES))
    ap.add_argument("--faults", nargs="+", choices=sorted(FAULTS), default=list(FAULTS))
    ap.add_argument("--burst", type=int, default=5, help="rounds of each fault per pytest run")
    ap.add_argument("--pause", type=float, default=30.0, help="seconds between bursts (a shared machine)")
    ap.add_argument("--timeout", type=float, default=3600.0, help="seconds for each pytest run")
    ap.add_argument("--report", help="JSON-lines report to append to (default: a temporary file)")
    ap.add_argument("--table-only", metavar="FILE", help="only print the table of an earlier report")
    args = ap.parse_args()
    if args.table_only:
        rows = load(args.table_only)
        print("\n".join(table(rows, args.mixes, faults_with_switchover(args.faults))))
        print(kill_comparison(rows))
        return 0
    report = args.report or tempfile.mkstemp(suffix=".jsonl", prefix="mixed-rounds-")[1]
    failed = {}
    for mix in args.mixes:
        done = 0
        while done < args.rounds:
            n = min(args.burst, args.rounds - done)
            env = dict(os.environ, RMQD_MIXED_ROUNDS=str(n), RMQD_MIXED_MIXES=mix,
                       RMQD_MIXED_FAULTS=",".join(args.faults), RMQD_MIXED_REPORT=report,
                       PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
            load_before = os.getloadavg()[0]
            try:
                code = subprocess.call([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-s", "-m",
                                        "mixed_faults", "-o", "timeout=0", TEST], cwd=REPO, env=env,
                                       timeout=args.timeout)
            except subprocess.TimeoutExpired:
                code = "timed out"
            print(f"{mix}: rounds {done + 1}-{done + n}: pytest {code}; load average {load_before:.1f} before, "
                  f"{os.getloadavg()[0]:.1f} after", flush=True)
            if code != 0:
                failed.setdefault(mix, []).append(code)
            done += n
            if done < args.rounds or mix != args.mixes[-1]:
                time.sleep(args.pause)
    rows = load(report)
    print(f"report: {report}")
    print("\n".join(table(rows, args.mixes, faults_with_switchover(args.faults))))
    print(kill_comparison(rows))
    for r in rows:
        if r.get("verdict"):
            print(f"{r['mix']}: checker {'ok' if r['ok'] else 'FOUND'}: {r['acked']} acked, {r['lost']} lost, "
                  f"{r['duplicates']} duplicates, {r['offset_reuse']} queue offsets reused, {r['epoch_conflicts']} "
                  f"epochs with two masters, {r['phantom_reads']} phantom reads, CommitLog differences "
                  f"{r['commitlog_differences'] or 'none'}")
    print("all runs passed" if not failed else f"FAILED runs: {failed}")
    return 0 if not failed else 1


if __name__ == "__main__":
    sys.exit(main())
