"""The network fault kit itself (compat_tests/netkit.py): hosts in namespaces reach each other and the clients'
host; a partition drops packets both ways (a connection attempt times out: no reset), one-way loss only one way;
the NFQUEUE delayer adds its 200 ms to every round trip and lets the reordered share through at once; a link
taken down is unreachable and back when up; everything made is gone after close, also when the test body failed;
a missing capability is named."""
from __future__ import annotations

import socket
import subprocess
import sys
import threading
import time

import pytest

import netkit
from netkit import CLIENT, NetKit, NetkitError, require_netns

ECHO = r'''
import socket, sys
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind((sys.argv[1], 7000)); s.listen()
print("ready", flush=True)
while True:
    c, _ = s.accept()
    while True:
        d = c.recv(64)
        if not d:
            break
        c.sendall(d)
    c.close()
'''


def echo_server(host) -> subprocess.Popen:
    proc = subprocess.Popen([*host.wrap, sys.executable, "-c", ECHO, host.ip], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "ready"
    return proc


def round_trips(ip: str, n: int = 5, timeout: float = 3.0) -> list[float]:
    with socket.create_connection((ip, 7000), timeout=timeout) as s:
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        out = []
        for _ in range(n):
            t = time.monotonic()
            s.sendall(b"x")
            assert s.recv(8) == b"x"
            out.append(time.monotonic() - t)
        return out


def reaches(ip: str, timeout: float = 1.5) -> bool:
    try:
        round_trips(ip, 1, timeout)
        return True
    except OSError:
        return False


def leftovers(net: int) -> list[str]:
    names = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout.split()
    links = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True).stdout
    return [n for n in names if n.startswith(f"rq{net}-")] + \
        [line.split(":")[1].strip() for line in links.splitlines() if f" rq{net}v" in line or f" rqb{net}:" in line]


@pytest.mark.timeout(120)
def test_hosts_faults_and_cleanup():
    require_netns()
    net_id = None
    with pytest.raises(RuntimeError, match="the body failed"):
        with NetKit() as net:
            net_id = net.net
            a, b = net.add_host("a"), net.add_host("b")
            servers = [echo_server(a), echo_server(b)]
            assert reaches(a.ip) and reaches(b.ip)
            net.partition([a], [CLIENT])
            assert not reaches(a.ip) and reaches(b.ip)
            net.heal()
            assert reaches(a.ip)
            net.drop_one_way(a, CLIENT)                         # our SYN arrives, its answer does not
            assert not reaches(a.ip)
            net.heal()
            net.delay(a, 200.0)
            assert min(round_trips(a.ip)) >= 0.19
            net.heal()
            assert max(round_trips(a.ip)) < 0.15
            net.delay(a, 200.0, reorder=1.0)                    # every packet let through at once
            assert max(round_trips(a.ip)) < 0.15
            net.heal()
            net.link(a, False)
            assert not reaches(a.ip)
            net.link(a, True)
            assert reaches(a.ip)
            stop = net.flap(b, 0.5, 0.5, 2.0)
            seen_down = threading.Event()
            end = time.monotonic() + 2.0
            while time.monotonic() < end and not seen_down.is_set():
                if not reaches(b.ip, 0.3):
                    seen_down.set()
            stop.set()
            assert seen_down.is_set()
            for s in servers:
                assert s.poll() is None
            raise RuntimeError("the body failed")
    assert net_id is not None and not leftovers(net_id), leftovers(net_id)
    for s in servers:
        s.wait(10)                                            # ended with its namespace


def test_a_missing_capability_is_named(monkeypatch):
    monkeypatch.setattr(netkit.os, "geteuid", lambda: 1000)
    assert "needs root" in netkit.missing_capability()
    with pytest.raises(NetkitError, match="needs root"):
        NetKit()
    monkeypatch.setattr(netkit.os, "geteuid", lambda: 0)
    monkeypatch.setattr(netkit.shutil, "which", lambda name: None if name == "iptables-legacy" else "/usr/bin/x")
    assert "Debian's iptables package" in netkit.missing_capability()
