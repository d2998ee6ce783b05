"""Every fault of compat_tests/fault_rounds.py, one round each, on each mixed controller-mode group the issue asks
for: rmqd alone, an rmqd master with Java 5.x slaves, a Java master with rmqd slaves, rmqd brokers under Java's
controller, Java brokers under rmqd's controller. Every server runs on a host of its own (compat_tests/netkit.py:
network namespaces on a bridge; partitions, loss, latency and reordering on the real links), the first member's
store on a throttled loop device (the slow-disk round); producers and a consumer record what they saw, and after
the last round the checker (compat_tests/queue_checker.py) must find nothing acknowledged lost, no duplicate, no
queue offset used twice, no epoch in which two brokers acknowledged sends, no read of something later cut off, and
the members' CommitLogs must be the same bytes.

``RMQD_MIXED_ROUNDS=N`` runs N rounds of each fault, ``RMQD_MIXED_MIXES=a,b`` other mixes (``java-only`` is the
reference), ``RMQD_MIXED_FAULTS=a,b`` some faults only, ``RMQD_MIXED_REPORT=FILE`` appends each round's record and
each group's verdict (JSON lines): scripts/mixed_rounds.py runs them in bursts and writes RELIABILITY.md's table.
Without root, ``ip netns``, iptables-legacy or the 5.x kit these tests fail naming what is missing.
"""
from __future__ import annotations

import os
from pathlib import Path

import orjson
import pytest

from fault_rounds import FAULTS, TOPIC, java_split_brain, judge, new_context, run_round, unexcused
from java5kit import require_kit5
from mixed_group import MIXES, MixedGroup
from netkit import NetKit, require_netns

from tests.failover.kit import SlowDisk

#: the mixes the suite runs by default: every mix with an rmqd member (java-only, the reference, is left to
#: scripts/mixed_rounds.py). The two whose replicas are of both kinds were left out after a run of 2026-11-29 in which
#: their Java members did not rejoin; the three causes found (RELIABILITY.md, "Java brokers that do not come back")
#: are fixed and they are back.
CI_MIXES = ["rmqd-only", "rmqd-under-java-controller", "java-under-rmqd-controller", "rmqd-master-java-slaves",
            "java-master-rmqd-slaves"]
ROUNDS = int(os.environ.get("RMQD_MIXED_ROUNDS", "1"))
MIX_NAMES = [m for m in os.environ.get("RMQD_MIXED_MIXES", ",".join(CI_MIXES)).split(",") if m]
FAULT_NAMES = [f for f in os.environ.get("RMQD_MIXED_FAULTS", ",".join(FAULTS)).split(",") if f]
#: the member whose store is on the slow disk flushes every send (SYNC_FLUSH), so a slow disk slows its sends
SLOW_MEMBER_CONF = {"flushDiskType": "SYNC_FLUSH", "syncFlushTimeout": 2000}


def report(**fields) -> None:
    path = os.environ.get("RMQD_MIXED_REPORT")
    if path:
        with open(path, "a", encoding="utf-8") as f:
            f.write(orjson.dumps(fields).decode() + "\n")


@pytest.mark.mixed_faults
@pytest.mark.timeout(1200 * ROUNDS)
@pytest.mark.parametrize("mix", MIX_NAMES)
def test_each_fault_on_a_mixed_group_loses_nothing_acknowledged(mix, tmp_path):
    require_netns()
    if "java" in MIXES[mix].kinds:
        require_kit5()
    with NetKit() as net:
        disk = SlowDisk() if "slow-disk" in FAULT_NAMES else None
        group = ctx = None
        try:
            group = MixedGroup(tmp_path, MIXES[mix], net,
                               member_store={0: Path(disk.mount) / "store"} if disk else None,
                               member_conf={0: SLOW_MEMBER_CONF} if disk else None).start()
            group.wait_group(TOPIC, 3, timeout=120)
            ctx = new_context(group, net, disk)
            for rnd in range(ROUNDS):
                for fault in FAULT_NAMES:
                    done = len(ctx.records)
                    run_round(ctx, fault, rnd)
                    for rec in ctx.records[done:]:          # with the switchover a slow-disk round starts with
                        report(**rec)
            verdict, per, diffs = judge(ctx)
            for tag, counts in per.items():
                report(mix=mix, tag=tag, summary=True, **counts)
                print(f"{mix} {tag} {counts}")
            report(mix=mix, verdict=True, ok=verdict.ok, acked=verdict.acked, lost=len(verdict.lost),
                   duplicates=verdict.duplicates, offset_reuse=len(verdict.offset_reuse), moved=len(verdict.moved),
                   epoch_conflicts=len(verdict.epoch_conflicts), phantom_reads=len(verdict.phantom_reads),
                   commitlog_differences=diffs)
            excused = java_split_brain(ctx, verdict)
            failures = unexcused(verdict, excused)
            assert not failures, f"{len(failures)} findings: {failures[:10]}; {verdict.summary()}"
            assert not diffs, diffs
            assert verdict.acked > 100 * len(FAULT_NAMES) * ROUNDS / 2, verdict.summary()
        finally:
            if ctx is not None:
                ctx.producer.stop()
                ctx.consumer.stop()
            if group is not None:
                group.stop()
            if disk is not None:
                disk.close()
