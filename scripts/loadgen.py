#!/usr/bin/env python3
"""Native sync-send load generator for rmqd (or any RocketMQ broker).

N threads, each with its own connection, send SEND_MESSAGE_V2 requests shaped like the Java
client's (1 KB body, UNIQ_KEY/WAIT/TAGS properties) in lockstep for a bounded time, with the GIL
released (rmqd.cython_ext.loadgen).  Prints one JSON line: tps, latency percentiles, errors.

    python scripts/loadgen.py --broker 127.0.0.1:10911 --topic BenchTopic --threads 16 --seconds 8
"""
from __future__ import annotations

import argparse
import json
import socket
import threading
import time

from array import array

from rmqd.cython_ext.loadgen import run_sync_sender
from rmqd.remoting.client import split_address
from rmqd.remoting.command import RemotingCommand, encode_frame_bytes


def send_request(topic: str, size: int, tag: str = "TagBench") -> bytes:
    props = "\x01".join(["UNIQ_KEY", "7F000001AAAA18B4AAC2ADD4A4000000"]) + "\x02WAIT\x01true\x02TAGS\x01" + tag
    ext = {"a": "BenchPG", "b": topic, "c": "TBW102", "d": "4", "e": "-1", "f": "0",
           "g": str(int(time.time() * 1000)), "h": "0", "i": props, "j": "0", "k": "false", "m": "false"}
    return encode_frame_bytes(RemotingCommand(310, ext, b"x" * size, opaque=1, language="JAVA", version=409))


def run(broker: str, topic: str, threads: int, seconds: float, size: int) -> dict:
    request = send_request(topic, size)
    # Warm up: make sure the topic exists before timing.
    warm = socket.create_connection(split_address(broker))
    lat = array("d", bytes(8 * 16))
    run_sync_sender(warm.fileno(), request, 0.2, memoryview(lat), b'{"code":0,')
    warm.close()
    socks = [socket.create_connection(split_address(broker)) for _ in range(threads)]
    for s in socks:
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    cap = int(seconds * 200_000 / max(1, threads)) + 1000
    buffers = [array("d", bytes(8 * cap)) for _ in range(threads)]
    results: list = [None] * threads

    def worker(k: int) -> None:
        results[k] = run_sync_sender(socks[k].fileno(), request, seconds, memoryview(buffers[k]), b'{"code":0,')

    ts = [threading.Thread(target=worker, args=(k,)) for k in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    for s in socks:
        s.close()
    sent = sum(r[0] for r in results)
    errors = sum(r[1] for r in results)
    elapsed = max(r[2] for r in results)
    lats = sorted(v for k in range(threads) for v in buffers[k][:min(results[k][0], cap)])

    def pct(q: float) -> float | None:
        return lats[min(len(lats) - 1, int(q * len(lats)))] * 1000 if lats else None

    return dict(op="load", threads=threads, sent=sent, errors=errors, seconds=elapsed, tps=sent / elapsed,
                avg_ms=(sum(lats) / len(lats) * 1000) if lats else None, p50=pct(0.5), p99=pct(0.99), p999=pct(0.999))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--broker", required=True)
    ap.add_argument("--topic", default="BenchTopic")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--size", type=int, default=1024)
    args = ap.parse_args()
    print(json.dumps(run(args.broker, args.topic, args.threads, args.seconds, args.size)), flush=True)


if __name__ == "__main__":
    main()
