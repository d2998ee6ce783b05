"""The copier in the background: one wake-up keeps copying while a hot queue is behind (more than
a round's cap per queue), and both its paths (the fast one gathers and scans a group commit in
slices to hand the GIL over; the record-by-record one yields every slice too) store exactly the
records, times, original offsets and keys of the local store."""
from __future__ import annotations

import pytest

from rmqd.store.message import decode_message
from rmqd.store.tier.dispatcher import MAX_GROUPS_PER_QUEUE_PER_ROUND, SLICE, TierDispatcher
from tests.tier.helpers import make_store, put, tier_props

TOPIC = "HotTopic"
GROUP = 600                          # records per group commit: more than one slice


@pytest.mark.parametrize("path", ["fast", "record-by-record"])
def test_one_wakeup_catches_up_and_slices_match_the_local_records(tmp_path, monkeypatch, path):
    n = GROUP * MAX_GROUPS_PER_QUEUE_PER_ROUND + 1200          # more than one round's cap
    assert GROUP > SLICE
    if path != "fast":                                          # what records not in memory take
        monkeypatch.setattr(TierDispatcher, "_copy_group_fast", lambda *_a: -1)
    props = tier_props("memory", "", tieredStoreGroupCommitCount=str(GROUP),
                       tieredStoreIndexFileMaxHashSlotNum="4096", tieredStoreIndexFileMaxIndexNum="40000")
    store = make_store(str(tmp_path / "store"), props, mapped_file_size_consume_queue=20 * 20_000)
    store.start()
    try:
        put(store, TOPIC, n, queues=1, body=100)
        rounds = []
        run_once = store.tier.dispatcher.run_once
        store.tier.dispatcher.run_once = lambda force=False: rounds.append(run_once(force)) or rounds[-1]
        store.tier._dispatch_loop()                             # what one wake-up of the thread does
        assert len(rounds) >= 2 and rounds[0] == GROUP * MAX_GROUPS_PER_QUEUE_PER_ROUND
        tq = store.tier.queues[(TOPIC, 0)]
        assert tq.max_offset == n and not store.tier.dispatcher.backlog
        assert store.tier.committed_max[(TOPIC, 0)] == n
        local = store.local_queue(TOPIC, 0)
        recs = tq.read_messages(0, n, 1 << 30)
        assert [q for q, _, _ in recs] == list(range(n))
        for q, rec, tags in recs:                               # byte for byte, same tags codes
            phys, size, ltags = local.get_entry(q)
            assert rec == bytes(store.commitlog.get(phys, size)) and tags == ltags
        times = [decode_message(r).store_timestamp for _, r, _ in recs]
        segs = tq.commitlog.segments
        assert min(s.min_ts for s in segs) == min(times) and max(s.max_ts for s in segs) == max(times)
        for q in (0, SLICE - 1, SLICE, GROUP - 1, GROUP, n - 1):   # offset msgIds across slice/group edges
            phys = local.get_entry(q)[0]
            assert tq.find_by_commitlog_offset(phys) == recs[q][1]
        hits = store.tier.reads.tier_query(TOPIC, "shared", 2 * n, 0, 2 ** 62)
        assert len(hits) == n
        for i in (0, SLICE, GROUP + SLICE - 1, n - 1):
            assert len(store.tier.reads.tier_query(TOPIC, f"UNIQ{i:08d}", 4, 0, 2 ** 62)) == 1
    finally:
        store.shutdown()
