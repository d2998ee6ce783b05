"""The RocketMQ 5 clients' own environments: a venv with the PyPI Python client, ``npm install`` of the
Node.js client. Both are made once and kept.

Only a package registry that cannot be reached (name resolution, connection or time-out failures) makes
the tests skip; anything else (a yanked or missing version, a broken install, node/npm not installed)
fails them, naming what went wrong.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PY5_PACKAGE = "rocketmq-python-client==5.1.2"
NODE5_PACKAGE = "rocketmq-client-nodejs@1.0.8"
INSTALL_TIMEOUT_S = 480

# What pip and npm print when the registry cannot be reached at all (not when it answers "no").
NETWORK_FAILURES = ("enotfound", "eai_again", "etimedout", "temporary failure in name resolution",
                    "failed to establish a new connection")


def registry_unreachable(output: str) -> bool:
    """Whether an install's output shows a network failure (and nothing else decided the outcome)."""
    text = output.lower()
    return any(s in text for s in NETWORK_FAILURES)


def _install(cmd: list[str], what: str, cwd: Path | None = None) -> None:
    """Run an install command; skip when the registry is unreachable, fail on any other error."""
    try:
        r = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=INSTALL_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        pytest.skip(f"{what} did not finish in {INSTALL_TIMEOUT_S} s (package registry unreachable?)")
    if r.returncode == 0:
        return
    output = r.stdout + r.stderr
    if registry_unreachable(output):
        pytest.skip(f"package registry unreachable: {what}: {output.strip()[-300:]}")
    pytest.fail(f"{what} failed (exit {r.returncode}): {output[-2000:]}", pytrace=False)


def py5_python() -> str:
    """The interpreter of ``$RMQD_PY5_PYTHON``, or of ``$RMQD_PY5_VENV`` / ``<repo>/.venv-py5`` (made here)."""
    explicit = os.environ.get("RMQD_PY5_PYTHON")
    if explicit:
        return explicit
    venv = Path(os.environ.get("RMQD_PY5_VENV") or REPO / ".venv-py5")
    python = venv / "bin" / "python"
    check = [str(python), "-c", "import rocketmq.v5, rocketmq; print(rocketmq.Producer)"]
    if python.exists() and subprocess.run(check, capture_output=True, timeout=60).returncode == 0:
        return str(python)
    if not python.exists():
        r = subprocess.run([sys.executable, "-m", "venv", str(venv)], capture_output=True, text=True, timeout=120)
        if r.returncode != 0:
            pytest.fail(f"python -m venv {venv} failed: {r.stderr[-1500:]}", pytrace=False)
    _install([str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", PY5_PACKAGE],
             f"pip install {PY5_PACKAGE}")
    r = subprocess.run(check, capture_output=True, text=True, timeout=60)
    if r.returncode != 0:
        pytest.fail(f"{PY5_PACKAGE} installed but not importable: {r.stderr[-1500:]}", pytrace=False)
    return str(python)


def node5_dir() -> str:
    """``$RMQD_NODE5_DIR`` or ``<repo>/.node-client5`` with the Node.js client installed (made here)."""
    missing = [tool for tool in ("node", "npm") if shutil.which(tool) is None]
    if missing:
        pytest.fail(f"{' and '.join(missing)} not installed: the RocketMQ 5 Node.js client test needs Debian's "
                    "nodejs and npm (.ci/run installs them)", pytrace=False)
    target = Path(os.environ.get("RMQD_NODE5_DIR") or REPO / ".node-client5")
    marker = target / "node_modules" / "rocketmq-client-nodejs" / "package.json"
    if marker.exists():
        return str(target)
    target.mkdir(parents=True, exist_ok=True)
    (target / "package.json").write_text('{"name": "rmqd-node5-client", "private": true}\n')
    _install(["npm", "install", "--no-audit", "--no-fund", "--loglevel=error", NODE5_PACKAGE],
             f"npm install {NODE5_PACKAGE}", cwd=target)
    if not marker.exists():
        pytest.fail(f"npm install {NODE5_PACKAGE} succeeded but {marker} is missing", pytrace=False)
    return str(target)
