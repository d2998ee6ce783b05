"""Fake HA peers speaking the raw DefaultHA protocol (8-byte reports, 12-byte transfer headers), for bad input."""
from __future__ import annotations

import socket
import struct
import time

from rmqd.store.message_store import MessageStore, MessageToStore, StoreConfig

REPORT = struct.Struct(">q")
HEADER = struct.Struct(">qi")


class FakeSlave:
    """Connects to a master's HA port and reports whatever the test says."""

    def __init__(self, port: int, host: str = "127.0.0.1") -> None:
        self.sock = socket.create_connection((host, port), timeout=5)

    def report(self, offset: int) -> None:
        self.sock.sendall(REPORT.pack(offset))

    def read_transfer(self, timeout: float = 5.0) -> tuple[int, bytes]:
        """The next transfer (offset, body); a heartbeat has an empty body."""
        self.sock.settimeout(timeout)
        head = self._exactly(12)
        offset, size = HEADER.unpack(head)
        return offset, self._exactly(size)

    def _exactly(self, n: int) -> bytes:
        out = b""
        while len(out) < n:
            got = self.sock.recv(n - len(out))
            if not got:
                raise ConnectionError("closed by the master")
            out += got
        return out

    def closed_by_peer(self, timeout: float = 5.0) -> bool:
        """True once the master closed the connection (transfers still arriving are read and dropped)."""
        deadline = time.monotonic() + timeout
        self.sock.settimeout(0.2)
        while time.monotonic() < deadline:
            try:
                if not self.sock.recv(65536):
                    return True
            except socket.timeout:
                continue
            except ConnectionError:
                return True
        return False

    def close(self) -> None:
        self.sock.close()


class FakeMaster:
    """Listens like a master's HA port; the test drives what it sends."""

    def __init__(self) -> None:
        self.lsock = socket.socket()
        self.lsock.bind(("127.0.0.1", 0))
        self.lsock.listen(4)
        self.port = self.lsock.getsockname()[1]
        self.conn: socket.socket | None = None

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def accept(self, timeout: float = 10.0) -> int:
        """Accept the slave and return the offset of its first report."""
        self.lsock.settimeout(timeout)
        self.conn, _ = self.lsock.accept()
        return self.read_report(timeout)

    def read_report(self, timeout: float = 5.0) -> int:
        self.conn.settimeout(timeout)
        data = b""
        while len(data) < 8:
            got = self.conn.recv(8 - len(data))
            if not got:
                raise ConnectionError("closed by the slave")
            data += got
        return REPORT.unpack(data)[0]

    def transfer(self, offset: int, body: bytes) -> None:
        self.conn.sendall(HEADER.pack(offset, len(body)) + body)

    def raw(self, data: bytes) -> None:
        self.conn.sendall(data)

    def closed_by_peer(self, timeout: float = 5.0) -> bool:
        deadline = time.monotonic() + timeout
        self.conn.settimeout(0.2)
        while time.monotonic() < deadline:
            try:
                if not self.conn.recv(4096):
                    return True
            except socket.timeout:
                continue
            except ConnectionError:
                return True
        return False

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()
        self.lsock.close()


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
