"""Fixtures for the RocketMQ 5 client tests: the clients' own environments and an rmqd with gRPC.

- ``py5_python``: ``<repo>/.venv-py5`` with the PyPI ``rocketmq-python-client`` 5.1.2 (its import
  name ``rocketmq`` clashes with the C++ wheel, so it gets its own venv), built once and kept.
- ``node5_dir``: ``<repo>/.node-client5`` with ``npm install rocketmq-client-nodejs@1.0.8``, kept.
Both are bounded in time; when the package registry cannot be reached they skip with that reason.
- ``grpc_server``: one rmqd per module (name server, broker, gRPC endpoint on free ports) with a
  small ``minInvisibleTimeMillsForRecv`` so redelivery tests take seconds.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from rmqd.remoting.client import BlockingClient
from rmqd.remoting.command import new_request

REPO = Path(__file__).resolve().parents[2]
PY5_PACKAGE = "rocketmq-python-client==5.1.2"
NODE5_PACKAGE = "rocketmq-client-nodejs@1.0.8"
GRPC_BROKER = {"brokerIP1": "127.0.0.1", "minInvisibleTimeMillsForRecv": "1000",
               "transactionCheckInterval": "1000", "transactionTimeOut": "1000"}


def _unreachable(output: str) -> bool:
    text = output.lower()
    return any(s in text for s in ("could not find a version", "no matching distribution", "connection",
                                   "network", "enotfound", "eai_again", "etimedout", "name resolution",
                                   "temporary failure"))


@pytest.fixture(scope="session")
def py5_python() -> str:
    explicit = os.environ.get("RMQD_PY5_PYTHON")
    if explicit:
        return explicit
    venv = Path(os.environ.get("RMQD_PY5_VENV") or REPO / ".venv-py5")
    python = venv / "bin" / "python"
    check = [str(python), "-c", "import rocketmq.v5, rocketmq; print(rocketmq.Producer)"]
    if python.exists() and subprocess.run(check, capture_output=True, timeout=60).returncode == 0:
        return str(python)
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    try:
        r = subprocess.run([str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", PY5_PACKAGE],
                           capture_output=True, text=True, timeout=480)
    except subprocess.TimeoutExpired:
        pytest.skip(f"pip install {PY5_PACKAGE} did not finish in 8 minutes (package registry unreachable?)")
    if r.returncode != 0:
        if _unreachable(r.stdout + r.stderr):
            pytest.skip(f"package registry unreachable: pip install {PY5_PACKAGE}: {r.stderr.strip()[-300:]}")
        raise RuntimeError(f"pip install {PY5_PACKAGE} failed: {r.stderr[-2000:]}")
    assert subprocess.run(check, capture_output=True, timeout=60).returncode == 0
    return str(python)


@pytest.fixture(scope="session")
def node5_dir() -> str:
    if shutil.which("node") is None or shutil.which("npm") is None:
        pytest.skip("node/npm are not installed")
    target = Path(os.environ.get("RMQD_NODE5_DIR") or REPO / ".node-client5")
    marker = target / "node_modules" / "rocketmq-client-nodejs" / "package.json"
    if marker.exists():
        return str(target)
    target.mkdir(parents=True, exist_ok=True)
    (target / "package.json").write_text('{"name": "rmqd-node5-client", "private": true}\n')
    try:
        r = subprocess.run(["npm", "install", "--no-audit", "--no-fund", "--loglevel=error", NODE5_PACKAGE],
                           cwd=target, capture_output=True, text=True, timeout=480)
    except subprocess.TimeoutExpired:
        pytest.skip(f"npm install {NODE5_PACKAGE} did not finish in 8 minutes (npm registry unreachable?)")
    if r.returncode != 0:
        if _unreachable(r.stdout + r.stderr):
            pytest.skip(f"npm registry unreachable: npm install {NODE5_PACKAGE}: {r.stderr.strip()[-300:]}")
        raise RuntimeError(f"npm install {NODE5_PACKAGE} failed: {r.stderr[-2000:]}")
    return str(target)


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
        self.server._server.cleanup()


@pytest.fixture(scope="module")
def grpc_server():
    s = GrpcServer(GRPC_BROKER)
    yield s
    s.close()
