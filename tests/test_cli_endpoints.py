"""`rmqd serve` with metrics and console: one ready line with every endpoint, /healthz, broker.conf's
metricsExporterType=PROM, `rmqd console -n` alone, `rmqd metrics grafana`, a taken console port."""
from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import urllib.error
import urllib.request

import pytest
from rmqd.common.localports import free_port

pytestmark = [pytest.mark.timeout(60), pytest.mark.slow]

READY = re.compile(r"^rmqd ready: name server (\S+), broker (\S+) \(vip \S+\), metrics (\S+), grpc (\S+), "
                   r"console (\S+)$")




def rmqd(*args: str, cwd: str) -> subprocess.Popen:
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    return subprocess.Popen([sys.executable, "-m", "rmqd.runtime.cli", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env, cwd=cwd)


def ready_line(proc: subprocess.Popen) -> str:
    lines = []
    for line in proc.stdout:
        lines.append(line)
        if line.startswith("rmqd ready:"):
            return line.rstrip("\n")
    raise AssertionError(f"no ready line; stdout {lines}, stderr {proc.stderr.read()[-3000:]}")


def stop(proc: subprocess.Popen) -> str:
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=20)
    assert proc.returncode == 0, err[-3000:]
    return err


def get(url: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("cli-endpoints")
    mport, cport, gport = free_port(), free_port(), free_port()
    conf = tmp / "broker.conf"
    conf.write_text(f"metricsExporterType=PROM\nmetricsPromExporterPort={mport}\nmetricsLabel=env:ci\n")
    proc = rmqd("serve", "--namesrv-port", "0", "--broker-port", "0", "--console-port", str(cport),
                "--grpc-port", str(gport), "--store-dir", str(tmp / "store"), "-c", str(conf), cwd=str(tmp))
    line = ready_line(proc)
    try:
        yield proc, line, mport, cport, tmp, gport
    finally:
        stop(proc)


def test_one_ready_line_with_every_endpoint(served):
    proc, line, mport, cport, _, gport = served
    m = READY.match(line)
    assert m, line
    assert m.group(3) == f"http://127.0.0.1:{mport}/metrics" and m.group(5) == f"http://127.0.0.1:{cport}/"
    assert m.group(4) == f"127.0.0.1:{gport}"


def test_healthz_metrics_from_broker_conf_and_console(served):
    proc, line, mport, cport, _, _ = served
    assert get(f"http://127.0.0.1:{mport}/healthz") == (200, b'{"status": "ok"}')
    assert json.loads(get(f"http://127.0.0.1:{cport}/healthz")[1]) == {"status": "ok"}
    code, body = get(f"http://127.0.0.1:{mport}/metrics")
    assert code == 200 and b'rocketmq_topic_number{cluster="DefaultCluster",node_type="broker",node_id="broker-a",env="ci"' in body
    code, body = get(f"http://127.0.0.1:{cport}/topics")
    assert code == 200 and b"/static/app.js" in body


def test_console_alone_against_a_name_server(served):
    proc, line, mport, cport, tmp, _ = served
    ns = READY.match(line).group(1)
    port = free_port()
    alone = rmqd("console", "-n", ns, "--port", str(port), "--read-only", cwd=str(tmp))
    try:
        assert ready_line(alone) == f"rmqd ready: console http://127.0.0.1:{port}/ (read-only)"
        overview = json.loads(get(f"http://127.0.0.1:{port}/api/overview")[1])
        assert overview["mode"] == "remote" and overview["brokers"][0]["brokerName"] == "broker-a"
        req = urllib.request.Request(f"http://127.0.0.1:{port}/api/topics", data=b"{}", method="POST")
        try:
            urllib.request.urlopen(req, timeout=10)
            raise AssertionError("a read-only console accepted a POST")
        except urllib.error.HTTPError as e:
            assert e.code == 403
    finally:
        stop(alone)


def test_an_explicit_console_port_that_is_taken_is_an_error(tmp_path):
    with socket.socket() as blocker:
        blocker.bind(("127.0.0.1", 0))
        blocker.listen(1)
        port = blocker.getsockname()[1]
        # an explicit --console-port that is taken is an error ...
        proc = rmqd("serve", "--namesrv-port", "0", "--broker-port", "0", "--console-port", str(port),
                    "--store-dir", str(tmp_path / "a"), cwd=str(tmp_path))
        out, err = proc.communicate(timeout=30)
        assert proc.returncode == 1 and "address already in use" in err.lower()


def test_metrics_grafana_prints_the_dashboard(tmp_path):
    out = subprocess.run([sys.executable, "-m", "rmqd.runtime.cli", "metrics", "grafana"], capture_output=True, text=True,
                         timeout=30, check=True).stdout
    d = json.loads(out)
    assert d["uid"] == "rmqd-broker" and len(d["panels"]) >= 10
    assert all(t["expr"].count("rocketmq_") >= 1 for p in d["panels"] for t in p["targets"])


def test_grpc_port_taken_explicit_is_an_error_and_missing_extra_runs_on(tmp_path, monkeypatch, capsys):
    with socket.socket() as blocker:
        blocker.bind(("127.0.0.1", 0))
        blocker.listen(1)
        port = blocker.getsockname()[1]
        proc = rmqd("serve", "--namesrv-port", "0", "--broker-port", "0", "--console-port", "0",
                    "--grpc-port", str(port), "--store-dir", str(tmp_path / "g"), cwd=str(tmp_path))
        out, err = proc.communicate(timeout=30)
        assert proc.returncode == 1 and f"127.0.0.1:{port} is in use" in err
    # without the grpc extra, serve says so and runs on without the endpoint
    import importlib.util

    from rmqd.runtime import cli
    from rmqd.runtime.services import Services
    from rmqd.config import BrokerConfig
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "grpc" else real(name, *a))
    services = Services()
    cli._add_grpc_endpoint(services, cli.build_parser().parse_args(["serve"]), BrokerConfig())
    assert services.components == [] and "pip install grpcio protobuf" in capsys.readouterr().err


@pytest.mark.parametrize("conf, host", [
    ("metricsExporterType=PROM\nmetricsPromExporterHost=127.0.0.1\nbrokerIP1=10.9.8.7\n", "127.0.0.1"),
    ("metricsExporterType=PROM\nbrokerIP1=10.9.8.7\n", "10.9.8.7"),              # Java: empty -> brokerIP1
    ("metricsExporterType=2\nmetricsPromExporterHost=::1\nmetricsPromExporterPort=5599\n", "::1"),
])
def test_metrics_prom_exporter_host_from_broker_conf(tmp_path, conf, host):
    """The Prometheus endpoint binds metricsPromExporterHost, else brokerIP1 (as Java's
    BrokerMetricsManager); metricsExporterType by name or number."""
    from types import SimpleNamespace

    from rmqd.runtime.cli import _broker_config, _with_endpoints, build_parser
    path = tmp_path / "broker.conf"
    path.write_text(conf)
    args = build_parser().parse_args(["serve", "-c", str(path), "--console-port", "0", "--grpc-port", "0",
                                      "--store-dir", str(tmp_path / "store")])
    added = []
    services = SimpleNamespace(broker=SimpleNamespace(config=_broker_config(args)), add=added.append)
    _with_endpoints(services, args)
    (ep,) = added
    assert type(ep).__name__ == "MetricsEndpoint" and ep.host == host
    assert ep.port == (5599 if "5599" in conf else 5557)
    assert ep.url == ("http://[::1]:5599/metrics" if host == "::1" else f"http://{host}:5557/metrics")

