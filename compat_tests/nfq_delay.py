"""A packet delayer on the kernel's NFQUEUE (netfilter's userspace queue), for the network tests: the kernel here
has no ``tc netem`` (CONFIG_NET_SCH_NETEM is not set), so latency and reordering are made by holding real packets.

An iptables rule (``-j NFQUEUE --queue-num N``, put in place by compat_tests/netkit.py in the host's network
namespace) hands each matching packet to this process, which gives the kernel its verdict (NF_ACCEPT) only after
``--delay-ms``; with ``--reorder P`` a packet is let through at once with probability P, so it overtakes the ones
held before it (netem's ``reorder``). Packets are never changed or dropped here (loss is an iptables ``statistic``
rule). Speaks nfnetlink_queue on a raw netlink socket: no library. Runs until SIGTERM; prints ``ready`` once bound.

    ip netns exec NS python3 nfq_delay.py --queue 0 --delay-ms 200 --reorder 0.25
"""
from __future__ import annotations

import argparse
import heapq
import os
import random
import select
import signal
import socket
import struct
import sys
import time

NETLINK_NETFILTER = 12
NFNL_SUBSYS_QUEUE = 3
NFQNL_MSG_PACKET, NFQNL_MSG_VERDICT, NFQNL_MSG_CONFIG = 0, 1, 2
NFQA_CFG_CMD, NFQA_CFG_PARAMS, NFQA_CFG_QUEUE_MAXLEN, NFQA_CFG_MASK, NFQA_CFG_FLAGS = 1, 2, 3, 4, 5
NFQNL_CFG_CMD_BIND = 1
NFQNL_COPY_META = 1
NFQA_CFG_F_FAIL_OPEN, NFQA_CFG_F_GSO = 1, 4
NFQA_PACKET_HDR, NFQA_VERDICT_HDR = 1, 2
NF_ACCEPT = 1
NLM_F_REQUEST, NLM_F_ACK = 1, 4
NLMSG_ERROR = 2
NLMSG_HDR = struct.Struct("=IHHII")
NFGEN_HDR = struct.Struct("=BBH")       # family, version, res_id (big-endian on the wire: packed by hand)


def _attr(kind: int, payload: bytes) -> bytes:
    raw = struct.pack("=HH", 4 + len(payload), kind) + payload
    return raw + b"\0" * (-len(raw) % 4)


def _message(msg_type: int, queue: int, attrs: bytes, seq: int, flags: int = NLM_F_REQUEST) -> bytes:
    body = struct.pack("=BB", socket.AF_UNSPEC, 0) + struct.pack(">H", queue) + attrs
    return NLMSG_HDR.pack(NLMSG_HDR.size + len(body), (NFNL_SUBSYS_QUEUE << 8) | msg_type, flags, seq, 0) + body


def _attrs(buf: bytes, pos: int, end: int) -> dict[int, bytes]:
    out = {}
    while pos + 4 <= end:
        length, kind = struct.unpack_from("=HH", buf, pos)
        if length < 4:
            break
        out[kind & 0x7FFF] = buf[pos + 4:pos + length]
        pos += (length + 3) & ~3
    return out


class Delayer:
    """Bound to queue ``queue`` of this network namespace; see the module docstring."""

    def __init__(self, queue: int, delay_s: float, reorder: float, seed: int | None = None) -> None:
        self.queue, self.delay_s, self.reorder = queue, delay_s, reorder
        self.rng = random.Random(seed)
        self.sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_NETFILTER)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
        self.sock.bind((0, 0))
        self.seq = 0
        self.held: list[tuple[float, int, int]] = []      # (release time, sequence, packet id)
        self.counts = {"held": 0, "early": 0}

    def _request(self, attrs: bytes) -> None:
        self.seq += 1
        self.sock.send(_message(NFQNL_MSG_CONFIG, self.queue, attrs, self.seq, NLM_F_REQUEST | NLM_F_ACK))
        reply = self.sock.recv(65536)
        _, kind, _, _, _ = NLMSG_HDR.unpack_from(reply, 0)
        if kind == NLMSG_ERROR:
            (err,) = struct.unpack_from("=i", reply, NLMSG_HDR.size)
            if err != 0:
                raise OSError(-err, f"nfnetlink_queue config of queue {self.queue}: {os.strerror(-err)}")

    def bind(self) -> None:
        self._request(_attr(NFQA_CFG_CMD, struct.pack("=BxH", NFQNL_CFG_CMD_BIND, socket.htons(socket.AF_INET))))
        self._request(_attr(NFQA_CFG_PARAMS, struct.pack(">IB", 0xFFFF, NFQNL_COPY_META) + b"\0\0\0"))
        self._request(_attr(NFQA_CFG_QUEUE_MAXLEN, struct.pack(">I", 65536)))
        flags = NFQA_CFG_F_FAIL_OPEN | NFQA_CFG_F_GSO
        self._request(_attr(NFQA_CFG_MASK, struct.pack(">I", flags)) + _attr(NFQA_CFG_FLAGS, struct.pack(">I", flags)))

    def _verdict(self, packet_id: int) -> None:
        self.seq += 1
        self.sock.send(_message(NFQNL_MSG_VERDICT, self.queue,
                                _attr(NFQA_VERDICT_HDR, struct.pack(">II", NF_ACCEPT, packet_id)), self.seq))

    def _on_packets(self, buf: bytes) -> None:
        pos = 0
        now = time.monotonic()
        while pos + NLMSG_HDR.size <= len(buf):
            length, kind, _, _, _ = NLMSG_HDR.unpack_from(buf, pos)
            if length < NLMSG_HDR.size:
                break
            if kind == (NFNL_SUBSYS_QUEUE << 8) | NFQNL_MSG_PACKET:
                attrs = _attrs(buf, pos + NLMSG_HDR.size + NFGEN_HDR.size, pos + length)
                hdr = attrs.get(NFQA_PACKET_HDR)
                if hdr is not None:
                    (packet_id,) = struct.unpack_from(">I", hdr, 0)
                    if self.reorder and self.rng.random() < self.reorder:
                        self.counts["early"] += 1
                        self._verdict(packet_id)
                    else:
                        self.counts["held"] += 1
                        heapq.heappush(self.held, (now + self.delay_s, self.seq, packet_id))
                        self.seq += 1
            pos += (length + 3) & ~3

    def run(self, stop: list[bool]) -> None:
        while not stop[0]:
            timeout = max(0.0, self.held[0][0] - time.monotonic()) if self.held else 0.5
            ready, _, _ = select.select([self.sock], [], [], timeout)
            if ready:
                try:
                    self._on_packets(self.sock.recv(1 << 20))
                except BlockingIOError:
                    pass
                except OSError as exc:          # ENOBUFS: the kernel dropped queue messages (fail-open lets them on)
                    print(f"nfq_delay: recv: {exc}", file=sys.stderr, flush=True)
            now = time.monotonic()
            while self.held and self.held[0][0] <= now:
                self._verdict(heapq.heappop(self.held)[2])
        for _, _, packet_id in self.held:       # let everything still held go on the way out
            self._verdict(packet_id)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--queue", type=int, default=0)
    ap.add_argument("--delay-ms", type=float, default=200.0)
    ap.add_argument("--reorder", type=float, default=0.0, help="share of packets let through at once (0-1)")
    ap.add_argument("--seed", type=int, default=None)
    args = ap.parse_args(argv)
    delayer = Delayer(args.queue, args.delay_ms / 1000, args.reorder, args.seed)
    delayer.bind()
    stop = [False]

    def on_term(*_: object) -> None:
        stop[0] = True
    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_term)
    print("ready", flush=True)
    delayer.run(stop)
    print(f"nfq_delay: {delayer.counts['held']} packets held {args.delay_ms:.0f} ms, {delayer.counts['early']} "
          "let through at once", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
