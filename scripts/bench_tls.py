#!/usr/bin/env python3
"""TLS cost per message on gRPC and remoting: rmqd beside the Java 5.x broker + proxy, same run.

Servers, each its own process (server CPU is read from /proc/<pid>/stat, every thread counted):
  * ``rmqd serve`` in its default TLS mode, permissive: remoting takes TLS or plaintext by the first byte; the gRPC
    port is the front splicing to grpcio's loopback plaintext or TLS port;
  * two more ``rmqd serve`` for the gRPC port without the front: ``tls.server.mode=disabled`` (grpcio's plaintext
    port) and ``enforcing`` (grpcio's TLS port) -- what the front costs;
  * the Java 5.5 name server and broker with the proxy in local mode (compat_tests/java5kit.Reference5Cluster), in
    Java's default mode too (permissive, test-mode certificate): one JVM serves the broker port and the gRPC port.

Load, from this process, the same for every server (1 KB bodies; ``--inflight`` requests in flight on one
connection, each sent again when its answer arrives):
  * remoting: SEND_MESSAGE_V2 frames as the Java client sends them (scripts/loadgen.send_request), over a
    plaintext or a TLS connection (asyncio, uvloop);
  * gRPC: unary SendMessage calls (grpcio's asyncio client), on a plaintext or TLS channel (the server's own
    certificate as the root: rmqd's test-mode one, the proxy's self-signed one).
Each case runs ``--seconds`` after ``--warmup`` seconds of the same load (3 s: the JVM's JIT); prints msgs/s, p50/p99 and the server's CPU per message. ``--runs
N`` repeats the whole set after ``--warm-runs`` passes that are not counted (plaintext and TLS swap order every other run, so neither gains from the other's
warm-up) and prints the median of each figure.

Usage: python scripts/bench_tls.py [--seconds 6] [--runs 3] [--warm-runs 1] [--inflight 16] [--no-java]
                                  [--only java,rmqd]
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shutil
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(REPO, "compat_tests"))
sys.path.insert(0, HERE)
sys.path.insert(0, REPO)               # this checkout's rmqd, here and in the servers started

from benchenv import machine_line  # noqa: E402
from loadgen import send_request  # noqa: E402

from rmqd.common.localports import free_port_block  # noqa: E402
from rmqd.remoting.client import BlockingClient  # noqa: E402
from rmqd.remoting.command import FrameReader, new_request  # noqa: E402

TOPIC = "TlsBench"
READY = re.compile(r"rmqd ready: name server (\S+), broker (\S+) .*grpc (\S+)")
CLK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK


# ---------------------------------------------------------------------------------- servers
class Rmqd:
    def __init__(self, name: str, props: dict[str, str], tls_dir: str) -> None:
        self.name = name
        self.dir = tempfile.mkdtemp(prefix=f"rmqd-bench-tls-{name}-")
        conf = os.path.join(self.dir, "broker.conf")
        with open(conf, "w") as f:
            f.write("".join(f"{k}={v}\n" for k, v in {"brokerIP1": "127.0.0.1", **props}.items()))
        grpc = free_port_block(1)
        env = dict(os.environ, PYTHONUNBUFFERED="1", RMQD_TLS_DIR=tls_dir, PYTHONPATH=REPO,
                   TLS_ENABLE="true" if props.get("tls.server.mode") == "enforcing" else "")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "rmqd.runtime.cli", "--log-level", "WARNING", "serve", "-c", conf, "--namesrv-port", "0",
             "--broker-port", "0", "--grpc-port", str(grpc), "--no-metrics", "--console-port", "0", "--store-dir",
             os.path.join(self.dir, "store")], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            line = self.proc.stdout.readline()
            m = READY.search(line or "")
            if m:
                self.namesrv, self.broker, self.grpc = m.groups()
                break
            if not line and self.proc.poll() is not None:
                raise RuntimeError(f"rmqd {name} exited during start")
        else:
            raise RuntimeError(f"rmqd {name} did not start")
        self.pid = self.proc.pid
        self.enforcing = props.get("tls.server.mode") == "enforcing"

    def create_topic(self) -> None:
        ctx = client_ssl() if self.enforcing else None
        with BlockingClient(self.broker, 10, ssl_context=ctx) as c:
            resp = c.invoke(new_request(17, {"topic": TOPIC, "defaultTopic": "TBW102", "readQueueNums": "4",
                                             "writeQueueNums": "4", "perm": "6", "topicFilterType": "SINGLE_TAG",
                                             "topicSysFlag": "0", "order": "false"}), 10)
            assert resp.code == 0, resp.remark

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


class JavaProxy:
    def __init__(self) -> None:
        from java5kit import Reference5Cluster
        self.dir = tempfile.mkdtemp(prefix="rmqd-bench-tls-java-")
        self.cluster = Reference5Cluster(self.dir).start()
        self.broker, self.grpc = self.cluster.broker_addr, self.cluster.grpc_addr
        self.pid = self.cluster.broker.proc.pid
        self.enforcing = False

    create_topic = Rmqd.create_topic

    def stop(self) -> None:
        self.cluster.kill()
        shutil.rmtree(self.dir, ignore_errors=True)


# ---------------------------------------------------------------------------------- clients
def client_ssl() -> ssl.SSLContext:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE                 # test mode, as the Java clients
    return ctx


def percentile(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))] * 1000 if values else float("nan")


async def remoting_load(addr: str, tls: bool, seconds: float, inflight: int) -> tuple[int, list[float]]:
    host, port = addr.rsplit(":", 1)
    reader, writer = await asyncio.open_connection(host, int(port), ssl=client_ssl() if tls else None,
                                                   server_hostname="" if tls else None)
    frames = [send_request(TOPIC, 1024, opaque=k + 1, queue_id=k % 4) for k in range(inflight)]
    sent_at = [0.0] * inflight
    lat: list[float] = []
    frame_reader = FrameReader()
    stop = time.perf_counter() + seconds
    for k in range(inflight):
        sent_at[k] = time.perf_counter()
        writer.write(frames[k])
    done = errors = 0
    outstanding = inflight
    while outstanding:
        data = await reader.read(1 << 16)
        if not data:
            raise ConnectionError(f"{addr} closed the connection")
        now = time.perf_counter()
        for resp in frame_reader.feed(data):
            k = resp.opaque - 1
            if resp.code == 0:
                lat.append(now - sent_at[k])
                done += 1
            else:
                errors += 1
            if now < stop:
                sent_at[k] = now
                writer.write(frames[k])
            else:
                outstanding -= 1
    writer.close()
    if errors:
        print(f"    {errors} sends answered with an error", flush=True)
    return done, lat


async def grpc_load(addr: str, tls: bool, seconds: float, inflight: int) -> tuple[int, list[float]]:
    import grpc

    from rmqd.grpc.pb import definition_pb2 as d
    from rmqd.grpc.pb import service_pb2 as s
    from rmqd.grpc.pb import service_pb2_grpc as sg

    host, port = addr.rsplit(":", 1)
    opts = [("grpc.max_receive_message_length", -1)]
    if tls:
        pem = ssl.get_server_certificate((host, int(port))).encode()
        cn = _common_name(pem)
        channel = grpc.aio.secure_channel(addr, grpc.ssl_channel_credentials(root_certificates=pem),
                                          options=opts + [("grpc.ssl_target_name_override", cn)])
    else:
        channel = grpc.aio.insecure_channel(addr, options=opts)
    stub = sg.MessagingServiceStub(channel)
    md = [("x-mq-client-id", f"bench-tls-{uuid.uuid4().hex[:8]}"), ("x-mq-language", "PYTHON"),
          ("x-mq-protocol", "v2"), ("x-mq-client-version", "5.1.2")]
    body = b"x" * 1024
    lat: list[float] = []
    failures: list[str] = []
    stop = time.perf_counter() + seconds

    async def worker() -> None:
        while time.perf_counter() < stop:
            m = d.Message(topic=d.Resource(name=TOPIC), body=body, system_properties=d.SystemProperties(
                message_id=uuid.uuid4().hex.upper(), tag="TagBench", body_encoding=d.IDENTITY,
                message_type=d.NORMAL))
            t0 = time.perf_counter()
            resp = await stub.SendMessage(s.SendMessageRequest(messages=[m]), metadata=md, timeout=20)
            if resp.status.code == d.OK:
                lat.append(time.perf_counter() - t0)
            elif len(failures) < 3:
                failures.append(f"{resp.status.code} {resp.status.message}")
    await asyncio.gather(*(worker() for _ in range(inflight)))
    await channel.close()
    if failures:
        print(f"    failed sends, e.g. {failures}", flush=True)
    return len(lat), lat


def _common_name(pem: bytes) -> str:
    from cryptography import x509
    from cryptography.x509.oid import NameOID
    cert = x509.load_pem_x509_certificate(pem)
    names = cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
    return str(names[0].value) if names else "localhost"


def measure(server, protocol: str, tls: bool, seconds: float, inflight: int, warmup: float) -> dict:
    load = remoting_load if protocol == "remoting" else grpc_load
    addr = server.broker if protocol == "remoting" else server.grpc
    asyncio.run(load(addr, tls, warmup, inflight))                  # warm-up: connections, JIT, the TLS context
    before, t0 = cpu_seconds(server.pid), time.perf_counter()
    done, lat = asyncio.run(load(addr, tls, seconds, inflight))
    elapsed, cpu = time.perf_counter() - t0, cpu_seconds(server.pid) - before
    return {"msgs/s": done / elapsed, "p50 ms": percentile(lat, 0.5), "p99 ms": percentile(lat, 0.99),
            "cpu us/msg": cpu / done * 1e6 if done else float("nan")}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=float, default=6.0)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--inflight", type=int, default=16)
    ap.add_argument("--warmup", type=float, default=3.0, help="seconds of the same load before each case")
    ap.add_argument("--warm-runs", type=int, default=1,
                    help="passes over every case before the runs that count (the JVM's JIT settles over minutes)")
    ap.add_argument("--no-java", action="store_true", help="rmqd only")
    ap.add_argument("--only", default="", help="comma-separated servers to run (rmqd, rmqd disabled, rmqd enforcing, "
                                               "java); default all")
    args = ap.parse_args()
    try:
        import uvloop
        uvloop.install()
    except ImportError:
        pass
    print(machine_line(), flush=True)
    tls_dir = tempfile.mkdtemp(prefix="rmqd-bench-tls-cert-")
    cases = [("rmqd", "remoting"), ("rmqd", "grpc"), ("rmqd disabled", "grpc"), ("rmqd enforcing", "grpc"),
             ("java", "remoting"), ("java", "grpc")]
    results: dict[tuple[str, str, str], list[dict]] = {}
    servers: dict[str, object] = {}
    try:
        wanted = set(filter(None, (x.strip() for x in args.only.split(",")))) or {
            "rmqd", "rmqd disabled", "rmqd enforcing", "java"}
        if args.no_java:
            wanted.discard("java")
        if "rmqd" in wanted:
            servers["rmqd"] = Rmqd("permissive", {}, tls_dir)
        if "rmqd disabled" in wanted:
            servers["rmqd disabled"] = Rmqd("disabled", {"tls.server.mode": "disabled"}, tls_dir)
        if "rmqd enforcing" in wanted:
            servers["rmqd enforcing"] = Rmqd("enforcing", {"tls.server.mode": "enforcing", "tls.enable": "true"},
                                             tls_dir)
        if "java" in wanted:
            servers["java"] = JavaProxy()
        for server in servers.values():
            server.create_topic()
        time.sleep(2)                                   # the topics reach the name servers (the proxy's route)
        for run in range(1 - args.warm_runs, args.runs + 1):
            print(f"{'warm-up pass' if run < 1 else 'run'} {run if run > 0 else ''} (load average "
                  f"{os.getloadavg()[0]:.1f})", flush=True)
            for name, protocol in cases:
                if name not in servers:
                    continue
                modes = {"rmqd disabled": [False], "rmqd enforcing": [True]}.get(name, [False, True])
                if run % 2 == 0:
                    modes = modes[::-1]                 # plaintext first, then TLS first: no order advantage
                for tls in modes:
                    r = measure(servers[name], protocol, tls, args.seconds, args.inflight, args.warmup)
                    key = (name, protocol, "TLS" if tls else "plaintext")
                    if run > 0:
                        results.setdefault(key, []).append(r)
                    print(f"  {key}: " + ", ".join(f"{k} {v:,.1f}" for k, v in r.items()), flush=True)
    finally:
        for server in servers.values():
            server.stop()
        shutil.rmtree(tls_dir, ignore_errors=True)
    print(f"\nmedian of {args.runs} run(s), {args.seconds:g} s each, {args.inflight} in flight, 1 KB:")
    print("| server | protocol | transport | msgs/s | p50 ms | p99 ms | server CPU µs/msg |")
    print("|---|---|---|---:|---:|---:|---:|")
    for (name, protocol, transport), rs in results.items():
        med = {k: statistics.median(r[k] for r in rs) for k in rs[0]}
        print(f"| {name} | {protocol} | {transport} | {med['msgs/s']:,.0f} | {med['p50 ms']:.2f} | "
              f"{med['p99 ms']:.2f} | {med['cpu us/msg']:.0f} |")
    print(json.dumps({" / ".join(k): v for k, v in results.items()}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
