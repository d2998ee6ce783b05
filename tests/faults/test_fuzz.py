"""Bounded fuzzing in CI: decoders (seeded mutation engine over tests/faults/corpus) and a live
server fed mutated requests of every registered request code.  Longer runs: scripts/fuzz_*.py."""
from __future__ import annotations

import pytest

from tests.faults import fuzzkit
from tests.faults.netfuzz import registered_codes, run_network_fuzz

pytestmark = pytest.mark.timeout(180)


@pytest.mark.parametrize("target", sorted(fuzzkit.TARGETS))
def test_decoder_fuzz(target):
    assert fuzzkit.run(target, 3000, seed=20261121) == 3000


def test_every_dispatcher_code_is_fuzzed():
    broker, namesrv = registered_codes()
    assert 310 in broker and 11 in broker and 105 in namesrv and 103 in namesrv


@pytest.mark.slow
def test_network_fuzz_live_server(make_server):
    srv = make_server().start()
    rep = run_network_fuzz(srv, 1500, seed=7, deadline_s=20.0)
    assert srv.alive()
    assert rep.unanswered == []
    assert rep.healthy_after
    assert rep.bystander_failures == 0
    assert rep.rss_after_kb - rep.rss_before_kb < 150 * 1024
