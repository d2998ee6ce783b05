#!/usr/bin/env python3
"""Codec micro-benchmark: frames/s decoding a SEND_MESSAGE_V2 request and encoding its response.

Both serialize types (JSON, ROCKETMQ).  Each case runs for a bounded time; the median of
``--runs`` runs is printed.  Usage: python scripts/bench_codec.py [--seconds 1.0] [--runs 3]
"""
from __future__ import annotations

import argparse
import statistics
import time

from benchenv import machine_line
from rmqd.remoting.command import JSON, ROCKETMQ, FrameReader, RemotingCommand, encode_frame, new_response, prepare_reply


def send_v2_request(stype: int, body_size: int = 1024) -> RemotingCommand:
    ext = {"a": "please_rename_unique_group_name", "b": "TopicTest", "c": "TBW102", "d": "4", "e": "3",
           "f": "0", "g": "1763700000000", "h": "0",
           "i": "UNIQ_KEY\x017F0000010F8A18B4AAC2ADD4A40000\x02WAIT\x01true\x02TAGS\x01TagA",
           "j": "0", "k": "false", "m": "false", "n": "broker-a"}
    return RemotingCommand(310, ext, b"x" * body_size, opaque=1, language="JAVA", version=409, serialize_type=stype)


def bench_decode(stype: int, seconds: float, batch: int = 256) -> float:
    one = b"".join(bytes(b) for b in encode_frame(send_v2_request(stype)))
    chunk = one * batch
    reader = FrameReader()
    n = 0
    t0 = time.perf_counter()
    deadline = t0 + seconds
    while time.perf_counter() < deadline:
        n += len(reader.feed(chunk))
    return n / (time.perf_counter() - t0)


def bench_encode(stype: int, seconds: float) -> float:
    request = send_v2_request(stype)
    n = 0
    t0 = time.perf_counter()
    deadline = t0 + seconds
    while time.perf_counter() < deadline:
        for _ in range(256):
            resp = new_response(0, None, {"msgId": "7F00000100002A9F0000000000001234", "queueId": "3",
                                          "queueOffset": "1234", "MSG_REGION": "DefaultRegion", "TRACE_ON": "true"})
            encode_frame(prepare_reply(request, resp))
        n += 256
    return n / (time.perf_counter() - t0)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=1.0)
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    print(machine_line())
    print(f"{'case':<52}{'frames/s (median of %d)' % args.runs:>24}")
    for name, stype in (("JSON", JSON), ("ROCKETMQ", ROCKETMQ)):
        for label, fn in (("decode SEND_MESSAGE_V2 request, 1 KB body", bench_decode),
                          ("encode SEND_MESSAGE_V2 response", bench_encode)):
            rates = [fn(stype, args.seconds) for _ in range(args.runs)]
            print(f"{name + ' ' + label:<52}{statistics.median(rates):>24,.0f}")


if __name__ == "__main__":
    main()
