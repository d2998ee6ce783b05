#!/usr/bin/env python3
"""Native sync-send load generator for rmqd (or any RocketMQ broker).

N threads send SEND_MESSAGE_V2 requests shaped like the Java client's (1 KB body,
UNIQ_KEY/WAIT/TAGS properties), each synchronously (one request in flight per thread), for a
bounded time, with the GIL released (rmqd.cython_ext.loadgen).  Prints one JSON line: tps,
latency percentiles, errors.

Modes (``--threads N`` is the number of synchronous senders in every mode):
  closed-loop (default)  N senders on one connection driven by one native thread: each sends its
                         next request when the response to its previous one arrives.  On the wire
                         this is what the Java benchmark producer's N threads do (one
                         DefaultMQProducer, one Netty channel per broker, at most N requests in
                         flight), without paying a thread wake-up per message on the client side.
  shared                 N real threads over one connection, each waiting for its own response
                         (opaque k+1) that a reader thread hands over.
  per-thread             N real threads with a connection each: N independent clients.

    python scripts/loadgen.py --broker 127.0.0.1:10911 --topic BenchTopic --threads 16 --seconds 8
"""
from __future__ import annotations

import argparse
import json
import socket
import threading
import time

from array import array

from rmqd.acl.signer import sign_request
from rmqd.cython_ext.loadgen import SharedConnectionSenders, run_closed_loop, run_sync_sender
from rmqd.remoting.client import split_address
from rmqd.remoting.command import RemotingCommand, encode_frame_bytes


def send_request(topic: str, size: int, tag: str = "TagBench", opaque: int = 1, queue_id: int = 0,
                 credentials: tuple[str, str] | None = None) -> bytes:
    """A SEND_MESSAGE_V2 frame like the Java client's (which always names the queue). With
    ``credentials`` (access key, secret key) it is signed as AclClientRPCHook signs: the signature
    covers the ext fields and the body, not the opaque, so every repetition of the frame is valid."""
    props = "\x01".join(["UNIQ_KEY", "7F000001AAAA18B4AAC2ADD4A4000000"]) + "\x02WAIT\x01true\x02TAGS\x01" + tag
    ext = {"a": "BenchPG", "b": topic, "c": "TBW102", "d": "4", "e": str(queue_id), "f": "0",
           "g": str(int(time.time() * 1000)), "h": "0", "i": props, "j": "0", "k": "false", "m": "false"}
    body = b"x" * size
    if credentials is not None:
        sign_request(ext, body, *credentials)
    return encode_frame_bytes(RemotingCommand(310, ext, body, opaque=opaque, language="JAVA", version=409))


def run(broker: str, topic: str, threads: int, seconds: float, size: int, mode: str = "closed-loop",
        credentials: tuple[str, str] | None = None) -> dict:
    request = send_request(topic, size, credentials=credentials)
    # Warm up: make sure the topic exists before timing.
    warm = socket.create_connection(split_address(broker))
    lat = array("d", bytes(8 * 16))
    warm_sent = run_sync_sender(warm.fileno(), request, 0.2, memoryview(lat), b'{"code":0,')[0]
    warm.close()
    socks = [socket.create_connection(split_address(broker)) for _ in range(threads if mode == "per-thread" else 1)]
    for s in socks:
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    cap = int(seconds * 200_000 / max(1, threads)) + 1000
    buffers = [array("d", bytes(8 * cap)) for _ in range(threads)]
    results: list = [None] * threads
    if mode == "per-thread":
        def worker(k: int) -> None:
            results[k] = run_sync_sender(socks[k].fileno(), request, seconds, memoryview(buffers[k]),
                                         b'{"code":0,')
        extra = []
    elif mode == "closed-loop":
        requests = [send_request(topic, size, opaque=k + 1, queue_id=k % 4, credentials=credentials)
                    for k in range(threads)]
        buffers = [array("d", bytes(8 * cap * threads))]
        results = [None]

        def worker(k: int) -> None:
            results[0] = run_closed_loop(socks[0].fileno(), requests, seconds, memoryview(buffers[0]))
        extra = []
    else:
        shared = SharedConnectionSenders(socks[0].fileno(),
                                         [send_request(topic, size, opaque=k + 1, queue_id=k % 4,
                                                       credentials=credentials) for k in range(threads)])

        def worker(k: int) -> None:
            results[k] = shared.worker(k, seconds, memoryview(buffers[k]))
        extra = [threading.Thread(target=shared.reader)]

    ts = [threading.Thread(target=worker, args=(k,)) for k in range(len(results))]
    cpu0 = time.process_time()
    for t in extra + ts:
        t.start()
    for t in ts:
        t.join()
    for s in socks:
        s.shutdown(socket.SHUT_RDWR)
        s.close()
    for t in extra:
        t.join()
    cpu = time.process_time() - cpu0
    sent = sum(r[0] for r in results)
    errors = sum(r[1] for r in results)
    elapsed = max(r[2] for r in results)
    lats = sorted(v for k in range(len(results)) for v in buffers[k][:min(results[k][0], len(buffers[k]))])

    def pct(q: float) -> float | None:
        return lats[min(len(lats) - 1, int(q * len(lats)))] * 1000 if lats else None

    return dict(op="load", mode=mode, threads=threads, warmup_sent=warm_sent, sent=sent, errors=errors,
                gen_cpu_us_per_msg=cpu / max(1, sent) * 1e6, seconds=elapsed, tps=sent / elapsed,
                avg_ms=(sum(lats) / len(lats) * 1000) if lats else None, p50=pct(0.5), p99=pct(0.99), p999=pct(0.999))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--broker", required=True)
    ap.add_argument("--topic", default="BenchTopic")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--mode", choices=("closed-loop", "shared", "per-thread"), default="closed-loop",
                    help="how the N senders are run (see the module docstring)")
    ap.add_argument("--access-key", help="sign the requests (ACL), with --secret-key")
    ap.add_argument("--secret-key")
    args = ap.parse_args()
    creds = (args.access_key, args.secret_key) if args.access_key else None
    print(json.dumps(run(args.broker, args.topic, args.threads, args.seconds, args.size, args.mode, creds)),
          flush=True)


if __name__ == "__main__":
    main()
