"""Fixtures of the fault suite: a ``rmqd serve`` subprocess on free ports with a tmp store."""
from __future__ import annotations

import pytest

from tests.faults.faultkit import ServerProcess


@pytest.fixture
def make_server(tmp_path):
    servers: list[ServerProcess] = []

    def make(conf: dict | None = None, name: str = "srv") -> ServerProcess:
        root = tmp_path / name
        root.mkdir(exist_ok=True)
        s = ServerProcess(str(root / "store"), conf, str(root / "server.log"))
        servers.append(s)
        return s

    yield make
    for s in servers:
        s.kill()
