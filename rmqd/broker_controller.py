"""BrokerController: wires the store, the processors and name-server registration together."""
from __future__ import annotations

import logging

from rmqd.config import BrokerConfig
from rmqd.remoting.dispatch import Dispatcher, ProcessorPool
from rmqd.remoting.server import RemotingServer

log = logging.getLogger(__name__)


class BrokerController:
    """One broker: listens on ``listenPort`` and the VIP port ``listenPort - 2``."""

    def __init__(self, config: BrokerConfig | None = None, host: str = "127.0.0.1") -> None:
        self.config = config or BrokerConfig()
        c = self.config
        self.dispatcher = Dispatcher("broker")
        self.pools = {
            "send": ProcessorPool("send", c.sendMessageThreadPoolNums, c.sendThreadPoolQueueCapacity,
                                  c.waitTimeMillsInSendQueue),
            "pull": ProcessorPool("pull", c.pullMessageThreadPoolNums, c.pullThreadPoolQueueCapacity,
                                  c.waitTimeMillsInPullQueue),
            "query": ProcessorPool("query", c.queryMessageThreadPoolNums, c.queryThreadPoolQueueCapacity),
            "admin": ProcessorPool("admin", c.adminBrokerThreadPoolNums, 10000),
            "client": ProcessorPool("client", c.clientManageThreadPoolNums, 50000),
            "consumer": ProcessorPool("consumer", c.consumerManageThreadPoolNums, 100000),
            "transaction": ProcessorPool("transaction", c.endTransactionThreadPoolNums, 100000,
                                         c.waitTimeMillsInTransactionQueue),
        }
        for pool in self.pools.values():
            self.dispatcher.add_pool(pool)
        extra = [c.vip_port] if c.listenPort else [0]
        self.server = RemotingServer(self.dispatcher, host, c.listenPort, extra_ports=extra, name="broker",
                                     max_frame_length=c.serverMaxFrameLength)
        self._register_processors()

    def _register_processors(self) -> None:
        """Hook for the broker request processors (send, pull, client and consumer management...)."""

    @property
    def address(self) -> str:
        return f"{self.config.brokerIP1}:{self.server.port}"

    @property
    def vip_address(self) -> str:
        ports = self.server.bound_ports
        return f"{self.config.brokerIP1}:{ports[1] if len(ports) > 1 else ports[0]}"

    async def start(self) -> None:
        await self.server.start()
        self.config.listenPort = self.server.port

    async def close(self) -> None:
        await self.server.close()
