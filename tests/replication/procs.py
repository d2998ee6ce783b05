"""rmqd processes for kill -9 tests, a send loop that records what was acknowledged, and a reader of a broker."""
from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time

from rmqd.remoting.client import BlockingClient
from rmqd.remoting.codes import RequestCode, ResponseCode
from rmqd.remoting.command import new_request
from rmqd.store.message import decode_messages

ADDR = re.compile(r"listening on (\d+\.\d+\.\d+\.\d+:\d+)")


class RmqdProc:
    """``python -m rmqd.cli ARGS``; its log goes to ``log_path``; ``addr`` is the first address it printed.
    ``wrap`` goes before the command (``ip netns exec NS`` runs it on a host of compat_tests/netkit.py; it execs
    the command, so ``proc`` is still the rmqd process)."""

    def __init__(self, log_path: str, *args: str, timeout: float = 30.0, wrap: tuple[str, ...] = ()) -> None:
        self.log_path = log_path
        self.log = open(log_path, "ab")
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        self.proc = subprocess.Popen([*wrap, sys.executable, "-m", "rmqd.cli", "--log-level", "INFO", *args],
                                     stdout=subprocess.PIPE, stderr=self.log, text=True, env=env)
        deadline = time.monotonic() + timeout
        self.addr = ""
        while time.monotonic() < deadline:
            line = self.proc.stdout.readline()
            if not line:
                break
            m = ADDR.search(line)
            if m:
                self.addr = m.group(1)
                break
        if not self.addr:
            self.stop()
            raise RuntimeError(f"rmqd {' '.join(args)} did not start; log {log_path}:\n{self.log_text()[-3000:]}")
        threading.Thread(target=self.proc.stdout.read, daemon=True).start()     # keep the pipe drained

    def log_text(self) -> str:
        if not self.log.closed:
            self.log.flush()
        with open(self.log_path, encoding="utf-8", errors="replace") as f:
            return f.read()

    def kill9(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)
        self.log.close()

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        if not self.log.closed:
            self.log.close()


def write_conf(path: str, **props: object) -> str:
    with open(path, "w", encoding="utf-8") as f:
        f.write("".join(f"{k}={v}\n" for k, v in props.items()))
    return path


def send_one(client: BlockingClient, topic: str, key: str, body: bytes, queue_id: int, timeout: float = 10):
    ext = {"a": "PG", "b": topic, "c": "TBW102", "d": "4", "e": str(queue_id), "f": "0",
           "g": str(int(time.time() * 1000)), "h": "0", "i": f"KEYS\x01{key}\x02WAIT\x01true", "j": "0",
           "k": "false", "m": "false"}
    return client.invoke(new_request(RequestCode.SEND_MESSAGE_V2, ext, body), timeout)


class SendLoop:
    """``threads`` producers sending to ``addr`` until stopped or the broker goes away; ``acked`` holds the keys
    answered SUCCESS (SEND_OK), ``stored`` those answered 11/12 (stored, not confirmed on a slave)."""

    def __init__(self, addr: str, topic: str, threads: int = 4, body_size: int = 1000) -> None:
        self.addr, self.topic, self.body = addr, topic, b"r" * body_size
        self.acked: set[str] = set()
        self.stored: set[str] = set()
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._threads = [threading.Thread(target=self._run, args=(t,), daemon=True) for t in range(threads)]

    def start(self) -> "SendLoop":
        for t in self._threads:
            t.start()
        return self

    def _run(self, n: int) -> None:
        try:
            client = BlockingClient(self.addr, timeout=10)
        except OSError as exc:
            self.errors.append(repr(exc))
            return
        i = 0
        try:
            while not self._stop.is_set():
                key = f"t{n}-{i}"
                try:
                    r = send_one(client, self.topic, key, self.body, i % 4)
                except (OSError, TimeoutError, ConnectionError) as exc:
                    self.errors.append(repr(exc))
                    return
                with self._lock:
                    if r.code == ResponseCode.SUCCESS:
                        self.acked.add(key)
                    elif r.code in (ResponseCode.SLAVE_NOT_AVAILABLE, ResponseCode.FLUSH_SLAVE_TIMEOUT):
                        self.stored.add(key)
                i += 1
        finally:
            client.close()

    def stop(self) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(15)


def read_all_keys(addr: str, topic: str, queues: int = 4, group: str = "ReadBackCG") -> set[str]:
    """Every message key of ``topic`` on the broker at ``addr`` (pulled from offset 0 to the queue's max)."""
    return set(read_key_counts(addr, topic, queues, group))


def read_key_counts(addr: str, topic: str, queues: int = 4, group: str = "ReadBackCG") -> dict[str, int]:
    """How many times each message key of ``topic`` is stored on the broker at ``addr`` (duplicates > 1)."""
    keys: dict[str, int] = {}
    client = BlockingClient(addr, timeout=10)
    try:
        for q in range(queues):
            offset = 0
            while True:
                ext = {"consumerGroup": group, "topic": topic, "queueId": str(q), "queueOffset": str(offset),
                       "maxMsgNums": "32", "sysFlag": "4", "commitOffset": "0", "suspendTimeoutMillis": "0",
                       "subVersion": "0", "subscription": "*", "expressionType": "TAG"}
                r = client.invoke(new_request(RequestCode.PULL_MESSAGE, ext), 10)
                if r.code != ResponseCode.SUCCESS:
                    break
                for m in decode_messages(r.body_bytes()):
                    key = m.properties.get("KEYS") or m.properties_str
                    keys[key] = keys.get(key, 0) + 1
                offset = int(r.ext_fields["nextBeginOffset"])
    finally:
        client.close()
    return keys
