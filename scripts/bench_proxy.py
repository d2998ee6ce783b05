#!/usr/bin/env python3
"""``rmqd proxy`` vs the Java 5.5 cluster-mode proxy, same run, same broker; and the proxy hop vs direct on rmqd.

One Java 5.5.0 name server + broker (compat_tests/java5kit.Reference5Cluster; its local-mode proxy is the "direct"
row: no hop), and in front of it, each its own process on free loopback ports:
  * ``rmqd proxy -n NAMESRV`` (compat_tests/rmqd_proxy.RmqdProxy);
  * Java's ``mqproxy -pm cluster`` (compat_tests/java5kit.ClusterProxy5).
In the same run, one ``rmqd serve`` (name server + broker with its own gRPC endpoint, the default permissive TLS
mode: the "direct" rmqd row) and another ``rmqd proxy`` over its name server (the hop to an rmqd broker).
Load from this process, the same for each (scripts/bench_tls.grpc_load): unary SendMessage calls of 1 KB with
``--inflight`` in flight on one plaintext gRPC channel, ``--warmup`` seconds first (JIT, connections), then
``--seconds`` measured (at most 60 per side). Prints sends/s, p50/p99 (ms), the proxy's CPU per message (its
process's utime+stime from /proc/<pid>/stat, every thread) and its RSS after the run (VmRSS, VmHWM), as a table and
a JSON line. The hop to rmqd also gives the CPU per message of the rmqd broker behind it ("broker us/msg"), so the
hop's whole cost compares with the direct row's.

Usage: python scripts/bench_proxy.py [--seconds 20] [--warmup 4] [--inflight 16] [--no-direct] [--no-rmqd-broker]
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(REPO, "compat_tests"))
sys.path.insert(0, HERE)
sys.path.insert(0, REPO)

from bench_tls import Rmqd, cpu_seconds, grpc_load, percentile  # noqa: E402
from benchenv import machine_line  # noqa: E402

from rmqd.remoting.client import BlockingClient  # noqa: E402
from rmqd.remoting.command import new_request  # noqa: E402

TOPIC = "TlsBench"          # bench_tls.grpc_load sends to this topic
MAX_SECONDS = 60.0


def rss_mb(pid: int) -> tuple[float, float]:
    """(VmRSS, VmHWM) of ``pid`` in MB."""
    got = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(("VmRSS:", "VmHWM:")):
                key, value = line.split(":", 1)
                got[key] = int(value.split()[0]) / 1024
    return got.get("VmRSS", float("nan")), got.get("VmHWM", float("nan"))


def create_topic(broker: str) -> None:
    with BlockingClient(broker, 10) as c:
        resp = c.invoke(new_request(17, {"topic": TOPIC, "defaultTopic": "TBW102", "readQueueNums": "8",
                                         "writeQueueNums": "8", "perm": "6", "topicFilterType": "SINGLE_TAG",
                                         "topicSysFlag": "0", "order": "false"}), 10)
        assert resp.code == 0, resp.remark


def measure(name: str, addr: str, pid: int, seconds: float, warmup: float, inflight: int,
            behind: int | None = None) -> dict:
    """One side's row; ``behind``: the broker process behind a proxy, whose CPU per message is added as a column
    (the hop's whole cost is the proxy's plus the broker's)."""
    asyncio.run(grpc_load(addr, False, warmup, inflight))
    before, t0 = cpu_seconds(pid), time.perf_counter()
    behind_before = cpu_seconds(behind) if behind else 0.0
    done, lat = asyncio.run(grpc_load(addr, False, seconds, inflight))
    elapsed, cpu = time.perf_counter() - t0, cpu_seconds(pid) - before
    behind_cpu = cpu_seconds(behind) - behind_before if behind else float("nan")
    rss, hwm = rss_mb(pid)
    row = {"side": name, "sends/s": round(done / elapsed, 1), "p50 ms": round(percentile(lat, 0.5), 2),
           "p99 ms": round(percentile(lat, 0.99), 2),
           "cpu us/msg": round(cpu / done * 1e6, 1) if done else float("nan"),
           "rss MB": round(rss, 1), "peak rss MB": round(hwm, 1), "sends": done}
    if behind:
        row["broker cpu us/msg"] = round(behind_cpu / done * 1e6, 1) if done else float("nan")
    print(f"  {name:<22} {row['sends/s']:>9.1f} {row['p50 ms']:>8.2f} {row['p99 ms']:>8.2f} "
          f"{row['cpu us/msg']:>11.1f} {row['rss MB']:>8.1f} {row['peak rss MB']:>9.1f} "
          f"{row.get('broker cpu us/msg', float('nan')):>11.1f}", flush=True)
    return row


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--warmup", type=float, default=4.0)
    ap.add_argument("--inflight", type=int, default=16)
    ap.add_argument("--no-direct", action="store_true", help="skip the Java broker's own gRPC (no hop) row")
    ap.add_argument("--no-rmqd-broker", action="store_true", help="skip the rmqd broker rows (hop and direct)")
    a = ap.parse_args()
    seconds = min(a.seconds, MAX_SECONDS)

    from java5kit import REFERENCE5_PROXY_PROPERTIES, ClusterProxy5, Reference5Cluster
    from rmqd_proxy import FAST_PROXY, RmqdProxy

    work = tempfile.mkdtemp(prefix="rmqd-bench-proxy-")
    cluster = java = rmqd = serve = hop = None
    rows = []
    try:
        print(machine_line(), flush=True)
        cluster = Reference5Cluster(os.path.join(work, "java")).start()
        create_topic(cluster.broker_addr)
        java = ClusterProxy5(os.path.join(work, "proxy5"), cluster.namesrv_addr,
                             proxy_conf=REFERENCE5_PROXY_PROPERTIES).start()
        rmqd = RmqdProxy(os.path.join(work, "rmqd-proxy"), cluster.namesrv_addr, dict(FAST_PROXY)).start()
        if not a.no_rmqd_broker:
            serve = Rmqd("proxy-direct", {}, os.path.join(work, "tls"))
            serve.create_topic()
            hop = RmqdProxy(os.path.join(work, "rmqd-proxy-hop"), serve.namesrv, dict(FAST_PROXY)).start()
        time.sleep(2)
        print(f"1 KB sends, {a.inflight} in flight, one plaintext gRPC channel, {a.warmup:.0f} s warm-up + "
              f"{seconds:.0f} s each; broker: Java 5.5.0, then rmqd", flush=True)
        print(f"  {'side':<22} {'sends/s':>9} {'p50 ms':>8} {'p99 ms':>8} {'cpu us/msg':>11} {'rss MB':>8} "
              f"{'peak MB':>9} {'broker us/msg':>11}", flush=True)
        rows.append(measure("rmqd proxy", rmqd.grpc_addr, rmqd.proc.pid, seconds, a.warmup, a.inflight))
        rows.append(measure("Java proxy -pm cluster", java.grpc_addr, java.jvm.proc.pid, seconds, a.warmup,
                            a.inflight))
        if not a.no_direct:
            row = measure("direct (Java local)", cluster.grpc_addr, cluster.broker.proc.pid, seconds, a.warmup,
                          a.inflight)
            row["note"] = "broker+local proxy JVM: cpu and rss are the broker's, not a proxy's"
            rows.append(row)
        if serve is not None:
            rows.append(measure("rmqd proxy -> rmqd", hop.grpc_addr, hop.proc.pid, seconds, a.warmup, a.inflight,
                                behind=serve.pid))
            row = measure("direct (rmqd serve)", serve.grpc, serve.pid, seconds, a.warmup, a.inflight)
            row["note"] = "rmqd serve: cpu and rss are the name server + broker + gRPC process's, not a proxy's"
            rows.append(row)
        print(json.dumps({"bench": "proxy", "seconds": seconds, "inflight": a.inflight, "rows": rows}))
        return 0
    finally:
        for proc in (hop, serve, rmqd, java, cluster):
            if proc is None:
                continue
            try:
                proc.stop() if proc in (rmqd, hop, serve) else proc.kill()
            except Exception as exc:           # the others are still stopped
                print(f"stopping {proc!r} failed: {exc!r}", file=sys.stderr)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
