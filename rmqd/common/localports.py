"""Free loopback ports that stay free while their server is down.

A port the kernel hands out for ``bind(0)`` comes from the ephemeral range, the same range it uses for the
source port of every outgoing connection; a server that is stopped (or killed) and started again on such a port
can find it taken by some client's connection meanwhile (EADDRINUSE). The ports here are picked below the
ephemeral range (``/proc/sys/net/ipv4/ip_local_port_range``), where the kernel never picks on its own, so only
another explicit bind can take them.
"""
from __future__ import annotations

import random
import socket

LOWEST = 10000
_rng = random.SystemRandom()


def ephemeral_range() -> tuple[int, int]:
    """The kernel's ephemeral port range (Linux default 32768-60999)."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range", encoding="ascii") as f:
            low, high = (int(x) for x in f.read().split())
        return low, high
    except (OSError, ValueError):
        return 32768, 60999


def _bindable(port: int, host: str) -> bool:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


def _candidate_span() -> tuple[int, int]:
    low, high = ephemeral_range()
    if low - LOWEST >= 2000:
        return LOWEST, low              # below the ephemeral range
    return high + 1, 65535              # a machine whose ephemeral range starts low: above it


def free_port_block(count: int = 1, host: str = "127.0.0.1") -> int:
    """A base port such that ``base .. base + count - 1`` are all free on ``host``, outside the ephemeral range."""
    low, high = _candidate_span()
    for _ in range(500):
        base = _rng.randrange(low, high - count)
        if all(_bindable(base + i, host) for i in range(count)):
            return base
    raise RuntimeError(f"no free block of {count} loopback ports in {low}-{high}")


def free_ports(n: int, host: str = "127.0.0.1") -> list[int]:
    """``n`` distinct free ports on ``host``, outside the ephemeral range."""
    ports: list[int] = []
    while len(ports) < n:
        port = free_port_block(1, host)
        if port not in ports:
            ports.append(port)
    return ports


def free_port(host: str = "127.0.0.1") -> int:
    """One free port on ``host``, outside the ephemeral range."""
    return free_port_block(1, host)
