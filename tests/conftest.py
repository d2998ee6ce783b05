"""Fixtures of every folder of tests/: async tests on uvloop, and an event loop on a thread for in-process
servers (``loop_thread``; the kit is tests/kit/)."""
from __future__ import annotations

from typing import Iterator

import pytest
import uvloop

from tests.kit.loop import LoopThread


def pytest_asyncio_loop_factories(config, item):
    """Run every async test on uvloop, as the server does."""
    return {"uvloop": uvloop.new_event_loop}


@pytest.fixture
def loop_thread() -> Iterator[LoopThread]:
    """A uvloop on a daemon thread (tests.kit.loop.LoopThread), stopped after the test."""
    lt = LoopThread()
    yield lt
    lt.stop()
