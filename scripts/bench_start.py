"""`rmqd serve` start-up time and idle memory: launch -> the `rmqd ready:` line, then RSS once idle.

    python scripts/bench_start.py                          # this interpreter, this tree
    python scripts/bench_start.py --target before=/tmp/venv/bin/python:/path/to/old/checkout \
                                  --target after=/tmp/venv2/bin/python:/path/to/this/checkout
    python scripts/bench_start.py -- --grpc-port 0         # extra `rmqd serve` options after --

Each run starts `rmqd serve` on free ports (name server, broker, console and gRPC: a default port another
process holds would switch that endpoint off and change what is measured), in a fresh
store directory and HOME, and measures:

The metrics port is left to the server's default (whether `serve` opens it by default, and at 5557, depends on
the tree measured).

* start: process launch -> the `rmqd ready:` line on stdout (interpreter start, imports, store recovery, every
  endpoint bound), and the CPU time the process used until then (utime + stime: what start-up costs, which
  other load on the machine does not inflate as it does the wall time);
* idle RSS: VmRSS and RssAnon (the process's own memory; the rest is shared libraries and mapped files) from
  /proc/<pid>/status, ``--idle`` seconds after ready (default 5), no client connected.

Prints the machine line, the load average (before and after: others' load inflates the wall time, not the CPU
time), each run and the medians. A target is an interpreter (e.g. a venv holding only the base dependencies)
and a checkout whose extensions are built in place; runs alternate between targets.

Bytecode: each target line says how many of the tree's rmqd modules have a current ``__pycache__`` file. Without
them (a fresh checkout run with PYTHONDONTWRITEBYTECODE=1) every start compiles every module it imports, which
costs more CPU than the imports themselves; ``--compile`` writes them first (``compileall``, as ``pip install``
does), so the runs measure what an installed rmqd does.
"""
from __future__ import annotations

import argparse
import importlib.util
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from benchenv import machine_line  # noqa: E402


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def status_kb(pid: int, field: str) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def cpu_seconds(pid: int) -> float:
    """utime + stime of the process so far (a start-up cost that CPU contention does not inflate)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def one_run(python: str, tree: str, extra: list[str], idle: float,
            timeout: float) -> tuple[float, float, float, float, str]:
    with tempfile.TemporaryDirectory(prefix="rmqd-bench-start-") as tmp:
        env = dict(os.environ, PYTHONPATH=tree, HOME=tmp, PYTHONUNBUFFERED="1")
        args = [python, "-m", "rmqd.runtime.cli", "serve", "--namesrv-port", "0", "--broker-port", "0",
                "--console-port", str(free_port()), "--grpc-port", str(free_port()),
                "--store-dir", os.path.join(tmp, "store")]
        args += extra
        t0 = time.perf_counter()
        proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=tmp)
        try:
            ready = ""
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:
                line = proc.stdout.readline()
                if not line:
                    raise RuntimeError(f"rmqd exited during start: {proc.stderr.read()[-2000:]}")
                if line.startswith("rmqd ready:"):
                    ready = line.strip()
                    break
            start = time.perf_counter() - t0
            cpu = cpu_seconds(proc.pid)
            if not ready:
                raise RuntimeError("no ready line")
            time.sleep(idle)
            rss = status_kb(proc.pid, "VmRSS") / 1024
            anon = status_kb(proc.pid, "RssAnon") / 1024
        finally:
            proc.terminate()
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        return start, cpu, rss, anon, ready


def bytecode_state(tree: str) -> str:
    """How many of the tree's rmqd modules have a bytecode cache file at least as new as the source."""
    total = current = 0
    for root, dirs, files in os.walk(os.path.join(tree, "rmqd")):
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        for name in files:
            if name.endswith(".py"):
                total += 1
                src = os.path.join(root, name)
                pyc = importlib.util.cache_from_source(src)
                if os.path.exists(pyc) and os.stat(pyc).st_mtime >= os.stat(src).st_mtime:
                    current += 1
    return f"{current} of {total} rmqd modules with current bytecode"


def load_line() -> str:
    return "load average %.2f %.2f %.2f" % os.getloadavg()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--target", action="append", metavar="LABEL=PYTHON:TREE",
                    help="what to measure (repeatable; runs alternate between targets so load shifts hit all "
                         "alike). Default: this interpreter and this tree")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--idle", type=float, default=5.0, help="seconds after ready before reading RSS")
    ap.add_argument("--timeout", type=float, default=60.0)
    ap.add_argument("--compile", action="store_true",
                    help="write each tree's bytecode first (compileall, as pip install does)")
    ap.add_argument("extra", nargs="*", help="more `rmqd serve` options (after --)")
    a = ap.parse_args()
    targets = []
    for t in a.target or [f"this={sys.executable}:{os.path.dirname(HERE)}"]:
        label, _, rest = t.partition("=")
        python, _, tree = rest.partition(":")
        targets.append((label, python, tree))
    print(machine_line())
    print(f"{load_line()}; PYTHONDONTWRITEBYTECODE={os.environ.get('PYTHONDONTWRITEBYTECODE', '-')}")
    for label, python, tree in targets:
        if a.compile:
            subprocess.run([python, "-m", "compileall", "-q", os.path.join(tree, "rmqd")], check=True,
                           stdout=subprocess.DEVNULL)
        print(f"{label}: python {python}, tree {tree} ({bytecode_state(tree)})")
    print(f"extra options: {a.extra or '-'}; idle {a.idle} s")
    results: dict[str, list] = {label: [] for label, _, _ in targets}
    for i in range(a.runs):
        for label, python, tree in targets:
            start, cpu, rss, anon, ready = one_run(python, tree, a.extra, a.idle, a.timeout)
            results[label].append((start, cpu, rss, anon))
            print(f"{label} run {i + 1}: start {start * 1000:.0f} ms (CPU {cpu * 1000:.0f} ms), idle RSS {rss:.1f} MB "
                  f"(RssAnon {anon:.1f} MB)"
                  + (f"  [{ready}]" if i == 0 else ""), flush=True)
    print(f"after the runs: {load_line()}")
    for label, rs in results.items():
        print(f"{label}, median of {a.runs}: start {statistics.median(r[0] for r in rs) * 1000:.0f} ms "
              f"(CPU {statistics.median(r[1] for r in rs) * 1000:.0f} ms), "
              f"idle RSS {statistics.median(r[2] for r in rs):.1f} MB "
              f"(RssAnon {statistics.median(r[3] for r in rs):.1f} MB); start min/max "
              f"{min(r[0] for r in rs) * 1000:.0f}/{max(r[0] for r in rs) * 1000:.0f} ms, CPU min/max "
              f"{min(r[1] for r in rs) * 1000:.0f}/{max(r[1] for r in rs) * 1000:.0f} ms, RSS min/max "
              f"{min(r[2] for r in rs):.1f}/{max(r[2] for r in rs):.1f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
