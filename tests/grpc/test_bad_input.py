"""rmqd.grpc.bad_input: one log line per cause and interval, with the count of what was not logged; malformed
request bodies end the call with UNKNOWN and no details (the flood itself: compat_tests/grpc/test_grpc5_bad_input)."""
from __future__ import annotations

import logging

import grpc
import pytest

from rmqd.grpc.bad_input import CauseLog
from rmqd.grpc.pb import service_pb2 as s
from tests.grpc.test_grpc_endpoint import MD, g  # noqa: F401 (the module's endpoint fixture)


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_a_line_per_cause_and_interval_with_the_count_of_the_rest(caplog):
    clock = Clock()
    causes = CauseLog(logging.getLogger("test.causes"), interval_s=60, clock=clock)
    with caplog.at_level(logging.WARNING, logger="test.causes"):
        for _ in range(500):
            causes.warning("gRPC QueryRoute: malformed request body", "5 bytes")
        causes.warning("gRPC SendMessage: malformed request body", "7 bytes")
        clock.now = 61
        causes.warning("gRPC QueryRoute: malformed request body", "9 bytes")
    lines = [r.getMessage() for r in caplog.records]
    assert lines == ["gRPC QueryRoute: malformed request body: 5 bytes",
                     "gRPC SendMessage: malformed request body: 7 bytes",
                     "gRPC QueryRoute: malformed request body: 9 bytes (499 more like it in the last 60 s, "
                     "not logged)"]
    assert causes.seen == {"gRPC QueryRoute: malformed request body": 501,
                           "gRPC SendMessage: malformed request body": 1}


def test_an_unexpected_failure_carries_its_traceback_once(caplog):
    causes = CauseLog(logging.getLogger("test.causes2"), interval_s=60, clock=Clock())
    with caplog.at_level(logging.ERROR, logger="test.causes2"):
        for i in range(3):
            try:
                raise KeyError(i)
            except KeyError as exc:
                causes.exception("gRPC AckMessageResponse failed with KeyError", str(exc), exc)
    assert len(caplog.records) == 1 and caplog.records[0].exc_info is not None


@pytest.mark.parametrize("method", ["QueryRoute", "ReceiveMessage", "Telemetry"])
def test_malformed_bodies_end_the_call_with_unknown(g, method):  # noqa: F811
    channel = grpc.insecure_channel(g.endpoint.address)
    try:
        path = f"/apache.rocketmq.v2.MessagingService/{method}"
        if method == "Telemetry":
            rpc = channel.stream_stream(path, request_serializer=None, response_deserializer=None)
            call = rpc(iter([b"\xff\xff\xff\xff\x0f"]), metadata=MD, timeout=10)
        elif method == "ReceiveMessage":
            call = channel.unary_stream(path, request_serializer=None, response_deserializer=None)(
                b"\xff\xff\xff\xff\x0f", metadata=MD, timeout=10)
        else:
            call = channel.unary_unary(path, request_serializer=None, response_deserializer=None).future(
                b"\xff\xff\xff\xff\x0f", metadata=MD, timeout=10)
        with pytest.raises(grpc.RpcError) as err:
            list(call) if method != "QueryRoute" else call.result()
        assert err.value.code() == grpc.StatusCode.UNKNOWN and not err.value.details()
        # and the endpoint still answers
        stub_answer = channel.unary_unary("/apache.rocketmq.v2.MessagingService/QueryRoute",
                                          request_serializer=s.QueryRouteRequest.SerializeToString,
                                          response_deserializer=s.QueryRouteResponse.FromString)
        assert stub_answer(s.QueryRouteRequest(), metadata=MD, timeout=10).status.code != 0
    finally:
        channel.close()
