"""`pip install .` into a fresh venv gives a broker with the console, metrics and the gRPC endpoint: the base
dependencies are enough (no extra). Then Python started in the source tree, whose compiled modules were built
into the installed copy only, says to run `pip install -e .`.

What is real: a copy of the tree, the build backend with build isolation (setuptools, wheel and Cython installed
from wheels into an isolated environment, as pip does for any user), the wheel's contents (package data: the
console's static files, the .proto files), dependency resolution of the base install into an empty venv, the
`rmqd` console script, and the endpoints answering. What is reused, to keep the test to seconds:

- the C compile: the copy's build directory gets this tree's compiled extensions (the ones the suite runs), and
  they and the generated C get times ahead of their sources and of the Cython the isolated build installs, so
  cythonize and setuptools find them up to date, as in a re-build;
- the downloads: pip installs from a wheelhouse (``$RMQD_WHEELHOUSE``, default ``~/.cache/rmqd-test-wheelhouse``)
  that ``pip download`` fills from the package index the first time, and again whenever the dependencies in
  pyproject.toml change (the offline install then fails to resolve). Only an index that cannot be reached makes
  the test skip, as the other tests that install clients do.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import sysconfig
import threading
import time
import tomllib
import urllib.request
from pathlib import Path

import pytest

from rmqd.common.localports import free_port
from tests.documentation.doc_examples import REPO

PIP_TIMEOUT_S = 240.0
TOPIC = "FreshInstallTopic"
pytestmark = [pytest.mark.timeout(2 * PIP_TIMEOUT_S + 120), pytest.mark.slow]

WHEELHOUSE = Path(os.environ.get("RMQD_WHEELHOUSE") or Path.home() / ".cache" / "rmqd-test-wheelhouse")
UNREACHABLE = ("Name or service not known", "Temporary failure in name resolution", "Network is unreachable",
               "Connection refused", "timed out", "Max retries exceeded")


def pip(*args: str, timeout: float = PIP_TIMEOUT_S) -> subprocess.CompletedProcess:
    env = dict(os.environ, PIP_DISABLE_PIP_VERSION_CHECK="1")
    env.pop("PYTHONPATH", None)
    return subprocess.run([sys.executable, "-m", "pip", *args], capture_output=True, text=True, timeout=timeout,
                          env=env)


def requirements() -> list[str]:
    """What an install of this tree needs from an index: the build requirements and the base dependencies."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text())
    return [*project["build-system"]["requires"], *project["project"]["dependencies"]]


def fill_wheelhouse() -> None:
    WHEELHOUSE.mkdir(parents=True, exist_ok=True)
    # wheels where the index has them; a pure-Python dependency published only as an sdist (pysyncobj) is built
    # into a wheel here, so the offline install below never builds anything but rmqd
    res = pip("wheel", "-q", "--prefer-binary", "-w", str(WHEELHOUSE), *requirements())
    if res.returncode != 0:
        out = res.stdout + res.stderr
        if any(s in out for s in UNREACHABLE):
            pytest.skip(f"the package index cannot be reached: {out[-500:]}")
        raise AssertionError(f"pip download failed:\n{out[-3000:]}")


def offline(*args: str) -> subprocess.CompletedProcess:
    return pip(*args, "--no-index", "--find-links", str(WHEELHOUSE))


def copy_tree(dest: Path) -> None:
    """The tracked files, the generated C sources, and a build directory holding this tree's compiled
    extensions, newer than their sources."""
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, text=True, check=True,
                            timeout=60).stdout.split("\0")
    for rel in filter(None, listed):
        src = REPO / rel
        if src.is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / rel)
    ext_dir = REPO / "rmqd" / "cython_ext"
    lib = dest / "build" / f"lib.{sysconfig.get_platform()}-{sys.implementation.cache_tag}" / "rmqd" / "cython_ext"
    lib.mkdir(parents=True)
    # a day ahead: newer than the sources and than the Cython that build isolation installs during the test
    # (cythonize also compares the .c with Cython's own .pxd files)
    ahead = time.time() + 86400
    for pyx in ext_dir.glob("*.pyx"):
        c = ext_dir / f"{pyx.stem}.c"
        built = list(ext_dir.glob(f"{pyx.stem}.cpython-*.so"))
        assert c.is_file() and built, f"{pyx.name} is not built in this tree (pip install -e . builds it)"
        shutil.copy2(c, dest / "rmqd" / "cython_ext" / c.name)
        shutil.copy2(built[0], lib / built[0].name)
        os.utime(dest / "rmqd" / "cython_ext" / c.name, (ahead, ahead))
        os.utime(lib / built[0].name, (ahead + 1, ahead + 1))


def get(url: str) -> tuple[int, bytes]:
    with urllib.request.urlopen(url, timeout=20) as r:
        return r.status, r.read()




def test_pip_install_then_serve_answers_on_every_endpoint(tmp_path):
    tree, dist, venv = tmp_path / "rmqd-src", tmp_path / "dist", tmp_path / "venv"
    copy_tree(tree)
    t0 = time.monotonic()
    built = offline("wheel", "--no-deps", "-w", str(dist), str(tree))
    if built.returncode != 0:                   # the wheelhouse lacks setuptools/wheel/Cython: fetch them once
        fill_wheelhouse()
        built = offline("wheel", "--no-deps", "-w", str(dist), str(tree))
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    assert "Cythonizing" not in built.stdout + built.stderr
    (wheel,) = dist.glob("rmqd-*.whl")
    t1 = time.monotonic()
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    installed = offline("--python", str(python), "install", "--no-compile", str(wheel))
    if installed.returncode != 0:               # a dependency the wheelhouse does not have yet
        fill_wheelhouse()
        installed = offline("--python", str(python), "install", "--no-compile", str(wheel))
    assert installed.returncode == 0, installed.stdout[-3000:] + installed.stderr[-3000:]
    print(f"wheel built in {t1 - t0:.1f} s, installed with its dependencies in {time.monotonic() - t1:.1f} s")
    freeze = pip("--python", str(python), "list", "--format=json")
    have = {p["name"].lower() for p in json.loads(freeze.stdout)}
    assert {"rmqd", "aiohttp", "grpcio", "protobuf"} <= have and not {"pyspark", "boto3"} & have, have

    ports = {name: free_port() for name in ("console", "metrics", "grpc")}
    env = {"PATH": f"{venv / 'bin'}{os.pathsep}/usr/bin:/bin", "HOME": str(tmp_path), "PYTHONUNBUFFERED": "1",
           "ROCKETMQ_BROKER_DISKSPACEWARNINGLEVELRATIO": "0.98", "ROCKETMQ_BROKER_DISKSPACECLEANFORCIBLYRATIO": "0.98"}
    proc = subprocess.Popen(["rmqd", "serve", "--namesrv-port", "0", "--broker-port", "0",
                             "--console-port", str(ports["console"]), "--metrics-port", str(ports["metrics"]),
                             "--grpc-port", str(ports["grpc"])], cwd=tmp_path, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    err: list[str] = []
    threading.Thread(target=lambda: err.extend(proc.stderr), daemon=True).start()
    try:
        block = []
        for line in proc.stdout:
            block.append(line)
            if line.startswith("rmqd ready:"):
                break
        ready = block[-1] if block else ""
        assert ready.startswith("rmqd ready:"), "".join(block) + "".join(err)
        assert f"console http://127.0.0.1:{ports['console']}/" in ready
        assert f"metrics http://127.0.0.1:{ports['metrics']}/metrics" in ready
        assert f"grpc 127.0.0.1:{ports['grpc']}" in ready
        status, body = get(f"http://127.0.0.1:{ports['console']}/healthz")
        assert status == 200 and json.loads(body) == {"status": "ok"}
        status, page = get(f"http://127.0.0.1:{ports['console']}/topics")
        assert status == 200 and b"/static/app.js" in page
        assert get(f"http://127.0.0.1:{ports['console']}/static/app.js")[0] == 200      # package data
        status, text = get(f"http://127.0.0.1:{ports['metrics']}/metrics")
        assert status == 200 and b"rocketmq_topic_number" in text
        # a topic as a user makes one, with the installed `rmqd admin` (the gRPC endpoint, as the 5.x proxy,
        # refuses routes of system topics such as TBW102)
        namesrv, broker = (re.search(rf"{what} (127\.0\.0\.1:\d+)", ready).group(1)
                           for what in ("name server", "broker"))
        made = subprocess.run(["rmqd", "admin", "updateTopic", "-n", namesrv, "-b", broker, "-t", TOPIC],
                              cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
        assert made.returncode == 0, made.stdout + made.stderr
        assert_grpc_answers(ports["grpc"])
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)
    assert proc.returncode == 0, "".join(err)

    # the installed copy works from anywhere; Python started in the source tree imports that tree instead,
    # whose extensions were built into the installed copy only, and says what to run
    ok = subprocess.run([str(python), "-c", "import rmqd.store.message_store"], cwd=tmp_path, env=env,
                        capture_output=True, text=True, timeout=60)
    assert ok.returncode == 0, ok.stderr
    guard = subprocess.run([str(python), "-c", "import rmqd.store.message_store"], cwd=tree, env=env,
                           capture_output=True, text=True, timeout=60)
    assert guard.returncode == 1 and f"Run `pip install -e .` in {tree}" in guard.stderr, guard.stderr


def assert_grpc_answers(port: int) -> None:
    """A RocketMQ 5 QueryRoute for the topic ``rmqd admin`` made (8 queues), with this suite's stubs of the same
    .proto; the route may take a moment to reach the name server."""
    import grpc

    from rmqd.grpc.pb import definition_pb2 as d
    from rmqd.grpc.pb import service_pb2 as s
    from rmqd.grpc.pb import service_pb2_grpc as sg
    deadline = time.monotonic() + 20
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        stub = sg.MessagingServiceStub(channel)
        while True:
            route = stub.QueryRoute(s.QueryRouteRequest(topic=d.Resource(name=TOPIC)), timeout=20,
                                    metadata=[("x-mq-client-id", "fresh-install-test")])
            if route.status.code != d.TOPIC_NOT_FOUND or time.monotonic() > deadline:
                break
            time.sleep(0.2)
    assert route.status.code == d.OK and len(route.message_queues) == 8, route
