"""Replica groups under load: rmqd master + rmqd slave beside a Java 4.9.8 master + Java slave, same run (issue 28).

For each group and each master role (ASYNC_MASTER, SYNC_MASTER) it starts a name server, a master and a slave
(rmqd: ``rmqd namesrv`` + two ``rmqd broker`` processes; Java: the kit's ``reference-cluster`` + a
``reference-broker`` slave), then

- runs RocketMQ's ``bench-producer`` (1 KB bodies, 16 threads, sync sends) for ``--windows`` 10 s windows after
  its warm-up window: the median send TPS and average RT it prints;
- samples the slave's lag meanwhile, every 0.25 s: master max offset minus slave max offset (bytes), from each
  broker's GET_BROKER_RUNTIME_INFO; the max and the median;
- runs ``SendLatency`` (compat_tests/java/src: the same load, every round trip kept; bench-producer prints only
  the average) for ``--latency-s`` seconds after a warm-up: p50/p99/p99.9 and the statuses (SEND_OK etc.);
- runs ``scripts/loadgen.py`` (16 closed-loop senders from one native thread: the same wire traffic without a
  client JVM competing for the two cores) and reads the CPU the master and the slave processes spent per message.

The load average before and after each group is printed: on a shared machine it says how much the figures are
worth. Groups run one at a time, alternating, ``--passes`` times; medians across passes are printed and written as JSON
(``--json``). Usage: python scripts/bench_replication.py [--passes 1] [--windows 3] [--only rmqd|java] [--quick]
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(REPO / "compat_tests"))
sys.path.insert(0, str(REPO))                      # tests.kit

from benchenv import machine_line  # noqa: E402
from javakit import ReferenceCluster, free_port_block, java_command, kit_dir  # noqa: E402
from replication_kit import FILE_SIZE, ReferenceBroker, RmqdProcess, max_offset, wait_until  # noqa: E402

TPS = re.compile(r"Send TPS: (\d+) Max RT\(ms\): (\d+) Average RT\(ms\):\s+([\d.]+) Send Failed: (\d+)")
WINDOW_S = 10.0
ROLES = ("ASYNC_MASTER", "SYNC_MASTER")


class RmqdGroup:
    name = "rmqd"

    def __init__(self, root: Path, role: str) -> None:
        root.mkdir(parents=True, exist_ok=True)
        base = free_port_block(12)
        self.ns = RmqdProcess("namesrv", "--port", str(base), log_path=root / "namesrv.log").start()
        self.namesrv = self.ns.addr
        mconf = root / "m.conf"
        mconf.write_text(f"brokerRole={role}\nmappedFileSizeCommitLog={FILE_SIZE * 256}\n")
        sconf = root / "s.conf"
        sconf.write_text(f"brokerRole=SLAVE\nbrokerId=1\nmappedFileSizeCommitLog={FILE_SIZE * 256}\n")
        self.master = RmqdProcess("broker", "-n", self.namesrv, "--broker-port", str(base + 3), "--store-dir",
                                  str(root / "master"), "-c", str(mconf), "--grpc-port", "0",
                                  log_path=root / "master.log", log_level="WARNING").start()
        self.slave = RmqdProcess("broker", "-n", self.namesrv, "--broker-port", str(base + 8), "--store-dir",
                                 str(root / "slave"), "-c", str(sconf), "--grpc-port", "0",
                                 log_path=root / "slave.log", log_level="WARNING").start()
        self.master_addr, self.slave_addr = self.master.addr, self.slave.addr
        self.pids = (self.master.proc.pid, self.slave.proc.pid)

    def stop(self) -> None:
        for p in (self.slave, self.master, self.ns):
            p.stop()


class JavaGroup:
    name = "java"

    def __init__(self, root: Path, role: str) -> None:
        root.mkdir(parents=True, exist_ok=True)
        self.cluster = ReferenceCluster(root / "cluster", extra_conf=[f"brokerRole={role}",
                                                                       f"mappedFileSizeCommitLog={FILE_SIZE * 256}"])
        self.cluster.start()
        self.namesrv = self.cluster.namesrv_addr
        self.master_addr = self.cluster.broker_addr
        port = free_port_block(4) + 2
        self.slave = ReferenceBroker(root / "slave", self.namesrv, port, 1, "SLAVE",
                                     {"mappedFileSizeCommitLog": FILE_SIZE * 256}).start()
        self.slave_addr = self.slave.addr
        self.pids = tuple(int((root / d / "broker.pid").read_text()) for d in ("cluster", "slave"))

    def stop(self) -> None:
        self.slave.stop()
        self.cluster.stop()


def kit_tool(name: str, *args: str) -> subprocess.Popen:
    return subprocess.Popen([str(kit_dir() / "bin" / name), *args], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, cwd=tempfile.gettempdir(),
                            env=dict(os.environ, HOME=tempfile.gettempdir()), start_new_session=True)


def stop_tool(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, 15)
        try:
            proc.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, 9)
            proc.communicate()


class LagSampler(threading.Thread):
    """Master max offset minus slave max offset every 0.25 s."""

    def __init__(self, group) -> None:
        super().__init__(daemon=True)
        self.group = group
        self.samples: list[int] = []
        self.stopped = threading.Event()

    def run(self) -> None:
        while not self.stopped.wait(0.25):
            try:
                self.samples.append(max(0, max_offset(self.group.master_addr) - max_offset(self.group.slave_addr)))
            except (OSError, KeyError, AssertionError) as exc:
                print(f"  lag sample failed: {exc!r}", flush=True)

    def result(self) -> dict:
        s = self.samples or [0]
        return {"lag_max_bytes": max(s), "lag_median_bytes": statistics.median(s), "lag_samples": len(s)}


def wait_slave_ready(group, role: str) -> None:
    """Until the slave has acknowledged something (SYNC_MASTER answers 11 before; a Java slave reports after 5 s)."""
    probe = java_command("SendLatency", group.namesrv, "BenchmarkTest", "1", "16", "0", "1")
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        out = subprocess.run(probe, capture_output=True, text=True, timeout=120, cwd=tempfile.gettempdir()).stdout
        line = next((ln for ln in out.splitlines() if ln.startswith("{")), "{}")
        if json.loads(line).get("statuses", {}).get("SEND_OK") and (
                role != "SYNC_MASTER" or not set(json.loads(line)["statuses"]) - {"SEND_OK"}):
            return
        time.sleep(1.0)
    raise RuntimeError(f"{group.name}: the slave never acknowledged")


def producer_windows(group, windows: int) -> dict:
    proc = kit_tool("bench-producer", "-n", group.namesrv, "-t", "BenchmarkTest", "-w", "16", "-s", "1024")
    rows = []
    deadline = time.monotonic() + WINDOW_S * (windows + 1) + 30
    for line in proc.stdout:
        m = TPS.search(line)
        if m:
            rows.append((int(m.group(1)), float(m.group(3)), int(m.group(4))))
            if len(rows) > windows:
                break
        if time.monotonic() > deadline:
            break
    stop_tool(proc)
    used = rows[1:] or rows
    if not used:
        raise RuntimeError("bench-producer printed no TPS line")
    return {"tps": statistics.median(r[0] for r in used), "avg_rt_ms": statistics.median(r[1] for r in used),
            "failed": sum(r[2] for r in used), "windows": [r[0] for r in used]}


def latency(group, seconds: int) -> dict:
    cmd = java_command("SendLatency", group.namesrv, "BenchmarkTest", "16", "1024", "3", str(seconds))
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=seconds + 120, cwd=tempfile.gettempdir())
    line = next((ln for ln in out.stdout.splitlines() if ln.startswith("{")), None)
    if line is None:
        raise RuntimeError(f"SendLatency printed nothing: {out.stderr[-2000:]}")
    return json.loads(line)


def cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def loadgen_point(group, seconds: int) -> dict:
    """loadgen.py closed-loop, 16 senders, 1 KB, on BenchmarkTest; the brokers' CPU per message."""
    before = [cpu_s(p) for p in group.pids]
    out = subprocess.run([sys.executable, str(HERE / "loadgen.py"), "--broker", group.master_addr, "--topic",
                          "BenchmarkTest", "--threads", "16", "--seconds", str(seconds)],
                         capture_output=True, text=True, timeout=seconds + 60)
    after = [cpu_s(p) for p in group.pids]
    r = json.loads(out.stdout.strip().splitlines()[-1])
    n = max(1, r["sent"])
    return {"lg_tps": r["tps"], "lg_p50_ms": r["p50"], "lg_p99_ms": r["p99"],
            "master_us_per_msg": (after[0] - before[0]) / n * 1e6, "slave_us_per_msg": (after[1] - before[1]) / n * 1e6}


def one(kind: str, role: str, root: Path, args) -> dict:
    group = (RmqdGroup if kind == "rmqd" else JavaGroup)(root, role)
    try:
        wait_slave_ready(group, role)
        sampler = LagSampler(group)
        sampler.start()
        prod = producer_windows(group, args.windows)
        sampler.stopped.set()
        sampler.join(5)
        lat = latency(group, args.latency_s)
        lg = loadgen_point(group, args.latency_s)
        caught = time.monotonic()
        wait_until(lambda: max_offset(group.slave_addr) == max_offset(group.master_addr), 120, what="slave caught up")
        return {**prod, **sampler.result(), "p50_ms": lat["p50"], "p99_ms": lat["p99"], "p999_ms": lat["p99.9"],
                "latency_tps": lat["tps"], "statuses": lat["statuses"], "latency_failed": lat["failed"],
                "catch_up_s": round(time.monotonic() - caught, 2), **lg}
    finally:
        group.stop()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--passes", type=int, default=1)
    ap.add_argument("--windows", type=int, default=3)
    ap.add_argument("--latency-s", type=int, default=15)
    ap.add_argument("--only", choices=("rmqd", "java"))
    ap.add_argument("--roles", default=",".join(ROLES))
    ap.add_argument("--quick", action="store_true", help="1 window, 5 s of latency")
    ap.add_argument("--json", help="write the results here")
    args = ap.parse_args()
    if args.quick:
        args.windows, args.latency_s = 1, 5
    kinds = [args.only] if args.only else ["rmqd", "java"]
    roles = args.roles.split(",")
    work = Path(tempfile.mkdtemp(prefix="bench-replication-"))
    print(machine_line(), flush=True)
    results: dict = {}
    try:
        for n in range(args.passes):
            for role in roles:
                for kind in kinds:
                    load0 = os.getloadavg()[0]
                    r = one(kind, role, work / f"{kind}-{role}-{n}", args)
                    r["load_avg"] = (round(load0, 1), round(os.getloadavg()[0], 1))
                    results.setdefault(f"{kind} {role}", []).append(r)
                    print(f"pass {n + 1} {kind:4} {role:12} (load {r['load_avg'][0]}..{r['load_avg'][1]}) send TPS "
                          f"{r['tps']:>7.0f} avg RT {r['avg_rt_ms']:.2f} ms"
                          f" | p50 {r['p50_ms']:.2f} p99 {r['p99_ms']:.2f} p99.9 {r['p999_ms']:.2f} ms "
                          f"({r['latency_tps']:.0f}/s, {r['statuses']}) | lag max {r['lag_max_bytes'] / 1024:.0f} KiB "
                          f"median {r['lag_median_bytes'] / 1024:.0f} KiB | loadgen {r['lg_tps']:.0f}/s p50 "
                          f"{r['lg_p50_ms']:.2f} p99 {r['lg_p99_ms']:.2f} ms, CPU/msg master "
                          f"{r['master_us_per_msg']:.0f} us slave {r['slave_us_per_msg']:.0f} us", flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    fields = ("tps", "avg_rt_ms", "p50_ms", "p99_ms", "p999_ms", "lag_max_bytes", "lag_median_bytes", "lg_tps",
              "lg_p50_ms", "lg_p99_ms", "master_us_per_msg", "slave_us_per_msg")
    summary = {k: {f: statistics.median(r[f] for r in v) for f in fields} for k, v in results.items()}
    print("\nmedians:")
    for k, v in summary.items():
        print(f"  {k:22} TPS {v['tps']:>7.0f}  avg RT {v['avg_rt_ms']:.2f} ms  p99 {v['p99_ms']:.2f} ms  "
              f"lag max {v['lag_max_bytes'] / 1024:.0f} KiB  loadgen {v['lg_tps']:.0f}/s  CPU/msg "
              f"{v['master_us_per_msg']:.0f}+{v['slave_us_per_msg']:.0f} us")
    for role in roles:
        a, b = summary.get(f"rmqd {role}"), summary.get(f"java {role}")
        if a and b and b["tps"]:
            print(f"  {role}: rmqd/java TPS x{a['tps'] / b['tps']:.2f}, p99 {a['p99_ms']:.2f} vs {b['p99_ms']:.2f} ms")
    if args.json:
        Path(args.json).write_text(json.dumps({"machine": machine_line(), "runs": results, "medians": summary},
                                              indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
