"""One embedded name server + broker per test module; ``admin(...)`` runs ``rmqd admin`` in-process."""
from __future__ import annotations

import contextlib
import io
from typing import Iterator

import orjson
import pytest

from rmqd.admin.main import main
from rmqd.remoting.client import BlockingClient
from rmqd.remoting.command import new_request
from rmqd.testing import EmbeddedServer

PROPS = dict(mapedFileSizeCommitLog=1 << 20, mapedFileSizeConsumeQueue=300 * 20, registerNameServerPeriod=30000)


@pytest.fixture(scope="module")
def server() -> Iterator[EmbeddedServer]:
    with EmbeddedServer(broker_properties=PROPS) as s:
        yield s


class Admin:
    def __init__(self, server: EmbeddedServer) -> None:
        self.server = server

    def __call__(self, *argv: str, rc: int = 0) -> str:
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            got = main([*argv, "-n", self.server.namesrv_addr])
        assert got == rc, f"{argv}: rc={got} stderr={err.getvalue()} stdout={out.getvalue()}"
        return out.getvalue() if rc == 0 else err.getvalue()


@pytest.fixture
def admin(server: EmbeddedServer) -> Admin:
    return Admin(server)


@pytest.fixture
def broker_client(server: EmbeddedServer) -> Iterator[BlockingClient]:
    c = BlockingClient(server.broker_addr)
    yield c
    c.close()


def heartbeat_consumer(client: BlockingClient, group: str, topic: str, client_id: str = "127.0.0.1@fake") -> None:
    """Register ``client`` as a push consumer of ``group`` subscribing ``topic`` (all tags)."""
    body = orjson.dumps({"clientID": client_id, "producerDataSet": [], "consumerDataSet": [{
        "groupName": group, "consumeType": "CONSUME_PASSIVELY", "messageModel": "CLUSTERING",
        "consumeFromWhere": "CONSUME_FROM_LAST_OFFSET", "unitMode": False, "subscriptionDataSet": [{
            "classFilterMode": False, "codeSet": [], "expressionType": "TAG", "subString": "*",
            "subVersion": 1, "tagsSet": [], "topic": topic}]}]})
    assert client.invoke(new_request(34, {}, body)).code == 0


def commit_offset(client: BlockingClient, group: str, topic: str, qid: int, offset: int) -> None:
    r = client.invoke(new_request(15, {"consumerGroup": group, "topic": topic, "queueId": str(qid),
                                       "commitOffset": str(offset)}))
    assert r.code == 0
