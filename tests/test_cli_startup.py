"""`rmqd serve`'s start-up output: one short block on stdout (name server, broker, metrics, gRPC, console, store,
the ready line, where the logs go, how to stop) and a quiet stderr; per-topic and per-route records only at
DEBUG; --log-dir writes the log to a file; a default port that is taken is a note in the block."""
from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time

import pytest
from rmqd.common.localports import free_port

pytestmark = pytest.mark.timeout(90)




class Served:
    """An `rmqd serve` whose stdout block was read up to its `rmqd stop:` line; stop() returns stderr."""

    def __init__(self, args: list[str], cwd: str) -> None:
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        env.pop("RMQD_LOG_LEVEL", None)
        env.pop("RMQD_LOG_DIR", None)
        self.proc = subprocess.Popen([sys.executable, "-m", "rmqd.runtime.cli", *args], stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True, env=env, cwd=cwd)
        self.err: list[str] = []
        threading.Thread(target=lambda: self.err.extend(self.proc.stderr), daemon=True).start()
        self.block: list[str] = []
        deadline = time.monotonic() + 60
        for line in self.proc.stdout:
            self.block.append(line.rstrip("\n"))
            if line.startswith("rmqd stop:") or time.monotonic() > deadline:
                break
        assert self.block and self.block[-1].startswith("rmqd stop:"), (self.block, "".join(self.err))

    def stop(self) -> tuple[str, str]:
        self.proc.send_signal(signal.SIGTERM)
        rest, _ = self.proc.communicate(timeout=30)
        assert self.proc.returncode == 0, "".join(self.err)
        return rest, "".join(self.err)


def test_the_block_and_a_quiet_stderr(tmp_path):
    ns, broker, grpc, console, metrics = (free_port() for _ in range(5))
    store = tmp_path / "store"
    served = Served(["serve", "--namesrv-port", str(ns), "--broker-port", str(broker), "--grpc-port", str(grpc),
                     "--console-port", str(console), "--metrics-port", str(metrics), "--store-dir", str(store)],
                    str(tmp_path))
    rest, err = served.stop()
    a = "127.0.0.1"
    assert served.block == [
        f"rmqd name server listening on {a}:{ns}",
        f"rmqd broker broker-a (DefaultCluster) listening on {a}:{broker} (vip {a}:{broker - 2}), "
        f"name server {a}:{ns}",
        f"rmqd metrics on http://{a}:{metrics}/metrics",
        f"rmqd gRPC (RocketMQ 5 clients) on {a}:{grpc} (TLS permissive)",
        f"rmqd console on http://{a}:{console}/",
        f"rmqd store: {store}",
        f"rmqd ready: name server {a}:{ns}, broker {a}:{broker} (vip {a}:{broker - 2}), "
        f"metrics http://{a}:{metrics}/metrics, grpc {a}:{grpc}, console http://{a}:{console}/",
        "rmqd logs: stderr (--log-dir DIR for files)",
        f"rmqd stop: Ctrl-C, or kill {served.proc.pid}",
    ]
    assert rest == "rmqd shutting down\n"
    # nothing on stderr at the default level: the routes registered (a dozen topics), the sockets bound and
    # the store recovered are DEBUG records
    assert err == "", err


def test_log_dir_and_debug_level(tmp_path):
    logs = tmp_path / "logs"
    served = Served(["serve", "--namesrv-port", "0", "--broker-port", "0", "--grpc-port", "0", "--console-port",
                     "0", "--no-metrics", "--store-dir", str(tmp_path / "store"), "--log-dir", str(logs),
                     "--log-level", "DEBUG"], str(tmp_path))
    assert served.block[-2] == f"rmqd logs: {logs / 'rmqd.log'}"
    assert not any("metrics" in line for line in served.block)            # --no-metrics
    _, err = served.stop()
    assert err == ""                                                     # warnings and errors only, and none
    text = (logs / "rmqd.log").read_text()
    assert re.search(r" DEBUG rmqd\.namesrv\.route_info: new topic registered, TBW102 ", text)
    assert " DEBUG rmqd.remoting.server: broker listening on " in text


def test_a_taken_default_metrics_port_is_a_note(tmp_path):
    """serve's default endpoints step aside when their port is taken; the block says so."""
    with socket.socket() as blocker:
        blocker.bind(("127.0.0.1", 0))
        blocker.listen(1)
        port = blocker.getsockname()[1]
        conf = tmp_path / "broker.conf"
        conf.write_text(f"metricsPromExporterPort={port}\n")        # serve's default metrics port, taken
        served = Served(["serve", "-c", str(conf), "--namesrv-port", "0", "--broker-port", "0", "--grpc-port", "0",
                         "--console-port", "0", "--store-dir", str(tmp_path / "store")], str(tmp_path))
        served.stop()
    assert f"rmqd metrics not started: 127.0.0.1:{port} is in use" in "\n".join(served.block)
    assert "metrics off (port taken)" in next(line for line in served.block if line.startswith("rmqd ready:"))
