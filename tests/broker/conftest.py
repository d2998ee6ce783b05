"""Fixtures: a BrokerController (and optionally a NameServer) on the test's loop thread (``loop_thread``,
tests/conftest.py).

Tests talk to it with the blocking client, byte-exact, like a real client would.
"""
from __future__ import annotations

from typing import Any, Callable

import pytest

from rmqd.broker.controller import BrokerController
from rmqd.config import BrokerConfig
from rmqd.remoting.client import BlockingClient
from tests.kit.loop import LoopThread

#: how long a broker's start or close may take on the loop thread
CALL_TIMEOUT_S = 20.0


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
        self.lt.call(broker.start(), CALL_TIMEOUT_S)
        self.broker = broker
        return broker

    def stop(self) -> None:
        for c in self.clients:
            c.close()
        self.clients.clear()
        if self.broker is not None:
            self.lt.call(self.broker.close(), CALL_TIMEOUT_S)
            self.broker = None

    def client(self) -> BlockingClient:
        c = BlockingClient(self.broker.address, timeout=5.0)
        self.clients.append(c)
        return c


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
