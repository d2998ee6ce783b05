"""Crash consistency: SIGKILL under producer load, restart, every acknowledged send reads back.

SIGKILL keeps the page cache, so ASYNC_FLUSH must lose nothing here either (power loss is what
ASYNC_FLUSH risks, bounded by the flush interval; a process kill cannot simulate it).
Longer runs: ``scripts/crash_soak.py``.
"""
from __future__ import annotations

import random

import pytest

from tests.faults.faultkit import crash_trials, offset_trial

pytestmark = pytest.mark.timeout(180)


@pytest.mark.slow
@pytest.mark.parametrize("flush_type", ["SYNC_FLUSH", "ASYNC_FLUSH"])
def test_sigkill_under_load_loses_no_acknowledged_message(tmp_path, flush_type):
    results = crash_trials(str(tmp_path), trials=3, flush_type=flush_type, seed=7,
                           run_s=(0.4, 1.0), segment=128 * 1024)
    assert sum(r.acked for r in results) > 100, "the producers barely ran"
    assert [p for r in results for p in r.problems] == []
    assert max(r.recovery_s for r in results) < 20


@pytest.mark.slow
def test_consumer_offsets_survive_sigkill(tmp_path):
    assert offset_trial(str(tmp_path), persist_ms=1000, rounds=2, rnd=random.Random(3)) == []
