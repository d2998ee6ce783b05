"""pytest plugin (auto-loaded when rmqd is installed): fixtures for a fresh rmqd per test.

- ``rmqd_server``: an :class:`~rmqd.testing.EmbeddedServer` on free loopback ports.
- ``rmqd_namesrv_addr``: just its name-server address, e.g. ``"127.0.0.1:40123"``.

Broker properties can be set per test with ``@pytest.mark.rmqd_broker(flushDiskType="SYNC_FLUSH")``.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Iterator

import pytest

if TYPE_CHECKING:
    from rmqd.testing.embedded import EmbeddedServer


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "rmqd_broker(**properties): broker properties for the rmqd_server fixture")


@pytest.fixture
def rmqd_server(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedServer]:
    from rmqd.testing.embedded import EmbeddedServer

    marker = request.node.get_closest_marker("rmqd_broker")
    properties = dict(marker.kwargs) if marker else {}
    store_dir = str(tmp_path_factory.mktemp("rmqd-store"))
    server = EmbeddedServer(store_dir=store_dir, broker_properties=properties)
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def rmqd_namesrv_addr(rmqd_server: EmbeddedServer) -> str:
    return rmqd_server.namesrv_addr
