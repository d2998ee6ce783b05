"""NameServer: the route registry process (RocketMQ's NamesrvController)."""
from __future__ import annotations

import asyncio
import logging

from rmqd.config import NamesrvConfig
from rmqd.namesrv.kvconfig import KVConfigManager
from rmqd.namesrv.processors import NamesrvProcessors
from rmqd.namesrv.route_info import RouteInfoManager
from rmqd.remoting.dispatch import Dispatcher
from rmqd.remoting.server import RemotingServer
from rmqd.tls.contexts import remoting_server_tls

log = logging.getLogger(__name__)


class NameServer:
    """Owns the name server's dispatcher, processors and listening socket."""

    def __init__(self, config: NamesrvConfig | None = None, host: str | None = None) -> None:
        self.config = config or NamesrvConfig()
        self.dispatcher = Dispatcher("namesrv")
        host = host or str(self.config.bindAddress or "127.0.0.1")
        self.server = RemotingServer(self.dispatcher, host, self.config.listenPort, name="namesrv",
                                     max_frame_length=self.config.serverMaxFrameLength,
                                     max_idle_s=float(self.config.serverChannelMaxIdleTimeSeconds),
                                     tls=remoting_server_tls(self.config.extra))
        self._register_processors()

    def _register_processors(self) -> None:
        """Route, broker-registry and KV processors; brokers are dropped when their channel closes."""
        self.route_info = RouteInfoManager(int(self.config.brokerExpiredMillis))
        self.kv_config = KVConfigManager(self.config.kvConfigPath)
        self.processors = NamesrvProcessors(self.config, self.route_info, self.kv_config)
        self.processors.register(self.dispatcher)
        self.server.add_close_listener(lambda conn: self.route_info.on_channel_destroy(conn.remote_address, conn))
        self._scanner: asyncio.TimerHandle | None = None

    def _scan_not_active_broker(self) -> None:
        """Drop brokers whose last REGISTER_BROKER is older than brokerExpiredMillis; reschedule."""
        try:
            for addr, channel in self.route_info.scan_not_active_broker():
                if channel is not None:
                    log.info("closing expired broker channel %s (%s)", addr, channel)
                    channel.close()
        except Exception:
            log.exception("scanNotActiveBroker failed")
        loop = asyncio.get_running_loop()
        self._scanner = loop.call_later(self.config.scanNotActiveBrokerInterval / 1000.0, self._scan_not_active_broker)

    @property
    def address(self) -> str:
        return self.server.address

    async def start(self) -> None:
        self.kv_config.load()
        await self.server.start()
        self.config.listenPort = self.server.port
        loop = asyncio.get_running_loop()
        self._scanner = loop.call_later(self.config.scanNotActiveBrokerInterval / 1000.0, self._scan_not_active_broker)

    async def close(self) -> None:
        if self._scanner is not None:
            self._scanner.cancel()
            self._scanner = None
        await self.server.close()
        await asyncio.get_running_loop().run_in_executor(None, self.kv_config.close)
