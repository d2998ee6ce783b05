"""Embedded rmqd: name server + broker in this process, on free loopback ports.

    with EmbeddedServer() as server:            # runs its own uvloop thread
        producer.set_namesrv_addr(server.namesrv_addr)

    async with AsyncEmbeddedServer() as server:  # runs on the caller's event loop
        ...

The store lives in a temporary directory (removed on exit) unless ``store_dir`` is given; a
server can be stopped and started again on the same ports and store to test restarts. Ports not given are
picked below the kernel's ephemeral range (rmqd.common.localports), so no client connection can take them while the
server is down.
"""
from __future__ import annotations

import asyncio
import concurrent.futures
import shutil
import tempfile
import threading
from typing import Callable, Coroutine, Mapping, TypeVar

from rmqd.runtime.services import Endpoint, Services
from rmqd.broker.controller import BrokerController
from rmqd.config import BrokerConfig, NamesrvConfig
from rmqd.common.localports import free_port, free_port_block
from rmqd.namesrv.server import NameServer
from rmqd.tls.settings import tls_keys_of

_T = TypeVar("_T")
STOP_TIMEOUT_S = 60.0      # the services are shut down one after another, each thread joined for up to 10 s


class _EmbeddedParts:
    """What both servers hold: the ports, the store directory and, once started, the services."""

    def __init__(self, store_dir: str | None = None, broker_properties: Mapping[str, object] | None = None,
                 namesrv_port: int = 0, broker_port: int = 0,
                 endpoints: Callable[[], list[Endpoint]] | None = None) -> None:
        self._own_store = store_dir is None
        self.endpoints_factory = endpoints     # () -> [Endpoint]: servers beside the broker (metrics, console)
        self.store_dir = store_dir or tempfile.mkdtemp(prefix="rmqd-store-")
        self.broker_properties = dict(broker_properties or {})
        self.namesrv_port = namesrv_port or free_port()
        # The broker's block: VIP port (listenPort - 2), listenPort, HA port (listenPort + 1).
        self.broker_port = broker_port or free_port_block(4) + 2
        self.services: Services | None = None

    def _build(self) -> Services:
        ns_config = NamesrvConfig(listenPort=self.namesrv_port,
                                  kvConfigPath=f"{self.store_dir}/namesrv/kvConfig.json")
        broker_config = BrokerConfig(listenPort=self.broker_port, storePathRootDir=self.store_dir)
        broker_config.update(self.broker_properties, source="embedded")
        # one process: the broker's TLS keys are the name server's too (as rmqd serve)
        ns_config.update(tls_keys_of(broker_config.extra), source="embedded")
        endpoints = self.endpoints_factory() if self.endpoints_factory is not None else []
        return Services(NameServer(ns_config), BrokerController(broker_config), *endpoints)

    async def _start_services(self) -> None:
        services = self.services = self._build()
        await services.start()
        namesrv, broker = services.namesrv, services.broker
        assert namesrv is not None and broker is not None        # _build made both
        # Restarts reuse the ports that were picked the first time.
        self.namesrv_port = namesrv.server.port
        self.broker_port = broker.server.port

    async def _stop_services(self) -> None:
        if self.services is not None:
            await self.services.close()
            self.services = None

    def cleanup(self) -> None:
        """Remove the store directory if it is a temporary one (after stopping)."""
        if self._own_store:
            shutil.rmtree(self.store_dir, ignore_errors=True)

    @property
    def namesrv_addr(self) -> str:
        return f"127.0.0.1:{self.namesrv_port}"

    @property
    def broker_addr(self) -> str:
        return f"127.0.0.1:{self.broker_port}"

    @property
    def broker(self) -> BrokerController:
        assert self.services is not None and self.services.broker is not None
        return self.services.broker


class AsyncEmbeddedServer(_EmbeddedParts):
    """Name server + broker on the running loop (``async with``)."""

    async def start(self) -> "AsyncEmbeddedServer":
        await self._start_services()
        return self

    async def stop(self) -> None:
        await self._stop_services()

    async def __aenter__(self) -> "AsyncEmbeddedServer":
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()
        self.cleanup()


class EmbeddedServer(_EmbeddedParts):
    """Name server + broker on a background uvloop thread (``with``), for synchronous tests."""

    def __init__(self, store_dir: str | None = None, broker_properties: Mapping[str, object] | None = None,
                 namesrv_port: int = 0, broker_port: int = 0, start_timeout: float = 10.0,
                 endpoints: Callable[[], list[Endpoint]] | None = None) -> None:
        super().__init__(store_dir, broker_properties, namesrv_port, broker_port, endpoints)
        self._start_timeout = start_timeout
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> "EmbeddedServer":
        import uvloop

        ready = threading.Event()
        failure: list[BaseException] = []
        loop = self._loop = uvloop.new_event_loop()

        def run() -> None:
            asyncio.set_event_loop(loop)

            async def boot() -> None:
                try:
                    await self._start_services()
                except BaseException as exc:  # reported to the starting thread
                    failure.append(exc)
                finally:
                    ready.set()

            loop.run_until_complete(boot())
            if not failure:
                loop.run_forever()
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.close()

        self._thread = threading.Thread(target=run, name="rmqd-embedded", daemon=True)
        self._thread.start()
        if not ready.wait(self._start_timeout):
            raise TimeoutError("embedded rmqd did not start in time")
        if failure:
            self._thread.join(5)
            self._loop = self._thread = None        # the loop is closed: nothing left to stop
            raise failure[0]
        return self

    def stop(self) -> None:
        """Shut the servers down cleanly (store flushed); the store directory is kept."""
        if self._loop is None or self._thread is None:
            return
        fut = asyncio.run_coroutine_threadsafe(self._stop_services(), self._loop)
        try:
            fut.result(STOP_TIMEOUT_S)
        except concurrent.futures.TimeoutError:
            raise TimeoutError(f"embedded rmqd did not stop within {STOP_TIMEOUT_S} s (the log names each service "
                               "thread that did not stop, with where it was)") from None
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop = None
        self._thread = None

    def restart(self) -> "EmbeddedServer":
        """Stop and start again on the same ports and store."""
        self.stop()
        return self.start()

    def call(self, coro: Coroutine[object, object, _T], timeout: float = 10.0) -> _T:
        """Run a coroutine on the server's loop and return its result."""
        assert self._loop is not None
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout)

    def __enter__(self) -> "EmbeddedServer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
        self.cleanup()
