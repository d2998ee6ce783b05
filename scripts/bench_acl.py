"""ACL cost on the send path: RocketMQ's benchmark producer (1 KB sync sends, 16 threads by default)
against rmqd with ACL off and with ACL on (the producer signing with AclClientRPCHook), alternately.

    python scripts/bench_acl.py [--passes 3] [--threads 16] [--windows 2]
"""
from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_java import RmqdTarget, create_topic, machine_line, prime_memory, produce  # noqa: E402

AK, SK = "benchUser01", "benchSecret01"
ACL_YAML = f"accounts:\n  - {{accessKey: {AK}, secretKey: {SK}, admin: true}}\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--passes", type=int, default=3)
    ap.add_argument("--threads", type=int, default=16)
    ap.add_argument("--windows", type=int, default=2)
    ap.add_argument("--no-prime", action="store_true")
    args = ap.parse_args()
    print(machine_line(), flush=True)
    if not args.no_prime:
        print(f"primed guest memory in {prime_memory():.0f} s", flush=True)
    work = tempfile.mkdtemp(prefix="bench-acl-")
    acl_file = Path(work) / "conf" / "plain_acl.yml"
    acl_file.parent.mkdir(parents=True)
    acl_file.write_text(ACL_YAML)
    results: dict[str, list] = {"off": [], "on": []}
    for p in range(args.passes):
        for mode in ("off", "on"):
            target = RmqdTarget(work)
            props = {"aclEnable": "true", "aclFile": str(acl_file)} if mode == "on" else {}
            target.start(props)
            try:
                creds = (AK, SK) if mode == "on" else None
                create_topic(target, "BenchAcl", credentials=creds)
                extra = ("-a", "true", "-ak", AK, "-sk", SK) if mode == "on" else ()
                r = produce(target, "BenchAcl", args.threads, 1024, args.windows, extra)
            finally:
                target.stop()
            results[mode].append(r)
            print(f"pass {p + 1} ACL {mode}: {r}", flush=True)
    off = statistics.median(r["tps"] for r in results["off"])
    on = statistics.median(r["tps"] for r in results["on"])
    print(f"\n| {args.threads} senders, 1 KB | ACL off | ACL on | cost |\n|---|---:|---:|---:|")
    print(f"| sends/s (median of {args.passes}) | {off:,.0f} | {on:,.0f} | {100 * (off - on) / off:.1f} % |")
    rt_off = statistics.median(r["rt_ms"] for r in results["off"])
    rt_on = statistics.median(r["rt_ms"] for r in results["on"])
    print(f"| average RT (ms) | {rt_off:.3f} | {rt_on:.3f} | |")


if __name__ == "__main__":
    main()
