"""The embedded server and the pytest plugin applications use in their own test suites."""
import socket

import pytest

from rmqd.remoting.client import BlockingClient
from rmqd.remoting.command import RemotingCommand
from rmqd.testing import AsyncEmbeddedServer, EmbeddedServer


def answers(addr):
    host, port = addr.split(":")
    with socket.create_connection((host, int(port)), timeout=2):
        return True


def test_embedded_server_context_manager_and_restart(tmp_path):
    with EmbeddedServer(store_dir=str(tmp_path)) as server:
        ns, broker = server.namesrv_addr, server.broker_addr
        assert answers(ns) and answers(broker)
        server.restart()
        assert (server.namesrv_addr, server.broker_addr) == (ns, broker)
        with BlockingClient(broker) as c:
            resp = c.invoke(RemotingCommand(99999))
            assert resp.code == 3  # REQUEST_CODE_NOT_SUPPORTED: the broker is answering
    with pytest.raises(OSError):
        answers(broker)


async def test_async_embedded_server():
    async with AsyncEmbeddedServer() as server:
        assert server.namesrv_addr.startswith("127.0.0.1:") and server.broker.server.port == server.broker_port


def test_pytest_plugin_fixture(rmqd_namesrv_addr):
    assert answers(rmqd_namesrv_addr)


@pytest.mark.rmqd_broker(brokerName="broker-test", flushDiskType="SYNC_FLUSH")
def test_pytest_plugin_marker_sets_broker_properties(rmqd_server):
    assert rmqd_server.broker.config.brokerName == "broker-test"
    assert rmqd_server.broker.config.flushDiskType == "SYNC_FLUSH"
