"""NameServer: the route registry process (RocketMQ's NamesrvController)."""
from __future__ import annotations

import logging

from rmqd.config import NamesrvConfig
from rmqd.remoting.dispatch import Dispatcher
from rmqd.remoting.server import RemotingServer

log = logging.getLogger(__name__)


class NameServer:
    """Owns the name server's dispatcher, processors and listening socket."""

    def __init__(self, config: NamesrvConfig | None = None, host: str = "127.0.0.1") -> None:
        self.config = config or NamesrvConfig()
        self.dispatcher = Dispatcher("namesrv")
        self.server = RemotingServer(self.dispatcher, host, self.config.listenPort, name="namesrv",
                                     max_frame_length=self.config.serverMaxFrameLength)
        self._register_processors()

    def _register_processors(self) -> None:
        """Hook for the name-server request processors (route, broker registry, KV)."""

    @property
    def address(self) -> str:
        return self.server.address

    async def start(self) -> None:
        await self.server.start()
        self.config.listenPort = self.server.port

    async def close(self) -> None:
        await self.server.close()
