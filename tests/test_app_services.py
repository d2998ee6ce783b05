"""app.Services: an ordered list of components, started in order (early ones first), closed in reverse."""
import pytest

from rmqd.runtime.services import BrokerComponent, NameServerComponent, Services, as_component
from rmqd.broker.controller import BrokerController
from rmqd.config import BrokerConfig, NamesrvConfig
from rmqd.namesrv.server import NameServer


class Part:
    def __init__(self, name, log, early=False, fail=False):
        self.name, self.log, self.starts_early, self.fail = name, log, early, fail

    async def start(self, services):
        if self.fail:
            raise OSError(f"{self.name} cannot bind")
        self.log.append(("start", self.name))

    async def close(self):
        self.log.append(("close", self.name))

    def describe(self):
        return [f"{self.name} up"]


async def test_components_start_in_order_early_first_and_close_in_reverse():
    log = []
    services = Services(Part("namesrv", log), Part("controller", log), Part("console", log, early=True))
    services.add(Part("metrics", log))
    await services.start()
    assert services.ready() and services.describe() == ["namesrv up", "controller up", "console up", "metrics up"]
    await services.close()
    assert log == [("start", "console"), ("start", "namesrv"), ("start", "controller"), ("start", "metrics"),
                   ("close", "metrics"), ("close", "console"), ("close", "controller"), ("close", "namesrv")]
    assert not services.ready()


async def test_a_failed_start_closes_what_started_and_raises():
    log = []
    services = Services(Part("namesrv", log), Part("broker", log, fail=True), Part("grpc", log))
    with pytest.raises(OSError, match="broker cannot bind"):
        await services.start()
    assert log == [("start", "namesrv"), ("close", "namesrv")] and not services.ready()


async def test_name_server_and_broker_are_wrapped_and_found(tmp_path):
    ns = NameServer(NamesrvConfig(listenPort=0, kvConfigPath=str(tmp_path / "kv.json")))
    broker = BrokerController(BrokerConfig(listenPort=0, storePathRootDir=str(tmp_path / "store")))
    services = Services(ns, broker)
    assert [type(c) for c in services.components] == [NameServerComponent, BrokerComponent]
    assert services.namesrv is ns and services.broker is broker
    assert Services().broker is None and as_component(services.components[0]) is services.components[0]
    await services.start()
    try:
        assert broker.config.namesrvAddr == ns.address          # the broker registers with the process's own
        assert services.ready_line().startswith(f"rmqd ready: name server {ns.address}, broker {broker.address}")
    finally:
        await services.close()


async def test_a_broker_start_that_fails_after_binding_releases_its_port_and_store(tmp_path):
    """A start failing after the remoting server bound (here: the HA port) closes the server, the services and the
    store, so a restart in the same process gets the same port and the store lock."""
    import socket

    store = str(tmp_path / "store")
    broker = BrokerController(BrokerConfig(listenPort=0, storePathRootDir=store))
    bound = []

    def refuse(listen_port, configured_port):
        bound.append(listen_port)
        raise OSError("HA port refused by the test")
    broker.replication.bind = refuse
    with pytest.raises(OSError, match="refused by the test"):
        await broker.start()
    (port,) = bound
    with socket.socket() as s:                       # the broker's port is free again
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", port))
    again = BrokerController(BrokerConfig(listenPort=port, storePathRootDir=store))
    await again.start()                              # the store lock was released too
    try:
        assert again.server.port == port
    finally:
        await again.close()
