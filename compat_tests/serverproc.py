"""A server process of a reference kit (java5kit's JVMs, rustkit's binaries): started in a session of its own with
its output in ``workdir/<name>.out``, waited for (a port open, a line printed), killed or stopped; and the wait
until a broker is registered with its name server. Failures raise the kit's error class, naming the kit's step."""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from pathlib import Path
from typing import Callable, Mapping, Sequence

from javakit import _wait_dead


def port_open(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket() as s:
        s.settimeout(0.2)
        return s.connect_ex((host, port)) == 0


class ServerProcess:
    """``cmd`` in ``workdir`` (a session of its own, stdin closed, stdout and stderr appended to
    ``workdir/<name>.out``, a ``==== start at`` line first). ``kit`` and ``error`` name the kit in failures
    (``<kit> step 'start <name>': ...`` raised as ``error``); ``host`` is the address its ports are probed on."""

    def __init__(self, name: str, workdir: Path, cmd: Sequence[str], env: Mapping[str, str], kit: str,
                 error: type[Exception], host: str = "127.0.0.1") -> None:
        self.name = name
        self.host = host
        self.kit, self.error = kit, error
        self.log = workdir / f"{name}.out"
        with open(self.log, "ab") as out:
            out.write(f"==== start at {time.time():.3f}\n".encode())
            out.flush()
            self.proc = subprocess.Popen(list(cmd), stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                         env=dict(env), cwd=workdir, start_new_session=True)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc.poll() is None

    def output(self, tail: int = 3000) -> str:
        try:
            return self.log.read_text(errors="replace")[-tail:]
        except OSError:
            return ""

    def _failed(self, why: str) -> Exception:
        return self.error(f"{self.kit} step 'start {self.name}': {why}: {self.output()}")

    def wait_port(self, port: int, deadline: float) -> None:
        while time.monotonic() < deadline:
            if port_open(port, self.host):
                return
            if not self.alive():
                raise self._failed(f"exited ({self.proc.returncode})")
            time.sleep(0.1)
        raise self._failed(f"port {port} not open in time")

    def wait_output(self, text: str, deadline: float) -> None:
        while time.monotonic() < deadline:
            if text in self.output(1 << 20):
                return
            if not self.alive():
                raise self._failed(f"exited ({self.proc.returncode})")
            time.sleep(0.1)
        raise self._failed(f"'{text}' not printed in time")

    def kill(self) -> None:
        """SIGKILL of its process group, and until it is gone."""
        if self.alive():
            os.killpg(self.proc.pid, signal.SIGKILL)
            _wait_dead(self.proc.pid, 10.0)
        self.proc.wait()

    def stop(self, timeout: float = 30.0) -> None:
        """SIGTERM (a graceful shutdown: a JVM's shutdown hooks run), SIGKILL after ``timeout``."""
        if self.alive():
            self.proc.terminate()
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.kill()


def wait_broker_registered(namesrv_addr: str, broker_addr: str, deadline: float) -> bool:
    """Until the name server's cluster info (GET_BROKER_CLUSTER_INFO) lists ``broker_addr``; False at
    ``deadline``."""
    from rmqd.remoting.client import BlockingClient
    from rmqd.remoting.command import new_request

    while time.monotonic() < deadline:
        client = BlockingClient(namesrv_addr)
        try:
            resp = client.invoke(new_request(106, {}), 5)
            if resp.code == 0 and broker_addr.encode() in bytes(resp.body or b""):
                return True
        except OSError:
            pass
        finally:
            client.close()
        time.sleep(0.2)
    return False


def kit_main(argv: Sequence[str] | None, prog: str, description: str, prepare: tuple[str, str, Callable[[], str]],
             start: tuple[str, Callable[[Path], tuple[str, Callable[[], None]]]],
             error: type[Exception]) -> int:
    """A kit's command line: ``prepare`` = (sub-command, help, what makes the kit ready and says so: fetch, build)
    and ``start DIR`` = (help, what starts a cluster in DIR and returns its addresses and its stop) that runs
    until Ctrl-C (SIGINT or SIGTERM). A failure to prepare (``error``) is printed, exit status 1."""
    import argparse

    parser = argparse.ArgumentParser(prog=prog, description=description)
    sub = parser.add_subparsers(dest="cmd", required=True)
    sub.add_parser(prepare[0], help=prepare[1])
    sub.add_parser("start", help=start[0]).add_argument("dir")
    args = parser.parse_args(argv)
    try:
        ready = prepare[2]()
    except error as exc:
        print(exc)
        return 1
    if args.cmd == prepare[0]:
        print(ready)
        return 0
    addresses, stop = start[1](Path(args.dir).resolve())
    print(addresses, flush=True)
    try:
        signal.sigwait({signal.SIGINT, signal.SIGTERM})
    finally:
        stop()
    return 0
