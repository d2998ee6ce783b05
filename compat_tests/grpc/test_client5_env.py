"""The 5.x client environments skip only when the package registry cannot be reached."""
from __future__ import annotations

import subprocess

import pytest

import client5_env

YANKED_PIP = ("ERROR: Could not find a version that satisfies the requirement rocketmq-python-client==5.1.2 "
              "(from versions: 5.0.0, 5.1.3)\nERROR: No matching distribution found for rocketmq-python-client==5.1.2")
YANKED_NPM = "npm ERR! code ETARGET\nnpm ERR! notarget No matching version found for rocketmq-client-nodejs@1.0.8."
OFFLINE_PIP = ("WARNING: Retrying (Retry(total=4)) after connection broken by 'NewConnectionError(...: Failed to "
               "establish a new connection: [Errno -3] Temporary failure in name resolution')'\n" + YANKED_PIP)
OFFLINE_NPM = "npm ERR! code ENOTFOUND\nnpm ERR! errno ENOTFOUND\nnpm ERR! network request to https://x failed"


@pytest.mark.parametrize("output,unreachable", [
    (YANKED_PIP, False), (YANKED_NPM, False), ("npm ERR! code EACCES\nnpm ERR! permission denied", False),
    ("error: externally-managed-environment", False), (OFFLINE_PIP, True), (OFFLINE_NPM, True),
    ("npm ERR! code EAI_AGAIN", True), ("npm ERR! code ETIMEDOUT", True),
])
def test_only_network_failures_count_as_unreachable(output, unreachable):
    assert client5_env.registry_unreachable(output) is unreachable


def test_a_failed_install_fails_and_an_offline_one_skips(monkeypatch):
    def fake(output):
        return lambda *a, **k: subprocess.CompletedProcess(a, 1, "", output)

    monkeypatch.setattr(client5_env.subprocess, "run", fake(YANKED_NPM))
    with pytest.raises(pytest.fail.Exception, match="ETARGET"):
        client5_env._install(["npm", "install", "x"], "npm install x")
    monkeypatch.setattr(client5_env.subprocess, "run", fake(OFFLINE_NPM))
    with pytest.raises(pytest.skip.Exception, match="unreachable"):
        client5_env._install(["npm", "install", "x"], "npm install x")


def test_missing_node_fails(monkeypatch):
    monkeypatch.setattr(client5_env.shutil, "which", lambda tool: None if tool == "npm" else "/usr/bin/" + tool)
    with pytest.raises(pytest.fail.Exception, match="npm not installed"):
        client5_env.node5_dir()
