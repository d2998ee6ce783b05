"""`rmqd serve --replicas N --failover`: a local replica group that fails over by itself (RocketMQ 5's controller
mode), every server its own process.

The serve process runs the name server (9876 by default) and nothing else; :class:`FailoverProcesses` starts, as
child processes, three controllers (``rmqd controller -c``: peers on the name server's port + 2, - 8 and - 18, so
9878/9868/9858 as the 5.x samples, their Raft at +1000; with ``--namesrv-port 0`` any free ports) and, for every broker group, ``N`` brokers with
``enableControllerMode=true`` and ``controllerAddr`` set to the three controllers (ports ``listenPort + 4*j``,
stores ``<store-dir>/<brokerName>-r<j>``, configs ``<store-dir>/<brokerName>-r<j>.conf``: the given broker.conf plus
those keys). The controllers pick each group's master; a child that dies (``kill -9``) is started again after a
second and rejoins its group as a slave. See docs/controller.md.
"""
from __future__ import annotations

import os
from typing import TYPE_CHECKING, Optional

from rmqd.runtime.broker_processes import SLAVE_PORT_STEP, ExtraBrokers, _Child, grpc_args, port_step, rmqd_command, store_dir_of
from rmqd.common.localports import free_ports

if TYPE_CHECKING:
    from rmqd.runtime.services import Services

CONTROLLER_PORT_OFFSETS = (2, -8, -18)      # from 9876: 9878/9868/9858, the distribution/conf/controller samples
RAFT_PORT_OFFSET = 1000


def _conf(path: str, base: Optional[str], extra: dict[str, object]) -> str:
    text = ""
    if base:
        with open(base, encoding="utf-8") as f:
            text = f.read()
        if text and not text.endswith("\n"):
            text += "\n"
    with open(path, "w", encoding="utf-8") as f:
        f.write(text + "".join(f"{k}={v}\n" for k, v in extra.items()))
    return path


class FailoverProcesses(ExtraBrokers):
    """Three controller processes and ``replicas`` controller-mode broker processes per group (an endpoint of
    :class:`rmqd.runtime.services.Services`; the name server is the serve process's)."""

    def __init__(self, names: list[str], config_file: Optional[str], store_root: str, base_port: int,
                 log_level: str = "WARNING", replicas: int = 3, namesrv_port: int = 9876,
                 extra_args: Optional[list[str]] = None, grpc_port: int = 0, grpc_optional: bool = True) -> None:
        self.children = []
        self._stopping = False
        self._namesrv = ""
        os.makedirs(store_root, exist_ok=True)
        if not namesrv_port:
            ports = free_ports(6)
            ctl, raft = ports[:3], ports[3:]
        else:
            ctl = [namesrv_port + d for d in CONTROLLER_PORT_OFFSETS]
            raft = [p + RAFT_PORT_OFFSET for p in ctl]
        peers = ";".join(f"n{i}-127.0.0.1:{p}" for i, p in enumerate(ctl))
        raft_peers = ";".join(f"n{i}-127.0.0.1:{p}" for i, p in enumerate(raft))
        self.controller_addr = ";".join(f"127.0.0.1:{p}" for p in ctl)
        py = rmqd_command(log_level)
        for i in range(3):
            home = os.path.join(store_root, f"controller-n{i}")
            conf = _conf(os.path.join(store_root, f"controller-n{i}.conf"), None, {
                "controllerDLegerGroup": "group1", "controllerDLegerPeers": peers, "controllerDLegerSelfId": f"n{i}",
                "controllerRaftPeers": raft_peers, "controllerStorePath": home,
                "configStorePath": os.path.join(home, "controller.properties")})
            self.children.append(_Child(f"controller n{i}", py + ["controller", "-c", conf], takes_namesrv=False))
        step = port_step(replicas)
        index = 0
        for g, name in enumerate(names):
            for j in range(replicas):
                index += 1
                port = base_port + step * g + SLAVE_PORT_STEP * j if base_port else 0
                conf = _conf(os.path.join(store_root, f"{name}-r{j}.conf"), config_file,
                             {"enableControllerMode": "true", "controllerAddr": self.controller_addr})
                args = py + ["broker", "--broker-name", name, "--broker-port", str(port), "--store-dir",
                             store_dir_of(store_root, f"{name}-r{j}"), "--no-metrics", "-c", conf,
                             *grpc_args(grpc_port, index - 1, grpc_optional)] + (extra_args or [])
                self.children.append(_Child(f"{name} replica {j}", args))

    async def start(self, services: "Services") -> None:
        namesrv = services.namesrv
        self._namesrv = namesrv.address if namesrv is not None else ""
        try:
            controllers = [c for c in self.children if not c.takes_namesrv]
            for c in controllers:               # the brokers need a controller leader to start
                await self._spawn(c)
            for c in self.children:
                if c not in controllers:
                    await self._spawn(c)
        except BaseException:
            await self.close()
            raise

    def describe(self) -> list[str]:
        return [f"rmqd {c.name} listening on {c.address} (process {c.proc.pid if c.proc else '-'})"
                + (f", gRPC {c.grpc}" if c.grpc else "") for c in self.children] + \
            [f"rmqd controllers: controllerAddr={self.controller_addr}"]

    def ready_parts(self) -> list[str]:
        return [f"{c.name} {c.address}" + (f" (grpc {c.grpc})" if c.grpc else "") for c in self.children]
