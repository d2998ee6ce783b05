"""Fixtures of the tier tests: an S3 server (moto's, in this process, on 127.0.0.1 and a free
port, one per session) and the backend factory every backend test is parametrised over."""
from __future__ import annotations

import logging
import uuid

import pytest

from tests.tier.helpers import make_backend_of


@pytest.fixture(scope="session")
def s3_endpoint():
    moto_server = pytest.importorskip("moto.server", reason="moto[server] comes with the test extra")
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        yield f"http://127.0.0.1:{server._server.server_port}"
    finally:
        server.stop()


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
