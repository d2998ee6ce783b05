"""Access control 2.0's cost on the send path, rmqd against Java 5.5.0 in the same run: RocketMQ's benchmark producer
(the 4.9.8 kit's bench-producer, 1 KB sync sends, 16 threads, signing every request with AclClientRPCHook) against
each broker with authentication and authorization off, then on (a normal user allowed to publish by its ACL, so
every send is authenticated and authorized; the super user would skip the policies).

Each broker is started once per mode (a Java 5.5.0 start takes minutes on a loaded machine) and driven ``--passes``
times; the table gives the medians: sends/s, and the broker's CPU per send (µs, the broker process's CPU time over a
run divided by the messages it stored). The cost of turning access control on is the difference of the CPU per send;
the goal is rmqd's cost at most half of Java's.

    python scripts/bench_acl2.py [--passes 3] [--threads 16] [--windows 2] [--broker rmqd|java|both]
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Optional

sys.path.insert(0, str(Path(__file__).resolve().parent))
from procstat import cpu_seconds  # noqa: E402
from bench_java import (RmqdTarget, Target, create_topic, machine_line, prime_memory,  # noqa: E402
                        produce)
from java5kit import REFERENCE5_BROKER_PROPERTIES, Reference5Cluster  # noqa: E402

from rmqd.acl.signer import sign_request  # noqa: E402
from rmqd.admin.client import AdminClient  # noqa: E402
from rmqd.remoting.client import BlockingClient  # noqa: E402
from rmqd.remoting.command import new_request  # noqa: E402

TOPIC = "BenchAcl2"
SUPER = ("benchRoot01", "benchRootSecret1")
USER = ("benchUser01", "benchSecret01")
AUTH = {"authenticationEnabled": "true", "authorizationEnabled": "true",
        "authenticationProvider": "org.apache.rocketmq.auth.authentication.provider.DefaultAuthenticationProvider",
        "authenticationMetadataProvider":
            "org.apache.rocketmq.auth.authentication.provider.LocalAuthenticationMetadataProvider",
        "authorizationProvider": "org.apache.rocketmq.auth.authorization.provider.DefaultAuthorizationProvider",
        "authorizationMetadataProvider":
            "org.apache.rocketmq.auth.authorization.provider.LocalAuthorizationMetadataProvider",
        "initAuthenticationUser": json.dumps({"username": SUPER[0], "password": SUPER[1]}, separators=(",", ":"))}
# a Java 5.5.0 start on a loaded 2-core machine (other JVMs running) takes minutes
JAVA_START_S = 600.0
IDLE_S = 10.0              # the broker's idle CPU is measured this long before each pass


class Java5Target(Target):
    """The Java 5.5.0 name server + broker (java5kit.Reference5Cluster, the proxy idle: remoting only)."""

    name = "java"

    def __init__(self, workdir: str) -> None:
        self.workdir = workdir
        self.cluster: Optional[Reference5Cluster] = None

    def start(self, props: dict[str, str]) -> None:
        d = tempfile.mkdtemp(prefix="ref5-", dir=self.workdir)
        self.cluster = Reference5Cluster(d, broker_conf={**REFERENCE5_BROKER_PROPERTIES, **props}).start(JAVA_START_S)
        self.namesrv, self.broker_addr = self.cluster.namesrv_addr, self.cluster.broker_addr
        self.pid = self.cluster.broker.proc.pid
        self.server_pids = (self.cluster.namesrv.proc.pid, self.pid)

    def stop(self) -> None:
        if self.cluster is not None:
            self.cluster.kill()
        self.cluster = None


def admin(addr: str, code: int, ext: dict, body: Optional[dict] = None) -> None:
    raw = json.dumps(body).encode() if body is not None else None
    with BlockingClient(addr, 15) as c:
        r = c.invoke(new_request(code, sign_request(dict(ext), raw, *SUPER), raw), 15)
    if r.code != 0:
        raise RuntimeError(f"admin code {code}: {r.code} {r.remark}")


def set_up_user(target: Target) -> None:
    """A normal user whose ACL lets it publish to the topic (and nothing else)."""
    admin(target.broker_addr, 3001, {"username": USER[0]}, {"username": USER[0], "password": USER[1]})
    admin(target.broker_addr, 3006, {"subject": f"User:{USER[0]}"}, {"subject": f"User:{USER[0]}", "policies": [
        {"entries": [{"resource": f"Topic:{TOPIC}", "actions": ["Pub"], "decision": "Allow"}]}]})


def stored(target: Target, credentials: Optional[tuple]) -> int:
    """Messages the broker holds in the topic (its queues' max offsets)."""
    admin_client = AdminClient(target.namesrv, credentials=credentials)
    try:
        return sum(admin_client.max_offset(target.broker_addr, TOPIC, q) for q in range(8))
    finally:
        admin_client.close()


def run_mode(target: Target, mode: str, args: argparse.Namespace) -> list[dict]:
    target.start(AUTH if mode == "on" else {})
    try:
        create_topic(target, TOPIC, credentials=SUPER if mode == "on" else None)
        extra: tuple = ()
        if mode == "on":
            set_up_user(target)
            extra = ("-a", "true", "-ak", USER[0], "-sk", USER[1])
        runs = []
        creds = SUPER if mode == "on" else None
        for p in range(args.passes):
            idle = idle_cores(target.pid, IDLE_S)
            cpu0, n0, t0 = cpu_seconds(target.pid), stored(target, creds), time.monotonic()
            r = produce(target, TOPIC, args.threads, 1024, args.windows, extra)
            # the broker's CPU over the whole run divided by the messages it stored: exact, whatever the windows;
            # and without what the broker spends idle (timers, GC, the JIT) over as long
            r["stored"] = stored(target, creds) - n0
            cpu = cpu_seconds(target.pid) - cpu0
            r["idle_cores"] = round(idle, 3)
            r["cpu_us_per_send"] = round(1e6 * cpu / max(1, r["stored"]), 2)
            r["busy_us_per_send"] = round(1e6 * max(0.0, cpu - idle * (time.monotonic() - t0)) / max(1, r["stored"]), 2)
            if r["failed"] > 0.01 * r["tps"] * len(r["windows"]) * 10:     # refusals, not a loaded machine's timeouts
                raise RuntimeError(f"{target.name} with access control {mode}: {r['failed']} sends failed")
            runs.append(r)
            print(f"pass {p + 1} {target.name} access control {mode}: {r}", flush=True)
        return runs
    finally:
        target.stop()


def idle_cores(pid: int, seconds: float) -> float:
    """The broker's CPU (cores) with nothing sent for ``seconds``."""
    cpu0, t0 = cpu_seconds(pid), time.monotonic()
    time.sleep(seconds)
    return (cpu_seconds(pid) - cpu0) / (time.monotonic() - t0)


def cpu_per_send(runs: list[dict], field: str = "cpu_us_per_send") -> float:
    return statistics.median(r[field] for r in runs)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--passes", type=int, default=3)
    ap.add_argument("--threads", type=int, default=16)
    ap.add_argument("--windows", type=int, default=2)
    ap.add_argument("--no-prime", action="store_true")
    ap.add_argument("--broker", choices=["rmqd", "java", "both"], default="both")
    args = ap.parse_args()
    print(machine_line(), flush=True)
    if not args.no_prime:
        print(f"primed guest memory in {prime_memory():.0f} s", flush=True)
    work = tempfile.mkdtemp(prefix="bench-acl2-")
    brokers = ["rmqd", "java"] if args.broker == "both" else [args.broker]
    results: dict[tuple, list] = {}
    for broker in brokers:
        for mode in ("off", "on"):
            target = RmqdTarget(work) if broker == "rmqd" else Java5Target(work)
            results[(broker, mode)] = run_mode(target, mode, args)
    print(f"\n| {args.threads} senders, 1 KB (median of {args.passes}) | sends/s off | sends/s on "
          f"| broker CPU per send off / on (µs) | cost (µs per send) | idle taken out: off / on | cost |"
          f"\n|---|---:|---:|---:|---:|---:|---:|")
    costs = {}
    for broker in brokers:
        off, on = results[(broker, "off")], results[(broker, "on")]
        tps = [statistics.median(r["tps"] for r in rs) for rs in (off, on)]
        cpu = [cpu_per_send(off), cpu_per_send(on)]
        busy = [cpu_per_send(off, "busy_us_per_send"), cpu_per_send(on, "busy_us_per_send")]
        costs[broker] = busy[1] - busy[0]
        print(f"| {broker} | {tps[0]:,.0f} | {tps[1]:,.0f} | {cpu[0]:.1f} / {cpu[1]:.1f} | {cpu[1] - cpu[0]:.1f} "
              f"| {busy[0]:.1f} / {busy[1]:.1f} | {costs[broker]:.1f} |")
    if len(costs) == 2:
        print(f"\nrmqd's cost is {costs['rmqd']:.1f} µs per send, Java 5.5.0's {costs['java']:.1f} (idle taken out): "
              f"goal (at most half) {'met' if costs['rmqd'] <= costs['java'] / 2 else 'NOT met'}")


if __name__ == "__main__":
    main()
