"""One embedded rmqd per module (the SparkSession is the run-wide one of the root conftest.py)."""
from __future__ import annotations

import sys

import pytest

from rmqd.testing import EmbeddedServer

# small files, so a few thousand messages span several CommitLog and ConsumeQueue files
BROKER_PROPS = dict(mapedFileSizeCommitLog=256 * 1024, mapedFileSizeConsumeQueue=20 * 500,
                    flushIntervalCommitLog=50)


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    server = EmbeddedServer(store_dir=str(tmp_path_factory.mktemp("spark-store")),
                            broker_properties=BROKER_PROPS).start()
    yield server
    server.stop()


@pytest.fixture
def client_python_cpp1() -> str:
    """The interpreter with the C++ 1.x wheel (the test extra installs it here)."""
    return sys.executable
