"""Lite Mode (5.5) and priority (5.4) benchmark against ``rmqd serve`` over gRPC.

Starts ``rmqd serve`` in its own process (gRPC on a free port), then drives it with raw gRPC calls from this
process (grpc.aio on uvloop; one client id per simulated consumer), each phase bounded in count and time:

* **sizes**: the lite index's bytes per lite topic and the registry's per subscription (tracemalloc, in this
  process, on the real classes);
* **scale**: one message to each of ``--lite-topics`` lite topics under one LITE topic: the server's RSS and
  open file descriptors before and after (memory per idle lite topic; file handles per lite topic);
* **subscriptions**: ``--consumers`` lite consumers subscribe ``--per-consumer`` lite topics each
  (COMPLETE_ADD), all parked in a long-polling receive at once: RSS per subscription; they then drain and
  ack the scale phase's messages;
* **subscribe time**: one consumer subscribes 1,000 lite topics one PARTIAL_ADD at a time, as clients do;
* **end to end**: ``--e2e-topics`` lite topics, ``--e2e-consumers`` consumers subscribed to all of them in
  equal shares, producers sending for ``--seconds``: messages/s received and acked, and the latency from
  send to receive (p50, p99);
* **priority**: the same number of messages through a NORMAL and a PRIORITY topic (priorities 0..7), sent
  then received and acked: messages/s of each and the server's CPU per received message, side by side;
* **litecost**: the same number of messages through plain POP (a NORMAL topic) and Lite Mode (spread over
  ``--cost-lite-topics`` lite topics, four consumers subscribed to a quarter each), sent then received and
  acked: the server's CPU per message sent and per message received+acked, side by side.

``--server-repo DIR`` starts the server from another checkout (e.g. main's head in a detached worktree) while
this script drives it, so two trees can be measured alternately on a shared machine (scripts/bench_lite_ab.sh).

Usage: ``python scripts/bench_lite.py`` (the full sizes of BENCHMARKS.md) or smaller, e.g.
``--lite-topics 20000 --consumers 200``. The machine line and the numbers print as a table.
"""
from __future__ import annotations

import argparse
import asyncio
import os
import random
import socket
import statistics
import subprocess
import sys
import tempfile
import time

import grpc
import orjson
from google.protobuf.duration_pb2 import Duration

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from benchenv import machine_line  # noqa: E402
from procstat import cpu_seconds, open_fds, rss_mb  # noqa: E402
from serve_child import ready_addresses  # noqa: E402
from rmqd.grpc.pb import definition_pb2 as d  # noqa: E402
from rmqd.grpc.pb import service_pb2 as s  # noqa: E402
from rmqd.grpc.pb import service_pb2_grpc as sg  # noqa: E402
from rmqd.remoting.client import BlockingClient  # noqa: E402
from rmqd.remoting.command import new_request  # noqa: E402



def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_server(store: str, extra: list[str], repo: str = REPO) -> tuple[subprocess.Popen, str, str]:
    conf = os.path.join(store, "broker.conf")
    os.makedirs(store, exist_ok=True)
    with open(conf, "w") as f:
        f.write("maxLiteSubscriptionCount=200000\nmaxSyncLiteSubscriptionRate=100000\n"
                "grpcClientConsumerMaxLongPollingTimeoutMillis=5000\n" + "".join(x + "\n" for x in extra))
    proc = subprocess.Popen([sys.executable, "-m", "rmqd.runtime.cli", "--log-level", "WARNING", "serve", "-c", conf,
                             "--namesrv-port", "0", "--broker-port", "0", "--console-port", "0", "--grpc-port", str(free_port()),
                             "--store-dir", store], stdout=subprocess.PIPE, text=True, cwd=repo,
                            env=dict(os.environ, PYTHONPATH=repo))
    addrs, grpc_addr = ready_addresses(proc)
    if grpc_addr is None:
        proc.kill()
        raise RuntimeError("no gRPC endpoint in the ready line")
    return proc, addrs[1], grpc_addr


def admin_setup(broker: str) -> None:
    c = BlockingClient(broker)
    try:
        for name, kind, queues in (("BL", "LITE", 4), ("BN", "NORMAL", 8), ("BP", "PRIORITY", 8)):
            r = c.invoke(new_request(17, {"topic": name, "readQueueNums": str(queues), "writeQueueNums": str(queues),
                                          "perm": "6", "attributes": f"+message.type={kind}"}), 10)
            assert r.code == 0, r.remark
        for name, attrs in (("BLG", {"+lite.bind.topic": "BL"}), ("BNG", {}), ("BPG", {})):
            r = c.invoke(new_request(200, None, orjson.dumps({"groupName": name, "attributes": attrs})), 10)
            assert r.code == 0, r.remark
    finally:
        c.close()


def md(cid: str) -> list:
    return [("x-mq-client-id", cid)]


class Gen:
    """Raw gRPC calls from this process (a few channels shared by all simulated clients)."""

    def __init__(self, addr: str, channels: int = 4) -> None:
        self.chans = [grpc.aio.insecure_channel(addr) for _ in range(channels)]
        self.stubs = [sg.MessagingServiceStub(ch) for ch in self.chans]
        self.seq = 0
        self.deadline_exceeded = 0
        self.last_error = ""

    def stub(self, k: int):
        return self.stubs[k % len(self.stubs)]

    async def close(self) -> None:
        for ch in self.chans:
            await ch.close()

    def message(self, topic: str, body: bytes, lite: str | None = None, priority: int | None = None):
        self.seq += 1
        sp = d.SystemProperties(message_id=f"B{self.seq:024d}", message_type=d.NORMAL)
        if lite is not None:
            sp.lite_topic, sp.message_type = lite, d.LITE
        if priority is not None:
            sp.priority, sp.message_type = priority, d.PRIORITY
        return d.Message(topic=d.Resource(name=topic), body=body, system_properties=sp)

    async def send(self, k: int, msgs: list) -> None:
        r = await self.stub(k).SendMessage(s.SendMessageRequest(messages=msgs), metadata=md("bench-producer"))
        if r.status.code not in (d.OK, d.MULTIPLE_RESULTS) or any(e.status.code != d.OK for e in r.entries):
            raise RuntimeError(f"send failed: {r.status} {[e.status for e in r.entries if e.status.code != d.OK][:1]}")

    async def sync(self, k: int, cid: str, action: int, names: list[str]) -> None:
        r = await self.stub(k).SyncLiteSubscription(s.SyncLiteSubscriptionRequest(
            action=action, topic=d.Resource(name="BL"), group=d.Resource(name="BLG"), lite_topic_set=names),
            metadata=md(cid))
        if r.status.code != d.OK:
            raise RuntimeError(f"sync failed: {r.status}")

    async def receive(self, k: int, cid: str, topic: str, group: str, batch: int = 32, poll_s: float = 2.0) -> list:
        req = s.ReceiveMessageRequest(group=d.Resource(name=group), message_queue=d.MessageQueue(
            topic=d.Resource(name=topic), id=-1), filter_expression=d.FilterExpression(type=d.TAG, expression="*"),
            batch_size=batch, invisible_duration=Duration(seconds=30),
            long_polling_timeout=Duration(seconds=int(poll_s), nanos=int(poll_s % 1 * 1e9)))
        out = []
        try:
            async for r in self.stub(k).ReceiveMessage(req, metadata=md(cid), timeout=poll_s + 30):
                if r.HasField("message"):
                    out.append(r.message)
        except grpc.aio.AioRpcError as exc:       # the server is saturated: counted, and the caller polls again
            if exc.code() not in (grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.CANCELLED):
                raise
            self.deadline_exceeded += 1
            self.last_error = f"{exc.code().name}: {exc.details()}"
            return None
        return out

    async def ack(self, k: int, cid: str, topic: str, group: str, msgs: list) -> None:
        if not msgs:
            return
        entries = []
        for m in msgs:
            e = s.AckMessageEntry(message_id=m.system_properties.message_id,
                                  receipt_handle=m.system_properties.receipt_handle)
            if m.system_properties.lite_topic:
                e.lite_topic = m.system_properties.lite_topic
            entries.append(e)
        r = await self.stub(k).AckMessage(s.AckMessageRequest(group=d.Resource(name=group),
                                                              topic=d.Resource(name=topic), entries=entries),
                                          metadata=md(cid))
        if r.status.code != d.OK:
            raise RuntimeError(f"ack failed: {r.status}")


async def bounded(coros, limit: int) -> list:
    sem = asyncio.Semaphore(limit)

    async def one(c):
        async with sem:
            return await c
    return await asyncio.gather(*(one(c) for c in coros))


async def scale_and_subscriptions(g: Gen, pid: int, a: argparse.Namespace) -> dict:
    out: dict = {}
    await g.send(0, [g.message("BL", b"x" * 64, lite=f"warm{i}") for i in range(32)])   # the parent's files exist
    await asyncio.sleep(1.0)
    rss0, fd0 = rss_mb(pid), open_fds(pid)
    names = [f"s{i}" for i in range(a.lite_topics)]
    t0 = time.monotonic()
    batches = [names[i:i + 32] for i in range(0, len(names), 32)]
    await bounded((g.send(i, [g.message("BL", b"x" * 64, lite=n) for n in b]) for i, b in enumerate(batches)), 16)
    out["scale_send_s"] = time.monotonic() - t0
    await asyncio.sleep(2.0)
    rss1, fd1 = rss_mb(pid), open_fds(pid)
    out.update(lite_topics=a.lite_topics, rss_before=rss0, rss_topics=rss1,
               bytes_per_lite_topic=(rss1 - rss0) * 1024 * 1024 / a.lite_topics, fds_before=fd0, fds_after=fd1)
    # consumers: each subscribes its share, then all park in a receive at once
    per = a.per_consumer
    cids = [f"bench-c{i}" for i in range(a.consumers)]
    t0 = time.monotonic()
    await bounded((g.sync(i, cid, d.COMPLETE_ADD, names[(i * per) % len(names):(i * per) % len(names) + per])
                   for i, cid in enumerate(cids)), 64)
    out["complete_add_s"] = time.monotonic() - t0
    await asyncio.sleep(2.0)
    rss2 = rss_mb(pid)
    subs = a.consumers * per
    out.update(subscriptions=subs, rss_subs=rss2, bytes_per_subscription=(rss2 - rss1) * 1024 * 1024 / subs,
               fds_with_subscriptions=open_fds(pid))
    got = 0
    t0 = time.monotonic()
    if a.no_drain:
        await bounded((g.sync(i, cid, d.COMPLETE_REMOVE, []) for i, cid in enumerate(cids)), 64)
        return out

    async def drain(i: int, cid: str) -> None:
        nonlocal got
        while True:
            msgs = await g.receive(i, cid, "BL", "BLG", 32, 1.0)
            if msgs is None:
                continue
            if not msgs:
                return
            await g.ack(i, cid, "BL", "BLG", msgs)
            got += len(msgs)
    async def progress() -> None:
        while True:
            await asyncio.sleep(10)
            print(f"  drained {got} of {a.lite_topics}, {g.deadline_exceeded} receives cut short "
                  f"({g.last_error}), server RSS {rss_mb(pid):.0f} MB", file=sys.stderr, flush=True)
    ticker = asyncio.ensure_future(progress())
    await asyncio.gather(*(drain(i, cid) for i, cid in enumerate(cids)))
    ticker.cancel()
    out.update(drained=got, drain_s=time.monotonic() - t0, concurrent_consumers=len(cids))
    out["rss_after_drain"] = rss_mb(pid)
    await bounded((g.sync(i, cid, d.COMPLETE_REMOVE, []) for i, cid in enumerate(cids)), 64)
    # one consumer subscribes 1,000 lite topics one PARTIAL_ADD at a time
    t0 = time.monotonic()
    for i in range(1000):
        await g.sync(0, "bench-one", d.PARTIAL_ADD, [f"one-{i}"])
    out["subscribe_1000_s"] = time.monotonic() - t0
    t0 = time.monotonic()
    await g.sync(0, "bench-bulk", d.COMPLETE_ADD, [f"bulk-{i}" for i in range(1000)])
    out["complete_add_1000_s"] = time.monotonic() - t0
    await g.sync(0, "bench-one", d.COMPLETE_REMOVE, [])
    await g.sync(0, "bench-bulk", d.COMPLETE_REMOVE, [])
    return out


async def end_to_end(g: Gen, pid: int, a: argparse.Namespace) -> dict:
    names = [f"e{i}" for i in range(a.e2e_topics)]
    cids = [f"bench-e{i}" for i in range(a.e2e_consumers)]
    share = len(names) // len(cids)
    await bounded((g.sync(i, cid, d.COMPLETE_ADD, names[i * share:(i + 1) * share]) for i, cid in enumerate(cids)), 64)
    stop = asyncio.Event()
    latencies: list[float] = []
    counts = {"sent": 0, "got": 0}

    async def produce(k: int) -> None:
        rnd = random.Random(k)
        while not stop.is_set():
            batch = [g.message("BL", orjson.dumps(time.time()), lite=rnd.choice(names)) for _ in range(8)]
            await g.send(k, batch)
            counts["sent"] += len(batch)

    async def consume(i: int, cid: str) -> None:
        while not stop.is_set():
            msgs = await g.receive(i, cid, "BL", "BLG", 32, 1.0) or []
            now = time.time()
            for m in msgs:
                latencies.append(now - orjson.loads(m.body))
            await g.ack(i, cid, "BL", "BLG", msgs)
            counts["got"] += len(msgs)

    cpu0, t0 = cpu_seconds(pid), time.monotonic()
    tasks = [asyncio.ensure_future(produce(k)) for k in range(a.producers)]
    tasks += [asyncio.ensure_future(consume(i, cid)) for i, cid in enumerate(cids)]
    await asyncio.sleep(a.seconds)
    stop.set()
    elapsed = time.monotonic() - t0
    cpu = cpu_seconds(pid) - cpu0
    await asyncio.wait(tasks, timeout=15)
    await bounded((g.sync(i, cid, d.COMPLETE_REMOVE, []) for i, cid in enumerate(cids)), 64)
    lat = sorted(latencies)
    pick = (lambda q: lat[min(len(lat) - 1, int(q * len(lat)))] * 1000) if lat else (lambda q: None)
    return {"e2e_topics": len(names), "e2e_consumers": len(cids), "e2e_sent_per_s": counts["sent"] / elapsed,
            "e2e_received_per_s": counts["got"] / elapsed, "e2e_p50_ms": pick(0.5), "e2e_p99_ms": pick(0.99),
            "e2e_server_cpu": cpu / elapsed, "e2e_server_us_per_msg": cpu / max(1, counts["got"]) * 1e6}


async def priority_vs_normal(g: Gen, pid: int, a: argparse.Namespace) -> dict:
    """Rounds alternate NORMAL and PRIORITY (a warm-up round first, not counted): send n messages, then four
    consumers of a fresh group receive and ack all of them."""
    n = a.priority_messages
    stats: dict[str, list] = {k: [] for k in ("normal_send", "normal_recv", "normal_cpu", "priority_send",
                                             "priority_recv", "priority_cpu")}
    for rnd in range(a.rounds + 1):
        for kind, topic in (("normal", "BN"), ("priority", "BP")) if rnd % 2 == 0 else (("priority", "BP"),
                                                                                     ("normal", "BN")):
            count = n if rnd else max(200, n // 10)
            rng = random.Random(rnd)
            t0 = time.monotonic()
            batches = [[g.message(topic, b"y" * 256, priority=rng.randrange(8) if kind == "priority" else None)
                        for _ in range(16)] for _ in range(count // 16)]
            await bounded((g.send(i, b) for i, b in enumerate(batches)), 8)
            send_rate = count // 16 * 16 / (time.monotonic() - t0)
            group = f"B-{kind}-{rnd}"
            got = 0
            cpu0, t0 = cpu_seconds(pid), time.monotonic()

            async def drain(i: int) -> None:
                nonlocal got
                while got < count // 16 * 16:
                    msgs = await g.receive(i, f"{group}-{i}", topic, group, 32, 1.0)
                    if msgs is None:
                        continue
                    if not msgs:
                        return
                    await g.ack(i, f"{group}-{i}", topic, group, msgs)
                    got += len(msgs)
            await asyncio.gather(*(drain(i) for i in range(4)))
            if rnd:
                el = time.monotonic() - t0
                stats[f"{kind}_send"].append(send_rate)
                stats[f"{kind}_recv"].append(got / el)
                stats[f"{kind}_cpu"].append((cpu_seconds(pid) - cpu0) / max(1, got) * 1e6)
    return {f"{k}_{'per_s' if not k.endswith('cpu') else 'server_us_per_msg'}": statistics.mean(v)
            for k, v in stats.items()}


async def lite_vs_pop(g: Gen, pid: int, a: argparse.Namespace) -> dict:
    """Rounds alternate plain POP and Lite Mode (a warm-up round first, not counted): send n messages, then four
    consumers receive and ack all of them; the server's CPU per message of each half."""
    n, k_topics = a.cost_messages // 16 * 16, max(4, a.cost_lite_topics)
    stats: dict[str, list] = {f"{kind}_{x}": [] for kind in ("pop", "lite")
                              for x in ("send_cpu", "recv_cpu", "recv")}
    for rnd in range(a.rounds + 1):
        for kind in ("pop", "lite") if rnd % 2 == 0 else ("lite", "pop"):
            count = n if rnd else max(256, n // 10 // 16 * 16)
            names = [f"c{rnd}-{i}" for i in range(k_topics)]
            cids = [f"cost-{kind}-{rnd}-{i}" for i in range(4)]
            topic, group = ("BL", "BLG") if kind == "lite" else ("BN", f"C-pop-{rnd}")
            if kind == "lite":
                share = k_topics // 4
                await asyncio.gather(*(g.sync(i, cid, d.COMPLETE_ADD, names[i * share:(i + 1) * share])
                                       for i, cid in enumerate(cids)))
            rng = random.Random(rnd)
            cpu0 = cpu_seconds(pid)
            batches = [[g.message(topic, b"y" * 256, lite=names[rng.randrange(4 * (k_topics // 4))]
                                  if kind == "lite" else None) for _ in range(16)] for _ in range(count // 16)]
            await bounded((g.send(i, b) for i, b in enumerate(batches)), 8)
            send_cpu = (cpu_seconds(pid) - cpu0) / count * 1e6
            got = 0
            cpu0, t0 = cpu_seconds(pid), time.monotonic()

            async def drain(i: int) -> None:
                nonlocal got
                idle = 0
                # a lite topic whose event found the client's event set full is offered again by the periodic
                # check (liteEventCheckInterval, 10 s): wait for it rather than stop short
                while got < count and idle < (25 if kind == "lite" else 3):
                    msgs = await g.receive(i, cids[i], topic, group, 32, 1.0)
                    if msgs is None:
                        continue
                    idle = 0 if msgs else idle + 1
                    await g.ack(i, cids[i], topic, group, msgs)
                    got += len(msgs)
            await asyncio.gather(*(drain(i) for i in range(4)))
            el = time.monotonic() - t0
            if got < count:
                raise RuntimeError(f"litecost {kind} round {rnd}: {got} of {count} received")
            if kind == "lite":
                await asyncio.gather(*(g.sync(i, cid, d.COMPLETE_REMOVE, []) for i, cid in enumerate(cids)))
            if rnd:
                stats[f"{kind}_send_cpu"].append(send_cpu)
                stats[f"{kind}_recv_cpu"].append((cpu_seconds(pid) - cpu0) / got * 1e6)
                stats[f"{kind}_recv"].append(got / el)
    out = {}
    for k, v in stats.items():
        out[f"{k}_per_s" if k.endswith("recv") else f"{k}_server_us_per_msg"] = statistics.mean(v)
    return out


def structure_sizes(n_topics: int, n_clients: int, per_client: int) -> dict:
    """Bytes the lite index holds per lite topic and the registry per subscription, measured in this process
    with tracemalloc on the real classes (the RSS figures above also hold the messages' own pages)."""
    import tracemalloc
    from types import SimpleNamespace
    from rmqd.lite.subscriptions import LiteSubscriptionManager
    from rmqd.lite.config import LiteConfig
    from rmqd.store.lite.index import LiteIndex
    from rmqd.store.metadata import SubscriptionGroupConfig, TopicConfig
    store = SimpleNamespace(get_max_offset=lambda t, q: 0, get_min_offset=lambda t, q: 0)
    tracemalloc.start()
    idx = LiteIndex(store, lambda p: 4)
    idx.parent("P", create=True)
    before = tracemalloc.get_traced_memory()[0]
    p = idx.parents["P"]
    for i in range(n_topics):
        idx._append(p, f"session-{i:08d}", 1000 + i * 300, 1)
    per_topic = (tracemalloc.get_traced_memory()[0] - before) / n_topics
    topics = SimpleNamespace(get=lambda n: TopicConfig("P", 4, 4, attributes={"message.type": "LITE"}))
    groups = SimpleNamespace(find=lambda n: SubscriptionGroupConfig("G", attributes={"lite.bind.topic": "P"}),
                             table={})
    pop = SimpleNamespace(orderly_listeners=[], queue_locked=lambda *a: False, open_orderly_count=lambda *a: 0)
    offsets = SimpleNamespace(query_offset=lambda *a: -1, commit_offset=lambda *a: None, table={})
    m = LiteSubscriptionManager(LiteConfig(maxLiteSubscriptionCount=10 ** 9, maxSyncLiteSubscriptionRate=10 ** 9),
                                idx, pop, topics, groups, offsets)
    before = tracemalloc.get_traced_memory()[0]
    for c in range(n_clients):
        m.sync(f"client-{c}", "G", "P", 2, [f"session-{(c * per_client + k) % n_topics:08d}" for k in range(per_client)])
    per_sub = (tracemalloc.get_traced_memory()[0] - before) / (n_clients * per_client)
    tracemalloc.stop()
    return {"index_bytes_per_lite_topic": per_topic, "registry_bytes_per_subscription": per_sub}


async def run(grpc_addr: str, pid: int, a: argparse.Namespace) -> dict:
    g = Gen(grpc_addr)
    try:
        res = {}
        for name, phase in (("scale", scale_and_subscriptions), ("e2e", end_to_end), ("priority", priority_vs_normal),
                            ("litecost", lite_vs_pop)):
            if name in a.phases:
                t0 = time.monotonic()
                res.update(await asyncio.wait_for(phase(g, pid, a), a.phase_timeout))
                print(f"phase {name}: {time.monotonic() - t0:.1f} s", file=sys.stderr, flush=True)
        res["receive_deadline_exceeded"] = g.deadline_exceeded
        return res
    finally:
        await g.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lite-topics", type=int, default=100_000)
    ap.add_argument("--consumers", type=int, default=1000)
    ap.add_argument("--per-consumer", type=int, default=100)
    ap.add_argument("--e2e-topics", type=int, default=10_000)
    ap.add_argument("--e2e-consumers", type=int, default=100)
    ap.add_argument("--producers", type=int, default=4)
    ap.add_argument("--seconds", type=float, default=15.0)
    ap.add_argument("--priority-messages", type=int, default=10_000)
    ap.add_argument("--rounds", type=int, default=4, help="priority phase: measured rounds (each NORMAL and PRIORITY)")
    ap.add_argument("--cost-messages", type=int, default=6000, help="litecost phase: messages per round")
    ap.add_argument("--cost-lite-topics", type=int, default=2000, help="litecost phase: lite topics per round")
    ap.add_argument("--server-repo", default=REPO, help="start the server from this checkout")
    ap.add_argument("--phases", default="sizes,scale,e2e,priority,litecost")
    ap.add_argument("--phase-timeout", type=float, default=900.0)
    ap.add_argument("--no-drain", action="store_true", help="scale phase: skip the 1,000 consumers' drain")
    a = ap.parse_args()
    if "sizes" in a.phases:
        print(machine_line())
        for k, v in structure_sizes(a.lite_topics, a.consumers, a.per_consumer).items():
            print(f"{k:32s} {v:.1f}")
        a.phases = a.phases.replace("sizes", "")
        if not a.phases.strip(","):
            return
    store = tempfile.mkdtemp(prefix="rmqd-bench-lite-")
    proc, broker, grpc_addr = start_server(store, [], a.server_repo)
    try:
        admin_setup(broker)
        import uvloop
        uvloop.install()
        res = asyncio.run(run(grpc_addr, proc.pid, a))
        res["rss_end"] = rss_mb(proc.pid)
    finally:
        proc.terminate()
        proc.wait(30)
    print(machine_line())
    print(f"server tree: {a.server_repo} ({git_head(a.server_repo)}); load average {os.getloadavg()}")
    for k, v in res.items():
        print(f"{k:32s} {v:.3f}" if isinstance(v, float) else f"{k:32s} {v}")
    if "normal_recv_per_s" in res:
        for kind in ("send", "recv"):
            n, p = res[f"normal_{kind}_per_s"], res[f"priority_{kind}_per_s"]
            print(f"priority / normal {kind}: {p / n * 100:.1f} %")
        print(f"priority / normal server CPU per received message: "
              f"{res['priority_cpu_server_us_per_msg'] / res['normal_cpu_server_us_per_msg'] * 100:.1f} %")
    if "lite_recv_cpu_server_us_per_msg" in res:
        print(f"lite / plain POP server CPU per received+acked message: "
              f"{res['lite_recv_cpu_server_us_per_msg'] / res['pop_recv_cpu_server_us_per_msg'] * 100:.1f} %")


def git_head(repo: str) -> str:
    try:
        return subprocess.run(["git", "-C", repo, "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                              timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError) as exc:
        return f"unknown ({exc})"

if __name__ == "__main__":
    main()
