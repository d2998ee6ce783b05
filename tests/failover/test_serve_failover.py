"""`rmqd serve --replicas 3 --failover`: three controllers and a 3-replica group, each its own process; kill -9
of the master's process moves brokerId 0 in the route to another replica, and the killed broker is started again
and rejoins the SyncStateSet."""
from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

import orjson

from tests.failover.kit import call, create_topic, route_of, wait_until
from tests.kit.processes import READY, RmqdProcess


@pytest.mark.slow
def test_serve_failover_group_survives_kill9_of_its_master(tmp_path):
    serve = RmqdProcess("serve", "--replicas", "3", "--failover", "--namesrv-port", "0", "--broker-port", "0",
                        "--console-port", "0", "--store-dir", str(tmp_path / "store"), log_path=tmp_path / "serve.log",
                        ready=READY)
    try:
        serve.start(60)
        out = "".join(serve.lines)
        namesrv = re.search(r"name server listening on (\S+)", out).group(1)
        controllers = re.search(r"controllerAddr=(\S+)", out).group(1).split(";")
        pids = dict(re.findall(r"listening on (\S+) \(process (\d+)\)", out))
        assert len(controllers) == 3 and len(pids) == 6

        def state():
            for c in controllers:
                try:
                    r = call(c, 1006, body=orjson.dumps(["broker-a"]), timeout=2)
                except (OSError, TimeoutError, ConnectionError):
                    continue
                if r.code == 0:
                    st = orjson.loads(r.body_bytes())["replicasInfoTable"].get("broker-a")
                    if st and st.get("masterAddress"):
                        return st
            return None
        st = wait_until(lambda: (lambda s: s if s and len(s["inSyncReplicas"]) == 3 else None)(state()), 40, interval=0.2,
                        what="a master and 3 in-sync replicas")
        old = st["masterAddress"]
        create_topic(old, "ServeTopic")
        wait_until(lambda: (route_of(namesrv, "ServeTopic") or {}).get("brokerDatas"), 10, interval=0.1, what="route")
        os.kill(int(pids[old]), signal.SIGKILL)

        def new_master():
            r = route_of(namesrv, "ServeTopic")
            addr = r and r["brokerDatas"][0]["brokerAddrs"].get("0")
            return addr if addr and addr != old else None
        wait_until(new_master, 15, interval=0.05, what="brokerId 0 in the route on another replica")
        wait_until(lambda: "restarting it" in open(tmp_path / "serve.log", errors="replace").read(), 10, interval=0.1,
                   what="the killed broker restarted")
        st = wait_until(lambda: (lambda s: s if s and len(s["inSyncReplicas"]) == 3 and s["masterAddress"] != old
                                 else None)(state()), 40, interval=0.2, what="the restarted broker back in the SyncStateSet")
        assert st["masterEpoch"] >= 2
    finally:
        serve.stop(40)


@pytest.mark.slow
def test_serve_failover_children_import_the_parents_rmqd_whatever_the_working_directory(tmp_path):
    """Started from a directory holding another ``rmqd`` package (a checkout of the sources with rmqd installed
    from a wheel: the unbuilt tree), every child process (controllers, replicas) imports the rmqd the serve process
    runs, not the one in its working directory (before: "broker process controller n0 exited during start-up")."""
    decoy = tmp_path / "checkout" / "rmqd"
    decoy.mkdir(parents=True)
    (decoy / "__init__.py").write_text("raise ImportError('the decoy rmqd of the working directory was imported')\n")
    script = Path(sys.executable).with_name("rmqd")
    assert script.exists(), f"the rmqd console script is not installed beside {sys.executable}"
    proc = subprocess.Popen([str(script), "--log-level", "WARNING", "serve", "--replicas", "3", "--failover",
                             "--namesrv-port", "0", "--broker-port", "0", "--console-port", "0", "--grpc-port", "0",
                             "--no-metrics", "--store-dir", str(tmp_path / "store")],
                            cwd=decoy.parent, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env=dict(os.environ, PYTHONUNBUFFERED="1"), start_new_session=True)
    lines: list[str] = []
    threading.Thread(target=lambda: lines.extend(proc.stdout), daemon=True).start()
    try:
        wait_until(lambda: any(line.startswith("rmqd ready:") for line in lines) or proc.poll() is not None, 60, interval=0.1,
                   what="serve ready or exited")
        out = "".join(lines)
        assert proc.poll() is None and "rmqd ready:" in out, out[-3000:]
        assert len(re.findall(r"listening on \S+ \(process \d+\)", out)) == 6, out
        assert "decoy" not in out
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(40)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(10)
