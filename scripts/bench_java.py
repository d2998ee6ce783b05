"""rmqd against the Java 4.9.8 broker, measured with RocketMQ's own benchmark tools (issue 13).

Runs the kit's ``bench-producer`` / ``bench-consumer`` (``../shared/rocketmq-4.9.8/bin``) against rmqd
(``rmqd serve`` in a subprocess) and against the real Java name server + broker (``reference-cluster``),
alternately, one target at a time, and prints medians and ratios:

- sync sends, 1 KB bodies at 1/4/16/64 threads, 16 KB and 128 KB at 16 threads: the median of the
  producer's 10 s windows (its first window, with the JVM warm-up, is dropped) and the average RT;
- backlog drain by the Java push consumer: a backlog of ``--backlog`` 1 KB messages, drained by
  ``bench-consumer -w 20``; the rate comes from the broker's consumer offsets (GET_CONSUME_STATS polled
  every 50 ms), from the first committed progress to the last message, not from the consumer's windows;
- live produce + consume: 4 producer threads with the consumer running; the consumer's average
  store-to-consume latency (S2C) windows;
- SYNC_FLUSH sends at 16 threads, next to the disk's fsync-bound limit measured with ``dd oflag=dsync``
  (1 KB writes) in the same run;
- the send points against a null broker that stores nothing (``--no-ceiling`` skips them): what the
  benchmark producer itself reaches on this machine, so the ceiling of any broker measured with it;
- idle CPU (% of one core over 10 s with nothing sent) and RSS at idle: of the broker process, and of name
  server + broker together (what `rmqd serve`, one process, replaces: two JVMs for Java).

Every run is bounded in time. ``--quick`` shortens everything for a smoke run.
Usage: python scripts/bench_java.py [--passes 2] [--window-count 3] [--backlog 2000000] [--only rmqd]
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
from typing import Callable, Optional

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(REPO / "compat_tests"))

from benchenv import machine_line  # noqa: E402
from procstat import cpu_seconds, cpu_ticks, rss_mb  # noqa: E402
from javakit import ReferenceCluster, free_port_block, kit_dir  # noqa: E402

from rmqd.admin.client import AdminClient  # noqa: E402
from rmqd.remoting.codes import RequestCode  # noqa: E402

TPS = re.compile(r"Send TPS: (\d+) Max RT\(ms\): (\d+) Average RT\(ms\):\s+([\d.]+) Send Failed: (\d+)")
CONSUME = re.compile(r"TPS: (\d+) FAIL: (\d+) AVG\(B2C\) RT\(ms\):\s+([\d.NaN]+) AVG\(S2C\) RT\(ms\):\s+([\d.NaN]+)")
WINDOW_S = 10.0
POINTS = ("idle", "send", "big", "drain", "live", "sync")


# ---------------------------------------------------------------------------------------------- system probes
def cpu_shares(start: tuple[float, float, float], broker_pid: int, client_pid: int) -> dict:
    """Cores used by the broker process and by the benchmark client JVM since ``start``."""
    wall = time.monotonic() - start[2]
    try:
        return {"broker_cores": round((cpu_seconds(broker_pid) - start[0]) / wall, 2),
                "client_cores": round((cpu_seconds(client_pid) - start[1]) / wall, 2)}
    except OSError:
        return {}


def steal_pct(before: list[int], after: list[int]) -> float:
    d = [b - a for a, b in zip(before, after)]
    total = sum(d[:8]) or 1
    return 100.0 * d[7] / total


def prime_memory(fraction: float = 0.8) -> float:
    """Touch most of the free RAM once and give it back (seconds taken).

    On a VM the first write to a guest page costs a fault on the host (~12 µs per 4 KiB, measured
    here), ten times a reused page. Whichever broker ran first on a fresh machine would pay that for
    every page of its page cache and the second would not; after this both run on backed memory."""
    t0 = time.perf_counter()
    with open("/proc/meminfo") as f:
        avail = next(int(line.split()[1]) * 1024 for line in f if line.startswith("MemAvailable:"))
    chunks = [bytearray(1 << 28) for _ in range(int(avail * fraction) >> 28)]
    del chunks
    return time.perf_counter() - t0


def dsync_limit(directory: str, count: int = 2000) -> float:
    """1 KB writes per second with O_DSYNC: what one fsync per message allows on this disk."""
    path = os.path.join(directory, "dd-dsync.bin")
    t0 = time.perf_counter()
    subprocess.run(["dd", "if=/dev/zero", f"of={path}", "bs=1k", f"count={count}", "oflag=dsync"],
                   capture_output=True, check=True, timeout=300)
    rate = count / (time.perf_counter() - t0)
    os.unlink(path)
    return rate


# ---------------------------------------------------------------------------------------------- targets
class Target:
    name = ""
    namesrv = ""
    broker_addr = ""
    pid = 0                  # the broker's process
    server_pids: tuple = ()  # every process of the name server + broker (rmqd serve: one; Java: two JVMs)

    def start(self, props: dict[str, str]) -> None: ...

    def stop(self) -> None: ...


class RmqdTarget(Target):
    name = "rmqd"

    def __init__(self, workdir: str, extra_args: tuple[str, ...] = ()) -> None:
        """``extra_args``: more ``rmqd serve`` options (e.g. ``--grpc-port N``)."""
        self.workdir = workdir
        self.extra_args = extra_args
        self.proc: Optional[subprocess.Popen] = None

    def start(self, props: dict[str, str]) -> None:
        store = tempfile.mkdtemp(prefix="store-", dir=self.workdir)
        conf = os.path.join(store, "broker.conf")
        with open(conf, "w") as f:
            f.writelines(f"{k}={v}\n" for k, v in props.items())
        base = free_port_block(4)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "rmqd.runtime.cli", "--log-level", "WARNING", "serve", "--namesrv-port", str(base),
             "--broker-port", str(base + 3), "--store-dir", store, "-c", conf, *self.extra_args],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        deadline = time.monotonic() + 30
        seen = 0
        while seen < 2 and time.monotonic() < deadline:
            line = self.proc.stdout.readline()
            if not line:
                break
            seen += "listening on" in line
        if seen < 2:
            self.stop()
            raise RuntimeError("rmqd did not start")
        threading.Thread(target=self.proc.stdout.read, daemon=True).start()
        self.namesrv, self.broker_addr, self.pid = f"127.0.0.1:{base}", f"127.0.0.1:{base + 3}", self.proc.pid
        self.server_pids = (self.proc.pid,)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None


class NullTarget(Target):
    """A null broker (bench_e2e.NULL_BROKER: routes every topic to itself, answers each send at once,
    stores nothing): what the benchmark client itself reaches on this machine, the ceiling of any broker."""
    name = "null"

    def __init__(self, workdir: str) -> None:
        self.proc: Optional[subprocess.Popen] = None

    def start(self, props: dict[str, str]) -> None:
        from bench_e2e import NULL_BROKER
        self.proc = subprocess.Popen([sys.executable, "-c", NULL_BROKER], stdout=subprocess.PIPE, text=True)
        m = re.search(r"listening on (127\.0\.0\.1:\d+)", self.proc.stdout.readline())
        if not m:
            self.stop()
            raise RuntimeError("the null broker did not start")
        self.namesrv = self.broker_addr = m.group(1)
        self.pid = self.proc.pid
        self.server_pids = (self.proc.pid,)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.proc = None


class JavaTarget(Target):
    name = "java"

    def __init__(self, workdir: str) -> None:
        self.workdir = workdir
        self.cluster: Optional[ReferenceCluster] = None

    def start(self, props: dict[str, str]) -> None:
        d = tempfile.mkdtemp(prefix="ref-", dir=self.workdir)
        self.cluster = ReferenceCluster(d, extra_conf=[f"{k}={v}" for k, v in props.items()]).start()
        self.namesrv, self.broker_addr = self.cluster.namesrv_addr, self.cluster.broker_addr
        self.pid = int(Path(d, "broker.pid").read_text().strip())
        self.server_pids = (int(Path(d, "namesrv.pid").read_text().strip()), self.pid)

    def stop(self) -> None:
        if self.cluster is not None:
            self.cluster.stop()
            shutil.rmtree(self.cluster.workdir, ignore_errors=True)
        self.cluster = None


# ---------------------------------------------------------------------------------------------- tools
def kit_tool(name: str, *args: str) -> subprocess.Popen:
    return subprocess.Popen([str(kit_dir() / "bin" / name), *args], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, cwd=tempfile.gettempdir(),
                            env=dict(os.environ, HOME=tempfile.gettempdir()), start_new_session=True)


def stop_tool(proc: subprocess.Popen) -> str:
    if proc.poll() is None:
        os.killpg(proc.pid, 15)
        try:
            out, _ = proc.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, 9)
            out, _ = proc.communicate()
        return out
    return proc.communicate()[0]


def create_topic(target: Target, topic: str, queues: int = 8, credentials: Optional[tuple] = None) -> None:
    admin = AdminClient(target.namesrv, credentials=credentials)
    try:
        admin.call(target.broker_addr, RequestCode.UPDATE_AND_CREATE_TOPIC, {
            "topic": topic, "defaultTopic": "TBW102", "readQueueNums": str(queues), "writeQueueNums": str(queues),
            "perm": "6", "topicFilterType": "SINGLE_TAG", "topicSysFlag": "0", "order": "false"})
        wait_routed(admin, topic)
    finally:
        admin.close()


def wait_routed(admin: AdminClient, topic: str, timeout: float = 30.0) -> None:
    """Until the name server routes ``topic`` (RuntimeError after ``timeout``)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if admin.route(topic).get("queueDatas"):
                return
        except Exception:                   # not routed yet: the name server answers TOPIC_NOT_EXIST
            pass
        time.sleep(0.2)
    raise RuntimeError(f"topic {topic} not routable")


def server_cpu_s(target: Target) -> float:
    """CPU seconds of all the target's server processes (name server, broker, proxy) together."""
    return sum(cpu_seconds(p) for p in target.server_pids)


def server_rss_mb(target: Target) -> float:
    return sum(rss_mb(p) for p in target.server_pids)


def produce(target: Target, topic: str, threads: int, size: int, windows: int, extra: tuple = ()) -> dict:
    """bench-producer for ``windows`` 10 s windows after the warm-up window; median TPS and RT, and the server
    processes' CPU per message over the measured windows (``server_us_per_msg``)."""
    proc = kit_tool("bench-producer", "-n", target.namesrv, "-t", topic, "-w", str(threads), "-s", str(size),
                    *extra)
    rows: list[tuple[int, float, int]] = []
    before = cpu_ticks()
    cpu0 = (cpu_seconds(target.pid), cpu_seconds(proc.pid), time.monotonic())
    srv0 = 0.0
    deadline = time.monotonic() + WINDOW_S * (windows + 1) + 20
    for line in proc.stdout:
        m = TPS.search(line)
        if m:
            rows.append((int(m.group(1)), float(m.group(3)), int(m.group(4))))
            if len(rows) == 1:          # the warm-up window ends: the measured windows start
                srv0 = server_cpu_s(target)
            if len(rows) > windows:
                break
        if time.monotonic() > deadline:
            break
    srv = server_cpu_s(target) - srv0
    steal = steal_pct(before, cpu_ticks())
    shares = cpu_shares(cpu0, target.pid, proc.pid)
    rss = server_rss_mb(target)
    stop_tool(proc)
    used = rows[1:] or rows
    if not used:
        raise RuntimeError("bench-producer printed no TPS line")
    measured = sum(r[0] for r in rows[1:]) * WINDOW_S
    return {"tps": statistics.median(r[0] for r in used), "rt_ms": statistics.median(r[1] for r in used),
            "failed": sum(r[2] for r in used), "windows": [r[0] for r in used], "steal": round(steal, 1),
            "server_us_per_msg": round(srv / measured * 1e6, 2) if measured else None, "server_rss_mb": round(rss),
            **shares}


def fill_backlog(target: Target, topic: str, count: int, timeout_s: float = 600) -> int:
    proc = kit_tool("bench-producer", "-n", target.namesrv, "-t", topic, "-w", "32", "-s", "1024")
    admin = AdminClient(target.namesrv)
    try:
        deadline = time.monotonic() + timeout_s
        total = 0
        while time.monotonic() < deadline:
            time.sleep(1.0)
            total = sum(admin.max_offset(target.broker_addr, topic, q) for q in range(8))
            if total >= count:
                break
        stop_tool(proc)
        time.sleep(1.0)
        return sum(admin.max_offset(target.broker_addr, topic, q) for q in range(8))
    finally:
        admin.close()


def consumed(admin: AdminClient, target: Target, group: str, topic: str) -> int:
    try:
        body = admin.call_json(target.broker_addr, RequestCode.GET_CONSUME_STATS,
                               {"consumerGroup": group, "topic": topic})
    except Exception:
        return 0
    total = 0
    for key, val in (body.get("offsetTable") or {}).items():
        total += max(0, int(val.get("consumerOffset", 0)))
    return total


def drain(target: Target, topic: str, backlog: int, timeout_s: float = 300) -> dict:
    """Rate of the push consumer through the backlog, from the broker's committed offsets.

    The consumer commits each queue's offset with its next pull, so the last batch of each queue
    (up to 32 messages) may stay uncommitted: the drain ends within 32 x 8 messages of the backlog."""
    group = f"drain_{int(time.time() * 1000)}"
    proc = kit_tool("bench-consumer", "-n", target.namesrv, "-t", topic, "-g", group, "-w", "20")
    admin = AdminClient(target.namesrv)
    end_at = backlog - 32 * 8
    try:
        t_first = t_last = None
        first_value = done = 0
        srv_first = srv_last = 0.0
        before = cpu_ticks()
        cpu0 = (cpu_seconds(target.pid), cpu_seconds(proc.pid), time.monotonic())
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            value = consumed(admin, target, group, topic)
            now = time.monotonic()
            if value > done:
                done, t_last, srv_last = value, now, server_cpu_s(target)
                if t_first is None:
                    t_first, first_value, srv_first = now, value, srv_last
            if done >= end_at or (t_last is not None and now - t_last > 10):
                break
            time.sleep(0.02)
        steal = steal_pct(before, cpu_ticks())
        shares = cpu_shares(cpu0, target.pid, proc.pid)
        rss = server_rss_mb(target)
    finally:
        admin.close()
        stop_tool(proc)
    if t_first is None or t_last is None or t_last <= t_first:
        return {"rate": 0.0, "consumed": done, "steal": 0.0}
    return {"rate": (done - first_value) / (t_last - t_first), "consumed": done,
            "seconds": round(t_last - t_first, 2), "steal": round(steal, 1),
            "server_us_per_msg": round((srv_last - srv_first) / max(1, done - first_value) * 1e6, 2),
            "server_rss_mb": round(rss), **shares}


def live_latency(target: Target, topic: str, windows: int) -> dict:
    """4 producer threads with the push consumer running: the consumer's S2C latency windows."""
    group = f"live_{int(time.time() * 1000)}"
    consumer = kit_tool("bench-consumer", "-n", target.namesrv, "-t", topic, "-g", group, "-w", "20")
    time.sleep(5)
    producer = kit_tool("bench-producer", "-n", target.namesrv, "-t", topic, "-w", "4", "-s", "1024")
    lat: list[float] = []
    tps: list[int] = []
    deadline = time.monotonic() + WINDOW_S * (windows + 2) + 20
    for line in consumer.stdout:
        m = CONSUME.search(line)
        if m and m.group(4) != "NaN" and int(m.group(1)) > 0:
            tps.append(int(m.group(1)))
            lat.append(float(m.group(4)))
            if len(lat) > windows:
                break
        if time.monotonic() > deadline:
            break
    stop_tool(producer)
    stop_tool(consumer)
    used = lat[1:] or lat
    return {"s2c_ms": statistics.median(used) if used else float("nan"), "tps": statistics.median(tps[1:] or tps or [0])}


def idle(target: Target, seconds: float = 10.0) -> dict:
    time.sleep(2.0)
    c0 = cpu_seconds(target.pid)
    time.sleep(seconds)
    return {"cpu_pct": 100.0 * (cpu_seconds(target.pid) - c0) / seconds, "rss_mb": rss_mb(target.pid),
            "anon_mb": rss_mb(target.pid, "RssAnon"),
            "server_rss_mb": sum(rss_mb(p) for p in target.server_pids),
            "server_anon_mb": sum(rss_mb(p, "RssAnon") for p in target.server_pids)}


# ---------------------------------------------------------------------------------------------- main
def run_pass(target: Target, args: argparse.Namespace, results: dict) -> None:
    def rec(key: str, value: dict) -> None:
        results.setdefault(key, {}).setdefault(target.name, []).append(value)
        print(f"  {target.name:5} {key:22} {json.dumps(value)}", flush=True)

    points = set(args.points)
    if target.name == "null":            # the client's own ceiling: send points only
        points &= {"send", "big"}
    target.start({})
    try:
        if "idle" in points:
            rec("idle", idle(target, args.idle_seconds))
        if "send" in points:
            for threads in args.threads:
                topic = f"Bench1k_{threads}"
                create_topic(target, topic)
                rec(f"send 1KB x{threads}", produce(target, topic, threads, 1024, args.window_count))
        if "big" in points:
            for size in (16 * 1024, 128 * 1024):
                topic = f"Bench{size // 1024}k"
                create_topic(target, topic)
                rec(f"send {size // 1024}KB x16", produce(target, topic, 16, size, args.window_count))
        if "drain" in points:
            create_topic(target, "BenchDrain")
            n = fill_backlog(target, "BenchDrain", args.backlog)
            rec("drain", dict(drain(target, "BenchDrain", n), backlog=n))
        if "live" in points:
            create_topic(target, "BenchLive")
            rec("live 4 producers", live_latency(target, "BenchLive", args.window_count))
        if "idle" in points:
            rec("idle after load", idle(target, args.idle_seconds))
    finally:
        target.stop()
    if "sync" not in points:
        return
    target.start({"flushDiskType": "SYNC_FLUSH"})
    try:
        create_topic(target, "BenchSync")
        rec("SYNC_FLUSH x16", produce(target, "BenchSync", 16, 1024, args.window_count))
    finally:
        target.stop()


def summarize(results: dict, dsync: list[float]) -> None:
    print("\n| measure | rmqd | Java 4.9.8 | ratio | null broker (client ceiling) |\n|---|---:|---:|---:|---:|")

    def med(key: str, name: str, field: str) -> Optional[float]:
        vals = [r[field] for r in results.get(key, {}).get(name, []) if r.get(field) == r.get(field)]
        return statistics.median(vals) if vals else None

    def row(label: str, key: str, field: str, fmt: str, higher_better: bool = True) -> None:
        a, b = med(key, "rmqd", field), med(key, "java", field)
        ratio = "" if a is None or b is None or not b or not a else f"{(a / b if higher_better else b / a):.2f}x"
        fa = fmt.format(a) if a is not None else "-"
        fb = fmt.format(b) if b is not None else "-"
        c = med(key, "null", field)
        fc = fmt.format(c) if c is not None else ""
        print(f"| {label} | {fa} | {fb} | {ratio} | {fc} |")

    def cpu_row(label: str, key: str) -> None:
        cells = []
        for name in ("rmqd", "java", "null"):
            b, c = med(key, name, "broker_cores"), med(key, name, "client_cores")
            cells.append("" if b is None else f"{b:.2f} / {c:.2f}")
        print(f"| {label} CPU, broker / client JVM (cores) | {cells[0] or '-'} | {cells[1] or '-'} | | {cells[2]} |")

    def size_order(key: str) -> tuple:
        m = re.match(r"send (\d+)KB x(\d+)", key)
        return (int(m.group(1)), int(m.group(2))) if m else (0, 0)

    for key in sorted((k for k in results if k.startswith("send")), key=size_order):
        row(f"{key} (msg/s)", key, "tps", "{:,.0f}")
        row(f"{key} avg RT (ms)", key, "rt_ms", "{:.3f}", higher_better=False)
        cpu_row(key, key)
    row("drain backlog (msg/s)", "drain", "rate", "{:,.0f}")
    cpu_row("drain", "drain")
    row("live: store-to-consume (ms)", "live 4 producers", "s2c_ms", "{:.1f}", higher_better=False)
    row("SYNC_FLUSH x16 (msg/s)", "SYNC_FLUSH x16", "tps", "{:,.0f}")
    if dsync:
        lim = statistics.median(dsync)
        a = med("SYNC_FLUSH x16", "rmqd", "tps")
        print(f"| dd oflag=dsync 1 KB writes/s | {lim:,.0f} | | rmqd SYNC_FLUSH = {100 * (a or 0) / lim:.0f}% |")
    row("idle CPU (% of a core)", "idle", "cpu_pct", "{:.2f}", higher_better=False)
    row("idle RSS after start, name server + broker (MB)", "idle", "server_rss_mb", "{:.0f}", higher_better=False)
    row("idle RSS after start, name server + broker, RssAnon (MB)", "idle", "server_anon_mb", "{:.0f}",
        higher_better=False)
    row("idle RSS after start, broker process (MB)", "idle", "rss_mb", "{:.0f}", higher_better=False)
    row("idle RSS after start, own memory (RssAnon MB)", "idle", "anon_mb", "{:.0f}", higher_better=False)
    row("idle RSS after the load (MB)", "idle after load", "rss_mb", "{:.0f}", higher_better=False)
    row("idle RSS after the load, own memory (RssAnon MB)", "idle after load", "anon_mb", "{:.0f}",
        higher_better=False)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--passes", type=int, default=2)
    ap.add_argument("--window-count", type=int, default=3, help="10 s windows per send point (after warm-up)")
    ap.add_argument("--backlog", type=int, default=2_000_000)
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 4, 16, 64])
    ap.add_argument("--idle-seconds", type=float, default=10.0)
    ap.add_argument("--only", choices=["rmqd", "java"])
    ap.add_argument("--points", nargs="+", default=list(POINTS), choices=POINTS,
                    help="which measurements to take (default: all)")
    ap.add_argument("--quick", action="store_true", help="1 pass, 1 window, 300k backlog")
    ap.add_argument("--no-ceiling", dest="ceiling", action="store_false",
                    help="skip the send points against a null broker (the benchmark client's own ceiling)")
    ap.add_argument("--json", help="write the raw results here")
    ap.add_argument("--no-prime", action="store_true", help="skip touching the free RAM first (see prime_memory)")
    args = ap.parse_args()
    if args.quick:
        args.passes, args.window_count, args.backlog, args.idle_seconds = 1, 1, 300_000, 3.0
    if kit_dir() is None:
        sys.exit("the RocketMQ 4.9.8 kit was not found (../shared/rocketmq-4.9.8 or $RMQD_JAVA_KIT)")
    print(machine_line(), flush=True)
    if not args.no_prime:
        print(f"primed guest memory in {prime_memory():.0f} s", flush=True)
    workdir = tempfile.mkdtemp(prefix="bench-java-")
    results: dict = {}
    dsync: list[float] = []
    try:
        for p in range(args.passes):
            dsync.append(dsync_limit(workdir))
            targets = [RmqdTarget(workdir), JavaTarget(workdir)]
            if args.ceiling:
                targets.append(NullTarget(workdir))
            for target in targets:
                if args.only and target.name not in (args.only, "null"):
                    continue
                print(f"pass {p + 1}: {target.name}", flush=True)
                run_pass(target, args, results)
        summarize(results, dsync)
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"results": results, "dsync": dsync, "machine": machine_line()}, f, indent=1)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
