"""Fixtures for the real-client scenarios: client interpreters and a fresh rmqd per test.

cpp1 is the interpreter running pytest (the ``rocketmq`` 0.4.4 wheel from the test extra, C++
client 1.0.1). cpp2 is ``.venv-cpp2`` (the ``rocketmq-python-cvs`` 2.1.0.3 sdist, C++ client 2.x,
same import name), created on first use: both are core clients, so a missing one fails the
run instead of skipping it.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from clientrunner import _has_client  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
CPP2_VENV = Path(os.environ.get("RMQD_CPP2_VENV", REPO / ".venv-cpp2"))
CPP2_PACKAGE = "rocketmq-python-cvs==2.1.0.3"


def _ensure_cpp2() -> str:
    python = CPP2_VENV / "bin" / "python"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(CPP2_VENV)], check=True, timeout=120)
    if not _has_client(str(python)):
        subprocess.run([str(python), "-m", "pip", "install", "-q", CPP2_PACKAGE], check=True, timeout=600)
        _has_client.cache_clear()
    assert _has_client(str(python)), f"{CPP2_PACKAGE} is not importable from {python}"
    return str(python)


@pytest.fixture(scope="session")
def client_pythons() -> dict[str, str]:
    cpp1 = os.environ.get("RMQD_CPP1_PYTHON", sys.executable)
    assert _has_client(cpp1), "the rocketmq wheel (test extra) is not importable"
    return {"cpp1": cpp1, "cpp2": os.environ.get("RMQD_CPP2_PYTHON") or _ensure_cpp2()}


@pytest.fixture(params=["cpp1", "cpp2"])
def client(request: pytest.FixtureRequest, client_pythons: dict[str, str]) -> tuple[str, str]:
    """(name, python executable) of each C++ client generation."""
    return request.param, client_pythons[request.param]

