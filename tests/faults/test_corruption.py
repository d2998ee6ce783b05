"""Corruption: flipped bytes / truncation in the commit log, consume queues, index files and the
JSON metadata; the server must start, repair or rebuild, log it, and serve every intact message.
Deterministic cases here; ``scripts/corruption_soak.py`` runs 100 random trials."""
from __future__ import annotations

import os
import random
import shutil

import pytest

from rmqd.common.fileutil import copy_sparse
from tests.faults.faultkit import (CORR_TOPIC, CORRUPTION_TARGETS, corruption_trial, populate_store, pull_queue,
                      ServerProcess, CORRUPTION_CONF)

pytestmark = pytest.mark.timeout(240)


@pytest.fixture(scope="module")
def populated(tmp_path_factory):
    root = str(tmp_path_factory.mktemp("populated"))
    acked = populate_store(root, messages=300, seed=5)
    return os.path.join(root, "store"), acked


@pytest.mark.slow
@pytest.mark.parametrize("target,seed", [(t, i) for i, t in enumerate(CORRUPTION_TARGETS)] +
                         [("consumequeue", 11), ("commitlog", 12)])
def test_corrupted_file_is_repaired_and_intact_messages_served(populated, tmp_path, target, seed):
    snapshot, acked = populated
    res = corruption_trial(snapshot, str(tmp_path / "w"), acked, target, random.Random(seed))
    assert res.started, res.problems
    assert res.problems == [], (res.what, res.problems, res.logged)


@pytest.mark.slow
def test_json_damage_is_logged(populated, tmp_path):
    snapshot, acked = populated
    res = corruption_trial(snapshot, str(tmp_path / "w"), acked, "topics.json", random.Random(1))
    assert res.problems == []
    assert any("topics.json" in line for line in res.logged), res.logged


@pytest.mark.slow
def test_topics_json_and_backup_lost_are_rebuilt_from_the_store(populated, tmp_path):
    snapshot, acked = populated
    store = str(tmp_path / "store")
    shutil.copytree(snapshot, store, copy_function=copy_sparse)
    for name in ("topics.json", "topics.json.bak"):
        os.unlink(os.path.join(store, "config", name))
    srv = ServerProcess(store, CORRUPTION_CONF, str(tmp_path / "server.log")).start()
    try:
        with srv.client() as c:
            got = sum(len(pull_queue(c, CORR_TOPIC, q)) for q in range(4))
        assert got == len(acked)
    finally:
        srv.stop()
    assert "restoring its config" in open(tmp_path / "server.log").read()
