"""Network faults on loopback, in this process: a TCP proxy put on a link that can cut it (connections reset, new
ones refused) or black-hole it (every byte dropped, no close seen by either side), then heal it.

Faults between hosts of their own (iptables rules, an NFQUEUE delayer) are the network-namespace kit,
compat_tests/netkit.py (root only).
"""
from __future__ import annotations

import socket
import threading

PASS, CUT, BLACKHOLE = "pass", "cut", "blackhole"


class FaultProxy:
    """Forwards ``127.0.0.1:listen_port`` (a free port by default: :attr:`addr`) to ``target``.

    * :meth:`cut`: every open connection is shut down and new ones are closed on accept (a partitioned link
      whose peers see resets);
    * :meth:`blackhole`: bytes are dropped both ways on open and new connections, and a close does not cross
      either (a partition without resets: neither side sees anything);
    * :meth:`heal`: forward again; after a black hole the connections that lost bytes are closed (their streams
      are broken).
    """

    def __init__(self, target: str, listen_port: int = 0) -> None:
        host, _, port = target.rpartition(":")
        self.target = (host, int(port))
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", listen_port))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.addr = f"127.0.0.1:{self.port}"
        self.state = PASS
        self._closed = False
        self._lock = threading.Lock()
        self._open: set[socket.socket] = set()
        threading.Thread(target=self._accept, name=f"fault-proxy-{self.port}", daemon=True).start()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self.sock.accept()
            except OSError:
                return
            if self.state == CUT:
                client.close()
                continue
            try:
                upstream = socket.create_connection(self.target, 2.0)
                upstream.settimeout(None)          # a silent link must not time out here
            except OSError:
                client.close()
                continue
            with self._lock:
                self._open.update((client, upstream))
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket) -> None:
        try:
            while True:
                data = src.recv(65536)
                if not data or self.state == CUT:
                    break
                if self.state != BLACKHOLE:
                    dst.sendall(data)
        except OSError:
            pass
        finally:
            # while black-holed a close does not cross either (the other side keeps a silent connection)
            self._close(*((src,) if self.state == BLACKHOLE else (src, dst)))

    def _close(self, *socks: socket.socket) -> None:
        with self._lock:
            for s in socks:
                self._open.discard(s)
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                s.close()

    def _close_all(self) -> None:
        with self._lock:
            socks = list(self._open)
        self._close(*socks)

    def cut(self) -> None:
        self.state = CUT
        self._close_all()

    def blackhole(self) -> None:
        self.state = BLACKHOLE

    def heal(self) -> None:
        was, self.state = self.state, PASS
        if was == BLACKHOLE:
            self._close_all()

    def close(self) -> None:
        self._closed = True
        self.cut()
        self.sock.close()
