"""Registrations with the name server keep going when the topic table's DataVersion goes back (a slave copies its
master's table and version, and a Java master's counter is its own): they are ordered by the broker's own count."""
from __future__ import annotations

from rmqd.runtime.services import Services
from rmqd.broker.controller import BrokerController
from rmqd.config import BrokerConfig, NamesrvConfig
from rmqd.common.data_version import DataVersion
from rmqd.namesrv.server import NameServer
from rmqd.remoting.client import BlockingClient
from rmqd.remoting.codes import ResponseCode
from rmqd.remoting.command import new_request
from rmqd.store.metadata import TopicConfig
from tests.kit.loop import LoopThread


def routed(namesrv_addr: str, topic: str) -> bool:
    with BlockingClient(namesrv_addr, 10) as n:
        return n.invoke(new_request(105, {"topic": topic})).code == ResponseCode.SUCCESS


def test_registration_goes_on_after_the_table_version_went_back(tmp_path):
    store = str(tmp_path / "s")
    lt = LoopThread(call_timeout=60)
    services = Services(NameServer(NamesrvConfig(listenPort=0, kvConfigPath=store + "/kv.json")),
                        BrokerController(BrokerConfig(listenPort=0, storePathRootDir=store, brokerIP1="127.0.0.1",
                                                      mapedFileSizeCommitLog=1 << 20)))
    lt.call(services.start(), 60)
    try:
        broker, mgr = services.broker, services.broker.topic_config_manager
        with mgr._lock:
            for _ in range(50):
                mgr.data_version.next_version()
            mgr.table["Before"] = TopicConfig("Before", 4, 4, 6)
        broker.register_broker_all_sync(timeout=10)
        assert routed(services.namesrv.address, "Before")
        with mgr._lock:                                   # what SlaveSynchronize does with its master's table
            mgr.data_version = DataVersion.from_json({"counter": 1, "timestamp": 1})
            mgr.table["After"] = TopicConfig("After", 4, 4, 6)
        broker.register_broker_all_sync(timeout=10)
        assert routed(services.namesrv.address, "After")
    finally:
        lt.call(services.close(), 60)
        lt.stop(close=False)
