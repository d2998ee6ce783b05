"""The tiered store under the local MessageStore, on every backend: history outlives local
retention (pull, min offset, search by time, query by key / unique key / offset msgId), retention
waits for the tier, restart keeps the tier, the index walks files newest first and stops early."""
from __future__ import annotations

import uuid

import pytest

from rmqd.store.message import decode_message
from rmqd.store.message_store import GetMessageStatus as S
from tests.tier.helpers import make_store, put, tier_props

TOPIC = "TierTopic"
N = 600


@pytest.fixture
def tiered(backend_kind, tmp_path, request):
    endpoint = request.getfixturevalue("s3_endpoint") if backend_kind == "s3" else ""
    props = tier_props(backend_kind, str(tmp_path / "tier"), endpoint, f"b-{uuid.uuid4().hex[:10]}")
    stores = []

    def open_store():
        s = make_store(str(tmp_path / "store"), props)
        s.start()
        stores.append(s)
        return s
    yield open_store
    for s in stores:
        s.shutdown()


def read_all(store, topic, qid, start=None):
    """(queueOffset, record bytes) from ``start`` (default: the min offset) to the max offset."""
    off = store.get_min_offset(topic, qid) if start is None else start
    out = []
    while off < store.get_max_offset(topic, qid):
        r = store.get_messages(topic, qid, off, 32)
        assert r.status is S.FOUND, (off, r.status)
        out.extend(zip(r.queue_offsets, (bytes(b) for b in r.buffers)))
        off = r.next_begin_offset
    return out


def test_history_outlives_local_retention(tiered, backend_kind):
    store = tiered()
    put(store, TOPIC, N)
    before = {q: read_all(store, TOPIC, q) for q in (0, 1)}
    assert [o for o, _ in before[0]] == list(range(N // 2))
    earliest = store.get_earliest_message_time(TOPIC, 0)
    store.tier.commit_now()
    assert store.execute_delete_files_manually() >= 2
    assert store.commitlog.min_offset() > 0
    local_min = store.local_queue(TOPIC, 0).min_offset
    assert local_min > 0                                   # the local queue lost its head ...
    assert store.get_min_offset(TOPIC, 0) == 0             # ... GET_MIN_OFFSET = min(local, tier)
    for q in (0, 1):
        after = read_all(store, TOPIC, q)
        assert after == before[q]                          # same offsets, same bytes, across both tiers
    first = decode_message(before[0][0][1])
    assert store.read_message(first.commit_log_offset) == before[0][0][1]   # VIEW_MESSAGE_BY_ID (offset msgId)
    assert store.get_earliest_message_time(TOPIC, 0) == earliest
    # SEARCH_OFFSET_BY_TIMESTAMP older than the local data answers from the tier
    mid = decode_message(before[0][local_min // 2][1])
    assert store.get_offset_by_time(TOPIC, 0, mid.store_timestamp) <= local_min // 2
    assert store.get_offset_by_time(TOPIC, 0, 0) == 0
    # below every tier: OFFSET_TOO_SMALL pointing at the tier's min; the fast path declines tier offsets
    assert store.get_messages_resident(TOPIC, 0, 0, 32, None) is None


def test_query_by_key_and_unique_key_finds_tier_only_messages(tiered, backend_kind):
    store = tiered()
    n = N // 2 if backend_kind == "s3" else N
    put(store, TOPIC, n)
    store.tier.commit_now()
    store.execute_delete_files_manually()
    gone = store.commitlog.min_offset()
    old = decode_message(store.get_messages(TOPIC, 0, 0, 1).buffers[0])
    assert old.commit_log_offset < gone
    for key in (old.properties["KEYS"].split()[0], old.properties["UNIQ_KEY"]):
        found = store.query_message(TOPIC, key, 32).messages
        assert [decode_message(m).queue_offset for m in found] == [old.queue_offset]
    every = store.query_message(TOPIC, "shared", 10_000).messages
    assert len(every) == n and len({decode_message(m).commit_log_offset for m in every}) == n
    # maxNum stops the walk early: newest files first, fewer range reads than a full walk
    reads0 = store.tier.index.query_reads
    some = store.tier.reads.tier_query(TOPIC, "shared", 5, 0, 2 ** 62)
    assert len(some) == 5
    reads_some = store.tier.index.query_reads - reads0
    reads0 = store.tier.index.query_reads
    store.tier.reads.tier_query(TOPIC, "shared", 10_000, 0, 2 ** 62)
    assert reads_some < store.tier.index.query_reads - reads0
    # a time range: only messages stored inside it
    t = old.store_timestamp
    ranged = store.tier.reads.tier_query(TOPIC, old.properties["UNIQ_KEY"], 32, t, t)
    assert len(ranged) == 1


def test_compacted_and_uploaded_queries_take_two_reads(tiered, backend_kind):
    store = tiered()
    put(store, TOPIC, 200)
    store.tier.commit_now()
    files = store.tier.index.status()
    assert files and all(f["state"] == "uploaded" for f in files)
    f = store.tier.index.files[0]
    from rmqd.store.tier.index import layout as L
    items, reads = f.query(L.key_hash(TOPIC, "key-0"), 0, 2 ** 62, 10, store.tier.backend,
                           store.tier.index.segment_path(f.seg_base))
    assert reads == 2 and len(items) == 1


@pytest.mark.parametrize("backend_kind", ["posix"])
def test_retention_waits_for_the_tier(tiered, backend_kind):
    store = tiered()
    put(store, TOPIC, N)

    def fail(step):
        if step == "dispatch.commitlog":
            raise OSError("backend down")
    store.tier.step_hook = fail
    assert store.execute_delete_files_manually() == 0      # logged, not raised: the run goes on
    assert store.commitlog.min_offset() == 0               # nothing reached the tier: nothing deleted
    assert "backend down" in store.tier.last_error
    store.tier.step_hook = None
    assert store.execute_delete_files_manually() >= 2      # now everything is copied first
    assert store.get_min_offset(TOPIC, 1) == 0
    assert len(read_all(store, TOPIC, 1)) == N // 2


def test_restart_keeps_the_tier(tiered, backend_kind):
    store = tiered()
    put(store, TOPIC, N)
    store.tier.commit_now()
    store.execute_delete_files_manually()
    want = read_all(store, TOPIC, 0)
    store.shutdown()
    store = tiered()
    if backend_kind == "memory":                           # Java's MemoryFileSegment: gone with the process
        assert store.get_min_offset(TOPIC, 0) > 0
        return
    assert read_all(store, TOPIC, 0) == want
    assert len(store.query_message(TOPIC, "shared", 10_000).messages) == N
    put(store, TOPIC, 100, start=N)                        # copying continues where it stopped
    store.tier.commit_now()
    assert store.tier.queues[(TOPIC, 0)].max_offset == (N + 100) // 2


def test_levels_and_system_topics(tmp_path):
    props = tier_props("memory", "", tieredStorageLevel="FORCE")
    store = make_store(str(tmp_path / "s"), props)
    store.start()
    try:
        put(store, TOPIC, 40)
        put(store, "RMQ_SYS_TRANS_HALF_TOPIC", 4, queues=1)
        store.tier.commit_now()
        assert ("RMQ_SYS_TRANS_HALF_TOPIC", 0) not in store.tier.queues
        assert store.tier.reads.serves_pull(TOPIC, 0, 0)       # FORCE: the tier serves what it has
        assert len(read_all(store, TOPIC, 0)) == 20
    finally:
        store.shutdown()
    props = tier_props("memory", "", tieredStorageLevel="DISABLE")
    store = make_store(str(tmp_path / "d"), props)
    store.start()
    try:
        put(store, TOPIC, N)
        store.execute_delete_files_manually()
        assert store.get_min_offset(TOPIC, 0) > 0               # copied, but never read back
    finally:
        store.shutdown()
