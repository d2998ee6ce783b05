"""The embedded server and the pytest plugin applications use in their own test suites."""
import socket

import pytest

from rmqd.common.localports import ephemeral_range, free_port_block
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


def test_ports_are_outside_the_ephemeral_range_and_a_failed_restart_can_be_retried(tmp_path):
    """A client's outgoing connection can take an ephemeral port while the server is down (a restart then
    failed with EADDRINUSE in CI); the embedded server's ports are outside that range. A restart that fails
    all the same leaves a server that can be stopped and started again."""
    low, high = ephemeral_range()
    with EmbeddedServer(store_dir=str(tmp_path)) as server:
        ports = [server.services.namesrv.server.port, *server.broker.server.bound_ports]
        assert len(ports) == 3 and all(not low <= p <= high for p in ports), (ports, low, high)
        server.stop()
        with socket.socket() as squatter:
            squatter.bind(("127.0.0.1", int(server.broker_addr.split(":")[1])))
            squatter.listen(1)
            with pytest.raises(OSError):
                server.start()
            server.stop()                               # nothing to stop, no "Event loop is closed"
        server.start()
        assert answers(server.broker_addr)


def test_free_port_block_is_bindable_and_outside_the_ephemeral_range():
    low, high = ephemeral_range()
    base = free_port_block(4)
    assert not low <= base <= high and not low <= base + 3 <= high
    socks = [socket.socket() for _ in range(4)]
    try:
        for i, s in enumerate(socks):
            s.bind(("127.0.0.1", base + i))
    finally:
        for s in socks:
            s.close()


async def test_async_embedded_server():
    async with AsyncEmbeddedServer() as server:
        assert server.namesrv_addr.startswith("127.0.0.1:") and server.broker.server.port == server.broker_port


def test_pytest_plugin_fixture(rmqd_namesrv_addr):
    assert answers(rmqd_namesrv_addr)


@pytest.mark.rmqd_broker(brokerName="broker-test", flushDiskType="SYNC_FLUSH")
def test_pytest_plugin_marker_sets_broker_properties(rmqd_server):
    assert rmqd_server.broker.config.brokerName == "broker-test"
    assert rmqd_server.broker.config.flushDiskType == "SYNC_FLUSH"
