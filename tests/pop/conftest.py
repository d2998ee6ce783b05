"""The POP tests' client: a BlockingClient of the module's ``server`` fixture (an EmbeddedServer each module
configures), closed after each test."""
from __future__ import annotations

import pytest

from rmqd.remoting.client import BlockingClient


@pytest.fixture()
def client(server):
    c = BlockingClient(server.broker_addr)
    yield c
    c.close()
