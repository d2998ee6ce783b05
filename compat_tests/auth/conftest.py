"""The access control 2.0 differential's pair: the Java 5.5.0 reference (name server, broker, local-mode proxy) and
an rmqd (name server, broker, gRPC endpoint), both with authentication and authorization on, both migrating the same
plain_acl.yml at start, and set up with the same topics, groups, users and ACLs (auth_matrix.setup_broker).
One Java reference for the whole session (it takes a minute to start on a loaded machine)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

import pytest

from auth_matrix import AUTH_SETTINGS, JAVA_START_TIMEOUT, PLAIN_ACL_YML, PROXY_AUTH_SETTINGS, setup_broker

# the short waits of the gRPC tests (invisible times from 1 s, long polls of at most 3 s)
RMQD_SETTINGS = {"brokerIP1": "127.0.0.1", "minInvisibleTimeMillsForRecv": "1000",
                 "grpcClientConsumerMaxLongPollingTimeoutMillis": "3000"}


@dataclass
class Side:
    name: str
    namesrv: str
    broker: str
    grpc: str
    home: str


@dataclass
class AuthPair:
    java: Side
    rmqd: Side
    rmqd_server: object

    @property
    def sides(self) -> tuple:
        return (self.java, self.rmqd)


@pytest.fixture(scope="session")
def auth_pair(tmp_path_factory) -> Iterator[AuthPair]:
    from java5kit import REFERENCE5_BROKER_PROPERTIES, REFERENCE5_PROXY_PROPERTIES, Reference5Cluster, require_kit5

    from rmqd.grpc.endpoint import GrpcEndpoint
    from rmqd.testing import EmbeddedServer

    require_kit5()
    jdir = tmp_path_factory.mktemp("auth5-java")
    (jdir / "home" / "conf").mkdir(parents=True)
    (jdir / "home" / "conf" / "plain_acl.yml").write_text(PLAIN_ACL_YML)
    java = Reference5Cluster(jdir, broker_conf={**REFERENCE5_BROKER_PROPERTIES, **AUTH_SETTINGS},
                             proxy_conf={**REFERENCE5_PROXY_PROPERTIES, **PROXY_AUTH_SETTINGS})
    rhome = tmp_path_factory.mktemp("auth5-rmqd-home")
    (rhome / "conf").mkdir()
    (rhome / "conf" / "plain_acl.yml").write_text(PLAIN_ACL_YML)
    endpoint = GrpcEndpoint("127.0.0.1", 0)
    server = EmbeddedServer(broker_properties={**RMQD_SETTINGS, **AUTH_SETTINGS,
                                               "aclFile": str(rhome / "conf" / "plain_acl.yml")},
                            endpoints=lambda: [endpoint])
    java.start(timeout=JAVA_START_TIMEOUT)
    try:
        server.start()
        try:
            pair = AuthPair(Side("java", java.namesrv_addr, java.broker_addr, java.grpc_addr, str(jdir / "home")),
                            Side("rmqd", server.namesrv_addr, server.broker_addr, endpoint.address, str(rhome)),
                            server)
            for side in pair.sides:
                setup_broker(side.broker)
            yield pair
        finally:
            server.stop()
    finally:
        java.kill()


@pytest.fixture(scope="session")
def py5_python() -> str:
    """The 5.x Python client's interpreter (compat_tests/grpc/client5_env: ``$RMQD_PY5_VENV``)."""
    import client5_env
    return client5_env.py5_python()
