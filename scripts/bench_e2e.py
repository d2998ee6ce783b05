#!/usr/bin/env python3
"""End-to-end benchmark: rmqd served to the official C++ client (rocketmq wheel) as load generator.

Measures, each bounded in time:
  * start-up: process launch -> name server and broker ports answering;
  * RSS of the server idle and its peak under load;
  * sync send TPS and latency p50/p99/p99.9 for 1 KB messages at 1, 4 and 16 producer threads,
    from the official C++ client (rocketmq wheel, via ctypes) and from a native raw-protocol
    sender (scripts/loadgen.py: the C++ client 1.0.1 itself tops out near 3k sends/s here, so it
    cannot show the server's capacity).  The native sender runs in three modes: closed-loop (the
    headline: N synchronous senders on one connection, what the Java benchmark producer's N
    threads put on the wire), shared (N real threads on one connection) and per-thread (N
    threads, N connections);
  * consume TPS from the backlog those sends left (push consumer);
  * end-to-end latency send -> push consumer callback at a fixed moderate rate;
  * pull latency: one connection pulling 32 messages at a time from the backlog, alone and while
    4 native senders run (with ``--conf`` turning the tier on, run it once with and once without
    to see what the tier's copier costs sends and pulls);
  * the load generator's own ceiling: the same producer against a null broker that answers
    every send at once without storing anything (so the client side is shown not to be the limit):
    a native one for the native sender, a Python one (it also answers route lookups) for the
    C++ client.

Usage: python scripts/bench_e2e.py [--seconds 8] [--threads 1,4,16] [--runs 1] [--size 1024] [--pull-seconds 5]
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "compat_tests"))
sys.path.insert(0, os.path.join(HERE, ".."))                  # tests.kit (compat_tests' modules import it)

from benchenv import machine_line  # noqa: E402
from procstat import cpu_ticks, rss_mb  # noqa: E402
from clientrunner import run_client_script  # noqa: E402
from scenarios import create_topic  # noqa: E402

ADDR = re.compile(r"listening on (127\.0\.0\.1:\d+)")

LOAD = r'''
import threading
from rocketmq.client import Producer, Message
A = _json.loads(_os.environ['ARGS'])
p = Producer('BenchPG')
p.set_namesrv_addr(NAMESRV)
p.set_timeout(10000)
p.start()
body = 'x' * A['size']
warm = Message(A['topic']); warm.set_body(body)
for _ in range(20):
    p.send_sync(warm)
lat = [[] for _ in range(A['threads'])]
errors = [0] * A['threads']
samples = []
stop = _time.perf_counter() + A['seconds']

def worker(k):
    m = Message(A['topic']); m.set_body(body); m.set_tags('TagBench')
    mine = lat[k]
    while True:
        t0 = _time.perf_counter()
        if t0 >= stop:
            return
        try:
            p.send_sync(m)
        except Exception as exc:
            errors[k] += 1
            if len(samples) < 3:
                samples.append(str(exc)[:300])
            continue
        mine.append(_time.perf_counter() - t0)

ts = [threading.Thread(target=worker, args=(k,)) for k in range(A['threads'])]
t0 = _time.perf_counter()
for t in ts: t.start()
for t in ts: t.join()
elapsed = _time.perf_counter() - t0
allv = sorted(v for l in lat for v in l)
def pct(q): return allv[min(len(allv) - 1, int(q * len(allv)))] * 1000 if allv else None
emit(op='load', sent=len(allv), errors=sum(errors), error_samples=samples, seconds=elapsed, tps=len(allv) / elapsed,
     avg_ms=(sum(allv) / len(allv) * 1000) if allv else None, p50=pct(0.5), p99=pct(0.99), p999=pct(0.999))
_os._exit(0)   # the C++ 1.x producer's shutdown can hang with many sender threads
'''

CONSUME = r'''
import threading
from rocketmq.client import PushConsumer
A = _json.loads(_os.environ['ARGS'])
c = PushConsumer(A['group'])
c.set_namesrv_addr(NAMESRV)
c.set_thread_count(4)
c.set_message_batch_max_size(32)
n = [0]; first = [None]; last = [None]
lock = threading.Lock()
def on(msg):
    now = _time.perf_counter()
    with lock:
        n[0] += 1
        if first[0] is None: first[0] = now
        last[0] = now
subscribe_raw(c, A['topic'], '*', on)
c.start()
wait_until(lambda: n[0] >= A['expect'], A['timeout'], 0.01)
span = (last[0] - first[0]) if first[0] and last[0] and last[0] > first[0] else None
emit(op='consume', received=n[0], seconds=span, tps=(n[0] / span) if span else None)
_os._exit(0)
'''

E2E = r'''
import threading
from rocketmq.client import Producer, Message, PushConsumer
A = _json.loads(_os.environ['ARGS'])
lat = []
lock = threading.Lock()
def on(msg):
    sent = float(msg.body.decode().split('|', 1)[0])
    with lock:
        lat.append(_time.time() - sent)
c = PushConsumer('BenchE2E')
c.set_namesrv_addr(NAMESRV)
subscribe_raw(c, A['topic'], '*', on)
c.start()
p = Producer('BenchE2EPG'); p.set_namesrv_addr(NAMESRV); p.start()
pad = 'x' * A['size']
for attempt in range(5):        # C++ 1.0.1 may time out on its transport lock while the consumer starts
    try:
        warm = Message(A['topic']); warm.set_body('%f|warm' % _time.time()); p.send_sync(warm)
        break
    except Exception:
        if attempt == 4:
            raise
        _time.sleep(1)
wait_until(lambda: len(lat) >= 1, 30, 0.01)
with lock: lat.clear()
interval = 1.0 / A['rate']
n = int(A['rate'] * A['seconds'])
t_next = _time.time()
errors = 0
for i in range(n):
    m = Message(A['topic']); m.set_body('%f|%s' % (_time.time(), pad))
    try:
        p.send_sync(m)
    except Exception:              # C++ 1.0.1's 3 ms transport try-lock ("No route info"): counted
        errors += 1
    t_next += interval
    d = t_next - _time.time()
    if d > 0: _time.sleep(d)
wait_until(lambda: len(lat) >= n - errors, 20, 0.01)
v = sorted(lat)
def pct(q): return v[min(len(v) - 1, int(q * len(v)))] * 1000 if v else None
emit(op='e2e', sent=n - errors, errors=errors, received=len(v), p50=pct(0.5), p99=pct(0.99),
     max=(v[-1] * 1000 if v else None))
_os._exit(0)
'''


class RssSampler(threading.Thread):
    def __init__(self, pid: int):
        super().__init__(daemon=True)
        self.pid, self.peak, self.peak_anon, self._halt = pid, 0.0, 0.0, threading.Event()

    def run(self) -> None:
        while not self._halt.is_set():
            try:
                self.peak = max(self.peak, rss_mb(self.pid))
                self.peak_anon = max(self.peak_anon, rss_mb(self.pid, "RssAnon"))
            except OSError:
                return
            self._halt.wait(0.1)

    def stop(self) -> tuple[float, float]:
        self._halt.set()
        self.join()
        return self.peak, self.peak_anon


def answers(addr: str) -> bool:
    host, port = addr.split(":")
    try:
        with socket.create_connection((host, int(port)), timeout=0.2):
            return True
    except OSError:
        return False


def start_server(store: str, extra: list[str]) -> tuple[subprocess.Popen, str, str, float]:
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "rmqd.runtime.cli", "--log-level", "WARNING", "serve", "--namesrv-port", "0",
                             "--broker-port", "0", "--console-port", "0", "--store-dir", store, *extra],
                            stdout=subprocess.PIPE, text=True)
    addrs = []
    while len(addrs) < 2:
        line = proc.stdout.readline()
        if not line:
            raise RuntimeError("server exited during start-up")
        m = ADDR.search(line)
        if m:
            addrs.append(m.group(1))
    while not (answers(addrs[0]) and answers(addrs[1])):
        time.sleep(0.001)
    return proc, addrs[0], addrs[1], time.perf_counter() - t0


NULL_BROKER = r'''
import asyncio, json, sys
import uvloop
from rmqd.remoting.command import FrameReader, encode_frame, new_response, prepare_reply

class P(asyncio.Protocol):
    def connection_made(self, t):
        self.t, self.r = t, FrameReader()
    def data_received(self, data):
        out = []
        for cmd in self.r.feed(data):
            if cmd.flag & 1:
                continue
            if cmd.code == 105:
                body = ('{"brokerDatas":[{"brokerAddrs":{0:"127.0.0.1:%d"},"brokerName":"null","cluster":"C"}],'
                        '"filterServerTable":{},"queueDatas":[{"brokerName":"null","perm":6,"readQueueNums":4,'
                        '"topicSysFlag":0,"writeQueueNums":4}]}' % PORT).encode()
                resp = new_response(0, body=body)
            elif cmd.code in (10, 310, 320):
                resp = new_response(0, None, {"msgId": "7F0000010000000000000000000000AA", "queueId": "0",
                                              "queueOffset": "0", "MSG_REGION": "DefaultRegion", "TRACE_ON": "true"})
            else:
                resp = new_response(0)
            out += encode_frame(prepare_reply(cmd, resp))
        if out:
            self.t.writelines(out)

async def main():
    global PORT
    loop = asyncio.get_running_loop()
    srv = await loop.create_server(P, "127.0.0.1", 0)
    PORT = srv.sockets[0].getsockname()[1]
    print("listening on 127.0.0.1:%d" % PORT, flush=True)
    await asyncio.Event().wait()

uvloop.run(main())
'''


NATIVE_NULL_BROKER = r'''
import socket, threading
from rmqd.cython_ext.loadgen import serve_null_connection
EXT = (b'{"msgId":"7F0000010000000000000000000000AA","queueId":"0","queueOffset":"0",'
       b'"MSG_REGION":"DefaultRegion","TRACE_ON":"true"}')
srv = socket.socket()
srv.bind(("127.0.0.1", 0))
srv.listen(256)
print("listening on 127.0.0.1:%d" % srv.getsockname()[1], flush=True)
while True:
    conn, _ = srv.accept()
    threading.Thread(target=serve_null_connection, args=(conn.detach(), EXT), daemon=True).start()
'''

NATIVE_MODES = (("native", "closed-loop"), ("native-shared", "shared"), ("native-per-thread", "per-thread"))
LABELS = {"native": "native closed-loop", "native-shared": "native threads, 1 conn",
          "native-per-thread": "native threads, N conns", "cpp": "C++ client 1.x"}


def load(namesrv: str, topic: str, threads: int, seconds: float, size: int) -> dict:
    res = run_client_script(sys.executable, LOAD, env={"NAMESRV": namesrv, "ARGS": json.dumps(
        dict(topic=topic, threads=threads, seconds=seconds, size=size))}, timeout=seconds + 120)
    events = res.events_of("load")
    if not events:
        raise RuntimeError(f"load generator failed: {res.stderr[-2000:]} {res.client_log[-2000:]}")
    return events[0]


def native_load(broker: str, topic: str, threads: int, seconds: float, size: int, mode: str = "closed-loop") -> dict:
    t0 = cpu_ticks()
    out = subprocess.run([sys.executable, os.path.join(HERE, "loadgen.py"), "--broker", broker, "--topic", topic,
                          "--threads", str(threads), "--seconds", str(seconds), "--size", str(size),
                          "--mode", mode],
                         capture_output=True, text=True, timeout=seconds + 60)
    if out.returncode != 0 or not out.stdout.strip():
        raise RuntimeError(f"loadgen failed: {out.stderr[-2000:]}")
    result = json.loads(out.stdout.strip().splitlines()[-1])
    d = [b - a for a, b in zip(t0, cpu_ticks())]
    # steal: CPU time the hypervisor gave to other guests while this point ran (noisy neighbours)
    result["steal_pct"] = 100.0 * d[7] / max(1, sum(d)) if len(d) > 7 else 0.0
    return result


def pull_latency(broker: str, topic: str, seconds: float, queues: int = 4) -> dict:
    """One connection pulling 32 messages at a time (PULL_MESSAGE, no suspend) round-robin over
    the queues, each from offset 0 forward (a queue that is read to its end starts over), for
    ``seconds``: the latency of each pull as the client sees it."""
    from rmqd.remoting.client import BlockingClient
    from rmqd.remoting.command import new_request
    offsets = [0] * queues
    lat: list = []
    msgs = 0
    deadline = time.perf_counter() + seconds
    with BlockingClient(broker, timeout=10) as client:
        q = 0
        while time.perf_counter() < deadline:
            ext = {"consumerGroup": "BenchPullLatency", "topic": topic, "queueId": str(q),
                   "queueOffset": str(offsets[q]), "maxMsgNums": "32", "sysFlag": "4", "commitOffset": "0",
                   "suspendTimeoutMillis": "0", "subscription": "*", "subVersion": "0"}
            t0 = time.perf_counter()
            resp = client.invoke(new_request(11, ext))
            lat.append(time.perf_counter() - t0)
            nxt = int((resp.ext_fields or {}).get("nextBeginOffset", 0))
            if resp.code == 0:
                msgs += max(0, nxt - offsets[q])
                offsets[q] = nxt
            else:
                offsets[q] = 0                       # read to the end (or moved): start over
            q = (q + 1) % queues
    lat.sort()

    def pct(x: float) -> float:
        return lat[min(len(lat) - 1, int(x * len(lat)))] * 1000 if lat else float("nan")
    return {"pulls": len(lat), "pulls_s": len(lat) / seconds, "msgs_s": msgs / seconds, "p50": pct(0.5),
            "p99": pct(0.99), "p999": pct(0.999)}


def pull_latency_under_load(broker: str, topic: str, seconds: float, size: int) -> tuple[dict, dict]:
    """:func:`pull_latency` while 4 native closed-loop senders keep the broker (and, with the
    tier on, its copier) busy; returns (pull figures, send figures)."""
    out: dict = {}
    sender = threading.Thread(target=lambda: out.update(native_load(broker, topic, 4, seconds, size)))
    sender.start()
    pulls = pull_latency(broker, topic, seconds)
    sender.join()
    return pulls, out


def median_run(fn, runs: int) -> dict:
    results = sorted((fn() for _ in range(runs)), key=lambda r: r["tps"])
    return results[len(results) // 2]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=8.0)
    ap.add_argument("--threads", default="1,4,16")
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--runs", type=int, default=1, help="runs per thread count (median reported)")
    ap.add_argument("--e2e-rate", type=int, default=500)
    ap.add_argument("--flush", default="ASYNC_FLUSH")
    ap.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE",
                    help="extra broker.conf line (repeatable), e.g. messageStorePlugIn=tiered")
    ap.add_argument("--skip-ceilings", action="store_true", help="do not measure the null-broker ceilings")
    ap.add_argument("--pull-seconds", type=float, default=5.0,
                    help="pull latency from the backlog, alone and under send load (0: skip)")
    args = ap.parse_args()
    threads = [int(t) for t in args.threads.split(",")]
    print(machine_line())

    # Load generator ceilings against null brokers (the C++ client also needs a name server).
    ceilings: dict = {kind: {n: {"tps": float("nan")} for n in threads} for kind in LABELS}
    if not args.skip_ceilings:
        null = subprocess.Popen([sys.executable, "-c", NULL_BROKER], stdout=subprocess.PIPE, text=True)
        null_addr = ADDR.search(null.stdout.readline()).group(1)
        for n in threads:
            ceilings["cpp"][n] = load(null_addr, "NullTopic", n, min(args.seconds, 5), args.size)
        null.kill()
        null.wait()
        null = subprocess.Popen([sys.executable, "-c", NATIVE_NULL_BROKER], stdout=subprocess.PIPE, text=True)
        null_addr = ADDR.search(null.stdout.readline()).group(1)
        for kind, mode in NATIVE_MODES:
            for n in threads:
                ceilings[kind][n] = native_load(null_addr, "NullTopic", n, min(args.seconds, 5), args.size, mode)
        null.kill()
        null.wait()

    conf = tempfile.NamedTemporaryFile("w", suffix=".conf", delete=False)
    conf.write(f"flushDiskType={args.flush}\n" + "".join(line + "\n" for line in args.conf))
    conf.close()
    store = tempfile.mkdtemp(prefix="rmqd-bench-")
    starts = []
    try:
        for _ in range(3):  # start-up time: median of 3 launches
            proc, ns, broker, t = start_server(tempfile.mkdtemp(dir=store), ["-c", conf.name])
            starts.append(t)
            proc.terminate()
            proc.wait(10)
        proc, ns, broker, _ = start_server(os.path.join(store, "main"), ["-c", conf.name])
        time.sleep(1.0)
        idle_rss, idle_anon = rss_mb(proc.pid), rss_mb(proc.pid, "RssAnon")
        sampler = RssSampler(proc.pid)
        sampler.start()
        results: dict = {kind: {} for kind in LABELS}
        for n in threads:
            for kind, mode in NATIVE_MODES:
                runs = args.runs if kind == "native" else 1
                results[kind][n] = median_run(
                    lambda: native_load(broker, "BenchTopic", n, args.seconds, args.size, mode), runs)
                print(f"  {LABELS[kind]}, {n} threads: {results[kind][n]['tps']:,.0f}/s", flush=True)
            results["cpp"][n] = median_run(lambda: load(ns, "BenchTopic", n, args.seconds, args.size), args.runs)
            print(f"  C++ client, {n} threads: {results['cpp'][n]['tps']:,.0f}/s", flush=True)
        pulls: dict = {}
        if args.pull_seconds > 0:
            pulls["alone"] = pull_latency(broker, "BenchTopic", args.pull_seconds)
            pulls["under send load"], pulls["sends"] = pull_latency_under_load(broker, "BenchTopic", args.pull_seconds,
                                                                               args.size)
            print(f"  pull latency: p99 {pulls['alone']['p99']:.3f} ms alone, "
                  f"{pulls['under send load']['p99']:.3f} ms under send load", flush=True)
        total_sent = sum(r["sent"] for kind in results.values() for r in kind.values())
        total_sent += pulls.get("sends", {}).get("sent", 0)
        peak_rss, peak_anon = sampler.stop()
        backlog = min(total_sent, 300000)
        cres = run_client_script(sys.executable, CONSUME, env={"NAMESRV": ns, "ARGS": json.dumps(
            dict(topic="BenchTopic", group="BenchConsume", expect=backlog, timeout=90))}, timeout=150)
        consume = (cres.events_of("consume") or [{}])[0]
        create_topic(broker, "BenchE2E")
        eres = run_client_script(sys.executable, E2E, env={"NAMESRV": ns, "ARGS": json.dumps(
            dict(topic="BenchE2E", rate=args.e2e_rate, seconds=5, size=args.size))}, timeout=120)
        e2e = (eres.events_of("e2e") or [{}])[0]
        if not e2e:
            print(f"end-to-end run failed (exit {eres.returncode}, timed out: {eres.timed_out}):\n"
                  f"{eres.stderr[-1500:]}", file=sys.stderr)
        proc.terminate()
        proc.wait(15)
    finally:
        shutil.rmtree(store, ignore_errors=True)
        os.unlink(conf.name)

    print(f"\nstart-up (launch -> both ports answering), median of 3: {statistics.median(starts) * 1000:.0f} ms")
    print(f"server memory idle: RSS {idle_rss:.1f} MB (own/anonymous {idle_anon:.1f} MB); peak under load: "
          f"RSS {peak_rss:.1f} MB (own/anonymous {peak_anon:.1f} MB; the rest is page cache of the mapped store files)")
    print(f"\nsync send, {args.size} B, {args.flush}, {args.seconds:.0f} s per point, median of {args.runs}")
    print(f"{'load generator':<24} {'threads':>7} {'TPS':>10} {'avg ms':>8} {'p50 ms':>8} {'p99 ms':>8} {'p99.9 ms':>9}"
          f" {'errors':>7} {'ceiling TPS':>12} {'gen µs/msg':>11} {'steal %':>8}")
    for kind, label in LABELS.items():
        for n in threads:
            r, c = results[kind][n], ceilings[kind][n]
            gen, steal = r.get("gen_cpu_us_per_msg"), r.get("steal_pct")
            print(f"{label:<24} {n:>7} {r['tps']:>10,.0f} {r['avg_ms']:>8.3f} {r['p50']:>8.3f} {r['p99']:>8.3f}"
                  f" {r['p999']:>9.3f} {r['errors']:>7} {c['tps']:>12,.0f} {('-' if gen is None else f'{gen:.1f}'):>11}"
                  f" {('-' if steal is None else f'{steal:.1f}'):>8}")
    print(f"(median of {args.runs} runs for native closed-loop and the C++ client, 1 run for the other modes; "
          "ceiling = the same load generator against a null broker that stores nothing and sleeps between "
          "requests; gen µs/msg = CPU the native generator itself spent per send)")
    if pulls:
        print(f"\npull latency (PULL_MESSAGE of 32 from the backlog, one connection, {args.pull_seconds:.0f} s each):")
        print(f"{'':<18} {'pulls/s':>8} {'msgs/s':>9} {'p50 ms':>8} {'p99 ms':>8} {'p99.9 ms':>9}")
        for label in ("alone", "under send load"):
            r = pulls[label]
            print(f"{label:<18} {r['pulls_s']:>8,.0f} {r['msgs_s']:>9,.0f} {r['p50']:>8.3f} {r['p99']:>8.3f} "
                  f"{r['p999']:>9.3f}")
        sl = pulls["sends"]
        print(f"(the send load meanwhile: native closed-loop, 4 senders: {sl['tps']:,.0f}/s, p99 {sl['p99']:.3f} ms)")
    if consume.get("tps"):
        print(f"\nconsume from backlog: {consume['received']:,} msgs at {consume['tps']:,.0f} msg/s")
    else:
        print(f"\nconsume from backlog: {consume}")
    print(f"end-to-end latency at {args.e2e_rate} msg/s: p50 {e2e.get('p50', float('nan')):.2f} ms, "
          f"p99 {e2e.get('p99', float('nan')):.2f} ms, max {e2e.get('max', float('nan')):.2f} ms "
          f"({e2e.get('received')}/{e2e.get('sent')} received; {e2e.get('errors')} sends failed in the client)")


if __name__ == "__main__":
    main()
