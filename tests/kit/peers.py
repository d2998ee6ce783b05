"""A fake remoting peer on loopback: a TCP listener that records every frame it is sent (raw bytes and the decoded
command) and may answer each, for tests that watch what a client or a server pushes (a C++ client's frames, a
controller's role-change notifications to a broker)."""
from __future__ import annotations

import socket
import struct
import threading
from typing import Callable, Optional

from rmqd.remoting.command import FrameReader, RemotingCommand, encode_frame_bytes, prepare_reply

Respond = Callable[[RemotingCommand], Optional[RemotingCommand]]


class RecordingPeer:
    """Listens on a free loopback port (:attr:`addr`); every connection is read on its own daemon thread. Each
    whole frame is recorded in :attr:`frames`; with ``respond`` the answer it returns (None: no answer) is sent
    back as the reply to that request and recorded in :attr:`answered`."""

    def __init__(self, respond: Respond | None = None) -> None:
        self.respond = respond
        self.frames: list[tuple[bytes, RemotingCommand]] = []
        self.answered: list[bytes] = []
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.addr = f"127.0.0.1:{self.port}"
        self._closed = False
        threading.Thread(target=self._accept, name=f"recording-peer-{self.port}", daemon=True).start()

    @property
    def received(self) -> list[RemotingCommand]:
        """The commands received so far, in order."""
        return [cmd for _raw, cmd in self.frames]

    def _accept(self) -> None:
        while not self._closed:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        buf = b""
        with conn:
            while not self._closed:
                try:
                    data = conn.recv(65536)
                except OSError:
                    return
                if not data:
                    return
                buf += data
                while len(buf) >= 4:
                    (length,) = struct.unpack_from(">I", buf)
                    if len(buf) < 4 + length:
                        break
                    raw, buf = buf[:4 + length], buf[4 + length:]
                    [cmd] = FrameReader().feed(raw)
                    self.frames.append((raw, cmd))
                    response = self.respond(cmd) if self.respond is not None else None
                    if response is not None:
                        out = encode_frame_bytes(prepare_reply(cmd, response))
                        self.answered.append(out)
                        conn.sendall(out)

    def close(self) -> None:
        self._closed = True
        self.sock.close()
