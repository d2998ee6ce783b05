"""The gRPC endpoint in-process (grpcio stubs from rmqd's own .proto): status codes as the proxy
gives them, ACL on the authorization header, stream cancel and client cleanup, and the generated
modules being current."""
from __future__ import annotations

import hashlib
import hmac
import subprocess
import sys
import threading
import time
from datetime import datetime, timezone
from pathlib import Path

import grpc
import pytest
from google.protobuf.duration_pb2 import Duration

from rmqd.grpc.endpoint import GrpcEndpoint
from rmqd.grpc.pb import definition_pb2 as d
from rmqd.grpc.pb import service_pb2 as s
from rmqd.grpc.pb import service_pb2_grpc as sg
from rmqd.remoting.client import BlockingClient
from rmqd.remoting.command import new_request
from rmqd.testing import EmbeddedServer
from tests.kit import clients

REPO = Path(__file__).resolve().parents[2]
def md_of(client_id: str) -> list:
    """The headers of a 5.x client (its id and language)."""
    return [("x-mq-client-id", client_id), ("x-mq-language", "JAVA")]


MD = md_of("test-client")


def create_topic(server, topic: str) -> None:
    """A topic of two queues on ``server``'s broker."""
    clients.create_topic(server.broker_addr, topic, 2)


class Grpc:
    def __init__(self, props: dict) -> None:
        self.endpoint = GrpcEndpoint("127.0.0.1", 0)
        self.server = EmbeddedServer(broker_properties=props, endpoints=lambda: [self.endpoint]).start()
        self.channel = grpc.insecure_channel(self.endpoint.address)
        self.stub = sg.MessagingServiceStub(self.channel)

    def close(self) -> None:
        self.channel.close()
        self.server.stop()
        self.server.cleanup()


@pytest.fixture(scope="module")
def g():
    x = Grpc({"autoCreateSubscriptionGroup": "false", "minInvisibleTimeMillsForRecv": "1000"})
    create_topic(x.server, "GT")
    c = BlockingClient(x.server.broker_addr)
    import orjson
    assert c.invoke(new_request(200, None, orjson.dumps({"groupName": "GG", "retryMaxTimes": 16})), 5).code == 0
    c.close()
    yield x
    x.close()


def receive_req(topic="GT", group="GG", batch=8, invisible_ms=5000, poll_s=0):
    req = s.ReceiveMessageRequest(group=d.Resource(name=group), message_queue=d.MessageQueue(
        topic=d.Resource(name=topic), id=-1), filter_expression=d.FilterExpression(type=d.TAG, expression="*"),
        batch_size=batch, long_polling_timeout=Duration(seconds=poll_s))
    if invisible_ms is not None:
        req.invisible_duration.FromMilliseconds(invisible_ms)
    return req


def first_status(stream):
    return next(iter(stream)).status


@pytest.mark.slow
def test_status_codes_as_the_proxy(g):
    st = g.stub
    route = st.QueryRoute(s.QueryRouteRequest(topic=d.Resource(name="GT")))
    assert route.status.code == d.CLIENT_ID_REQUIRED
    assert st.QueryRoute(s.QueryRouteRequest(topic=d.Resource(name="Nope")), metadata=MD).status.code == \
        d.TOPIC_NOT_FOUND
    r = st.QueryRoute(s.QueryRouteRequest(topic=d.Resource(name="GT")), metadata=MD)
    assert r.status.code == d.OK and [q.id for q in r.message_queues] == [0, 1]
    assert {q.permission for q in r.message_queues} == {d.READ_WRITE}
    assert first_status(st.ReceiveMessage(receive_req(group="NoGroup"), metadata=MD)).code == \
        d.CONSUMER_GROUP_NOT_FOUND
    # the proxy does not check the batch size: 0 pops nothing
    assert first_status(st.ReceiveMessage(receive_req(batch=0), metadata=MD)).code == d.MESSAGE_NOT_FOUND
    assert first_status(st.ReceiveMessage(receive_req(invisible_ms=500), metadata=MD)).code == \
        d.ILLEGAL_INVISIBLE_TIME
    assert first_status(st.ReceiveMessage(receive_req(), metadata=MD)).code == d.MESSAGE_NOT_FOUND
    ack = st.AckMessage(s.AckMessageRequest(group=d.Resource(name="GG"), topic=d.Resource(name="GT"), entries=[
        s.AckMessageEntry(message_id="X", receipt_handle="garbage")]), metadata=MD)
    assert ack.status.code == d.INTERNAL_SERVER_ERROR       # the proxy cannot decode it (ReceiptHandle.decode)
    assert st.SendMessage(s.SendMessageRequest(), metadata=MD).status.code == d.MESSAGE_CORRUPTED
    tx = st.EndTransaction(s.EndTransactionRequest(topic=d.Resource(name="GT"), transaction_id="nope",
                                                   resolution=d.COMMIT), metadata=MD)
    assert tx.status.code == d.INTERNAL_SERVER_ERROR and tx.status.message.endswith("cannot found transaction data")
    big = d.Message(topic=d.Resource(name="GT"), body=b"x" * (4 * 1024 * 1024 + 1),
                    system_properties=d.SystemProperties(message_id="BIG"))
    assert st.SendMessage(s.SendMessageRequest(messages=[big]), metadata=MD).status.code == d.MESSAGE_BODY_TOO_LARGE


def test_send_receive_ack_roundtrip_and_receipt_handle(g):
    m = d.Message(topic=d.Resource(name="GT"), body=b"hello", user_properties={"k": "v"},
                  system_properties=d.SystemProperties(message_id="01ABC", tag="T", keys=["a", "b"]))
    sent = g.stub.SendMessage(s.SendMessageRequest(messages=[m]), metadata=MD)
    assert sent.status.code == d.OK and sent.entries[0].message_id == "01ABC"
    out = list(g.stub.ReceiveMessage(receive_req(poll_s=2), metadata=MD, timeout=10))
    assert [r.WhichOneof("content") for r in out] == ["status", "message", "delivery_timestamp"]
    got = out[1].message
    assert got.system_properties.message_id == "01ABC" and got.body == b"hello" and dict(got.user_properties) == {"k": "v"}
    assert got.system_properties.tag == "T" and list(got.system_properties.keys) == ["a", "b"]
    assert got.system_properties.delivery_attempt == 1
    assert got.system_properties.body_digest.checksum == hashlib.md5(b"hello").hexdigest().upper()
    rh = got.system_properties.receipt_handle
    assert len(rh.split(" ")) == 9 and rh.split(" ")[5] == "broker-a"
    ack = g.stub.AckMessage(s.AckMessageRequest(group=d.Resource(name="GG"), topic=d.Resource(name="GT"), entries=[
        s.AckMessageEntry(message_id="01ABC", receipt_handle=rh)]), metadata=MD)
    assert ack.status.code == d.OK and ack.entries[0].status.code == d.OK


def test_cancelled_receive_releases_its_long_poll(g):
    polling = g.server.broker.pop_service.polling
    call = g.stub.ReceiveMessage(receive_req(poll_s=20), metadata=MD, timeout=30)
    deadline = time.monotonic() + 5
    while polling.polling_num == 0 and time.monotonic() < deadline:
        time.sleep(0.02)
    assert polling.polling_num == 1
    call.cancel()
    deadline = time.monotonic() + 5
    while polling.polling_num and time.monotonic() < deadline:
        time.sleep(0.02)
    assert polling.polling_num == 0 and not polling.watched


def test_telemetry_answers_settings_and_ends_on_termination(g):
    settings = d.Settings(client_type=d.PRODUCER, publishing=d.Publishing(topics=[d.Resource(name="GT")]))
    done = threading.Event()

    def commands():
        yield s.TelemetryCommand(settings=settings)
        done.wait(10)

    stream = g.stub.Telemetry(commands(), metadata=md_of("tele-1"), timeout=15)
    first = next(stream)
    assert first.status.code == d.OK and first.settings.publishing.max_body_size == 4 * 1024 * 1024
    assert first.settings.backoff_policy.max_attempts == 3
    producers = g.server.broker.producer_manager.groups()
    assert any(ch.client_id == "tele-1" for chans in producers.values() for ch in chans)
    r = g.stub.NotifyClientTermination(s.NotifyClientTerminationRequest(), metadata=md_of("tele-1"))
    assert r.status.code == d.OK
    assert list(stream) == []                    # the server ended the stream
    done.set()
    assert not any(ch.client_id == "tele-1" for chans in g.server.broker.producer_manager.groups().values()
                   for ch in chans)


def test_too_many_requests_when_the_pop_executor_is_full():
    x = Grpc({"popExecutorCapacity": "0"})
    try:
        create_topic(x.server, "Busy")
        assert first_status(x.stub.ReceiveMessage(receive_req(topic="Busy", group="BG", invisible_ms=60000),
                                                  metadata=MD)).code == d.TOO_MANY_REQUESTS
    finally:
        x.close()


ACL_YML = """\
globalWhiteRemoteAddresses: []
accounts:
  - accessKey: grpcUser1
    secretKey: grpcSecret1
    whiteRemoteAddress:
    admin: false
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms: ["ReadOnly=SUB", "ReadWrite=PUB|SUB"]
  - accessKey: grpcAdmin1
    secretKey: grpcAdminSecret1
    admin: true
    defaultTopicPerm: PUB|SUB
    defaultGroupPerm: PUB|SUB
"""


def signed(ak: str, sk: str, client_id: str = "acl-client") -> list:
    now = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    sig = hmac.new(sk.encode(), now.encode(), hashlib.sha1).hexdigest()
    return [("x-mq-client-id", client_id), ("x-mq-language", "JAVA"), ("x-mq-date-time", now),
            ("authorization", f"MQv2-HMAC-SHA1 Credential={ak}, SignedHeaders=x-mq-date-time, Signature={sig}")]


def test_acl_unauthorized_and_forbidden(tmp_path):
    acl = tmp_path / "plain_acl.yml"
    acl.write_text(ACL_YML)
    x = Grpc({"aclEnable": "true", "aclFile": str(acl)})
    try:
        admin_md = signed("grpcAdmin1", "grpcAdminSecret1")
        # topics are created through the ACL'd broker port by the admin account's remoting signature
        from rmqd.acl.signer import header_content, signature
        c = BlockingClient(x.server.broker_addr)
        for topic in ("ReadOnly", "ReadWrite"):
            ext = {"topic": topic, "defaultTopic": "TBW102", "readQueueNums": "1", "writeQueueNums": "1",
                   "perm": "6", "topicFilterType": "SINGLE_TAG", "topicSysFlag": "0", "order": "false",
                   "AccessKey": "grpcAdmin1"}
            ext["Signature"] = signature(header_content(ext), "grpcAdminSecret1")
            assert c.invoke(new_request(17, ext), 5).code == 0
        c.close()
        st = x.stub
        q = s.QueryRouteRequest(topic=d.Resource(name="ReadOnly"))
        r = st.QueryRoute(q, metadata=MD)
        assert r.status.code == d.UNAUTHORIZED and r.status.message == "No accessKey is configured"
        assert st.QueryRoute(q, metadata=signed("nobody12", "whatever1")).status.code == d.UNAUTHORIZED
        r = st.QueryRoute(q, metadata=signed("grpcUser1", "wrongSecret"))
        assert r.status.code == d.UNAUTHORIZED and r.status.message == "Check signature failed for accessKey=grpcUser1"
        assert st.QueryRoute(q, metadata=signed("grpcUser1", "grpcSecret1")).status.code == d.OK

        def send(topic, md):
            m = d.Message(topic=d.Resource(name=topic), body=b"x", system_properties=d.SystemProperties(message_id="A1"))
            return st.SendMessage(s.SendMessageRequest(messages=[m]), metadata=md).status

        denied = send("ReadOnly", signed("grpcUser1", "grpcSecret1"))
        assert denied.code == d.FORBIDDEN and "ReadOnly" in denied.message
        assert send("ReadWrite", signed("grpcUser1", "grpcSecret1")).code == d.OK
        assert send("ReadOnly", admin_md).code == d.OK
    finally:
        x.close()


def test_generated_modules_are_current():
    """The build generated rmqd/grpc/pb (not in git) and it matches rmqd/grpc/proto: a .proto edited after the last
    build fails here until the build (or scripts/gen_grpc.py) runs again."""
    assert not subprocess.run(["git", "ls-files", "rmqd/grpc/pb/*_pb2*"], cwd=REPO, capture_output=True, text=True,
                              check=True).stdout, "generated gRPC modules are committed"
    r = subprocess.run([sys.executable, str(REPO / "scripts" / "gen_grpc.py"), "--check"], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr


def test_forward_to_dead_letter_queue(g):
    m = d.Message(topic=d.Resource(name="GT"), body=b"poison", system_properties=d.SystemProperties(message_id="DLQ1"))
    assert g.stub.SendMessage(s.SendMessageRequest(messages=[m]), metadata=MD).status.code == d.OK
    out = [r for r in g.stub.ReceiveMessage(receive_req(poll_s=2), metadata=MD, timeout=10) if r.HasField("message")]
    got = [r.message for r in out if r.message.system_properties.message_id == "DLQ1"][0]
    r = g.stub.ForwardMessageToDeadLetterQueue(s.ForwardMessageToDeadLetterQueueRequest(
        group=d.Resource(name="GG"), topic=d.Resource(name="GT"), message_id="DLQ1",
        receipt_handle=got.system_properties.receipt_handle, delivery_attempt=1, max_delivery_attempts=17),
        metadata=MD)
    assert r.status.code == d.OK
    from rmqd.store.message import decode_message
    res = g.server.broker.store.get_messages("%DLQ%GG", 0, 0, 10)
    dlq = [decode_message(bytes(b)) for b in res.buffers]
    assert [(x.properties["UNIQ_KEY"], x.body) for x in dlq] == [("DLQ1", b"poison")]
    # acked: not delivered again after its invisible time
    pop = g.server.broker.pop_service
    assert not any(ck.topic == "GT" and ck.unacked() for ck in list(pop._cks.values()))


@pytest.mark.slow
def test_auto_renew_keeps_a_push_consumers_message_until_it_acks(g):
    """auto_renew (push consumers): the message stays invisible past its invisible time while the client is
    alive, its original receipt handle still acks it; a vanished client's messages come back."""
    create_topic(g.server, "Renew")
    md = md_of("pusher-1")
    g.stub.Heartbeat(s.HeartbeatRequest(group=d.Resource(name="GG"), client_type=d.PUSH_CONSUMER), metadata=md)
    for body in (b"keep", b"lost"):
        m = d.Message(topic=d.Resource(name="Renew"), body=body,
                      system_properties=d.SystemProperties(message_id=body.decode().upper()))
        assert g.stub.SendMessage(s.SendMessageRequest(messages=[m]), metadata=md).status.code == d.OK
    req = receive_req(topic="Renew", invisible_ms=2000, poll_s=2)
    req.auto_renew = True
    got = [r.message for r in g.stub.ReceiveMessage(req, metadata=md, timeout=10) if r.HasField("message")]
    assert sorted(m.body for m in got) == [b"keep", b"lost"]
    other = receive_req(topic="Renew", invisible_ms=2000, poll_s=0)
    time.sleep(3.5)                                                     # well past the 2 s invisible time
    assert first_status(g.stub.ReceiveMessage(other, metadata=md_of("other"))).code == \
        d.MESSAGE_NOT_FOUND
    keep = next(m for m in got if m.body == b"keep")
    ack = g.stub.AckMessage(s.AckMessageRequest(group=d.Resource(name="GG"), topic=d.Resource(name="Renew"), entries=[
        s.AckMessageEntry(message_id="KEEP", receipt_handle=keep.system_properties.receipt_handle)]), metadata=md)
    assert ack.entries[0].status.code == d.OK
    # the client goes away: "lost" is no longer renewed and comes back to someone else
    g.endpoint.service.clients.terminate("pusher-1")
    other.long_polling_timeout.seconds = 5
    back = [r.message for r in g.stub.ReceiveMessage(other, metadata=md_of("other"), timeout=10)
            if r.HasField("message")]
    assert [m.body for m in back] == [b"lost"] and back[0].system_properties.delivery_attempt == 2


def test_long_polling_receive_is_woken_by_a_send(g):
    """A receive parked in its long poll answers as soon as a message arrives, not at the end of the poll."""
    create_topic(g.server, "Wake")
    out: list = []

    def receive():
        started = time.monotonic()
        out.extend(g.stub.ReceiveMessage(receive_req(topic="Wake", poll_s=15), metadata=MD, timeout=30))
        out.append(time.monotonic() - started)

    t = threading.Thread(target=receive)
    t.start()
    polling = g.server.broker.pop_service.polling
    deadline = time.monotonic() + 5
    while polling.polling_count("Wake", "GG", -1) == 0 and time.monotonic() < deadline:
        time.sleep(0.02)
    assert polling.polling_count("Wake", "GG", -1) == 1
    m = d.Message(topic=d.Resource(name="Wake"), body=b"wake", system_properties=d.SystemProperties(message_id="W1"))
    sent = time.monotonic()
    assert g.stub.SendMessage(s.SendMessageRequest(messages=[m]), metadata=MD).status.code == d.OK
    t.join(20)
    elapsed = out.pop()
    assert [r.message.body for r in out if r.HasField("message")] == [b"wake"]
    assert time.monotonic() - sent < 3 and elapsed < 8, elapsed


def _registered(server, client_id: str) -> dict:
    broker = server.broker
    producers = [g for g, chans in broker.producer_manager.groups().items() if any(
        ch.client_id == client_id for ch in chans)]
    consumers = [g for g in ("GG",) if (info := broker.consumer_manager.get(g)) is not None
                 and info.find_channel(client_id) is not None]
    return {"producer": producers, "consumer": consumers}


def test_telemetry_stream_cancelled_without_termination_releases_the_registration(g):
    """A client that drops its Telemetry stream (crash, network cut) without NotifyClientTermination is no
    longer listed as a producer or consumer; its next Settings register it again."""
    streams = {}
    for cid, settings in (("cancel-p", d.Settings(client_type=d.PRODUCER,
                                                  publishing=d.Publishing(topics=[d.Resource(name="GT")]))),
                          ("cancel-c", d.Settings(client_type=d.SIMPLE_CONSUMER, subscription=d.Subscription(
                              group=d.Resource(name="GG"), subscriptions=[d.SubscriptionEntry(
                                  topic=d.Resource(name="GT"), expression=d.FilterExpression(expression="*"))])))):
        done = threading.Event()

        def commands(settings=settings, done=done):
            yield s.TelemetryCommand(settings=settings)
            done.wait(15)

        stream = g.stub.Telemetry(commands(), metadata=md_of(cid), timeout=20)
        assert next(stream).status.code == d.OK
        streams[cid] = (stream, done)
    assert _registered(g.server, "cancel-p")["producer"] == ["CID_RMQ_SYS_GRPC_GT"]
    assert _registered(g.server, "cancel-c")["consumer"] == ["GG"]
    for stream, done in streams.values():
        stream.cancel()
        done.set()
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and (_registered(g.server, "cancel-p")["producer"]
                                           or _registered(g.server, "cancel-c")["consumer"]):
        time.sleep(0.05)
    assert _registered(g.server, "cancel-p") == {"producer": [], "consumer": []}
    assert _registered(g.server, "cancel-c") == {"producer": [], "consumer": []}


@pytest.mark.slow
def test_an_idle_client_is_let_go_and_its_auto_renewed_message_comes_back():
    """grpcClientIdleTimeMills: a push consumer that stops talking (no heartbeat, no request) is expired: its
    registration goes, auto-renewal stops and what it held comes back to another client."""
    x = Grpc({"grpcClientIdleTimeMills": "1500", "minInvisibleTimeMillsForRecv": "2000"})
    try:
        create_topic(x.server, "Idle")
        pusher = md_of("idle-pusher")
        x.stub.Heartbeat(s.HeartbeatRequest(group=d.Resource(name="IG"), client_type=d.PUSH_CONSUMER), metadata=pusher)
        m = d.Message(topic=d.Resource(name="Idle"), body=b"held",
                      system_properties=d.SystemProperties(message_id="H1"))
        assert x.stub.SendMessage(s.SendMessageRequest(messages=[m]), metadata=pusher).status.code == d.OK
        req = receive_req(topic="Idle", group="IG", invisible_ms=2000, poll_s=2)
        req.auto_renew = True
        got = [r.message for r in x.stub.ReceiveMessage(req, metadata=pusher, timeout=10) if r.HasField("message")]
        assert [m.body for m in got] == [b"held"]
        taken = time.monotonic()
        clients = x.endpoint.service.clients
        assert "idle-pusher" in clients.channels
        # the pusher goes quiet; another client polls: nothing while the renewal holds, then the message
        other = receive_req(topic="Idle", group="IG", invisible_ms=10000, poll_s=6)
        back = [r.message for r in x.stub.ReceiveMessage(other, metadata=md_of("idle-other"),
                                                         timeout=15) if r.HasField("message")]
        assert [m.body for m in back] == [b"held"] and back[0].system_properties.delivery_attempt == 2
        assert time.monotonic() - taken >= 2.5          # renewed past its 2 s until the client was let go
        assert "idle-pusher" not in clients.channels
    finally:
        x.close()


@pytest.mark.slow
def test_receipt_handle_still_acks_after_a_broker_restart(tmp_path):
    """A receipt handle handed out before a restart acks the message after it: the acked message does not
    come back, the other one does (attempt 2)."""
    endpoint = GrpcEndpoint("127.0.0.1", 0)
    server = EmbeddedServer(str(tmp_path / "store"), {"minInvisibleTimeMillsForRecv": "1000"},
                            endpoints=lambda: [endpoint]).start()
    channel = None
    try:
        create_topic(server, "Restart")
        c = BlockingClient(server.broker_addr)
        import orjson
        assert c.invoke(new_request(200, None, orjson.dumps({"groupName": "RG"})), 5).code == 0
        c.close()
        channel = grpc.insecure_channel(endpoint.address)
        stub = sg.MessagingServiceStub(channel)
        for body in (b"acked", b"dropped"):
            m = d.Message(topic=d.Resource(name="Restart"), body=body,
                          system_properties=d.SystemProperties(message_id=body.decode().upper()))
            assert stub.SendMessage(s.SendMessageRequest(messages=[m]), metadata=MD).status.code == d.OK
        got = {r.message.body: r.message for r in stub.ReceiveMessage(
            receive_req(topic="Restart", group="RG", invisible_ms=3000, poll_s=2), metadata=MD, timeout=10)
            if r.HasField("message")}
        assert set(got) == {b"acked", b"dropped"}
        server.restart()
        ack = stub.AckMessage(s.AckMessageRequest(group=d.Resource(name="RG"), topic=d.Resource(name="Restart"),
                                                  entries=[s.AckMessageEntry(message_id="ACKED", receipt_handle=got[
                                                      b"acked"].system_properties.receipt_handle)]),
                              metadata=MD, timeout=10)
        assert ack.status.code == d.OK and ack.entries[0].status.code == d.OK
        back = [r.message for r in stub.ReceiveMessage(
            receive_req(topic="Restart", group="RG", invisible_ms=10000, poll_s=8), metadata=MD, timeout=15)
            if r.HasField("message")]
        assert [(m.body, m.system_properties.delivery_attempt) for m in back] == [(b"dropped", 2)]
        late = list(stub.ReceiveMessage(receive_req(topic="Restart", group="RG", poll_s=1), metadata=MD, timeout=10))
        assert late[0].status.code == d.MESSAGE_NOT_FOUND
    finally:
        if channel is not None:
            channel.close()
        server.stop()
