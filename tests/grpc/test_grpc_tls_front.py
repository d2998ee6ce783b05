"""The gRPC endpoint's TLS modes in-process, with grpcio clients: permissive (the front: TLS and plaintext on one
port, the service seeing the client's own address), enforcing and disabled (grpcio's own port, no front); bad
input on the permissive port (a stalled handshake, TLS-looking garbage, bytes that are neither TLS nor HTTP/2, a
silent connection): each closed with a log line while the port serves the others."""
from __future__ import annotations

import socket
import time

import grpc
import pytest

from rmqd.grpc.endpoint import GrpcEndpoint
from rmqd.grpc.pb import definition_pb2 as d
from rmqd.grpc.pb import service_pb2 as s
from rmqd.grpc.pb import service_pb2_grpc as sg
from rmqd.testing import EmbeddedServer
from rmqd.tls.certificates import split_pem, self_signed_bundle

pytestmark = pytest.mark.timeout(120)
MD = [("x-mq-client-id", "tls-front-client")]


class Endpoint:
    def __init__(self, props: dict) -> None:
        self.endpoint = GrpcEndpoint("127.0.0.1", 0)
        self.server = EmbeddedServer(broker_properties=props, endpoints=lambda: [self.endpoint]).start()

    def route(self, channel: grpc.Channel) -> int:
        stub = sg.MessagingServiceStub(channel)
        resp = stub.QueryRoute(s.QueryRouteRequest(topic=d.Resource(name="NoSuchTopic")), metadata=MD, timeout=10)
        return resp.status.code

    def plain(self) -> grpc.Channel:
        return grpc.insecure_channel(self.endpoint.address)

    def tls(self) -> grpc.Channel:
        _, bundle = self_signed_bundle()
        _, chain = split_pem(bundle)
        creds = grpc.ssl_channel_credentials(root_certificates=chain)
        host, port = self.endpoint.address.rsplit(":", 1)
        return grpc.secure_channel(f"localhost:{port}", creds)

    def close(self) -> None:
        self.server.stop()
        self.server.cleanup()


@pytest.fixture(autouse=True)
def _own_self_signed_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("RMQD_TLS_DIR", str(tmp_path / "tls"))


@pytest.fixture
def make():
    made = []

    def build(**props) -> Endpoint:
        made.append(Endpoint(props))
        return made[-1]
    yield build
    for e in made:
        e.close()


def test_permissive_port_serves_tls_and_plaintext_and_sees_the_client_address(make):
    e = make(tlsHandshakeTimeoutMillis="2000")
    assert e.endpoint.front is not None and not e.endpoint._tls_port       # TLS starts with its first client
    with e.plain() as plain, e.tls() as tls:
        assert e.route(plain) == d.TOPIC_NOT_FOUND
        assert e.route(tls) == d.TOPIC_NOT_FOUND
        assert e.endpoint._tls_port
        # the service sees each client as the front saw it, not the front's loopback connection
        front = e.endpoint.front
        assert len(front.clients) == 2
        for local_port, client in front.clients.items():
            assert e.endpoint.client_of("127.0.0.1", local_port) == client != ("127.0.0.1", local_port)
    assert e.server.broker.config.grpcServerPort == e.endpoint.port


def test_enforcing_and_disabled_use_grpcios_own_port(make):
    enforcing = make(**{"tls.server.mode": "enforcing", "tls.enable": "true"})
    assert enforcing.endpoint.front is None
    with enforcing.tls() as tls:
        assert enforcing.route(tls) == d.TOPIC_NOT_FOUND
    with enforcing.plain() as plain, pytest.raises(grpc.RpcError) as err:
        enforcing.route(plain)
    assert err.value.code() == grpc.StatusCode.UNAVAILABLE
    disabled = make(**{"tls.server.mode": "disabled"})
    assert disabled.endpoint.front is None
    with disabled.plain() as plain:
        assert disabled.route(plain) == d.TOPIC_NOT_FOUND
    with disabled.tls() as tls, pytest.raises(grpc.RpcError) as err:
        disabled.route(tls)
    assert err.value.code() == grpc.StatusCode.UNAVAILABLE


def closed_within(sock: socket.socket, seconds: float) -> float:
    start = time.monotonic()
    sock.settimeout(seconds)
    try:
        while sock.recv(4096):
            pass
    except ConnectionResetError:
        pass
    except socket.timeout:
        pytest.fail(f"not closed within {seconds} s")
    return time.monotonic() - start


def test_bad_input_closed_with_a_log_line_the_port_serves_on(make, caplog):
    e = make(tlsHandshakeTimeoutMillis="800")
    host, port = e.endpoint.address.rsplit(":", 1)
    target = (host, int(port))
    with caplog.at_level("INFO", logger="rmqd.grpc.front"), e.plain() as plain, e.tls() as tls:
        assert e.route(tls) == d.TOPIC_NOT_FOUND
        stalled = socket.create_connection(target)
        stalled.sendall(b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03")       # a ClientHello that stops
        garbage = socket.create_connection(target)
        garbage.sendall(b"\x16 not a TLS record " * 4)
        neither = socket.create_connection(target)
        neither.sendall(b"GET / HTTP/1.1\r\nHost: rmqd\r\n\r\n")
        silent = socket.create_connection(target)
        silent_since = time.monotonic()
        try:
            assert closed_within(neither, 2) < 1.5
            assert closed_within(garbage, 3) < 2.5
            assert e.route(plain) == d.TOPIC_NOT_FOUND and e.route(tls) == d.TOPIC_NOT_FOUND
            assert 0.5 < closed_within(stalled, 6) < 5
            closed_within(silent, 6)
            assert 0.8 < time.monotonic() - silent_since < 5
            assert e.route(plain) == d.TOPIC_NOT_FOUND and e.route(tls) == d.TOPIC_NOT_FOUND
        finally:
            for sock in (stalled, garbage, neither, silent):
                sock.close()
        lines = [r.getMessage() for r in caplog.records]
    assert sum("TLS handshake with 127.0.0.1:" in m and "failed or did not finish" in m for m in lines) == 2, lines
    assert any("sent neither a TLS handshake nor the HTTP/2 preface" in m for m in lines), lines
    assert any("nothing received in 1 s" in m for m in lines), lines
