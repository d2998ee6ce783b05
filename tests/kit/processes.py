"""rmqd as child processes (``rmqd serve``, ``broker``, ``namesrv``, ``controller``): start, wait until ready, read
their addresses, kill -9, stop, restart on the same store; and the environment of Python child programs.

* :class:`RmqdProcess`: ``python -m rmqd.runtime.cli --log-level L ARGS``, ready at the first ``listening on`` line (or
  another pattern), stdout kept in :attr:`~RmqdProcess.lines` (and drained), stderr appended to a log file;
* :class:`ServeProcess`: ``rmqd serve`` on free ports over a store with a ``broker.conf``;
* :class:`ControllerProcess`: ``rmqd controller -c FILE``, ready at its ``rmqd ready:`` line.
"""
from __future__ import annotations

import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
from typing import IO, Any, Optional

from tests.kit.waits import WaitTimeout

#: the repository under test (its ``rmqd`` and ``tests`` packages)
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
#: an address a server prints when it listens
ADDR = re.compile(r"listening on (\d+\.\d+\.\d+\.\d+:\d+)")
#: the line ``rmqd serve`` and ``rmqd controller`` print once every listener is up
READY = re.compile(r"^rmqd ready:")


def child_env(**extra: str) -> dict[str, str]:
    """This environment for a Python child program: unbuffered output, fault handler on, and the repository first
    on its path (so it imports ``tests.*`` and this tree's ``rmqd`` whatever its working directory)."""
    path = os.pathsep.join(p for p in (REPO, os.environ.get("PYTHONPATH", "")) if p)
    return dict(os.environ, PYTHONUNBUFFERED="1", PYTHONFAULTHANDLER="1", PYTHONPATH=path, **extra)


def write_conf(path: str, **props: object) -> str:
    """A ``key=value`` properties file (broker.conf, namesrv.conf); returns ``path``."""
    with open(path, "w", encoding="utf-8") as f:
        f.write("".join(f"{k}={v}\n" for k, v in props.items()))
    return path


def tail(path: str, n: int = 40) -> str:
    """The last ``n`` lines of a log file (or why there are none)."""
    try:
        with open(path, errors="replace") as f:
            return "".join(f.readlines()[-n:])
    except OSError as exc:
        return f"(no log: {exc})"


class RmqdProcess:
    """``python -m rmqd.runtime.cli --log-level LEVEL ARGS`` (started by :meth:`start`, again after a kill on the same
    arguments). ``wrap`` goes before the command (``ip netns exec NS`` runs it on a host of compat_tests/netkit.py;
    it execs the command, so :attr:`proc` is still the rmqd process). Without ``log_path`` its stderr is dropped
    and it logs at WARNING unless told otherwise. With ``new_session`` it leads its own process group, and
    :meth:`kill` and :meth:`stop` signal the whole group."""

    def __init__(self, *args: str, log_path: Optional[str | os.PathLike] = None, log_level: Optional[str] = None,
                 wrap: tuple[str, ...] = (), ready: re.Pattern = ADDR, new_session: bool = False,
                 cwd: str = REPO, addr: str = "") -> None:
        """``addr``: the address it is configured to listen on, if its output does not say."""
        self.args = tuple(str(a) for a in args)
        self.log_path = os.fspath(log_path) if log_path is not None else None
        self.log_level = log_level or ("INFO" if log_path is not None else "WARNING")
        self.wrap = tuple(wrap)
        self.ready = ready
        self.new_session = new_session
        self.cwd = cwd
        self.proc: Optional[subprocess.Popen] = None
        self.lines: list[str] = []
        #: the stdout line that matched ``ready`` at the last start (:attr:`lines` keeps growing after it)
        self.ready_line = ""
        self.configured_addr = addr
        self.addr = addr
        self.starts = 0
        self.last_start_s = 0.0

    @property
    def pid(self) -> int:
        return self.proc.pid if self.proc is not None else 0

    def start(self, timeout: float = 30.0) -> "RmqdProcess":
        """Start and wait until a stdout line matches ``ready``; :attr:`addr` is the first address printed.
        RuntimeError (with the log's tail) if the process exits first, :class:`WaitTimeout` after ``timeout``."""
        t0 = time.monotonic()
        log: IO[Any] | int = subprocess.DEVNULL
        if self.log_path is not None:
            log = open(self.log_path, "a", encoding="utf-8")
            log.write(f"==== start #{self.starts + 1} at {time.time():.3f}\n")
            log.flush()
        cmd = [*self.wrap, sys.executable, "-m", "rmqd.runtime.cli", "--log-level", self.log_level, *self.args]
        try:
            self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=log, text=True, cwd=self.cwd,
                                         env=child_env(), start_new_session=self.new_session)
        finally:
            if not isinstance(log, int):
                log.close()
        self.starts += 1
        self.lines = []
        self.ready_line = ""
        self.addr = self.configured_addr
        lines: "queue.Queue[Optional[str]]" = queue.Queue()
        threading.Thread(target=self._read, args=(self.proc, lines), daemon=True).start()
        deadline = t0 + timeout
        while True:
            try:
                line = lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                self.kill()
                raise WaitTimeout(f"rmqd {' '.join(self.args)} did not start within {timeout} s; "
                                  f"log {self.log_path}:\n{self.log_tail()}") from None
            if line is None:
                rc = self.proc.wait(10)
                raise RuntimeError(f"rmqd {' '.join(self.args)} exited with {rc} during start; "
                                   f"log {self.log_path}:\n{self.log_tail()}")
            m = ADDR.search(line)
            if m and not self.addr:
                self.addr = m.group(1)
            if self.ready.search(line):
                self.ready_line = line
                break
        self.last_start_s = time.monotonic() - t0
        return self

    def _read(self, proc: subprocess.Popen, lines: "queue.Queue[Optional[str]]") -> None:
        """Keep stdout in :attr:`lines` (and the pipe drained, so the process never blocks on it)."""
        try:
            for line in proc.stdout:                    # type: ignore[union-attr]
                self.lines.append(line)
                lines.put(line)
        except (OSError, ValueError):
            pass
        lines.put(None)

    def _signal(self, sig: int) -> None:
        if self.new_session:
            os.killpg(self.proc.pid, sig)               # type: ignore[union-attr]
        else:
            self.proc.send_signal(sig)                  # type: ignore[union-attr]

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill(self, sig: int = signal.SIGKILL) -> None:
        """Send ``sig`` (kill -9 by default) and wait for the exit (30 s at most)."""
        if self.alive():
            self._signal(sig)
            self.proc.wait(30)                          # type: ignore[union-attr]

    kill9 = kill

    def stop(self, timeout: float = 30.0) -> int:
        """SIGTERM, then SIGKILL after ``timeout`` seconds; the exit code."""
        if self.proc is None:
            return 0
        if self.proc.poll() is None:
            self._signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self._signal(signal.SIGKILL)
                self.proc.wait(10)
        return self.proc.returncode

    def log_text(self) -> str:
        if self.log_path is None:
            return ""
        with open(self.log_path, encoding="utf-8", errors="replace") as f:
            return f.read()

    def log_tail(self, n: int = 40) -> str:
        return tail(self.log_path, n) if self.log_path is not None else "(stderr not kept)"


class ServeProcess(RmqdProcess):
    """``rmqd serve`` (name server + broker) on free 127.0.0.1 ports over ``store_dir``, with ``conf`` written to
    ``broker.conf`` beside the store at each start; ready once the broker's ``listening on`` line is out.
    :attr:`namesrv_addr` and :attr:`broker_addr` are read from the start-up lines."""

    BROKER_LINE = re.compile(r"^rmqd broker .* listening on (\S+)")
    NAMESRV_LINE = re.compile(r"^rmqd name server listening on (\S+)")

    def __init__(self, store_dir: str, conf: Optional[dict] = None, log_path: Optional[str] = None,
                 log_level: str = "INFO", extra_args: tuple[str, ...] = (), ready: Optional[re.Pattern] = None,
                 new_session: bool = False) -> None:
        """``extra_args`` go after the ones above (``--grpc-port 0``); ``ready``: READY waits for every listener."""
        here = os.path.dirname(store_dir.rstrip("/")) or "."
        self.store_dir = store_dir
        self.conf = dict(conf or {})
        self.conf_path = os.path.join(here, "broker.conf")
        super().__init__("serve", "--namesrv-port", "0", "--broker-port", "0", "--console-port", "0",
                         "--store-dir", store_dir, "-c", self.conf_path, *extra_args,
                         log_path=log_path or os.path.join(here, "server.log"), log_level=log_level,
                         ready=ready or self.BROKER_LINE, new_session=new_session)

    def start(self, timeout: float = 30.0) -> "ServeProcess":
        write_conf(self.conf_path, **self.conf)
        super().start(timeout)
        return self

    def _address(self, pattern: re.Pattern) -> str:
        return next((m.group(1) for m in map(pattern.search, self.lines) if m), "")

    @property
    def broker_addr(self) -> str:
        return self._address(self.BROKER_LINE)

    @property
    def namesrv_addr(self) -> str:
        return self._address(self.NAMESRV_LINE)

    def client(self, timeout: float = 5.0) -> Any:
        from rmqd.remoting.client import BlockingClient
        return BlockingClient(self.broker_addr, timeout)


class ControllerProcess(RmqdProcess):
    """One ``rmqd controller -c CONF`` at ``addr`` (the address its configuration gives it)."""

    def __init__(self, conf_path: str, log_path: str, addr: str, wrap: tuple[str, ...] = ()) -> None:
        super().__init__("controller", "-c", conf_path, log_path=log_path, wrap=wrap, ready=READY, addr=addr)
        self.conf_path = conf_path
