"""Fixtures for the real-client scenarios: client interpreters and a fresh rmqd per test.

cpp1 is the interpreter running pytest (the ``rocketmq`` 0.4.4 wheel from the test extra, C++
client 1.0.1). cpp2 is ``.venv-cpp2`` (the ``rocketmq-python-cvs`` 2.1.0.3 sdist, C++ client 2.x,
same import name), created on first use: both are core clients, so a missing one fails the
run instead of skipping it.
"""
from __future__ import annotations

import os
import sys

import pytest

from clientrunner import _has_client, ensure_cpp2_python

HERE = os.path.dirname(os.path.abspath(__file__))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Every test here runs real clients or a reference broker: marked ``compat`` and ``slow`` (out of the fast
    loop). The hook sees the whole session's items, so only those under this folder are marked."""
    for item in items:
        if str(item.path).startswith(HERE + os.sep):
            item.add_marker(pytest.mark.compat)
            item.add_marker(pytest.mark.slow)


@pytest.fixture(scope="session")
def client_pythons() -> dict[str, str]:
    cpp1 = os.environ.get("RMQD_CPP1_PYTHON", sys.executable)
    assert _has_client(cpp1), "the rocketmq wheel (test extra) is not importable"
    return {"cpp1": cpp1, "cpp2": ensure_cpp2_python()}


@pytest.fixture(params=["cpp1", "cpp2"])
def client(request: pytest.FixtureRequest, client_pythons: dict[str, str]) -> tuple[str, str]:
    """(name, python executable) of each C++ client generation."""
    return request.param, client_pythons[request.param]



@pytest.fixture(scope="session")
def reference_cluster(tmp_path_factory: pytest.TempPathFactory):
    """The real Java 4.9.8 name server + broker, started once per test session (javakit), with
    ``javakit.REFERENCE_BROKER_PROPERTIES`` (fast delay levels and transaction checks, SQL92 filtering)."""
    from javakit import ReferenceCluster, reference_conf_lines, require_kit

    require_kit()
    cluster = ReferenceCluster(tmp_path_factory.mktemp("reference-cluster"), extra_conf=reference_conf_lines())
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.kill()


@pytest.fixture(scope="session")
def reference_broker(request: pytest.FixtureRequest):
    """The real RocketMQ the differential tests compare rmqd with (reference_target.choose_reference):
    the official image through testcontainers where a Docker engine answers, else the kit's cluster
    (the session's ``reference_cluster``, so the session runs one Java broker either way)."""
    from reference_target import DockerReference, choose_reference, docker_engine_answers

    kind = choose_reference()
    if kind == "kit":
        cluster = request.getfixturevalue("reference_cluster")
        cluster.kind = "kit"
        yield cluster
        return
    if not docker_engine_answers():
        pytest.fail("RMQD_REFERENCE=docker but no Docker engine answers (DOCKER_HOST / /var/run/docker.sock)",
                    pytrace=False)
    ref = DockerReference().start()
    ref.kind = "docker"
    try:
        yield ref
    finally:
        ref.stop()


@pytest.fixture(scope="session")
def mqadmin_shell():
    """The kit's mqadmin in one JVM for the whole session (javakit.MqadminShell)."""
    from javakit import MqadminShell

    shell = MqadminShell()
    try:
        yield shell
    finally:
        shell.close()


@pytest.fixture(scope="session")
def reference5(tmp_path_factory: pytest.TempPathFactory):
    """The real Java RocketMQ 5.x name server + broker with the local-mode proxy (gRPC), started once per test
    session (java5kit.Reference5Cluster), with the settings the differential scenarios need to run in seconds:
    javakit.REFERENCE_BROKER_PROPERTIES and java5kit.REFERENCE5_PROXY_PROPERTIES."""
    from java5kit import reference5_running

    with reference5_running(tmp_path_factory.mktemp("reference5")) as cluster:
        yield cluster


@pytest.fixture(scope="session")
def mqadmin5():
    """5.x's mqadmin in one JVM for the whole session (java5kit.Mqadmin5)."""
    from java5kit import Mqadmin5

    shell = Mqadmin5()
    try:
        yield shell
    finally:
        shell.close()
