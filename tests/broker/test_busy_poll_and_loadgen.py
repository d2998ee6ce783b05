"""Busy polling on the broker loop, and the benchmark load generator's bookkeeping."""
from __future__ import annotations

import asyncio

import pytest

from rmqd.remoting.busy_poll import BusyPoll
from scripts import loadgen
from tests.broker.helpers import send_v2


def test_busy_poll_spins_after_close_reads_and_stops_after_the_budget():
    async def main():
        bp = BusyPoll(asyncio.get_running_loop(), 2000)
        for _ in range(60):                     # reads microseconds apart
            bp.touch()
            await asyncio.sleep(0)
        assert bp.spins_started == 1 and bp._spinning
        await asyncio.sleep(0.02)               # nothing arrives for longer than the budget
        assert not bp._spinning
        sparse = BusyPoll(asyncio.get_running_loop(), 200)
        for _ in range(10):                     # reads 5 ms apart: a spin would be wasted
            sparse.touch()
            await asyncio.sleep(0.005)
        assert sparse.spins_started == 0
    asyncio.run(main())


def test_broker_with_busy_poll_serves_sends(harness):
    broker = harness.start(busyPollMicros=20000)     # wide enough for a Python client's round trips
    client = harness.client()
    for k in range(50):
        assert send_v2(client, "BusyTopic", body=b"m%d" % k).code == 0
    assert broker.server._busy_poll is not None and broker.server._busy_poll.spins_started >= 1


@pytest.mark.parametrize("mode", ["closed-loop", "shared", "per-thread"])
def test_loadgen_counts_only_stored_messages(harness, mode):
    broker = harness.start()
    r = loadgen.run(broker.address, "LoadTopic", 4, 0.3, 256, mode)
    assert r["errors"] == 0 and r["sent"] > 0 and r["p50"] is not None
    stored = sum(broker.store.get_max_offset("LoadTopic", q) for q in range(8))
    assert stored == r["warmup_sent"] + r["sent"]
