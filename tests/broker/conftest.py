"""Fixtures: a BrokerController (and optionally a NameServer) on its own uvloop thread.

Tests talk to it with the blocking client, byte-exact, like a real client would.
"""
from __future__ import annotations

import asyncio
import threading
from typing import Any, Callable

import pytest
import uvloop

from rmqd.broker_controller import BrokerController
from rmqd.config import BrokerConfig
from rmqd.remoting.client import BlockingClient
from rmqd.remoting.command import new_request


class LoopThread:
    """An event loop running in a daemon thread; ``call(coro_fn)`` runs a coroutine on it."""

    def __init__(self) -> None:
        self.loop = uvloop.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="test-loop", daemon=True)
        self.thread.start()

    def call(self, coro: Any, timeout: float = 20.0) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)
        self.loop.close()


def make_config(store_dir: str, **overrides: Any) -> BrokerConfig:
    values = dict(listenPort=0, storePathRootDir=store_dir, mapedFileSizeCommitLog=1024 * 1024,
                  mapedFileSizeConsumeQueue=300 * 20, brokerIP1="127.0.0.1", namesrvAddr=None)
    values.update(overrides)
    return BrokerConfig(**values)


class BrokerHarness:
    def __init__(self, loop_thread: LoopThread, store_dir: str) -> None:
        self.lt = loop_thread
        self.store_dir = store_dir
        self.broker: BrokerController | None = None
        self.clients: list[BlockingClient] = []

    def start(self, setup: Callable[[BrokerController], None] | None = None, **overrides: Any) -> BrokerController:
        cfg = make_config(self.store_dir, **overrides)
        broker = BrokerController(cfg)
        if setup is not None:
            setup(broker)
        self.lt.call(broker.start())
        self.broker = broker
        return broker

    def stop(self) -> None:
        for c in self.clients:
            c.close()
        self.clients.clear()
        if self.broker is not None:
            self.lt.call(self.broker.close())
            self.broker = None

    def client(self) -> BlockingClient:
        c = BlockingClient(self.broker.address, timeout=5.0)
        self.clients.append(c)
        return c


@pytest.fixture
def loop_thread():
    lt = LoopThread()
    yield lt
    lt.stop()


@pytest.fixture
def harness(loop_thread, tmp_path):
    h = BrokerHarness(loop_thread, str(tmp_path / "store"))
    yield h
    h.stop()


@pytest.fixture
def broker(harness):
    return harness.start()


@pytest.fixture
def client(harness, broker):
    return harness.client()


def send_v2(client: BlockingClient, topic: str, body: bytes = b"hello", queue_id: int = 0,
            properties: str = "", code: int = 310, **extra: str):
    ext = {"a": "PG", "b": topic, "c": "TBW102", "d": "4", "e": str(queue_id), "f": "0",
           "g": "1700000000000", "h": "0", "i": properties, "j": "0", "k": "false", "m": "false"}
    ext.update(extra)
    return client.invoke(new_request(code, ext, body))
