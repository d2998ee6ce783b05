"""One SparkSession (local[2]) for the whole run, and one embedded rmqd per module."""
from __future__ import annotations

import os
import sys

import pytest

from rmqd.testing import EmbeddedServer

# small files, so a few thousand messages span several CommitLog and ConsumeQueue files
BROKER_PROPS = dict(mapedFileSizeCommitLog=256 * 1024, mapedFileSizeConsumeQueue=20 * 500,
                    flushIntervalCommitLog=50)


@pytest.fixture(scope="session")
def spark():
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)      # executors run this interpreter
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession
    session = (SparkSession.builder.master("local[2]").appName("rmqd-tests")
               .config("spark.ui.enabled", "false")
               .config("spark.driver.host", "127.0.0.1")
               .config("spark.driver.bindAddress", "127.0.0.1")
               .config("spark.sql.shuffle.partitions", "2")
               .config("spark.sql.python.filterPushdown.enabled", "true")
               .config("spark.python.worker.reuse", "true")
               .getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    server = EmbeddedServer(store_dir=str(tmp_path_factory.mktemp("spark-store")),
                            broker_properties=BROKER_PROPS).start()
    yield server
    server.stop()


@pytest.fixture
def client_python_cpp1() -> str:
    """The interpreter with the C++ 1.x wheel (the test extra installs it here)."""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                                    "compat_tests"))
    return sys.executable
