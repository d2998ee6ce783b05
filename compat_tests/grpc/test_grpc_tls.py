"""TLS on the gRPC endpoint with the 5.x clients as they come.

- The Java 5.x client (rocketmq-client-java 5.2.0) with its DEFAULT configuration (``sslEnabled`` is true unless
  the application turns it off) sends and receives through rmqd in test mode (a self-signed certificate, which the
  client does not check), and through the Java proxy's permissive port alike; the same client with TLS off works on
  the same ports (permissive: TLS and plaintext on one port).
- The PyPI Python client 5.1.2 with ``tls_enable=True`` checks the server's certificate against grpc's roots
  (``GRPC_DEFAULT_SSL_ROOTS_FILE_PATH`` names a test CA here) and its host name: rmqd serves a CA-issued certificate
  (``tlsTestModeEnable=false``, ``tlsCertPath``, ``tlsKeyPath``); a plaintext producer shares the port.
- The Go v5 client (golang/v5 5.1.4, compat_tests/go/cmd/grpc5 -tls) with TLS as it comes (``rmq.EnableSsl``
  true: TLS, the certificate not checked) sends and receives on a permissive port beside a plaintext Go client,
  and on an enforcing port, where the plaintext Go client gets nothing.
- Enforcing: the TLS client is served, a plaintext client is refused (its connection closed at the first bytes, as
  the proxy's SslHandler closes one that is not TLS).
"""
from __future__ import annotations

import socket
import time

import pytest

from go_outcomes import distinct, of, ok
from gokit import BUILD_TIMEOUT, run_go_all
from java5kit import FETCH_TIMEOUT, START_TIMEOUT, run_java5
from test_grpc_python import run5

from rmqd.testing.pki import TestPki

pytestmark = pytest.mark.timeout(FETCH_TIMEOUT + START_TIMEOUT + 400)


def smoke(endpoint: str, topic: str, group: str, ssl: str, count: int = 4):
    res = run_java5("grpc", "Grpc5Smoke", endpoint, topic, group, str(count), ssl, timeout=150)
    return res, (sorted(e["body"] for e in res.events_of("send")), sorted(e["body"] for e in res.events_of("receive")))


def test_java5_client_default_configuration_tls_on_rmqd_and_the_java_proxy(reference5, mqadmin5, grpc_server,
                                                                           tmp_path, monkeypatch):
    monkeypatch.setenv("RMQD_TLS_DIR", str(tmp_path / "tls"))
    want = ([f"smoke-{i}" for i in range(4)],) * 2
    outcomes = {}
    for name, endpoint, namesrv in (("java", reference5.grpc_addr, reference5.namesrv_addr),
                                    ("rmqd", grpc_server.grpc_addr, grpc_server.server.namesrv_addr)):
        for ssl in ("default", "false"):
            topic, group = f"Tls5Topic-{ssl}", f"tls5-group-{ssl}"
            for create in (("updateTopic", "-t", topic), ("updateSubGroup", "-g", group)):
                res = mqadmin5.run(create[0], "-n", namesrv, "-c", "DefaultCluster", *create[1:])
                assert "success" in res.stdout, (name, res.stdout)
            res, outcomes[(name, ssl)] = smoke(endpoint, topic, group, ssl)
            assert res.returncode == 0 and not res.timed_out, (name, ssl, res.stdout[-2000:], res.stderr[-3000:])
    assert all(outcome == want for outcome in outcomes.values()), outcomes
    front = grpc_server.endpoint.front
    assert front is not None and grpc_server.endpoint._tls_port      # the TLS leg was used: the front started it


def test_python5_client_tls_verifies_a_ca_issued_certificate_plaintext_shares_the_port(py5_python,
                                                                                      make_grpc_server, tmp_path):
    pki = TestPki(tmp_path / "pki")
    server = make_grpc_server(tlsTestModeEnable="false", tlsCertPath=pki.server.cert, tlsKeyPath=pki.server.key)
    server.create_topic("Tls5Py")
    res = run5(py5_python, server, '''
        tls = Producer(CONFIG, ("Tls5Py",), tls_enable=True)
        plain = Producer(CONFIG, ("Tls5Py",))
        tls.startup(); plain.startup()
        for i in range(5):
            for name, p in (("tls", tls), ("plain", plain)):
                m = Message(); m.topic = "Tls5Py"; m.body = f"{name}-{i}".encode()
                emit(op="sent", id=p.send(m).message_id)
        c = SimpleConsumer(CONFIG, "Tls5PyGroup", {"Tls5Py": FilterExpression()}, await_duration=2, tls_enable=True)
        c.startup()
        for m in receive_all(c, 10, timeout=30):
            emit(op="got", id=m.message_id, body=m.body.decode())
        c.shutdown(); tls.shutdown(); plain.shutdown()
    ''', timeout=90, GRPC_DEFAULT_SSL_ROOTS_FILE_PATH=pki.ca)
    sent = {e["id"] for e in res.events_of("sent")}
    got = {e["id"]: e["body"] for e in res.events_of("got")}
    assert len(sent) == 10 and set(got) == sent, (sent, got)
    assert sorted(got.values()) == sorted([f"plain-{i}" for i in range(5)] + [f"tls-{i}" for i in range(5)])


def test_python5_client_refuses_an_untrusted_certificate(py5_python, make_grpc_server, tmp_path, monkeypatch):
    """The Python client checks the server: rmqd's test-mode certificate is not in its roots, so it does not
    connect (the Java client, which does not check, does): rmqd serves TLS, the client decides."""
    monkeypatch.setenv("RMQD_TLS_DIR", str(tmp_path / "tls"))
    server = make_grpc_server()
    server.create_topic("Tls5Untrusted")
    res = run5(py5_python, server, '''
        p = Producer(CONFIG, ("Tls5Untrusted",), tls_enable=True)
        try:
            p.startup()
            m = Message(); m.topic = "Tls5Untrusted"; m.body = b"x"
            p.send(m)
            emit(op="sent")
        except Exception as e:
            emit(op="refused", error=str(e)[:300])
        finally:
            try:
                p.shutdown()
            except Exception:
                pass
    ''', timeout=90)
    assert res.events_of("refused") and not res.events_of("sent"), res.events


def plaintext_refused(endpoint: str) -> bytes:
    """What an enforcing port answers to an HTTP/2 connection preface: the server closes it."""
    host, port = endpoint.rsplit(":", 1)
    with socket.create_connection((host, int(port)), 5) as sock:
        sock.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + b"\x00\x00\x00\x04\x00\x00\x00\x00\x00")
        sock.settimeout(5)
        got = b""
        try:
            while True:
                chunk = sock.recv(4096)
                if not chunk:
                    return got
                got += chunk
        except ConnectionResetError:
            return got


def test_enforcing_serves_tls_and_refuses_plaintext(make_grpc_server, tmp_path, monkeypatch):
    monkeypatch.setenv("RMQD_TLS_DIR", str(tmp_path / "tls"))
    monkeypatch.setenv("TLS_ENABLE", "true")        # the remoting ports enforce too: the admin client speaks TLS
    server = make_grpc_server(**{"tls.server.mode": "enforcing"})
    assert server.endpoint.front is None             # grpcio's own TLS port, no front
    server.create_topic("Tls5Enforcing")
    server.create_group("tls5-enforcing")
    start = time.monotonic()
    got = plaintext_refused(server.grpc_addr)
    assert time.monotonic() - start < 3 and b"HTTP/2" not in got
    res, outcome = smoke(server.grpc_addr, "Tls5Enforcing", "tls5-enforcing", "default", 2)
    assert res.returncode == 0, res.stderr[-3000:]
    assert outcome == (["smoke-0", "smoke-1"],) * 2
    res = run_java5("grpc", "Grpc5Smoke", server.grpc_addr, "Tls5Enforcing", "tls5-enforcing", "1", "false",
                    timeout=60)
    assert res.returncode != 0 and not res.events_of("send"), res.stdout[-2000:]


def go_normal(endpoint: str, topic: str, group: str, tls: bool, wait: int = 60) -> list[str]:
    """compat_tests/go/cmd/grpc5's normal scenario (3 sync sends and an async one, a TagA simple consumer)."""
    return ["grpc5", "-endpoint", endpoint, "-topic", topic, "-group", group, "-wait", str(wait),
            *(["-tls"] if tls else []), "normal"]


def check_go_normal(run, what: str, tls: bool) -> None:
    ok(run, what)
    assert [e["tls"] for e in of(run, "client")] == [tls], (what, of(run, "client"))
    assert len(of(run, "send")) == 4 and all(e.get("receipts") == 1 for e in of(run, "send")), (what, run.stdout)
    assert sorted(e["body"] for e in distinct(of(run, "recv"), "messageId")) == \
        ["normal-0", "normal-2", "normal-async"], (what, of(run, "recv"))        # the scenario's TagA filter


@pytest.mark.timeout(BUILD_TIMEOUT + 200)
def test_go5_client_tls_on_rmqd_permissive_and_enforcing(make_grpc_server, tmp_path, monkeypatch):
    monkeypatch.setenv("RMQD_TLS_DIR", str(tmp_path / "tls"))
    permissive = make_grpc_server()
    for name in ("GoTls", "GoPlain"):
        permissive.create_topic(name)
        permissive.create_group(f"{name}-g")
    monkeypatch.setenv("TLS_ENABLE", "true")        # the enforcing server's remoting ports too: admin speaks TLS
    enforcing = make_grpc_server(**{"tls.server.mode": "enforcing"})
    for name in ("GoTlsE", "GoPlainE"):
        enforcing.create_topic(name)
        enforcing.create_group(f"{name}-g")
    runs = run_go_all({
        "permissive-tls": go_normal(permissive.grpc_addr, "GoTls", "GoTls-g", True),
        "permissive-plain": go_normal(permissive.grpc_addr, "GoPlain", "GoPlain-g", False),
        "enforcing-tls": go_normal(enforcing.grpc_addr, "GoTlsE", "GoTlsE-g", True),
        "enforcing-plain": go_normal(enforcing.grpc_addr, "GoPlainE", "GoPlainE-g", False, wait=10),
    }, 150)
    for name in ("permissive-tls", "permissive-plain", "enforcing-tls"):
        check_go_normal(runs[name], f"the Go client ({name})", name.endswith("tls"))
    assert permissive.endpoint._tls_port, "the permissive front never started its TLS leg"
    refused = runs["enforcing-plain"]
    assert refused.returncode != 0 and not of(refused, "send"), (refused.stdout[-2000:], refused.stderr[-2000:])
