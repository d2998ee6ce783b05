"""BlockingClientPool (AdminClient's and the Spark connector's connections): one kept connection per address,
shared by threads; one the server closed is replaced before it is handed out again."""
from __future__ import annotations

import socket
import threading

import pytest

from rmqd.remoting.client import BlockingClientPool
from tests.kit.waits import poll


@pytest.fixture
def listener():
    """A loopback TCP server that accepts and keeps every connection (``accepted``), in accept order."""
    srv = socket.create_server(("127.0.0.1", 0))
    srv.settimeout(0.2)
    accepted: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        while not stop.is_set():
            try:
                accepted.append(srv.accept()[0])
            except (TimeoutError, socket.timeout):
                continue
            except OSError:
                return
    th = threading.Thread(target=accept, daemon=True)
    th.start()
    yield "127.0.0.1:%d" % srv.getsockname()[1], accepted
    stop.set()
    th.join(2)
    srv.close()
    for s in accepted:
        s.close()


def test_kept_connection_is_reused_and_replaced_once_the_server_closed_it(listener):
    addr, accepted = listener
    pool = BlockingClientPool()
    try:
        first = pool.get(addr)
        assert pool.get(addr) is first and pool.connected(addr) is first
        assert poll(lambda: len(accepted) == 1, 3.0, interval=0.02)
        accepted[0].close()                                   # the server's idle close
        assert poll(first.peer_closed, 3.0, interval=0.02)
        second = pool.get(addr)
        assert second is not first and pool.connected(addr) is second
        assert first.sock.fileno() == -1                     # the dead one was closed on this side too
        assert poll(lambda: len(accepted) == 2, 3.0, interval=0.02)
    finally:
        pool.close()
    assert pool.connected(addr) is None


def test_threads_asking_at_once_share_one_connection(listener):
    addr, accepted = listener
    pool = BlockingClientPool()
    got, start = [], threading.Barrier(8)

    def ask() -> None:
        start.wait()
        got.append(pool.get(addr))
    threads = [threading.Thread(target=ask) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(5)
    try:
        assert len(got) == 8 and len({id(c) for c in got}) == 1
        kept = got[0]
        assert kept.sock.fileno() != -1 and not kept.peer_closed()
    finally:
        pool.close()


def test_dropping_a_stale_client_keeps_the_newer_one(listener):
    addr, _ = listener
    pool = BlockingClientPool()
    try:
        old = pool.get(addr)
        pool.drop(addr)
        new = pool.get(addr)
        pool.drop(addr, old)                                  # a late caller drops what it had: no effect
        assert pool.connected(addr) is new and new.sock.fileno() != -1
        pool.drop(addr, new)
        assert pool.connected(addr) is None and new.sock.fileno() == -1
    finally:
        pool.close()
