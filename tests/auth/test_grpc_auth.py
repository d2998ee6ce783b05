"""Access control 2.0 on the gRPC endpoint (grpcio stubs): UNAUTHORIZED (40100) with 5.x's message for a refused
authentication or authorization, before the client-id check; the Telemetry stream checked per command; an old
x-mq-date-time accepted as 5.x accepts it."""
from __future__ import annotations

import hashlib
import hmac
import json
from datetime import datetime, timezone

import grpc
import pytest

from rmqd.acl.signer import sign_request
from rmqd.grpc.endpoint import GrpcEndpoint
from rmqd.grpc.pb import definition_pb2 as d
from rmqd.grpc.pb import service_pb2 as s
from rmqd.grpc.pb import service_pb2_grpc as sg
from rmqd.remoting.client import BlockingClient
from rmqd.remoting.command import new_request
from rmqd.testing import EmbeddedServer

SU = ("rocketmq", "12345678")
AUTH = {"authenticationEnabled": "true", "authorizationEnabled": "true",
        "initAuthenticationUser": '{"username":"rocketmq","password":"12345678"}'}


def signed(ak: str, sk: str, when: str | None = None, client_id: str = "auth-client") -> list:
    now = when or datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    sig = hmac.new(sk.encode(), now.encode(), hashlib.sha1).hexdigest()
    return [("x-mq-client-id", client_id), ("x-mq-date-time", now),
            ("authorization", f"MQv2-HMAC-SHA1 Credential={ak}, SignedHeaders=x-mq-date-time, Signature={sig}")]


def admin(addr: str, code: int, ext: dict, body: dict | None = None) -> int:
    raw = json.dumps(body).encode() if body is not None else None
    with BlockingClient(addr) as c:
        return c.invoke(new_request(code, sign_request(dict(ext), raw, *SU), raw), 10).code


@pytest.fixture(scope="module")
def g():
    endpoint = GrpcEndpoint("127.0.0.1", 0)
    server = EmbeddedServer(broker_properties=AUTH, endpoints=lambda: [endpoint]).start()
    addr = server.broker_addr
    assert admin(addr, 17, {"topic": "gT", "defaultTopic": "TBW102", "readQueueNums": "1", "writeQueueNums": "1",
                            "perm": "6", "topicFilterType": "SINGLE_TAG", "topicSysFlag": "0", "order": "false"}) == 0
    assert admin(addr, 3001, {"username": "gu"}, {"password": "guPass01"}) == 0
    assert admin(addr, 3006, {"subject": "User:gu"}, {"policies": [{"entries": [
        {"resource": "Topic:gT", "actions": ["Pub"], "decision": "Allow"}]}]}) == 0
    channel = grpc.insecure_channel(endpoint.address)
    try:
        yield sg.MessagingServiceStub(channel)
    finally:
        channel.close()
        server.stop()


def route(stub, md, topic="gT"):
    return stub.QueryRoute(s.QueryRouteRequest(topic=d.Resource(name=topic)), metadata=md).status


def send(stub, md, topic="gT"):
    m = d.Message(topic=d.Resource(name=topic), body=b"x", system_properties=d.SystemProperties(message_id="A1"))
    return stub.SendMessage(s.SendMessageRequest(messages=[m]), metadata=md).status


def test_authentication(g) -> None:
    st = route(g, [])
    assert (st.code, st.message) == (d.UNAUTHORIZED, "username cannot be null.")     # before CLIENT_ID_REQUIRED
    st = route(g, signed("ghost", "x"))
    assert (st.code, st.message) == (d.UNAUTHORIZED, "User:ghost is not found.")
    st = route(g, signed("gu", "wrong"))
    assert (st.code, st.message) == (d.UNAUTHORIZED, "check signature failed.")
    md = [("x-mq-client-id", "c"), ("authorization", "MQv2-HMAC-SHA1 Credential=gu, Signature=zz"),
          ("x-mq-date-time", "20240101T000000Z")]
    assert route(g, md).message == "create authentication context error."
    assert route(g, [("authorization", "x y"), ("x-mq-date-time", "1")]).message == \
        "authentication keyValues length is incorrect, actual length=1."
    assert route(g, [("authorization", "x")]).message == "datetime is null."
    assert route(g, signed("gu", "guPass01", when="20010101T000000Z")).code == d.OK     # no expiry in 5.x


def test_authorization(g) -> None:
    assert route(g, signed("gu", "guPass01")).code == d.OK           # Pub or Sub on the topic
    assert send(g, signed("gu", "guPass01")).code == d.OK
    st = send(g, signed("gu", "guPass01"), "other")
    assert (st.code, st.message) == (
        d.UNAUTHORIZED, "User:gu has no permission to access Topic:other from 127.0.0.1, no matched policies.")
    req = s.ReceiveMessageRequest(group=d.Resource(name="gg"), message_queue=d.MessageQueue(
        topic=d.Resource(name="gT"), id=-1), filter_expression=d.FilterExpression(type=d.TAG, expression="*"),
        batch_size=1)
    first = next(iter(g.ReceiveMessage(req, metadata=signed("gu", "guPass01")))).status
    assert (first.code, first.message) == (
        d.UNAUTHORIZED, "User:gu has no permission to access Group:gg from 127.0.0.1, no matched policies.")
    st = g.SendMessage(s.SendMessageRequest(), metadata=signed("gu", "guPass01")).status
    assert (st.code, st.message) == (d.UNAUTHORIZED, "message is null.")
    hb = g.Heartbeat(s.HeartbeatRequest(client_type=d.PRODUCER), metadata=signed("gu", "guPass01")).status
    # a producer's heartbeat touches nothing: it passes access control, then meets the proxy's own check (a client
    # that sent no Settings is not recognised)
    assert hb.code == d.UNRECOGNIZED_CLIENT_TYPE


def test_telemetry_settings_are_checked_per_command(g) -> None:
    def commands():
        yield s.TelemetryCommand(settings=d.Settings(client_type=d.PRODUCER, publishing=d.Publishing(
            topics=[d.Resource(name="other")])))
    stream = g.Telemetry(commands(), metadata=signed("gu", "guPass01"))
    first = next(iter(stream))
    assert first.status.code == d.UNAUTHORIZED and "Topic:other" in first.status.message
    stream.cancel()
