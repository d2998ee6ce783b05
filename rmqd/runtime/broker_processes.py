"""`rmqd serve --brokers N`: more broker processes beside the in-process one, the RocketMQ way to use
more cores on one host.

A Python process tops out near one core. RocketMQ's answer on a big host is several brokers
(broker-a, broker-b, ...), each with its own store and ports, registered with the same name server:
clients spread a topic's queues over all of them with no change. ``rmqd serve`` runs the name
server and broker-a itself; :class:`ExtraBrokers` starts broker-b ... as ``rmqd broker``
child processes (same broker.conf, their own name, ports and store directory), prints their
addresses, and stops them with the server. A child that dies is logged and started again.

`rmqd serve --replicas N` adds N-1 slaves to every broker group (brokerRole=SLAVE, brokerId 1..N-1, the group's
brokerName, a store in ``<store-dir>/<brokerName>-s<id>`` and a broker.conf there: the given one plus those two
keys), each its own process, so a local group has the real topology: kill one and watch the rest.
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
    from rmqd.runtime.services import Services

log = logging.getLogger(__name__)

LISTENING = re.compile(r"listening on (\S+:\d+)")
READY_GRPC = re.compile(r"\bgrpc (\S+:\d+)")
PORT_STEP = 10          # broker i listens on listenPort + 10*i (each broker also uses port-2 and port+1)
SLAVE_PORT_STEP = 4     # slave j of a group listens on the master's port + 4*j (ports -2 .. +1 each)
START_TIMEOUT_S = 30.0
RESTART_DELAY_S = 1.0


def rmqd_command(log_level: str) -> list[str]:
    """The command that runs ``rmqd`` in a child process with the same ``rmqd`` package as this process.

    ``python -m rmqd.runtime.cli`` would import ``rmqd`` from the child's working directory first: started inside a
    checkout of the sources with rmqd installed from a wheel, the children ran the unbuilt tree and failed. The
    child puts this package's parent directory first on its path, then runs ``rmqd.runtime.cli`` as ``-m`` would."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # above rmqd/runtime/
    boot = (f"import sys; sys.path.insert(0, {root!r}); import runpy; "
            "runpy.run_module('rmqd.runtime.cli', run_name='__main__', alter_sys=True)")
    return [sys.executable, "-c", boot, "--log-level", log_level]


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


def port_step(replicas: int) -> int:
    """Ports between two broker groups: room for the master and its slaves (4 ports each)."""
    return max(PORT_STEP, SLAVE_PORT_STEP * replicas + 2)


def grpc_args(base: int, index: int, optional: bool) -> list[str]:
    """A child broker's gRPC endpoint: port ``base + index`` (each broker serves its own, as the 5.x proxy in local
    mode beside each broker); ``base`` 0: off. ``optional``: a taken port is a warning, as serve's default port."""
    if base <= 0:
        return ["--grpc-port", "0"]
    return ["--grpc-port", str(base + index)] + (["--grpc-optional"] if optional else [])


def slave_config(root: str, name: str, broker_id: int, config_file: Optional[str]) -> str:
    """Write ``<root>/<name>-s<id>.conf``: ``config_file``'s properties plus brokerRole=SLAVE and brokerId."""
    text = ""
    if config_file:
        with open(config_file, encoding="utf-8") as f:
            text = f.read()
        if not text.endswith("\n"):
            text += "\n"
    os.makedirs(root, exist_ok=True)
    path = os.path.join(root, f"{name}-s{broker_id}.conf")
    with open(path, "w", encoding="utf-8") as f:
        f.write(text + f"brokerRole=SLAVE\nbrokerId={broker_id}\n")
    return path


@dataclass
class _Child:
    name: str
    args: list[str]
    proc: Optional[asyncio.subprocess.Process] = None
    address: str = ""
    grpc: str = ""                      # its gRPC endpoint, from its "rmqd ready:" line
    watcher: Optional[asyncio.Task[None]] = None
    restarts: int = 0
    lines: list[str] = field(default_factory=list)
    takes_namesrv: bool = True          # a broker gets ``-n <name server>``; a controller does not


class ExtraBrokers:
    """Broker processes 2..N of `rmqd serve --brokers N` (an endpoint of :class:`rmqd.runtime.services.Services`)."""

    def __init__(self, names: list[str], config_file: Optional[str], store_root: str, base_port: int,
                 log_level: str = "WARNING", metrics_port: Optional[int] = None,
                 extra_args: Optional[list[str]] = None, replicas: int = 1, first_name: Optional[str] = None,
                 grpc_port: int = 0, grpc_optional: bool = True) -> None:
        """Brokers ``names`` (groups 2..); with ``replicas`` > 1 also the slaves of every group, the serve
        process's own (``first_name``) included. Child ``index`` (1..) serves gRPC on ``grpc_port + index`` (0:
        none), as its metrics on ``metrics_port + index``."""
        self.children = []
        step = port_step(replicas)

        def child(label: str, name: str, port: int, store: str, conf: Optional[str], index: int) -> _Child:
            args = [*rmqd_command(log_level), "broker",
                    "--broker-name", name, "--broker-port", str(port), "--store-dir", store,
                    *grpc_args(grpc_port, index, grpc_optional)]
            if conf:
                args += ["-c", conf]
            if metrics_port is not None:        # each broker serves its own /metrics: port + index (0 = any)
                args += ["--metrics-port", str(metrics_port + index if metrics_port else 0)]
            return _Child(label, args + (extra_args or []))

        for i, name in enumerate(names, start=1):
            port = base_port + step * i if base_port else 0
            self.children.append(child(name, name, port, store_dir_of(store_root, name), config_file, i))
        groups = ([first_name] if first_name else []) + list(names)
        index = len(names)
        for i, name in enumerate(groups, start=0 if first_name else 1):
            for broker_id in range(1, replicas):
                index += 1
                port = base_port + step * i + SLAVE_PORT_STEP * broker_id if base_port else 0
                store = store_dir_of(store_root, f"{name}-s{broker_id}")
                self.children.append(child(f"{name} slave {broker_id}", name, port, store,
                                           slave_config(store_root, name, broker_id, config_file), index))
        self._stopping = False
        self._namesrv = ""

    async def start(self, services: "Services") -> None:
        broker = services.broker
        self._namesrv = (broker.config.namesrvAddr or "") if broker is not None else ""
        try:
            await asyncio.gather(*(self._spawn(c) for c in self.children))
        except BaseException:
            await self.close()
            raise

    async def _spawn(self, child: _Child) -> None:
        child.proc = await asyncio.create_subprocess_exec(
            *child.args, *(["-n", self._namesrv] if child.takes_namesrv else []), stdout=asyncio.subprocess.PIPE,
            stderr=None,
            env=dict(os.environ, PYTHONUNBUFFERED="1"))
        try:
            child.address = await asyncio.wait_for(self._read_address(child), START_TIMEOUT_S)
        except asyncio.TimeoutError:
            child.proc.kill()
            raise RuntimeError(f"broker process {child.name} did not start within {START_TIMEOUT_S:.0f}s")
        child.watcher = asyncio.get_running_loop().create_task(self._watch(child), name=f"watch-{child.name}")

    async def _read_address(self, child: _Child) -> str:
        """The child's address (its first "listening on" line); its gRPC endpoint from its "rmqd ready:" line,
        which ends the start-up block."""
        assert child.proc is not None and child.proc.stdout is not None
        address = ""
        while True:
            line = await child.proc.stdout.readline()
            if not line:
                raise RuntimeError(f"broker process {child.name} exited during start-up "
                                   f"(code {await child.proc.wait()})")
            text = line.decode(errors="replace")
            m = LISTENING.search(text)
            if m and not address:
                address = m.group(1)
            if text.startswith("rmqd ready:"):
                g = READY_GRPC.search(text)
                child.grpc = g.group(1) if g else ""
                return address or "-"

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
                + (f", gRPC {c.grpc}" if c.grpc else "") for c in self.children]

    def ready_parts(self) -> list[str]:
        return [f"broker {c.name} {c.address}" + (f" (grpc {c.grpc})" if c.grpc else "") for c in self.children]
