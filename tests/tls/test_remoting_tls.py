"""TLS on the remoting ports (broker, VIP, name server), as Java's NettyRemotingServer: permissive by default (TLS
and plaintext on one port, told apart by the first byte), enforcing and disabled modes, the test-mode certificate,
configured certificates (an encrypted key), mutual TLS; and bad input: a handshake that never finishes, garbage
before the handshake, a silent connection, refused client certificates. Each bad connection is closed with a log
line and the port keeps serving the others."""
from __future__ import annotations

import socket
import ssl
import time

import pytest

from rmqd.remoting.client import BlockingClient
from rmqd.remoting.codes import RequestCode
from rmqd.remoting.command import encode_frame_bytes, new_request
from rmqd.testing import EmbeddedServer
from rmqd.testing.pki import TestPki
from rmqd.tls.contexts import client_context
from rmqd.tls.settings import ClientTlsSettings

pytestmark = pytest.mark.timeout(120)

INSECURE = ClientTlsSettings(enable=True)          # test mode: the server's certificate is not checked (as Java's)


@pytest.fixture(autouse=True)
def _own_self_signed_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("RMQD_TLS_DIR", str(tmp_path / "tls-dir"))


def runtime_info(addr: str, ctx: "ssl.SSLContext | None") -> int:
    with BlockingClient(addr, 5, ssl_context=ctx) as c:
        return c.invoke(new_request(RequestCode.GET_BROKER_RUNTIME_INFO), 5).code


def cluster_info(addr: str, ctx: "ssl.SSLContext | None") -> bytes:
    with BlockingClient(addr, 5, ssl_context=ctx) as c:
        resp = c.invoke(new_request(RequestCode.GET_BROKER_CLUSTER_INFO), 5)
        assert resp.code == 0, resp.remark
        return bytes(resp.body or b"")


def closed_by_server(sock: socket.socket, within: float) -> float:
    """Seconds until the server closes ``sock`` (fails if it does not within ``within``)."""
    start = time.monotonic()
    sock.settimeout(within)
    try:
        while sock.recv(4096):
            pass
    except (ConnectionResetError, socket.timeout) as exc:
        if isinstance(exc, socket.timeout):
            pytest.fail(f"the server did not close the connection within {within} s")
    return time.monotonic() - start


def host_port(addr: str) -> tuple[str, int]:
    host, port = addr.rsplit(":", 1)
    return host, int(port)


def test_permissive_default_serves_tls_and_plaintext_on_every_port(tmp_path, caplog):
    tls = client_context(INSECURE)
    with EmbeddedServer(store_dir=str(tmp_path / "store")) as s, caplog.at_level("INFO", logger="rmqd.tls"):
        vip = f"127.0.0.1:{s.broker.config.vip_port}"
        for addr in (s.broker_addr, vip):
            assert runtime_info(addr, None) == 0
            assert runtime_info(addr, tls) == 0
        assert s.broker.config.brokerName.encode() in cluster_info(s.namesrv_addr, tls)
        assert s.broker.config.brokerName.encode() in cluster_info(s.namesrv_addr, None)
        with BlockingClient(s.broker_addr, 5, ssl_context=tls) as c:
            assert c.sock.version() in ("TLSv1.2", "TLSv1.3")
            peer = c.sock.getpeercert(binary_form=True)
            assert peer                                         # the test-mode certificate
        assert sum(a.tls_connections for a in s.broker.server._acceptors) >= 2      # main port and VIP port
    assert (tmp_path / "tls-dir" / "test-mode.pem").exists()
    assert "made a self-signed certificate" in caplog.text


def test_test_mode_certificate_is_made_once_and_kept(tmp_path):
    from rmqd.tls.certificates import self_signed_bundle
    path, first = self_signed_bundle()
    again_path, again = self_signed_bundle()
    assert path == again_path and first == again
    assert oct((tmp_path / "tls-dir" / "test-mode.pem").stat().st_mode & 0o777) == "0o600"


def test_enforcing_refuses_plaintext_with_javas_log_line(tmp_path, caplog):
    props = {"tls.server.mode": "enforcing"}
    with EmbeddedServer(store_dir=str(tmp_path / "store"), broker_properties=props) as s, \
            caplog.at_level("INFO", logger="rmqd.tls"):
        for addr in (s.broker_addr, s.namesrv_addr):
            with pytest.raises((ConnectionError, TimeoutError)):
                runtime_info(addr, None)
        assert runtime_info(s.broker_addr, client_context(INSECURE)) == 0
        # the broker itself registers in plaintext (tls.enable=false): refused too, as a Java broker would be
        assert b"brokerAddrTable" in cluster_info(s.namesrv_addr, client_context(INSECURE))
    assert "intends to establish an insecure connection while this server is running in SSL enforcing mode" \
        in caplog.text


def test_a_refused_connection_is_closed_after_reading_it_as_java_does(tmp_path):
    """Java reads the first bytes, then closes: a FIN, not a reset (the Java client then waits for its answer
    instead of failing its write at once)."""
    with EmbeddedServer(store_dir=str(tmp_path / "store"), broker_properties={"tls.server.mode": "enforcing"}) as s:
        with socket.create_connection(host_port(s.broker_addr), 5) as sock:
            sock.sendall(encode_frame_bytes(new_request(RequestCode.GET_BROKER_RUNTIME_INFO)))
            sock.settimeout(5)
            assert sock.recv(4096) == b""                   # an orderly close (ConnectionResetError otherwise)


def test_disabled_refuses_a_tls_handshake_and_serves_plaintext(tmp_path, caplog):
    with EmbeddedServer(store_dir=str(tmp_path / "store"), broker_properties={"tls.server.mode": "disabled"}) as s, \
            caplog.at_level("INFO"):
        assert s.broker.server._acceptors == []                 # the loop's own accept, as before TLS
        with pytest.raises((ssl.SSLError, ConnectionError, OSError)):
            runtime_info(s.broker_addr, client_context(INSECURE))
        assert runtime_info(s.broker_addr, None) == 0
    assert "it looks like a TLS handshake" in caplog.text


def test_bad_input_each_connection_closed_with_a_log_line_the_port_serves_on(tmp_path, caplog):
    props = {"tlsHandshakeTimeoutMillis": "600", "serverChannelMaxIdleTimeSeconds": "2"}
    tls = client_context(INSECURE)
    with EmbeddedServer(store_dir=str(tmp_path / "store"), broker_properties=props) as s, \
            caplog.at_level("INFO", logger="rmqd.tls"):
        target = host_port(s.broker_addr)
        stalled = socket.create_connection(target)
        stalled.sendall(b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03")   # the start of a ClientHello, no more
        garbage = socket.create_connection(target)
        garbage.sendall(b"\x16 this is not a TLS record at all, just bytes" * 4)
        silent = socket.create_connection(target)
        try:
            assert closed_by_server(garbage, 3) < 2
            assert runtime_info(s.broker_addr, tls) == 0 and runtime_info(s.broker_addr, None) == 0
            assert 0.3 < closed_by_server(stalled, 5) < 3
            assert runtime_info(s.broker_addr, tls) == 0 and runtime_info(s.broker_addr, None) == 0
            assert 1 < closed_by_server(silent, 6) < 5
            assert runtime_info(s.broker_addr, tls) == 0 and runtime_info(s.broker_addr, None) == 0
        finally:
            for sock in (stalled, garbage, silent):
                sock.close()
    lines = [r.getMessage() for r in caplog.records]
    assert any("TLS handshake with 127.0.0.1:" in m and "failed: WRONG_VERSION_NUMBER (" in m for m in lines), lines
    assert any("did not finish in 0.6 s: closed" in m for m in lines), lines
    assert any("nothing received in 2 s" in m for m in lines), lines


@pytest.fixture
def pki(tmp_path) -> TestPki:
    return TestPki(tmp_path / "pki")


def mutual_tls_props(pki: TestPki, password: str = "") -> dict:
    server = pki.issue("server-enc", "localhost", sans=("localhost", "127.0.0.1"), password=password or None) \
        if password else pki.server
    props = {"tls.test.mode.enable": "false", "tls.server.certPath": server.cert, "tls.server.keyPath": server.key,
             "tls.server.need.client.auth": "require", "tls.server.authClient": "true",
             "tls.server.trustCertPath": pki.ca}
    if password:
        props["tls.server.keyPassword"] = password
    return props


def client_with(pki: TestPki, issued) -> ssl.SSLContext:
    settings = ClientTlsSettings(enable=True, test_mode=False, auth_server=True, trust_cert_path=pki.ca,
                                 cert_path=issued.cert if issued else None, key_path=issued.key if issued else None)
    return client_context(settings)


def test_mutual_tls_refuses_expired_untrusted_and_missing_client_certificates(tmp_path, pki, caplog):
    good = pki.client("good")
    expired = pki.client("old", expired=True)
    stranger = pki.client("stranger", untrusted=True)
    with EmbeddedServer(store_dir=str(tmp_path / "store"), broker_properties=mutual_tls_props(pki)) as s, \
            caplog.at_level("INFO", logger="rmqd.tls"):
        assert runtime_info(s.broker_addr, client_with(pki, good)) == 0
        for bad in (expired, stranger, None):
            with pytest.raises((ssl.SSLError, ConnectionError, OSError)):
                runtime_info(s.broker_addr, client_with(pki, bad))
            assert runtime_info(s.broker_addr, client_with(pki, good)) == 0     # the port serves on
        refused = [r.getMessage() for r in caplog.records if "TLS handshake with" in r.getMessage()]
    assert len(refused) == 3, refused
    assert any("certificate has expired" in m for m in refused), refused
    assert any("unable to get local issuer certificate" in m for m in refused), refused
    assert any("PEER_DID_NOT_RETURN_A_CERTIFICATE" in m or "peer did not return a certificate" in m
               for m in refused), refused


def test_configured_certificate_with_an_encrypted_key(tmp_path, pki):
    props = {**mutual_tls_props(pki, password="s3cret"), "tls.server.need.client.auth": "none"}
    with EmbeddedServer(store_dir=str(tmp_path / "store"), broker_properties=props) as s:
        ctx = client_with(pki, None)               # verifies the server against the CA
        assert runtime_info(s.broker_addr, ctx) == 0
        with BlockingClient(s.broker_addr, 5, ssl_context=None) as admin:
            resp = admin.invoke(new_request(RequestCode.GET_BROKER_CONFIG), 5)
            text = bytes(resp.body).decode()
        assert "tls.server.keyPassword=******" in text and "s3cret" not in text


def test_broker_with_tls_enable_registers_with_an_enforcing_name_server(tmp_path):
    props = {"tls.server.mode": "enforcing", "tls.enable": "true"}
    with EmbeddedServer(store_dir=str(tmp_path / "store"), broker_properties=props) as s:
        body = cluster_info(s.namesrv_addr, client_context(INSECURE))
        assert s.broker.address.encode() in body                  # REGISTER_BROKER went over TLS
