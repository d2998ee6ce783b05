"""The Java 4.9.8 client and mqadmin with TLS (``-Dtls.enable=true``, the clients' test mode: the server's
certificate is not checked) against rmqd and against the Java broker, side by side.

- Permissive (both servers' default): 100 messages sent and consumed over TLS to the name server and the broker
  (``TlsClients.java``), and ``mqadmin clusterList`` over TLS, on both; plaintext clients keep working on the same
  ports (the rest of the suite).
- Enforcing (``tls.server.mode=enforcing``; both brokers register over TLS with ``tls.enable=true``): a plaintext
  request gets no answer, its connection is closed; the plaintext Java client and mqadmin fail the same way on both;
  the TLS client and mqadmin with TLS work on both.

A JVM's first TLS handshake is slow (the JDK loads its TLS and EC code): on a loaded machine it can pass mqadmin's
fixed 3 s call timeout, so each mqadmin JVM is asked a second time when its first TLS call timed out (the same rule
for both servers); ``TlsClients`` sets its own client timeouts to 20 s instead.
"""
from __future__ import annotations

import socket
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from javakit import SETUP_BUDGET, MqadminShell, ReferenceCluster, java_command, require_kit, run_java
from scenarios import create_topic

from rmqd.remoting.codes import RequestCode
from rmqd.remoting.command import encode_frame_bytes, new_request
from rmqd.testing import EmbeddedServer

pytestmark = pytest.mark.timeout(SETUP_BUDGET + 900)
TLS = {"tls.enable": "true"}
ENFORCING = {"tls.server.mode": "enforcing", "tls.enable": "true"}
COUNT = 100


@pytest.fixture(scope="module")
def tls_mqadmin():
    """mqadmin (4.9.8) in one JVM with ``-Dtls.enable=true``."""
    kit = require_kit()
    shell = MqadminShell(cmd=java_command("MqadminShell", system_props={"rocketmq.home.dir": str(kit), **TLS}))
    try:
        yield shell
    finally:
        shell.close()


def lists_broker(shell: MqadminShell, namesrv: str) -> bool:
    """``mqadmin clusterList`` names broker-a (asked again once if the JVM's first TLS call timed out)."""
    for attempt in range(2):
        res = shell.run("clusterList", "-n", namesrv, timeout=60)
        if "broker-a" in res.stdout:
            return True
        if "RemotingTimeoutException" not in res.stdout:
            return False
    return False


def tls_clients(namesrv: str, topic: str, tls: bool) -> dict:
    res = run_java("TlsClients", namesrv, topic, str(COUNT), timeout=300, system_props=TLS if tls else None)
    assert not res.timed_out, res.stderr[-3000:]
    out = {e["op"]: e for e in res.events}
    if "error" in out:
        print(f"TlsClients on {namesrv} (tls {tls}): {out['error']}")
    # the stage that failed, not the exception: the Java client reports one refusal as a timeout or a missing
    # route depending on when its route poll runs, against the Java broker as against rmqd
    return {"sent": out.get("sent", {}).get("n", 0), "received": out.get("received", {}).get("n", 0),
            "failed at": out["error"]["stage"] if "error" in out else None}


def test_java_client_and_mqadmin_with_tls_on_rmqd_and_the_java_broker(reference_cluster, tls_mqadmin, tmp_path,
                                                                       monkeypatch):
    monkeypatch.setenv("RMQD_TLS_DIR", str(tmp_path / "tls"))
    outcomes = {}
    with EmbeddedServer(store_dir=str(tmp_path / "store")) as rmqd:
        for name, server in (("java", reference_cluster), ("rmqd", rmqd)):
            create_topic(server.broker_addr, "TlsPermissive", 4)
            outcomes[name] = {**tls_clients(server.namesrv_addr, "TlsPermissive", tls=True),
                              "mqadmin lists the broker": lists_broker(tls_mqadmin, server.namesrv_addr)}
        # rmqd really spoke TLS with them: its name server and broker took TLS connections
        assert sum(a.tls_connections for a in rmqd.broker.server._acceptors) > 0
        assert sum(a.tls_connections for a in rmqd.services.namesrv.server._acceptors) > 0
    print(outcomes)
    assert outcomes["rmqd"] == outcomes["java"] == {"sent": COUNT, "received": COUNT, "failed at": None,
                                                    "mqadmin lists the broker": True}, outcomes


def plaintext_request_answered(addr: str) -> bool:
    """A plaintext GET_BROKER_RUNTIME_INFO: True if any answer came, False if the server closed the connection."""
    host, port = addr.rsplit(":", 1)
    with socket.create_connection((host, int(port)), 5) as sock:
        sock.sendall(encode_frame_bytes(new_request(RequestCode.GET_BROKER_RUNTIME_INFO)))
        sock.settimeout(5)
        try:
            return bool(sock.recv(4))
        except ConnectionResetError:
            return False


def test_enforcing_refuses_plaintext_as_the_java_broker_does(mqadmin_shell, tls_mqadmin, tmp_path, monkeypatch):
    monkeypatch.setenv("RMQD_TLS_DIR", str(tmp_path / "tls"))
    monkeypatch.setenv("TLS_ENABLE", "true")          # this test's own admin calls speak TLS
    java = ReferenceCluster(tmp_path / "java", system_props=ENFORCING).start()
    outcomes = {}
    try:
        with EmbeddedServer(store_dir=str(tmp_path / "store"), broker_properties=ENFORCING) as rmqd:
            servers = {"java": java, "rmqd": rmqd}
            for name, server in servers.items():
                start = time.monotonic()
                refused = [not plaintext_request_answered(a) for a in (server.namesrv_addr, server.broker_addr)]
                quick = time.monotonic() - start < 5
                create_topic(server.broker_addr, "TlsEnforced", 4)          # over TLS (TLS_ENABLE)
                outcomes[name] = {"plaintext refused": refused, "closed at once": quick}
            # the client JVMs of both servers at once (a refused plain client mostly waits for its time-out):
            # each server's plain client, then its TLS client
            def clients(server) -> dict:
                return {"plain client": tls_clients(server.namesrv_addr, "TlsEnforced", tls=False),
                        "tls client": tls_clients(server.namesrv_addr, "TlsEnforced", tls=True)}
            with ThreadPoolExecutor(max_workers=2) as pool:
                runs = {name: pool.submit(clients, server) for name, server in servers.items()}
                for name, run in runs.items():
                    outcomes[name].update(run.result())
            for name, server in servers.items():                            # one JVM each: one at a time
                outcomes[name].update({
                    "mqadmin plain lists the broker": "broker-a" in mqadmin_shell.run(
                        "clusterList", "-n", server.namesrv_addr, timeout=60).stdout,
                    "mqadmin tls lists the broker": lists_broker(tls_mqadmin, server.namesrv_addr)})
    finally:
        java.kill()
    print(outcomes)
    assert outcomes["rmqd"] == outcomes["java"], outcomes
    assert outcomes["rmqd"]["plaintext refused"] == [True, True] and outcomes["rmqd"]["closed at once"]
    assert outcomes["rmqd"]["tls client"] == {"sent": COUNT, "received": COUNT, "failed at": None}
    assert outcomes["rmqd"]["plain client"] == {"sent": 0, "received": 0, "failed at": "send"}
    assert outcomes["rmqd"]["mqadmin tls lists the broker"] and not outcomes["rmqd"]["mqadmin plain lists the broker"]
