"""rmqd beside every peer in one run: Java 4.9.8, Java 5.5 (broker and proxy), the Rust broker and proxy (issue 40).

One system at a time on the same machine, identical settings (ASYNC_FLUSH, 1 KB bodies, 8 queues per topic), the
systems' order rotated every pass, then medians over the passes. Two paths:

- **remoting** (rmqd, Java 4.9.8, Java 5.5 name server + broker, Rust name server + broker): RocketMQ's own
  ``bench-producer`` at 1/4/16/64 threads (scripts/bench_java.produce: the median of the 10 s windows after a
  dropped warm-up window, the server CPU over the measured windows), ``SendLatency`` (compat_tests/java/src:
  the same load with every round trip kept) for p50/p99, and a backlog drained by ``bench-consumer``
  (scripts/bench_java.drain: the rate from the broker's committed offsets);
- **gRPC** (rmqd's endpoint, the Java 5.5 proxy, the Rust proxy): ``grpcload`` (compat_tests/go/cmd/grpcload,
  raw v2 protobuf calls, built by gokit) sending at 1/4/16/64 calls in flight, receive + ack of a backlog, and
  Lite Mode end to end (lite consumers subscribed to lite topics while producers send to them). Java 5.5: the
  local-mode proxy (name server + one broker-and-proxy JVM); Lite Mode through a cluster-mode proxy (name server,
  broker and proxy JVMs), since 5.5.0's local proxy does not serve it. Rust: rocketmq-proxy in local mode (one
  process with its embedded broker). The generator's own ceiling comes first: the same cells against grpcload's
  null server, which answers at once.

For every cell: throughput, p50/p99 (remoting sends: SendLatency's; gRPC sends: per call; receive + ack: the
ack calls'; lite: send to receive), the CPU per message of all the system's server processes together (from
/proc: name server, broker, proxy), their RSS after the cell, and the 1-minute load average when the cell started
and when it ended (on a shared machine compare the systems' CPU per message, not their throughput).

Usage: python scripts/bench_peers.py [--passes 3] [--paths remoting grpc] [--systems rmqd java4 java5 rust]
       [--window-count 2] [--backlog 500000] [--grpc-seconds 10] [--json out.json]
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Optional

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(REPO / "compat_tests"))

from bench_java import (JavaTarget, RmqdTarget, Target, create_topic, drain, fill_backlog, kit_dir,  # noqa: E402
                        prime_memory, produce, wait_routed)
from benchenv import machine_line  # noqa: E402
from procstat import cpu_seconds, rss_mb  # noqa: E402
from javakit import java_command  # noqa: E402

from rmqd.common.localports import free_port_block  # noqa: E402
from rmqd.remoting.client import BlockingClient  # noqa: E402
from rmqd.remoting.command import new_request  # noqa: E402

SYSTEMS = ("rmqd", "rmqd-plain", "java4", "java5", "rust")
LABELS = {"rmqd": "rmqd", "rmqd-plain": "rmqd, TLS off", "java4": "Java 4.9.8", "java5": "Java 5.5",
          "rust": "Rust 1.0.0", "null": "null server"}
#: systems that serve only one path
GRPC_ONLY, REMOTING_ONLY = ("rmqd-plain",), ("java4",)
QUEUES = 8
UPDATE_AND_CREATE_TOPIC, UPDATE_AND_CREATE_SUBSCRIPTIONGROUP = 17, 200


def load_avg() -> float:
    return round(os.getloadavg()[0], 1)


# ---------------------------------------------------------------------------------------------- remoting targets
class Java5Target(Target):
    """A Java 5.5 name server and broker (BrokerStartup, no proxy), the broker's heap as the 5.x reference's."""
    name = "java5"

    def __init__(self, workdir: str) -> None:
        self.workdir = workdir
        self.namesrv5: Any = None
        self.jvm: Any = None

    def start(self, props: dict[str, str]) -> None:
        from java5kit import BROKER_HEAP, Namesrv5, _Jvm, _props, require_kit5
        require_kit5()
        d = Path(tempfile.mkdtemp(prefix="java5-", dir=self.workdir))
        self.namesrv5 = Namesrv5(d / "ns").start()
        port = free_port_block(4) + 2
        bd = d / "broker"
        conf = bd / "home" / "conf"
        conf.mkdir(parents=True)
        (conf / "broker.conf").write_text(_props({
            "brokerClusterName": "DefaultCluster", "brokerName": "broker-a", "brokerId": 0, "listenPort": port,
            "namesrvAddr": self.namesrv5.addr, "brokerIP1": "127.0.0.1", "brokerIP2": "127.0.0.1",
            "bindAddress": "127.0.0.1", "brokerRole": "ASYNC_MASTER", "flushDiskType": "ASYNC_FLUSH",
            "storePathRootDir": str(bd / "store"), "storePathCommitLog": str(bd / "store" / "commitlog"),
            "autoCreateTopicEnable": "true", **props}))
        self.jvm = _Jvm("broker", bd, "org.apache.rocketmq.broker.BrokerStartup", BROKER_HEAP,
                        ["-c", str(conf / "broker.conf")])
        self.jvm.wait_port(port, time.monotonic() + 150)
        self.namesrv, self.broker_addr, self.pid = self.namesrv5.addr, f"127.0.0.1:{port}", self.jvm.proc.pid
        self.server_pids = (self.namesrv5.jvm.proc.pid, self.pid)
        wait_routable(self)

    def stop(self) -> None:
        for part in (self.jvm, self.namesrv5):
            if part is not None:
                part.kill() if part is self.namesrv5 else part.stop()
        self.jvm = self.namesrv5 = None


class RustTarget(Target):
    """The Rust name server and broker (compat_tests/rustkit.py)."""
    name = "rust"

    def __init__(self, workdir: str) -> None:
        self.workdir = workdir
        self.cluster: Any = None

    def start(self, props: dict[str, str]) -> None:
        from rustkit import RustCluster
        self.cluster = RustCluster(tempfile.mkdtemp(prefix="rust-", dir=self.workdir), broker=props).start()
        self.namesrv, self.broker_addr = self.cluster.namesrv_addr, self.cluster.broker_addr
        self.pid = self.cluster.broker.pid
        self.server_pids = self.cluster.pids

    def stop(self) -> None:
        if self.cluster is not None:
            self.cluster.stop()
        self.cluster = None


def wait_routable(target: Target, timeout: float = 60) -> None:
    """Until the name server knows the broker (a send's first route lookup would otherwise fail)."""
    from rmqd.admin.client import AdminClient
    admin = AdminClient(target.namesrv)
    try:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                if target.broker_addr in json.dumps(admin.cluster_info()):
                    return
            except Exception:
                pass
            time.sleep(0.2)
    finally:
        admin.close()
    raise RuntimeError(f"{target.name}: the broker did not register")


def remoting_target(system: str, workdir: str) -> Target:
    return {"rmqd": lambda: RmqdTarget(workdir), "java4": lambda: JavaTarget(workdir),
            "java5": lambda: Java5Target(workdir), "rust": lambda: RustTarget(workdir)}[system]()


# ---------------------------------------------------------------------------------------------- gRPC targets
class GrpcSystem:
    """A running system with a gRPC endpoint: ``grpc_addr``, ``broker_addr`` (admin requests), ``namesrv`` (None
    when it has none), ``server_pids``."""
    name = ""
    grpc_addr = ""
    broker_addr = ""
    namesrv: Optional[str] = None
    server_pids: tuple = ()

    def start(self, lite: bool) -> None: ...

    def stop(self) -> None: ...


class RmqdGrpc(GrpcSystem):
    """rmqd as it starts by default: TLS permissive, so its gRPC port is the front (rmqd.grpc.front) that relays
    each connection to grpcio's loopback plaintext or TLS port, as the 5.x proxy serves both on one port."""
    name = "rmqd"
    props: dict[str, str] = {}

    def __init__(self, workdir: str) -> None:
        self.workdir = workdir
        self.target: Optional[RmqdTarget] = None

    def start(self, lite: bool) -> None:
        port = free_port_block(1)
        self.target = RmqdTarget(self.workdir, ("--grpc-port", str(port)))
        self.target.start(self.props)
        self.grpc_addr, self.broker_addr = f"127.0.0.1:{port}", self.target.broker_addr
        self.namesrv, self.server_pids = self.target.namesrv, self.target.server_pids

    def stop(self) -> None:
        if self.target is not None:
            self.target.stop()
        self.target = None


class RmqdPlainGrpc(RmqdGrpc):
    """rmqd with ``tls.server.mode=disabled``: grpcio's plaintext port itself, no front (what the front costs)."""
    name = "rmqd-plain"
    props = {"tls.server.mode": "disabled"}


class Java5Grpc(GrpcSystem):
    """Java 5.5: the local-mode proxy (name server + broker-and-proxy JVM); for Lite Mode a plain broker and a
    cluster-mode proxy (5.5.0's local proxy does not serve lite subscriptions)."""
    name = "java5"

    def __init__(self, workdir: str) -> None:
        self.workdir = workdir
        self.parts: list = []

    def start(self, lite: bool) -> None:
        from java5kit import ClusterProxy5, Reference5Cluster
        d = Path(tempfile.mkdtemp(prefix="java5g-", dir=self.workdir))
        if not lite:
            cluster = Reference5Cluster(d).start()
            self.parts = [cluster]
            self.grpc_addr, self.broker_addr, self.namesrv = cluster.grpc_addr, cluster.broker_addr, \
                cluster.namesrv_addr
            self.server_pids = (cluster.namesrv.proc.pid, cluster.broker.proc.pid)
            return
        broker = Java5Target(str(d))
        broker.start({"enableLmq": "true", "enableMultiDispatch": "true"})
        self.parts = [broker]
        proxy = ClusterProxy5(d / "proxy", broker.namesrv)
        (d / "proxy").mkdir()
        self.parts.insert(0, proxy)
        proxy.start()
        self.grpc_addr, self.broker_addr, self.namesrv = proxy.grpc_addr, broker.broker_addr, broker.namesrv
        self.server_pids = (*broker.server_pids, proxy.jvm.proc.pid)

    def stop(self) -> None:
        for part in self.parts:
            part.stop() if isinstance(part, Java5Target) else part.kill()
        self.parts = []


class RustGrpc(GrpcSystem):
    """rocketmq-proxy (Rust) in local mode: gRPC and its embedded broker in one process."""
    name = "rust"

    def __init__(self, workdir: str) -> None:
        self.workdir = workdir
        self.proxy: Any = None

    def start(self, lite: bool) -> None:
        from rustkit import RustLocalProxy
        self.proxy = RustLocalProxy(tempfile.mkdtemp(prefix="rustg-", dir=self.workdir)).start()
        self.grpc_addr, self.broker_addr, self.namesrv = self.proxy.grpc_addr, self.proxy.broker_addr, None
        self.server_pids = self.proxy.pids

    def stop(self) -> None:
        if self.proxy is not None:
            self.proxy.stop()
        self.proxy = None


class NullGrpc(GrpcSystem):
    """grpcload's null server: answers at once, stores nothing (the generator's ceiling)."""
    name = "null"

    def __init__(self, workdir: str) -> None:
        self.proc: Optional[subprocess.Popen] = None

    def start(self, lite: bool) -> None:
        self.proc = subprocess.Popen([grpcload(), "-mode", "null"], stdout=subprocess.PIPE, text=True)
        line = json.loads(self.proc.stdout.readline())
        self.grpc_addr = line["addr"]
        self.server_pids = (self.proc.pid,)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.proc = None


def grpc_system(system: str, workdir: str) -> GrpcSystem:
    return {"rmqd": RmqdGrpc, "rmqd-plain": RmqdPlainGrpc, "java5": Java5Grpc, "rust": RustGrpc,
            "null": NullGrpc}[system](workdir)


# ---------------------------------------------------------------------------------------------- admin
def create(broker_addr: str, namesrv: Optional[str], topic: str, attrs: str = "",
           groups: tuple[tuple[str, dict], ...] = ()) -> None:
    """A topic of QUEUES queues (``attrs``: e.g. ``+message.type=LITE``) and consumer groups, made on the broker
    as an operator does; with a name server, until it routes the topic."""
    c = BlockingClient(broker_addr)
    try:
        ext = {"topic": topic, "defaultTopic": "TBW102", "readQueueNums": str(QUEUES), "writeQueueNums": str(QUEUES),
               "perm": "6", "topicFilterType": "SINGLE_TAG", "topicSysFlag": "0", "order": "false"}
        if attrs:
            ext["attributes"] = attrs
        r = c.invoke(new_request(UPDATE_AND_CREATE_TOPIC, ext), 15)
        if r.code != 0:
            raise RuntimeError(f"create topic {topic} on {broker_addr}: {r.code} {r.remark}")
        for group, gattrs in groups:
            body = json.dumps({"groupName": group, "consumeEnable": True, "retryMaxTimes": 16,
                               "attributes": gattrs}).encode()
            r = c.invoke(new_request(UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, None, body), 15)
            if r.code != 0:
                raise RuntimeError(f"create group {group} on {broker_addr}: {r.code} {r.remark}")
    finally:
        c.close()
    if namesrv:
        from rmqd.admin.client import AdminClient
        admin = AdminClient(namesrv)
        try:
            wait_routed(admin, topic)
        finally:
            admin.close()


# ---------------------------------------------------------------------------------------------- load tools
def grpcload() -> str:
    from gokit import go_programs
    return str(go_programs() / "grpcload")


def run_grpcload(sys_: GrpcSystem, *args: str, timeout: float) -> dict:
    """One grpcload run against ``sys_``; its result line plus the server processes' CPU per message and RSS."""
    pids = sys_.server_pids
    cpu0 = sum(cpu_seconds(p) for p in pids) if sys_.name != "null" else 0.0
    res = subprocess.run([grpcload(), "-endpoint", sys_.grpc_addr, *args], capture_output=True, text=True,
                         timeout=timeout)
    lines = [json.loads(x) for x in res.stdout.splitlines() if x.startswith("{")]
    result = next((x for x in lines if x.get("op") == "result"), None)
    if res.returncode != 0 or result is None:
        raise RuntimeError(f"grpcload {' '.join(args)} failed (rc={res.returncode}): {res.stderr[-1500:]}")
    if sys_.name != "null":
        cpu = sum(cpu_seconds(p) for p in pids) - cpu0
        n = result.get("acked") or result.get("sent") or 0
        result["server_us_per_msg"] = round(cpu / n * 1e6, 2) if n else None
        result["server_rss_mb"] = round(sum(rss_mb(p) for p in pids))
    return result


def send_latency(target: Target, topic: str, threads: int, seconds: int) -> dict:
    """SendLatency (compat_tests/java/src): bench-producer's load with every round trip kept, for p50/p99."""
    cmd = java_command("SendLatency", target.namesrv, topic, str(threads), "1024", "2", str(seconds))
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=seconds + 120, cwd=tempfile.gettempdir())
    line = next((ln for ln in out.stdout.splitlines() if ln.startswith("{")), None)
    if line is None:
        raise RuntimeError(f"SendLatency printed nothing: {out.stderr[-1500:]}")
    r = json.loads(line)
    return {"lat_tps": r["tps"], "p50_ms": r["p50"], "p99_ms": r["p99"], "lat_failed": r["failed"]}


# ---------------------------------------------------------------------------------------------- passes
Record = Callable[[str, str, dict], None]


def remoting_pass(system: str, workdir: str, args: argparse.Namespace, rec: Record) -> None:
    target = remoting_target(system, workdir)
    target.start({})
    try:
        for threads in args.threads:
            topic = f"Peers1k_{threads}"
            create_topic(target, topic, QUEUES)
            load = load_avg()
            r = produce(target, topic, threads, 1024, args.window_count)
            r.update(send_latency(target, topic, threads, args.latency_seconds), load=load)
            rec("remoting", f"send x{threads}", r)
        create_topic(target, "PeersDrain", QUEUES)
        n = fill_backlog(target, "PeersDrain", args.backlog)
        load = load_avg()
        rec("remoting", "drain", dict(drain(target, "PeersDrain", n), backlog=n, load=load))
    finally:
        target.stop()


def grpc_pass(system: str, workdir: str, args: argparse.Namespace, rec: Record) -> None:
    secs = str(args.grpc_seconds)
    sys_ = grpc_system(system, workdir)
    sys_.start(lite=False)
    try:
        admin = sys_.name != "null"
        if args.grpc_warmup and admin:       # not recorded: the JVMs' JIT, the first files and connections
            create(sys_.broker_addr, sys_.namesrv, "PeersWarm", groups=(("PeersWarmG", {}),))
            w = run_grpcload(sys_, "-mode", "send", "-topic", "PeersWarm", "-conc", "16", "-seconds",
                             str(args.grpc_warmup), timeout=args.grpc_warmup + 120)
            run_grpcload(sys_, "-mode", "recv", "-topic", "PeersWarm", "-group", "PeersWarmG", "-conc", "4",
                         "-max", str(w["sent"]), "-seconds", str(2 * args.grpc_warmup), timeout=300)
        for conc in args.grpc_conc:
            topic = f"PeersG_{conc}"
            if admin:
                create(sys_.broker_addr, sys_.namesrv, topic)
            load = load_avg()
            r = run_grpcload(sys_, "-mode", "send", "-topic", topic, "-conc", str(conc), "-seconds", secs,
                             timeout=args.grpc_seconds + 120)
            rec("grpc", f"send x{conc}", dict(r, load=load))
        topic, group = "PeersGRecv", "PeersGRecvG"
        if admin:
            create(sys_.broker_addr, sys_.namesrv, topic, groups=((group, {}),))
        run_grpcload(sys_, "-mode", "send", "-topic", topic, "-conc", "16", "-max", str(args.grpc_backlog),
                     "-seconds", "120", timeout=300)
        load = load_avg()
        r = run_grpcload(sys_, "-mode", "recv", "-topic", topic, "-group", group, "-conc", str(args.recv_conc),
                         "-max", str(args.grpc_backlog), "-seconds", "180", timeout=400)
        rec("grpc", f"receive+ack x{args.recv_conc}", dict(r, load=load))
        if sys_.name in ("null", "rmqd", "rmqd-plain", "rust"):     # the same server serves Lite Mode
            lite_cell(sys_, args, rec)
    finally:
        sys_.stop()
    if sys_.name == "java5":
        sys_ = grpc_system(system, workdir)
        sys_.start(lite=True)
        try:
            lite_cell(sys_, args, rec)
        finally:
            sys_.stop()


def lite_cell(sys_: GrpcSystem, args: argparse.Namespace, rec: Record) -> None:
    topic, group = "PeersLite", "LitePeersG"
    if sys_.name != "null":
        create(sys_.broker_addr, sys_.namesrv, topic, "+message.type=LITE",
               groups=((group, {"+lite.bind.topic": topic}),))
    lite = ("-mode", "lite", "-topic", topic, "-group", group, "-conc", str(args.lite_producers), "-consumers",
            str(args.lite_consumers), "-lite-topics", str(args.lite_topics))
    if args.grpc_warmup and sys_.name != "null":     # not recorded (Java's lite runs in JVMs of its own)
        run_grpcload(sys_, *lite, "-seconds", str(args.grpc_warmup), timeout=args.grpc_warmup + 180)
    load = load_avg()
    r = run_grpcload(sys_, *lite, "-seconds", str(args.grpc_seconds), timeout=args.grpc_seconds + 180)
    rec("grpc", "lite end to end", dict(r, load=load))


# ---------------------------------------------------------------------------------------------- summary
def med(results: dict, path: str, cell: str, system: str, field: str) -> Optional[float]:
    vals = [r[field] for r in results.get(path, {}).get(cell, {}).get(system, [])
            if isinstance(r.get(field), (int, float))]
    return statistics.median(vals) if vals else None


def summarize(results: dict, systems: list[str]) -> None:
    def fmt(v: Optional[float], spec: str) -> str:
        return "-" if v is None else format(v, spec)

    for path in ("remoting", "grpc"):
        cells = results.get(path)
        if not cells:
            continue
        cols = [s for s in (["null"] if path == "grpc" else []) + systems
                if any(s in cells[c] for c in cells)]
        print(f"\n### {path}: msgs/s; p50 / p99 ms; server CPU µs per message; server RSS MB; "
              "load average before→after\n")
        print("| cell | " + " | ".join(LABELS[s] for s in cols) + " |")
        print("|---|" + "---:|" * len(cols))
        for cell in cells:
            row = []
            for s in cols:
                tps = med(results, path, cell, s, "rate" if cell == "drain" else "tps")
                if tps is None:
                    row.append("-")
                    continue
                p50, p99 = med(results, path, cell, s, "p50_ms"), med(results, path, cell, s, "p99_ms")
                us, rss = med(results, path, cell, s, "server_us_per_msg"), med(results, path, cell, s,
                                                                               "server_rss_mb")
                load, load_after = med(results, path, cell, s, "load"), med(results, path, cell, s, "load_after")
                lat = "" if p50 is None else f"; {fmt(p50, '.2f')} / {fmt(p99, '.2f')} ms"
                cpu = "" if us is None else f"; **{fmt(us, '.1f')} µs**; {fmt(rss, '.0f')} MB"
                row.append(f"{tps:,.0f}{lat}{cpu}; load {fmt(load, '.1f')}→{fmt(load_after, '.1f')}")
            print(f"| {cell} | " + " | ".join(row) + " |")
        others = [s for s in cols if s not in ("rmqd", "null")]
        if "rmqd" in cols and others:
            print("\nrmqd's CPU per message as a share of each peer's (median of the passes):\n")
            print("| cell | " + " | ".join(f"rmqd / {LABELS[s]}" for s in others) + " |")
            print("|---|" + "---:|" * len(others))
            for cell in cells:
                mine = med(results, path, cell, "rmqd", "server_us_per_msg")
                row = []
                for s in others:
                    theirs = med(results, path, cell, s, "server_us_per_msg")
                    row.append("-" if not mine or not theirs else f"{mine / theirs:.2f}")
                print(f"| {cell} | " + " | ".join(row) + " |")


def merge_results(into: dict, results: dict) -> None:
    """Add one run's ``results`` (path -> cell -> system -> passes; ``failures``) to ``into``."""
    for path, cells in results.items():
        if path == "failures":
            into.setdefault("failures", []).extend(cells)
            continue
        for cell, systems in cells.items():
            for system, passes in systems.items():
                into.setdefault(path, {}).setdefault(cell, {}).setdefault(system, []).extend(passes)


# ---------------------------------------------------------------------------------------------- main
def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--passes", type=int, default=3)
    ap.add_argument("--paths", nargs="+", default=["remoting", "grpc"], choices=["remoting", "grpc"])
    ap.add_argument("--systems", nargs="+", default=[s for s in SYSTEMS if s != "rmqd-plain"], choices=SYSTEMS)
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 4, 16, 64])
    ap.add_argument("--window-count", type=int, default=2, help="10 s bench-producer windows after the warm-up")
    ap.add_argument("--latency-seconds", type=int, default=6, help="SendLatency's measured seconds per cell")
    ap.add_argument("--backlog", type=int, default=500_000, help="messages drained by bench-consumer")
    ap.add_argument("--grpc-conc", type=int, nargs="+", default=[1, 4, 16, 64])
    ap.add_argument("--grpc-seconds", type=int, default=10)
    ap.add_argument("--grpc-warmup", type=int, default=10, help="unrecorded seconds of load after each start")
    ap.add_argument("--grpc-backlog", type=int, default=20_000, help="messages received + acked over gRPC")
    ap.add_argument("--recv-conc", type=int, default=4, help="receive + ack loops in flight")
    ap.add_argument("--lite-topics", type=int, default=200)
    ap.add_argument("--lite-consumers", type=int, default=4)
    ap.add_argument("--lite-producers", type=int, default=4)
    ap.add_argument("--no-ceiling", dest="ceiling", action="store_false", help="skip the gRPC null server")
    ap.add_argument("--no-prime", action="store_true", help="skip touching the free RAM first")
    ap.add_argument("--json", help="write the raw results here")
    ap.add_argument("--first-pass", type=int, default=1, help="number of the first pass (the systems' order "
                    "rotates with it: a run split into several keeps rotating)")
    ap.add_argument("--merge", nargs="+", metavar="JSON", help="only summarise the results of earlier --json "
                    "files together (the medians over all their passes)")
    args = ap.parse_args()
    if args.merge:
        merged: dict = {}
        for name in args.merge:
            with open(name) as f:
                merge_results(merged, json.load(f)["results"])
        summarize(merged, [s for s in SYSTEMS if s in args.systems])
        return
    if "java4" in args.systems and kit_dir() is None:
        sys.exit("the RocketMQ 4.9.8 kit was not found (../shared/rocketmq-4.9.8 or $RMQD_JAVA_KIT)")
    print(machine_line(), flush=True)
    if not args.no_prime:
        print(f"primed guest memory in {prime_memory():.0f} s", flush=True)
    workdir = tempfile.mkdtemp(prefix="bench-peers-")
    results: dict = {}

    def rec(path: str, cell: str, value: dict) -> None:
        value.setdefault("load_after", load_avg())
        results.setdefault(path, {}).setdefault(cell, {}).setdefault(current[0], []).append(value)
        print(f"  {current[0]:5} {path:8} {cell:18} {json.dumps(value)}", flush=True)

    current = [""]
    try:
        if "grpc" in args.paths and args.ceiling:
            current[0] = "null"
            print(f"gRPC generator ceiling (null server), load {load_avg()}", flush=True)
            grpc_pass("null", workdir, args, rec)
        for p in range(args.first_pass - 1, args.first_pass - 1 + args.passes):
            order = args.systems[p % len(args.systems):] + args.systems[:p % len(args.systems)]
            for system in order:
                for path in args.paths:
                    if (path == "grpc" and system in REMOTING_ONLY) or (path == "remoting" and system in GRPC_ONLY):
                        continue        # 4.9.8 has no gRPC endpoint; TLS off changes only rmqd's gRPC port
                    current[0] = system
                    print(f"pass {p + 1}: {system} {path}, load {load_avg()}", flush=True)
                    try:
                        (remoting_pass if path == "remoting" else grpc_pass)(system, workdir, args, rec)
                    except Exception as exc:      # one system failing does not end the others' passes
                        print(f"  {system} {path} failed: {exc!r}", flush=True)
                        results.setdefault("failures", []).append([p + 1, system, path, repr(exc)[:2000]])
        summarize(results, args.systems)
        for f in results.get("failures", []):
            print(f"failed: pass {f[0]} {f[1]} {f[2]}: {f[3][:300]}")
    finally:
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"results": results, "machine": machine_line(), "args": vars(args)}, f, indent=1)
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
