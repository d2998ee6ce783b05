"""`rmqd serve --brokers N`: more broker processes beside the in-process one, the RocketMQ way to use
more cores on one host.

A Python process tops out near one core. RocketMQ's answer on a big host is several brokers
(broker-a, broker-b, ...), each with its own store and ports, registered with the same name server:
clients spread a topic's queues over all of them with no change. ``rmqd serve`` runs the name
server and broker-a itself; :class:`ExtraBrokers` starts broker-b ... as ``rmqd broker``
child processes (same broker.conf, their own name, ports and store directory), prints their
addresses, and stops them with the server. A child that dies is logged and started again.
"""
from __future__ import annotations

import asyncio
import logging
import os
import re
import string
import sys
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Optional

if TYPE_CHECKING:
    from rmqd.app import Services

log = logging.getLogger(__name__)

LISTENING = re.compile(r"listening on (\S+:\d+)")
PORT_STEP = 10          # broker i listens on listenPort + 10*i (each broker also uses port-2 and port+1)
START_TIMEOUT_S = 30.0
RESTART_DELAY_S = 1.0


def broker_names(base: str, count: int) -> list[str]:
    """``broker-a`` -> ``broker-a, broker-b, ...``; another base name gets ``-1, -2, ...``."""
    if re.fullmatch(r".*-[a-z]", base) and count <= 26:
        stem, first = base[:-1], string.ascii_lowercase.index(base[-1])
        if first + count <= 26:
            return [stem + string.ascii_lowercase[first + i] for i in range(count)]
    return [base] + [f"{base}-{i}" for i in range(1, count)]


def store_dir_of(root: str, name: str) -> str:
    """Each broker of a multi-broker serve keeps its store in ``<store-dir>/<brokerName>``."""
    return os.path.join(root, name)


@dataclass
class _Child:
    name: str
    args: list[str]
    proc: Optional[asyncio.subprocess.Process] = None
    address: str = ""
    watcher: Optional[asyncio.Task] = None
    restarts: int = 0
    lines: list[str] = field(default_factory=list)


class ExtraBrokers:
    """Broker processes 2..N of `rmqd serve --brokers N` (an endpoint of :class:`rmqd.app.Services`)."""

    def __init__(self, names: list[str], config_file: Optional[str], store_root: str, base_port: int,
                 log_level: str = "WARNING", metrics_port: Optional[int] = None,
                 extra_args: Optional[list[str]] = None) -> None:
        self.children = []
        for i, name in enumerate(names, start=1):
            port = base_port + PORT_STEP * i if base_port else 0
            args = [sys.executable, "-m", "rmqd.cli", "--log-level", log_level, "broker",
                    "--broker-name", name, "--broker-port", str(port),
                    "--store-dir", store_dir_of(store_root, name),
                    "--grpc-port", "0"]          # the gRPC endpoint serves the serve process's broker only
            if config_file:
                args += ["-c", config_file]
            if metrics_port is not None:        # each broker serves its own /metrics: port + i (0 = any)
                args += ["--metrics-port", str(metrics_port + i if metrics_port else 0)]
            args += extra_args or []
            self.children.append(_Child(name, args))
        self._stopping = False
        self._namesrv = ""

    async def start(self, services: "Services") -> None:
        broker = services.broker
        self._namesrv = broker.config.namesrvAddr if broker is not None else ""
        try:
            await asyncio.gather(*(self._spawn(c) for c in self.children))
        except BaseException:
            await self.close()
            raise

    async def _spawn(self, child: _Child) -> None:
        child.proc = await asyncio.create_subprocess_exec(
            *child.args, "-n", self._namesrv, stdout=asyncio.subprocess.PIPE, stderr=None,
            env=dict(os.environ, PYTHONUNBUFFERED="1"))
        try:
            child.address = await asyncio.wait_for(self._read_address(child), START_TIMEOUT_S)
        except asyncio.TimeoutError:
            child.proc.kill()
            raise RuntimeError(f"broker process {child.name} did not start within {START_TIMEOUT_S:.0f}s")
        child.watcher = asyncio.get_running_loop().create_task(self._watch(child), name=f"watch-{child.name}")

    async def _read_address(self, child: _Child) -> str:
        assert child.proc is not None and child.proc.stdout is not None
        while True:
            line = await child.proc.stdout.readline()
            if not line:
                raise RuntimeError(f"broker process {child.name} exited during start-up "
                                   f"(code {await child.proc.wait()})")
            m = LISTENING.search(line.decode(errors="replace"))
            if m:
                return m.group(1)

    async def _watch(self, child: _Child) -> None:
        """Drain the child's output; restart it if it dies while the server runs."""
        assert child.proc is not None and child.proc.stdout is not None
        while await child.proc.stdout.readline():
            pass
        code = await child.proc.wait()
        if self._stopping:
            return
        child.restarts += 1
        log.error("broker process %s (%s) exited with code %s; restarting it (restart %d)",
                  child.name, child.address, code, child.restarts)
        await asyncio.sleep(RESTART_DELAY_S)
        if not self._stopping:
            try:
                await self._spawn(child)
            except Exception:
                log.exception("restarting broker process %s failed", child.name)

    async def close(self) -> None:
        self._stopping = True
        for child in self.children:
            if child.proc is not None and child.proc.returncode is None:
                child.proc.terminate()
        for child in self.children:
            if child.proc is None:
                continue
            try:
                await asyncio.wait_for(child.proc.wait(), 20)
            except asyncio.TimeoutError:
                log.error("broker process %s did not stop in 20s; killing it", child.name)
                child.proc.kill()
                await child.proc.wait()
            if child.watcher is not None:
                child.watcher.cancel()

    def describe(self) -> list[str]:
        return [f"rmqd broker {c.name} listening on {c.address} (process {c.proc.pid if c.proc else '-'})"
                for c in self.children]

    def ready_parts(self) -> list[str]:
        return [f"broker {c.name} {c.address}" for c in self.children]
