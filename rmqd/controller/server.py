"""A controller node as a process component: standalone (``rmqd controller -c controller.conf``) or inside the
name server (``enableControllerInNamesrv=true``), like Java's ControllerStartup / NamesrvStartup.

``ControllerServer`` owns its dispatcher and listening socket (the self peer's address from
``controllerDLegerPeers``, where brokers' ``controllerAddr`` and ``mqadmin -a`` point), the Raft member,
the broker heartbeat table and the role-change notifier.  ``start()``/``close()`` make it a self-contained
component; ``start`` also takes the process's ``Services`` so it slots into ``app.Services.endpoints``.
"""
from __future__ import annotations

import logging
from typing import Optional

from rmqd.config import NamesrvConfig
from rmqd.controller.config import ControllerConfig
from rmqd.controller.controller import Controller
from rmqd.controller.heartbeat import BrokerHeartbeatManager
from rmqd.controller.notify import RoleChangeNotifier
from rmqd.controller.processors import ControllerProcessors
from rmqd.controller.request_meter import OperationMeter
from rmqd.remoting.client import split_address
from rmqd.remoting.dispatch import Dispatcher
from rmqd.remoting.server import RemotingServer
from rmqd.tls.contexts import remoting_client_tls, remoting_server_tls

log = logging.getLogger(__name__)

SERVER_CHANNEL_MAX_IDLE_S = 120.0      # NettyServerConfig.serverChannelMaxIdleTimeSeconds


class ControllerServer:
    """One controller node (see the module docstring)."""

    def __init__(self, config: ControllerConfig) -> None:
        self.config = config
        self.peer = config.self_peer()
        self.address: str = self.peer.addr
        host, port = split_address(self.peer.addr)
        self.dispatcher = Dispatcher("controller")
        self.server = RemotingServer(self.dispatcher, host, port, name="controller", max_idle_s=SERVER_CHANNEL_MAX_IDLE_S,
                                     tls=remoting_server_tls(config.extra))
        self.heartbeat = BrokerHeartbeatManager()
        self.notifier = RoleChangeNotifier(tls=remoting_client_tls(config.extra))
        self.request_meter = OperationMeter()       # request_total / request_latency
        self.append_meter = OperationMeter()        # dledger_op_total / dledger_op_latency
        self.controller = Controller(config, self.heartbeat, self.notifier, self.append_meter)
        self.processors = ControllerProcessors(config, self.controller, self.heartbeat, self.request_meter)
        self.processors.register(self.dispatcher)
        self.server.add_close_listener(self.heartbeat.on_channel_close)
        self._started = False

    @property
    def started(self) -> bool:
        """True between a successful :meth:`start` and :meth:`close` (the metrics' ``role``)."""
        return self._started

    async def start(self, services: object = None) -> None:
        """Bind the controller port and the Raft port and join the group (``services``, the process's
        ``app.Services``, is not needed)."""
        await self.server.start()
        try:
            await self.controller.start()
        except BaseException:
            await self.server.close()
            raise
        self._started = True

    async def close(self) -> None:
        if not self._started:
            return
        self._started = False
        # Leave the Raft group first: the broker connections the server closes next must not look like dead
        # brokers to a controller that still leads (it would elect around them).
        await self.controller.stop()
        await self.server.close()
        await self.notifier.close()

    def describe(self) -> list[str]:
        c = self.config
        return [f"rmqd controller {self.peer.id} (group {c.group()}) listening on {self.peer.addr}, "
                f"raft {self.peer.raft_addr}, store {c.store_path()}, peers "
                + ";".join(f"{p.id}-{p.addr}" for p in c.peers())]

    def ready_parts(self) -> list[str]:
        return [f"controller {self.peer.id} {self.peer.addr}"]


def embedded_controller(namesrv_config: NamesrvConfig, config_path: Optional[str]) -> Optional[ControllerServer]:
    """The controller a name server runs in its own process when its config says ``enableControllerInNamesrv``
    (the controller keys come from the same file, as in Java's NamesrvStartup); None otherwise."""
    if not namesrv_config.enableControllerInNamesrv:
        return None
    config = ControllerConfig()
    if config_path:
        config.load_file(config_path)
    return ControllerServer(config)
