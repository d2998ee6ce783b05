"""ACL cost on the send path: RocketMQ's benchmark producer (1 KB sync sends, 16 threads by default)
against rmqd with ACL off and with ACL on (the producer signing with AclClientRPCHook), alternately.

The Java producer signs every request (HmacSHA1 over the header values and body, a Base64 encoding,
a header rebuilt), which costs the client as much as the check costs the broker. ``--native`` adds the
same points with the native load generator (scripts/loadgen.py, 16 senders on one connection), whose
requests are signed once up front: the difference between its two runs is the broker's own ACL cost.

    python scripts/bench_acl.py [--passes 3] [--threads 16] [--windows 2] [--native]
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
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from procstat import cpu_seconds  # noqa: E402
from bench_java import (JavaTarget, RmqdTarget, create_topic, machine_line, prime_memory,  # noqa: E402
                        produce)
from javakit import ReferenceCluster, shadow_home  # noqa: E402


class JavaAclTarget(JavaTarget):
    """The reference broker; with ``aclEnable`` it reads plain_acl.yml from a ROCKETMQ_HOME of ours."""

    def __init__(self, workdir: str, acl_yaml: str) -> None:
        super().__init__(workdir)
        self.acl_yaml = acl_yaml

    def start(self, props: dict) -> None:
        d = tempfile.mkdtemp(prefix="ref-", dir=self.workdir)
        home = shadow_home(Path(d) / "home", {"plain_acl.yml": self.acl_yaml}) if props else None
        self.cluster = ReferenceCluster(Path(d) / "cluster", extra_conf=[f"{k}={v}" for k, v in props.items()],
                                        home=home).start()
        self.namesrv, self.broker_addr = self.cluster.namesrv_addr, self.cluster.broker_addr
        self.pid = int((Path(d) / "cluster" / "broker.pid").read_text().strip())

AK, SK = "benchUser01", "benchSecret01"
HERE = Path(__file__).resolve().parent


def native(target, threads: int, seconds: float, credentials) -> dict:
    """scripts/loadgen.py (closed loop, pre-signed requests with ``credentials``) against the target."""
    args = [sys.executable, str(HERE / "loadgen.py"), "--broker", target.broker_addr, "--topic", "BenchAcl",
            "--threads", str(threads), "--seconds", str(seconds)]
    if credentials:
        args += ["--access-key", credentials[0], "--secret-key", credentials[1]]
    cpu0, t0 = cpu_seconds(target.pid), time.monotonic()
    out = subprocess.run(args, capture_output=True, text=True, timeout=seconds + 60,
                         env=dict(os.environ, PYTHONPATH=str(HERE.parent)))
    cores = (cpu_seconds(target.pid) - cpu0) / (time.monotonic() - t0)
    if out.returncode != 0 or not out.stdout.strip():
        raise RuntimeError(f"loadgen failed: {out.stderr[-2000:]}")
    r = json.loads(out.stdout.strip().splitlines()[-1])
    if r["errors"]:
        raise RuntimeError(f"loadgen: {r['errors']} requests refused or failed")
    return {"tps": r["tps"], "p99_ms": r["p99"], "broker_cores": round(cores, 2)}
ACL_YAML = f"accounts:\n  - {{accessKey: {AK}, secretKey: {SK}, admin: true}}\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--passes", type=int, default=3)
    ap.add_argument("--threads", type=int, default=16)
    ap.add_argument("--windows", type=int, default=2)
    ap.add_argument("--no-prime", action="store_true")
    ap.add_argument("--broker", choices=["rmqd", "java", "both"], default="both")
    ap.add_argument("--native", action="store_true", help="also drive each target with the native load generator")
    ap.add_argument("--native-seconds", type=float, default=8.0)
    args = ap.parse_args()
    print(machine_line(), flush=True)
    if not args.no_prime:
        print(f"primed guest memory in {prime_memory():.0f} s", flush=True)
    work = tempfile.mkdtemp(prefix="bench-acl-")
    acl_file = Path(work) / "conf" / "plain_acl.yml"
    acl_file.parent.mkdir(parents=True)
    acl_file.write_text(ACL_YAML)
    brokers = ["rmqd", "java"] if args.broker == "both" else [args.broker]
    results: dict[tuple, list] = {(b, m): [] for b in brokers for m in ("off", "on")}
    natives: dict[tuple, list] = {(b, m): [] for b in brokers for m in ("off", "on")}
    for p in range(args.passes):
        for broker, mode in ((b, m) for b in brokers for m in ("off", "on")):
            if broker == "rmqd":
                target = RmqdTarget(work)
                props = {"aclEnable": "true", "aclFile": str(acl_file)} if mode == "on" else {}
            else:
                target = JavaAclTarget(work, ACL_YAML)
                props = {"aclEnable": "true"} if mode == "on" else {}
            target.start(props)
            try:
                creds = (AK, SK) if mode == "on" else None
                create_topic(target, "BenchAcl", credentials=creds)
                extra = ("-a", "true", "-ak", AK, "-sk", SK) if mode == "on" else ()
                r = produce(target, "BenchAcl", args.threads, 1024, args.windows, extra)
                if args.native:
                    natives[(broker, mode)].append(native(target, args.threads, args.native_seconds, creds))
                    print(f"pass {p + 1} {broker} ACL {mode} native: {natives[(broker, mode)][-1]}", flush=True)
            finally:
                target.stop()
            results[(broker, mode)].append(r)
            print(f"pass {p + 1} {broker} ACL {mode}: {r}", flush=True)
    print_table(f"{args.threads} senders, 1 KB (median of {args.passes})", brokers, results)
    if args.native:
        print_table(f"native load generator, {args.threads} senders, pre-signed (median of {args.passes})",
                    brokers, natives)


def print_table(title: str, brokers: list[str], runs: dict[tuple, list]) -> None:
    """One markdown table: per broker the median sends/s with ACL off and on, the cost, CPU per send."""
    print(f"\n| {title} | ACL off | ACL on | cost | broker CPU per send off / on (µs) |\n|---|---:|---:|---:|---:|")
    for broker in brokers:
        off, on = runs[(broker, "off")], runs[(broker, "on")]
        tps_off, tps_on = (statistics.median(r["tps"] for r in rs) for rs in (off, on))
        cpu = [statistics.median(1e6 * r["broker_cores"] / r["tps"] for r in rs) for rs in (off, on)]
        print(f"| {broker} sends/s | {tps_off:,.0f} | {tps_on:,.0f} | {100 * (tps_off - tps_on) / tps_off:.1f} % "
              f"| {cpu[0]:.1f} / {cpu[1]:.1f} |")

if __name__ == "__main__":
    main()
