"""Fixtures of the tier tests: an S3 server (moto's, on 127.0.0.1 and a free port, one per
session) and the backend factory every backend test is parametrised over."""
from __future__ import annotations

import os
import subprocess
import sys
import time
import urllib.request
import uuid

import pytest

from rmqd.common.localports import free_port
from tests.tier.helpers import make_backend_of


@pytest.fixture(scope="session")
def s3_endpoint():
    """moto's S3 server in its own process (it would otherwise share this process's GIL)."""
    pytest.importorskip("moto.server", reason="moto[server] comes with the test extra")
    port = free_port()
    # parts of multipart uploads may be small (the tests upload KiB-sized files in 1 KiB parts)
    env = {**os.environ, "S3_UPLOAD_PART_MIN_SIZE": "1024"}
    proc = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while True:
        try:
            urllib.request.urlopen(url + "/moto-api/", timeout=1).close()
            break
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                pytest.fail(f"moto S3 server did not start on {url}")
            time.sleep(0.05)
    try:
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()


@pytest.fixture(params=["posix", "memory", "s3"])
def backend_kind(request):
    return request.param


@pytest.fixture
def backend_factory(backend_kind, tmp_path, request):
    """``factory()`` -> a backend of this kind over the same storage (a second call sees the
    first one's data, except for memory)."""
    endpoint = request.getfixturevalue("s3_endpoint") if backend_kind == "s3" else ""
    bucket = f"t-{uuid.uuid4().hex[:12]}"
    made = []

    def factory():
        b = make_backend_of(backend_kind, str(tmp_path / "tier"), endpoint, bucket)
        made.append(b)
        return b
    yield factory
    for b in made:
        b.close()
