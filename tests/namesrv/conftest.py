"""A NameServer on port 0 with a temp KV path, and helpers to talk to it."""
import pytest

from rmqd.config import NamesrvConfig
from rmqd.namesrv.route_data import DataVersion, RegisterBrokerBody, TopicConfig
from rmqd.namesrv.server import NameServer
from rmqd.remoting.client import RemotingClient
from rmqd.remoting.codes import RequestCode
from rmqd.remoting.command import new_request


def make_config(tmp_path, **overrides) -> NamesrvConfig:
    return NamesrvConfig(listenPort=0, kvConfigPath=str(tmp_path / "namesrv" / "kvConfig.json"), **overrides)


@pytest.fixture
async def namesrv(tmp_path):
    server = NameServer(make_config(tmp_path))
    await server.start()
    try:
        yield server
    finally:
        await server.close()


@pytest.fixture
async def client():
    c = RemotingClient()
    try:
        yield c
    finally:
        c.close()


def register_request(broker_name="broker-a", addr="127.0.0.1:10911", cluster="DefaultCluster", broker_id=0,
                     topics=None, version=(1, 1700000000000), compressed=False, crc=None, ha="127.0.0.1:10912",
                     request_version=409, state_version=None):
    """A REGISTER_BROKER request like a Java broker's; ``topics`` maps name → (read, write, perm[, sysFlag]);
    ``state_version``: a 5.x controller-mode broker's master epoch in the DataVersion."""
    configs = {}
    for name, spec in (topics or {}).items():
        read, write, perm, *rest = spec
        configs[name] = TopicConfig(name, read, write, perm, topic_sys_flag=rest[0] if rest else 0)
    body = RegisterBrokerBody(DataVersion(version[1], version[0], state_version), configs, []).encode(compressed)
    ext = {"brokerName": broker_name, "brokerAddr": addr, "clusterName": cluster, "haServerAddr": ha,
           "brokerId": str(broker_id), "compressed": "true" if compressed else "false"}
    if crc is not None:
        ext["bodyCrc32"] = str(crc)
    req = new_request(RequestCode.REGISTER_BROKER, ext, body)
    req.version = request_version
    return req


def route_request(topic, version=409, standard=None):
    ext = {"topic": topic}
    if standard is not None:
        ext["acceptStandardJsonOnly"] = "true" if standard else "false"
    req = new_request(RequestCode.GET_ROUTEINFO_BY_TOPIC, ext)
    req.version = version
    return req
