"""Fixtures shared by tests/ and compat_tests/: the one SparkSession (local[2]) of the whole run.

It starts on first use only, so a run without Spark tests starts no JVM. The connector tests
(tests/spark), the pipeline jobs (tests/pipeline) and the real-client pipeline scenario
(compat_tests) all use this session: jobs take it instead of making their own.
"""
from __future__ import annotations

import os
import sys

import pytest


@pytest.fixture(scope="session")
def spark():
    pytest.importorskip("pyspark", reason="the spark extra (pip install -e '.[test]') is required")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)      # executors run this interpreter
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession
    session = (SparkSession.builder.master("local[2]").appName("rmqd-tests")
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.driver.host", "127.0.0.1")
               .config("spark.driver.bindAddress", "127.0.0.1")
               .config("spark.sql.shuffle.partitions", "2")
               .config("spark.sql.python.filterPushdown.enabled", "true")
               .config("spark.python.worker.reuse", "true")
               .getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()
