#!/usr/bin/env python3
"""RocketMQ 5 clients over gRPC vs 4.x remoting, one rmqd, one run.

Starts ``rmqd serve`` (gRPC on a free port), then, each bounded in time and count:
  * 5.x: the PyPI Python client (rocketmq-python-client 5.1.2, in ``.venv-py5``): Producer sync sends
    of 1 KB at 1 and N threads (sends/s, latency p50/p99), then a SimpleConsumer draining that
    backlog with receive(32) + ack (receive+ack/s; acks from 8 threads, all confirmed before the clock stops);
  * 4.x: the C++ client (rocketmq wheel 0.4.4, remoting): sync sends of 1 KB at the same thread counts,
    and a push consumer draining its backlog (consumed/s);
  * the 5.x client's own ceiling: the same programs against a null gRPC server that answers at once;
  * the server's CPU per run and its RSS idle and peak.

Usage: python scripts/bench_grpc.py [--seconds 8] [--threads 1,8] [--size 1024] [--py5 PATH]
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import textwrap
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(REPO, "compat_tests"))
sys.path.insert(0, REPO)                                       # tests.kit (compat_tests' modules import it)

from benchenv import machine_line  # noqa: E402
from procstat import cpu_seconds, rss_mb  # noqa: E402
from serve_child import ready_addresses, stop_child  # noqa: E402
from clientrunner import run_client_script  # noqa: E402
from scenarios import create_topic  # noqa: E402


PRODUCE5 = r'''
import threading, time
from rocketmq import ClientConfiguration, Credentials, Message, Producer
A = _json.loads(_os.environ["ARGS"])
p = Producer(ClientConfiguration(A["endpoint"], Credentials()), (A["topic"],))
p.startup()
body = b"x" * A["size"]
def msg():
    m = Message(); m.topic = A["topic"]; m.body = body
    return m
for _ in range(20):
    p.send(msg())
lat = [[] for _ in range(A["threads"])]
errors = [0] * A["threads"]
stop = time.time() + A["seconds"]
def worker(k):
    n = 0
    while time.time() < stop and n < A["max_per_thread"]:
        t0 = time.perf_counter()
        try:
            p.send(msg())
            lat[k].append(time.perf_counter() - t0)
        except Exception:
            errors[k] += 1
        n += 1
t0 = time.time()
ts = [threading.Thread(target=worker, args=(k,)) for k in range(A["threads"])]
for t in ts: t.start()
for t in ts: t.join()
elapsed = time.time() - t0
allv = sorted(v for l in lat for v in l)
def pct(q): return allv[min(len(allv) - 1, int(q * len(allv)))] * 1000 if allv else None
emit(op="result", sent=len(allv) + 20, tps=len(allv) / elapsed, p50=pct(0.5), p99=pct(0.99), errors=sum(errors))
p.shutdown()
'''

CONSUME5 = r'''
import time
from concurrent.futures import ThreadPoolExecutor
from rocketmq import ClientConfiguration, Credentials, FilterExpression, SimpleConsumer
A = _json.loads(_os.environ["ARGS"])
c = SimpleConsumer(ClientConfiguration(A["endpoint"], Credentials()), "BenchSimple",
                   {A["topic"]: FilterExpression()}, await_duration=5)   # deadline 3 s + this must hold a 5 s poll
c.startup()
acks = ThreadPoolExecutor(8)          # the client's ack_async returns no future (5.1.2): ack in threads
got, pending, failed = 0, [], 0
t0 = time.time()
end = t0 + A["seconds"]
while got < A["expect"] and time.time() < end:
    msgs = c.receive(32, 60) or []
    pending.extend(acks.submit(c.ack, m) for m in msgs)
    got += len(msgs)
for f in pending:
    try:
        f.result(timeout=30)
    except Exception:
        failed += 1
elapsed = time.time() - t0
emit(op="result", received=got, acked=got - failed, tps=(got - failed) / elapsed if elapsed else 0)
c.shutdown()
'''

PRODUCE4 = r'''
import threading
from rocketmq.client import Producer, Message
A = _json.loads(_os.environ["ARGS"])
p = Producer("BenchPG4"); p.set_namesrv_addr(NAMESRV); p.set_timeout(10000); p.start()
body = "x" * A["size"]
def msg():
    m = Message(A["topic"]); m.set_body(body); return m
for _ in range(20):
    p.send_sync(msg())
lat = [[] for _ in range(A["threads"])]
errors = [0] * A["threads"]
stop = _time.time() + A["seconds"]
def worker(k):
    n = 0
    while _time.time() < stop and n < A["max_per_thread"]:
        t0 = _time.perf_counter()
        try:
            p.send_sync(msg())
            lat[k].append(_time.perf_counter() - t0)
        except Exception:
            errors[k] += 1
        n += 1
t0 = _time.time()
ts = [threading.Thread(target=worker, args=(k,)) for k in range(A["threads"])]
for t in ts: t.start()
for t in ts: t.join()
elapsed = _time.time() - t0
allv = sorted(v for l in lat for v in l)
def pct(q): return allv[min(len(allv) - 1, int(q * len(allv)))] * 1000 if allv else None
emit(op="result", sent=len(allv) + 20, tps=len(allv) / elapsed, p50=pct(0.5), p99=pct(0.99), errors=sum(errors))
p.shutdown()
'''

CONSUME4 = r'''
from rocketmq.client import PushConsumer
A = _json.loads(_os.environ["ARGS"])
c = PushConsumer("BenchPush4"); c.set_namesrv_addr(NAMESRV)
seen = [0]
first = [None]
def on(msg):
    if first[0] is None:
        first[0] = _time.time()
    seen[0] += 1
    return True
subscribe_raw(c, A["topic"], "*", on)
t0 = _time.time()
c.start()
wait_until(lambda: seen[0] >= A["expect"], A["seconds"])
elapsed = _time.time() - (first[0] or t0)
emit(op="result", received=seen[0], tps=seen[0] / elapsed if elapsed else 0)
c.shutdown()
'''


NULL_GRPC = r'''
import asyncio, hashlib, sys, time
import grpc
from rmqd.grpc.pb import definition_pb2 as d, service_pb2 as s, service_pb2_grpc as sg
OK = d.Status(code=d.OK, message="OK")
BODY = b"x" * int(sys.argv[2])
class Null(sg.MessagingServiceServicer):
    """Answers at once, stores nothing: the 5.x client's own ceiling."""
    def __init__(self, port):
        self.port, self.n = port, 0
    async def QueryRoute(self, r, c):
        b = d.Broker(name="null", endpoints=d.Endpoints(scheme=d.IPv4, addresses=[d.Address(host="127.0.0.1", port=self.port)]))
        return s.QueryRouteResponse(status=OK, message_queues=[d.MessageQueue(topic=r.topic, id=i, permission=d.READ_WRITE,
                                    broker=b, accept_message_types=[d.NORMAL]) for i in range(4)])
    async def Heartbeat(self, r, c):
        return s.HeartbeatResponse(status=OK)
    async def SendMessage(self, r, c):
        return s.SendMessageResponse(status=OK, entries=[s.SendResultEntry(status=OK, message_id=m.system_properties.message_id)
                                                         for m in r.messages])
    async def ReceiveMessage(self, r, c):
        yield s.ReceiveMessageResponse(status=OK)
        digest = d.Digest(type=d.MD5, checksum=hashlib.md5(BODY).hexdigest().upper())
        for _ in range(r.batch_size):
            self.n += 1
            sp = d.SystemProperties(message_id=f"N{self.n:030d}", body_digest=digest, body_encoding=d.IDENTITY,
                                    message_type=d.NORMAL, receipt_handle=f"0 0 60000 0 0 null 0 {self.n} 0",
                                    delivery_attempt=1)
            yield s.ReceiveMessageResponse(message=d.Message(topic=r.message_queue.topic, system_properties=sp, body=BODY))
    async def AckMessage(self, r, c):
        return s.AckMessageResponse(status=OK, entries=[s.AckMessageResultEntry(message_id=e.message_id, status=OK)
                                                        for e in r.entries])
    async def Telemetry(self, it, c):
        async for cmd in it:
            if cmd.HasField("settings"):
                st = d.Settings(); st.CopyFrom(cmd.settings)
                if st.HasField("publishing"):
                    st.publishing.max_body_size = 4 << 20
                yield s.TelemetryCommand(status=OK, settings=st)
    async def NotifyClientTermination(self, r, c):
        return s.NotifyClientTerminationResponse(status=OK)
async def main():
    port = int(sys.argv[1])
    server = grpc.aio.server()
    sg.add_MessagingServiceServicer_to_server(Null(port), server)
    server.add_insecure_port(f"127.0.0.1:{port}")
    await server.start()
    print("ready", flush=True)
    await server.wait_for_termination()
import uvloop; uvloop.install(); asyncio.run(main())
'''


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class RssPeak(threading.Thread):
    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.pid, self.peak, self._stop_evt = pid, 0.0, threading.Event()

    def run(self) -> None:
        while not self._stop_evt.wait(0.2):
            self.peak = max(self.peak, rss_mb(self.pid))

    def stop(self) -> float:
        self._stop_evt.set()
        self.join(2)
        return self.peak


def start_server(store: str) -> tuple[subprocess.Popen, str, str, str]:
    proc = subprocess.Popen([sys.executable, "-m", "rmqd.runtime.cli", "--log-level", "WARNING", "serve", "--namesrv-port", "0",
                             "--broker-port", "0", "--console-port", "0", "--grpc-port", str(free_port()),
                             "--store-dir", store], stdout=subprocess.PIPE, text=True)
    addrs, grpc_addr = ready_addresses(proc)
    if grpc_addr is None:
        raise RuntimeError("no gRPC endpoint in the ready line (is rmqd[grpc] installed?)")
    return proc, addrs[0], addrs[1], grpc_addr


def run_json(python: str, script: str, args: dict, namesrv: str = "", timeout: float = 120,
             server_pid: int | None = None) -> dict:
    """Run one client program; with ``server_pid``, add the server's CPU use over the run (cores busy)."""
    cpu0, t0 = (cpu_seconds(server_pid), time.monotonic()) if server_pid else (0.0, 0.0)
    res = run_client_script(python, textwrap.dedent(script), env={"ARGS": json.dumps(args), "NAMESRV": namesrv},
                            timeout=timeout)
    results = res.events_of("result")
    if res.returncode != 0 or not results:
        raise RuntimeError(f"client run failed (rc={res.returncode}): {res.stderr[-2000:]}")
    out = results[-1]
    if server_pid:
        out["server_cpu"] = (cpu_seconds(server_pid) - cpu0) / (time.monotonic() - t0)
    return out


def null_ceiling(py5: str, a: argparse.Namespace, threads: int) -> tuple[dict, dict]:
    """The 5.x client against a gRPC server that answers at once: what the client itself can do."""
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-c", NULL_GRPC, str(port), str(a.size)], stdout=subprocess.PIPE,
                            text=True)
    try:
        if proc.stdout.readline().strip() != "ready":
            raise RuntimeError("the null gRPC server did not start")
        endpoint = f"127.0.0.1:{port}"
        p = run_json(py5, PRODUCE5, dict(size=a.size, threads=threads, seconds=a.seconds,
                                         max_per_thread=a.max_per_thread, endpoint=endpoint, topic="Null"))
        c = run_json(py5, CONSUME5, dict(endpoint=endpoint, topic="Null", expect=p["sent"], seconds=a.seconds))
        return p, c
    finally:
        proc.kill()
        proc.wait(10)


def ensure_py5(path: str | None) -> str:
    if path:
        return path
    python = os.path.join(REPO, ".venv-py5", "bin", "python")
    if not os.path.exists(python):
        subprocess.run([sys.executable, "-m", "venv", os.path.join(REPO, ".venv-py5")], check=True, timeout=120)
        subprocess.run([python, "-m", "pip", "install", "-q", "rocketmq-python-client==5.1.2"], check=True,
                       timeout=600)
    return python


def fmt(v: float | None, digits: int = 1) -> str:
    return "-" if v is None else f"{v:.{digits}f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=8.0)
    ap.add_argument("--threads", default="1,8")
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--max-per-thread", type=int, default=200_000)
    ap.add_argument("--py5", help="interpreter with rocketmq-python-client 5.1.2 (default: .venv-py5, made if missing)")
    a = ap.parse_args()
    py5 = ensure_py5(a.py5)
    cpp = os.environ.get("RMQD_CPP1_PYTHON", sys.executable)
    threads = [int(t) for t in a.threads.split(",")]
    store = tempfile.mkdtemp(prefix="rmqd-bench-grpc-")
    proc, namesrv, broker, grpc_addr = start_server(store)
    rows = []
    try:
        time.sleep(0.5)
        idle = rss_mb(proc.pid)
        peak = RssPeak(proc.pid)
        peak.start()
        for t in threads:
            topic5, topic4 = f"Bench5_{t}", f"Bench4_{t}"
            create_topic(broker, topic5, 4)
            create_topic(broker, topic4, 4)
            time.sleep(0.3)
            common = dict(size=a.size, threads=t, seconds=a.seconds, max_per_thread=a.max_per_thread)
            pid = proc.pid
            p5 = run_json(py5, PRODUCE5, dict(common, endpoint=grpc_addr, topic=topic5), server_pid=pid)
            c5 = run_json(py5, CONSUME5, dict(endpoint=grpc_addr, topic=topic5, expect=p5["sent"],
                                              seconds=max(30.0, a.seconds * 4)), server_pid=pid)
            p4 = run_json(cpp, PRODUCE4, dict(common, topic=topic4), namesrv, server_pid=pid)
            c4 = run_json(cpp, CONSUME4, dict(topic=topic4, expect=p4["sent"], seconds=max(30.0, a.seconds * 4)),
                          namesrv, server_pid=pid)
            rows.append((t, p5, c5, p4, c4))
            print(f"threads={t}: 5.x send {p5['tps']:.0f}/s p50 {fmt(p5['p50'], 2)} ms p99 {fmt(p5['p99'], 2)} ms, "
                  f"receive+ack {c5['tps']:.0f}/s ({c5['acked']}/{p5['sent']}); 4.x send {p4['tps']:.0f}/s "
                  f"p50 {fmt(p4['p50'], 2)} ms p99 {fmt(p4['p99'], 2)} ms, push consume {c4['tps']:.0f}/s "
                  f"({c4['received']}/{p4['sent']})", flush=True)
        peak_rss = peak.stop()
        ceilings = {t: null_ceiling(py5, a, t) for t in threads}
    finally:
        stop_child(proc)
        shutil.rmtree(store, ignore_errors=True)
    print()
    print(f"machine: {machine_line()}; {a.size} B messages, {a.seconds:g} s per send run")
    print(f"server RSS: idle {idle:.0f} MB, peak {peak_rss:.0f} MB")
    print("| producer threads | 5.x gRPC send/s (server CPU) | p50 / p99 ms | 5.x client ceiling send/s | "
          "5.x receive+ack/s (server CPU) | 5.x client ceiling receive+ack/s | 4.x remoting send/s (server CPU) | "
          "p50 / p99 ms | 4.x push consume/s |")
    print("|---|---|---|---|---|---|---|---|---|")
    for t, p5, c5, p4, c4 in rows:
        np5, nc5 = ceilings[t]
        print(f"| {t} | {p5['tps']:.0f} ({p5['server_cpu']:.0%}) | {fmt(p5['p50'], 2)} / {fmt(p5['p99'], 2)} | "
              f"{np5['tps']:.0f} | {c5['tps']:.0f} ({c5['server_cpu']:.0%}) | {nc5['tps']:.0f} | "
              f"{p4['tps']:.0f} ({p4['server_cpu']:.0%}) | {fmt(p4['p50'], 2)} / {fmt(p4['p99'], 2)} | "
              f"{c4['tps']:.0f} |")
    print("server CPU: the rmqd process's CPU time over the client run, in cores (100% = one core busy); "
          "client ceiling: the same 5.x client program against a gRPC server that answers at once")


if __name__ == "__main__":
    main()
