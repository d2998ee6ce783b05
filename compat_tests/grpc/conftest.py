"""Fixtures for the RocketMQ 5 client tests: the clients' own environments and an rmqd with gRPC.

- ``py5_python``: ``<repo>/.venv-py5`` with the PyPI ``rocketmq-python-client`` 5.1.2 (its import
  name ``rocketmq`` clashes with the C++ wheel, so it gets its own venv), built once and kept.
- ``node5_dir``: ``<repo>/.node-client5`` with ``npm install rocketmq-client-nodejs@1.0.8``, kept.
Both are made by client5_env, bounded in time: only a registry that cannot be reached makes them
skip; a failed install (a yanked version, a local error) or missing node/npm fails.
- ``grpc_server``: one rmqd per module (name server, broker, gRPC endpoint on free ports) with short
  invisible times, check-backs and long polls (GRPC_BROKER) so the tests take seconds.
"""
from __future__ import annotations

import os
import sys

import pytest

from rmqd.remoting.client import BlockingClient
from rmqd.remoting.command import new_request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import client5_env  # noqa: E402

# short waits: invisible times from 1 s, transaction check-backs after 1 s, long polls of at most 3 s (a push
# consumer's shutdown waits for its parked receive); recall on, as on the Java reference (java5kit)
GRPC_BROKER = {"brokerIP1": "127.0.0.1", "minInvisibleTimeMillsForRecv": "1000",
               "transactionCheckInterval": "1000", "transactionTimeOut": "1000",
               "grpcClientConsumerMaxLongPollingTimeoutMillis": "3000", "recallMessageEnable": "true"}


@pytest.fixture(scope="session")
def py5_python() -> str:
    return client5_env.py5_python()


@pytest.fixture(scope="session")
def node5_dir() -> str:
    return client5_env.node5_dir()


class GrpcServer:
    """An embedded rmqd with its gRPC endpoint; ``admin`` is a remoting client to the broker."""

    def __init__(self, props: dict) -> None:
        from rmqd.grpc.endpoint import GrpcEndpoint
        from rmqd.testing import EmbeddedServer

        self.endpoint = GrpcEndpoint("127.0.0.1", 0)
        self.server = EmbeddedServer(broker_properties=props, endpoints=lambda: [self.endpoint]).start()
        self.admin = BlockingClient(self.server.broker_addr)

    @property
    def grpc_addr(self) -> str:
        return self.endpoint.address

    @property
    def broker(self):
        return self.server.broker

    def create_topic(self, topic: str, queues: int = 4, message_type: str | None = None) -> None:
        ext = {"topic": topic, "defaultTopic": "TBW102", "readQueueNums": str(queues),
               "writeQueueNums": str(queues), "perm": "6", "topicFilterType": "SINGLE_TAG", "topicSysFlag": "0",
               "order": "false"}
        if message_type:
            ext["attributes"] = f"+message.type={message_type}"
        resp = self.admin.invoke(new_request(17, ext), 10)
        assert resp.code == 0, resp.remark

    def create_group(self, group: str, retry_max_times: int = 16, fifo: bool = False) -> None:
        import orjson
        body = orjson.dumps({"groupName": group, "consumeMessageOrderly": fifo, "consumeEnable": True, "consumeFromMinEnable": True,
                             "consumeBroadcastEnable": True, "retryQueueNums": 1, "retryMaxTimes": retry_max_times,
                             "brokerId": 0, "whichBrokerWhenConsumeSlowly": 1,
                             "notifyConsumerIdsChangedEnable": True})
        resp = self.admin.invoke(new_request(200, None, body), 10)
        assert resp.code == 0, resp.remark

    def close(self) -> None:
        self.admin.close()
        self.server.stop()
        self.server.cleanup()


@pytest.fixture(scope="module")
def grpc_server():
    s = GrpcServer(GRPC_BROKER)
    yield s
    s.close()


@pytest.fixture
def make_grpc_server():
    """``make(**broker_properties)``: another rmqd with gRPC (GRPC_BROKER plus these), closed after the test."""
    made: list[GrpcServer] = []

    def make(**props: str) -> GrpcServer:
        made.append(GrpcServer({**GRPC_BROKER, **props}))
        return made[-1]
    yield make
    for server in made:
        server.close()


@pytest.fixture(scope="session")
def proxy5(reference5, tmp_path_factory):
    """A Java 5.x proxy in cluster mode attached to the session's reference cluster (java5kit.ClusterProxy5): Lite
    Mode is judged against it, since the reference's local-mode proxy has no lite subscription service in 5.5.0."""
    from java5kit import REFERENCE5_PROXY_PROPERTIES, ClusterProxy5

    proxy = ClusterProxy5(tmp_path_factory.mktemp("proxy5"), reference5.namesrv_addr,
                          proxy_conf=REFERENCE5_PROXY_PROPERTIES).start()
    try:
        yield proxy
    finally:
        proxy.kill()


@pytest.fixture(scope="session")
def mqadmin5_pair(mqadmin5):
    """Two 5.x mqadmin shells (the session's and one more), so that the differential tests make the same topics
    and groups on both sides at once (differential5.create_on)."""
    from java5kit import Mqadmin5

    second = Mqadmin5()
    try:
        yield (mqadmin5, second)
    finally:
        second.close()
