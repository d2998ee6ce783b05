"""Bad input on every gRPC method, against the Java 5.x proxy and rmqd: malformed protobuf bodies (raw bytes through
grpcio's generic channel), missing or wrong ``x-mq-*`` headers, an oversized request. The statuses are compared;
on rmqd, a flood of bad bodies costs at most a line per cause in its log and serving goes on."""
from __future__ import annotations

import concurrent.futures
import logging
import random
import time
from typing import Any, Optional

import grpc
import pytest

from differential5 import (METHODS, REQUEST_TYPES, Session, Target, assert_same, call_raw, consumer_settings,
                           create_on, group_cmd, message_pb, metadata, producer_settings, sides_of, topic_cmd)
from rmqd.grpc.pb import definition_pb2 as d
from rmqd.grpc.pb import service_pb2 as s

pytestmark = pytest.mark.timeout(600)

TOPIC, GROUP = "D5BadTopic", "D5BadGroup"
# hand-made bodies no parser accepts: garbage tags, a length past the end, a wrong wire type for field 1
# (a message field sent as a varint), a proto3 string that is not UTF-8
#: a queue offset beyond any queue of the tests (the receipt handle of the consumer calls)
BEYOND = 1_000_000_000
MALFORMED = {"garbage": b"\xff\xff\xff\xff\x0f", "truncated": b"\x0a\x05ab", "wire-type": b"\x08\x96\x01\x0a",
             "bad-utf8": b"\x0a\x04\x12\x02\xff\xfe"}


def parses(method: str, body: bytes) -> bool:
    try:
        REQUEST_TYPES[method].FromString(body)
        return True
    except Exception:                 # noqa: BLE001 - DecodeError and friends
        return False


def fuzz_bodies(method: str, count: int, seed: int) -> list[bytes]:
    """``count`` random byte strings the method's request type cannot parse (checked with protobuf here)."""
    rng = random.Random(f"{seed}:{method}")
    out: list[bytes] = []
    while len(out) < count:
        body = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 64)))
        if not parses(method, body):
            out.append(body)
    return out


@pytest.fixture(scope="module")
def sides(reference5, mqadmin5_pair, grpc_server) -> dict[str, Target]:
    out = sides_of(reference5, grpc_server)
    create_on(out, mqadmin5_pair, topic_cmd(TOPIC), group_cmd(GROUP))
    return out


def _raw_status(answer: tuple) -> Any:
    """A raw call's outcome: the gRPC error code (and details), or "answered" for a response."""
    if answer[0] == "rpc-error":
        return [answer[1], answer[2]]
    return "answered"


def malformed_scenario(side: Target) -> dict:
    out = {}
    channel = grpc.insecure_channel(side.grpc_addr)
    try:
        for method in METHODS:
            for name, body in [*((n, b) for n, b in MALFORMED.items() if not parses(method, b)),
                               *((f"fuzz-{i}", b) for i, b in enumerate(fuzz_bodies(method, 3, 5)))]:
                out[f"{method}/{name}"] = _raw_status(call_raw(side.grpc_addr, method, body, timeout=10,
                                                               channel=channel))
    finally:
        channel.close()
    return out


def on_both(sides: dict[str, Target], scenario: Any) -> dict[str, Any]:
    with concurrent.futures.ThreadPoolExecutor(len(sides)) as pool:
        futures = {name: pool.submit(scenario, side) for name, side in sides.items()}
        return {name: f.result() for name, f in futures.items()}


def test_malformed_bodies_on_every_method(sides):
    """grpc-java cannot parse them: status UNKNOWN, no details; rmqd the same (no parser's text, no traceback)."""
    got = on_both(sides, malformed_scenario)
    assert_same(got["java"], got["rmqd"], "malformed bodies")
    assert {tuple(v) for v in got["rmqd"].values()} == {("UNKNOWN", "")}


def requests_of(topic: str, group: str) -> dict[str, Any]:
    """A well-formed request of each method (what a client would send, with names that exist)."""
    res, grp = d.Resource(name=topic), d.Resource(name=group)
    mq = d.MessageQueue(topic=res, id=-1, broker=d.Broker(name="broker-a"))
    receive = s.ReceiveMessageRequest(group=grp, message_queue=mq, batch_size=1,
                                      filter_expression=d.FilterExpression(type=d.TAG, expression="*"))
    receive.invisible_duration.FromMilliseconds(10_000)
    receive.long_polling_timeout.FromMilliseconds(1000)
    # a handle whose queue offset no queue reaches: what a change of invisible time answers no longer depends on
    # whether the test's own send landed in queue 0 (5.x refuses an offset at the queue's max, apache/rocketmq#9187)
    handle = f"{BEYOND} {int(time.time() * 1000)} 60000 0 0 broker-a 0 {BEYOND} 0"
    return {
        "QueryRoute": s.QueryRouteRequest(topic=res),
        "Heartbeat": s.HeartbeatRequest(client_type=d.PRODUCER),
        "SendMessage": s.SendMessageRequest(messages=[message_pb(topic, b"x")]),
        "QueryAssignment": s.QueryAssignmentRequest(topic=res, group=grp),
        "ReceiveMessage": receive,
        "AckMessage": s.AckMessageRequest(group=grp, topic=res, entries=[
            s.AckMessageEntry(message_id="01AA", receipt_handle=handle)]),
        "ForwardMessageToDeadLetterQueue": s.ForwardMessageToDeadLetterQueueRequest(
            group=grp, topic=res, receipt_handle=handle, message_id="01AA", delivery_attempt=1,
            max_delivery_attempts=2),
        "EndTransaction": s.EndTransactionRequest(topic=res, message_id="01AA", transaction_id="bogus",
                                                  resolution=d.COMMIT, source=d.SOURCE_CLIENT),
        "NotifyClientTermination": s.NotifyClientTerminationRequest(group=grp),
        "ChangeInvisibleDuration": s.ChangeInvisibleDurationRequest(group=grp, topic=res, receipt_handle=handle,
                                                                    message_id="01AA"),
        "RecallMessage": s.RecallMessageRequest(topic=res, recall_handle="garbage"),
        "SyncLiteSubscription": s.SyncLiteSubscriptionRequest(topic=res, group=grp, action=d.PARTIAL_ADD,
                                                              lite_topic_set=["a"]),
    }


def _replace(md: list, key: str, value: Optional[str]) -> list:
    """The headers with ``key`` set to ``value`` (None: left out)."""
    out = [h for h in md if h[0] != key]
    return out + [(key, value)] if value is not None else out


# header variants, as functions of the client id
HEADER_VARIANTS = {
    "no-language": lambda cid: _replace(metadata(cid), "x-mq-language", None),
    "bad-language": lambda cid: _replace(metadata(cid), "x-mq-language", "KLINGON"),
    "python-language": lambda cid: _replace(metadata(cid), "x-mq-language", "PYTHON"),
    "no-protocol-version-date-request-id": lambda cid: [h for h in metadata(cid) if h[0] not in (
        "x-mq-protocol", "x-mq-client-version", "x-mq-date-time", "x-mq-request-id")],
    "bad-version-and-date": lambda cid: _replace(_replace(metadata(cid), "x-mq-client-version", "not a version"),
                                                 "x-mq-date-time", "yesterday"),
    "garbage-authorization-and-namespace": lambda cid: metadata(cid, authorization="garbage",
                                                                x_mq_namespace="ns1"),
}
# methods a client calls once its Settings are known, with the client type that calls them
PRODUCER_METHODS = ("QueryRoute", "Heartbeat", "SendMessage", "EndTransaction", "RecallMessage",
                    "NotifyClientTermination")
CONSUMER_METHODS = ("QueryAssignment", "Heartbeat", "ReceiveMessage", "AckMessage", "ChangeInvisibleDuration",
                    "ForwardMessageToDeadLetterQueue", "NotifyClientTermination")


def _answer(answer: Any) -> Any:
    if isinstance(answer, tuple):
        return list(answer[1:])
    if isinstance(answer, list):                 # ReceiveMessage: the statuses of the stream
        return [[d.Code.Name(a.status.code), a.status.message] for a in answer if a.HasField("status")]
    return [d.Code.Name(answer.status.code), answer.status.message]


def _session_outcome(sess: Session) -> Any:
    if sess.settings is not None:
        return ["settings", d.Code.Name(sess.settings_status.code)]
    return list(sess.error[1:]) if sess.error else ["no answer"]


# every call and Settings here is answered (or its stream ended) within a second on an idle machine; the bound only
# matters on a loaded one, where a JVM that answers late must not read as a different answer
ANSWER_WITHIN_S = 30


def headers_scenario(side: Target) -> dict:
    """Every method without ``x-mq-client-id``; then, per header variant, a producer and a consumer whose
    Telemetry stream and calls all carry those headers."""
    from differential5 import call
    out = {}
    reqs = requests_of(TOPIC, GROUP)
    for method, req in reqs.items():
        out[f"no-client-id/{method}"] = _answer(call(side.grpc_addr, method, req, md=metadata(""),
                                                     timeout=ANSWER_WITHIN_S))
    channel = grpc.insecure_channel(side.grpc_addr)
    try:
        from rmqd.grpc.pb import service_pb2_grpc as sg
        stream = sg.MessagingServiceStub(channel).Telemetry(
            iter([s.TelemetryCommand(settings=producer_settings(side.grpc_addr, TOPIC))]), metadata=metadata(""),
            timeout=ANSWER_WITHIN_S)
        try:
            out["no-client-id/Telemetry"] = [[d.Code.Name(c.status.code), c.status.message] for c in stream]
        except grpc.RpcError as exc:
            out["no-client-id/Telemetry"] = [exc.code().name, exc.details() or ""]
    finally:
        channel.close()
    for variant, headers in HEADER_VARIANTS.items():
        for role, settings, methods in (
                ("producer", producer_settings(side.grpc_addr, TOPIC), PRODUCER_METHODS),
                ("consumer", consumer_settings(side.grpc_addr, GROUP, TOPIC), CONSUMER_METHODS)):
            sess = Session(side.grpc_addr, settings, headers=headers, wait=ANSWER_WITHIN_S)
            try:
                out[f"{variant}/{role}/Telemetry"] = _session_outcome(sess)
                for method in methods:
                    req = reqs[method]
                    if method == "Heartbeat" and role == "consumer":
                        req = s.HeartbeatRequest(client_type=d.SIMPLE_CONSUMER, group=d.Resource(name=GROUP))
                    out[f"{variant}/{role}/{method}"] = _answer(sess.call(method, req, timeout=ANSWER_WITHIN_S))
            finally:
                sess.close()
    return out


# A consumer whose Settings the proxy refused (here: for its x-mq-language) has no client channel there; 5.5.0 then
# fails its receive, change-invisible and forward calls with a NullPointerException. rmqd serves them (see
# docs/compatibility.md, "5.x gRPC clients").
WITHOUT_SETTINGS = "consumer calls of a client without Settings: rmqd serves them, the 5.5.0 proxy fails them with a " \
                   "NullPointerException (INTERNAL_SERVER_ERROR)"
EXPLAINED = {f"{variant}/consumer/{method}": WITHOUT_SETTINGS for variant in ("no-language", "bad-language")
             for method in ("ReceiveMessage", "ChangeInvisibleDuration", "ForwardMessageToDeadLetterQueue")}


def test_missing_and_wrong_headers_on_every_method(sides):
    got = on_both(sides, headers_scenario)
    assert_same(got["java"], got["rmqd"], "headers", EXPLAINED)


class _Records(logging.Handler):
    """Every log record (rmqd's and grpcio's) while installed."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)

    def lines(self, level: int = logging.INFO) -> list[str]:
        return [self.format(r) for r in self.records if r.levelno >= level]


FLOOD_PER_METHOD = 150          # 17 methods: 2,550 bodies, the count that once gave 1.9 MB of tracebacks


def test_a_flood_of_bad_bodies_costs_a_line_per_cause_and_serving_goes_on(grpc_server):
    grpc_server.create_topic("D5Flood")
    bodies = [(m, b) for m in METHODS for b in fuzz_bodies(m, FLOOD_PER_METHOD, 11)]
    records = _Records()
    records.setFormatter(logging.Formatter("%(levelname)s %(name)s %(message)s"))
    root = logging.getLogger()
    old_level = root.level
    root.addHandler(records)
    root.setLevel(logging.INFO)
    channel = grpc.insecure_channel(grpc_server.grpc_addr)
    causes = grpc_server.endpoint.service.causes.seen
    before = sum(n for c, n in causes.items() if "malformed" in c)
    t0 = time.monotonic()
    try:
        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            answers = list(pool.map(lambda mb: call_raw(grpc_server.grpc_addr, mb[0], mb[1], timeout=30,
                                                        channel=channel), bodies))
    finally:
        root.removeHandler(records)
        root.setLevel(old_level)
        channel.close()
    took = time.monotonic() - t0
    assert {a[:3] for a in answers} == {("rpc-error", "UNKNOWN", "")}, {a[:3] for a in answers}
    lines = records.lines()
    log_bytes = sum(len(x) for x in lines)
    # a line per method (the cause: its malformed bodies), none per request, no traceback
    assert len(lines) <= len(METHODS) and log_bytes < 20_000, (len(lines), log_bytes, lines[:5])
    assert not any("Traceback" in x for x in lines)
    assert sum(n for c, n in causes.items() if "malformed" in c) - before == len(bodies)
    # and it keeps serving: a producer sends, a consumer receives
    with Session(grpc_server.grpc_addr, producer_settings(grpc_server.grpc_addr, "D5Flood")) as p:
        sent = p.call("SendMessage", s.SendMessageRequest(messages=[message_pb("D5Flood", b"after the flood")]))
        assert sent.status.code == d.OK, sent
    print(f"{len(bodies)} malformed bodies in {took:.1f} s: {len(lines)} log lines, {log_bytes} bytes")


def oversized_scenario(side: Target) -> dict:
    """A request over the servers' inbound limit (130 MiB for both, the proxy's ``grpcMaxInboundMessageSize``)."""
    body = b"x" * (130 * 1024 * 1024 + 1024)
    answer = call_raw(side.grpc_addr, "SendMessage", s.SendMessageRequest(
        messages=[message_pb(TOPIC, body)]).SerializeToString(), timeout=60)
    return {"code": answer[1] if answer[0] == "rpc-error" else "answered", "_details": answer[2:] }


def test_oversized_request(sides):
    """Both refuse it before reading it all: grpc-java resets the stream (the client sees CANCELLED), grpc-core
    answers RESOURCE_EXHAUSTED naming the limit (docs/compatibility.md); nothing is stored, serving goes on."""
    got = {n: oversized_scenario(side) for n, side in sides.items()}
    assert got["java"]["code"] in ("CANCELLED", "RESOURCE_EXHAUSTED"), got["java"]
    assert got["rmqd"]["code"] == "RESOURCE_EXHAUSTED" and "larger than max" in got["rmqd"]["_details"][0], got
    with Session(sides["rmqd"].grpc_addr, producer_settings(sides["rmqd"].grpc_addr, TOPIC)) as p:
        assert p.call("SendMessage", s.SendMessageRequest(messages=[message_pb(TOPIC, b"ok")])).status.code == d.OK
