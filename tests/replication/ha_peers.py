"""Fake HA peers speaking the raw DefaultHA protocol (8-byte reports, 12-byte transfer headers), for bad input."""
from __future__ import annotations

import socket
import struct
import time

from rmqd.store.message_store import MessageStore, MessageToStore, StoreConfig

REPORT = struct.Struct(">q")
HEADER = struct.Struct(">qi")


def recv_exactly(sock: socket.socket, n: int, who: str) -> bytes:
    """``n`` bytes from ``sock``; ConnectionError naming ``who`` if it closes first."""
    out = b""
    while len(out) < n:
        got = sock.recv(n - len(out))
        if not got:
            raise ConnectionError(f"closed by {who}")
        out += got
    return out


def closed_by_peer(sock: socket.socket, timeout: float = 5.0) -> bool:
    """True once the peer closed ``sock`` (data still arriving is read and dropped)."""
    deadline = time.monotonic() + timeout
    sock.settimeout(0.2)
    while time.monotonic() < deadline:
        try:
            if not sock.recv(65536):
                return True
        except socket.timeout:
            continue
        except OSError:
            return True
    return False


class FakeSlave:
    """Connects to a master's HA port and reports whatever the test says."""

    def __init__(self, port: int, host: str = "127.0.0.1") -> None:
        self.sock = socket.create_connection((host, port), timeout=5)

    def report(self, offset: int) -> None:
        self.sock.sendall(REPORT.pack(offset))

    def read_transfer(self, timeout: float = 5.0) -> tuple[int, bytes]:
        """The next transfer (offset, body); a heartbeat has an empty body."""
        self.sock.settimeout(timeout)
        offset, size = HEADER.unpack(recv_exactly(self.sock, 12, "the master"))
        return offset, recv_exactly(self.sock, size, "the master")

    def closed_by_peer(self, timeout: float = 5.0) -> bool:
        """True once the master closed the connection (transfers still arriving are read and dropped)."""
        return closed_by_peer(self.sock, timeout)

    def close(self) -> None:
        self.sock.close()


class FakeListener:
    """A loopback listening socket that accepts one peer (``conn``); closes both."""

    def __init__(self) -> None:
        self.lsock = socket.socket()
        self.lsock.bind(("127.0.0.1", 0))
        self.lsock.listen(4)
        self.port = self.lsock.getsockname()[1]
        self.conn: socket.socket | None = None

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def accept_conn(self, timeout: float) -> socket.socket:
        self.lsock.settimeout(timeout)
        self.conn, _ = self.lsock.accept()
        self.conn.settimeout(timeout)
        return self.conn

    def closed_by_peer(self, timeout: float = 5.0) -> bool:
        assert self.conn is not None
        return closed_by_peer(self.conn, timeout)

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()
        self.lsock.close()


class FakeMaster(FakeListener):
    """Listens like a master's HA port; the test drives what it sends."""

    def accept(self, timeout: float = 10.0) -> int:
        """Accept the slave and return the offset of its first report."""
        self.accept_conn(timeout)
        return self.read_report(timeout)

    def read_report(self, timeout: float = 5.0) -> int:
        assert self.conn is not None
        self.conn.settimeout(timeout)
        return REPORT.unpack(recv_exactly(self.conn, 8, "the slave"))[0]

    def transfer(self, offset: int, body: bytes) -> None:
        assert self.conn is not None
        self.conn.sendall(HEADER.pack(offset, len(body)) + body)

    def raw(self, data: bytes) -> None:
        assert self.conn is not None
        self.conn.sendall(data)


def make_store(root: str, file_size: int) -> MessageStore:
    store = MessageStore(StoreConfig(root, mapped_file_size_commitlog=file_size,
                                     mapped_file_size_consume_queue=3000 * 20, warm_mapped_pages=False))
    store.start()
    return store


def fill(store: MessageStore, count: int, size: int = 1000, topic: str = "HaTopic") -> None:
    for i in range(count):
        r = store.put_message(MessageToStore(topic, i % 2, bytes([i % 251]) * size, f"KEYS\x01k{i}", 0, 0,
                                             int(time.time() * 1000), ("127.0.0.1", 5000), ("127.0.0.1", 10911)))
        assert r.status.name == "PUT_OK", r


def commitlog_bytes(store: MessageStore, start: int, end: int) -> bytes:
    """The CommitLog bytes [start, end) (within one file)."""
    v = store.commitlog.get(start, end - start)
    assert v is not None, (start, end)
    return bytes(v)
