"""Truncating a store to the consistent point: consume queues and queue offsets follow, and it survives kill -9
at any step (apache/rocketmq#10666: Java leaves the stale tail valid on disk; #7689: queue offsets reused)."""
from __future__ import annotations

import time

import pytest

from rmqd.store.ha import truncate as truncate_mod
from rmqd.store.ha.truncate import truncate_store
from rmqd.store.message_store import MessageToStore
from tests.replication.ha_peers import make_store

FS = 64 * 1024


def put(store, i: int, queue: int = 0, topic: str = "TruncTopic"):
    r = store.put_message(MessageToStore(topic, queue, b"t" * 700, f"KEYS\x01k{i}", 0, 0, int(time.time() * 1000),
                                         ("127.0.0.1", 5000), ("127.0.0.1", 10911)))
    assert r.status.name == "PUT_OK", r
    return r


def fill(store, n: int) -> list:
    return [put(store, i, i % 2) for i in range(n)]


def abandon(store) -> None:
    """What kill -9 leaves: no shutdown (the abort marker stays), only the directory lock is let go."""
    store._engine.running = False
    for svc in store._services:
        svc.shutdown()
    store._dir_lock.release()


def test_truncation_cuts_commitlog_and_queues_and_hands_out_no_offset_twice(tmp_path):
    store = make_store(str(tmp_path / "s"), FS)
    results = fill(store, 300)                      # several CommitLog files
    cut = results[200].wrote_offsets[0]
    assert store.commitlog_max_offset() > cut
    q0_before, q1_before = store.get_max_offset("TruncTopic", 0), store.get_max_offset("TruncTopic", 1)
    assert truncate_store(store, cut) == cut
    assert store.commitlog_max_offset() == cut
    assert store.get_max_offset("TruncTopic", 0) == 100 and store.get_max_offset("TruncTopic", 1) == 100
    assert (q0_before, q1_before) == (150, 150)
    r = put(store, 1000, 0)
    assert r.wrote_offsets[0] == cut and r.queue_offset == 100    # the next queue offset, not a reused one
    mx = store.commitlog_max_offset()
    store.shutdown()
    again = make_store(str(tmp_path / "s"), FS)
    assert again.get_max_offset("TruncTopic", 0) == 101 and again.commitlog_max_offset() == mx
    again.shutdown()


@pytest.mark.parametrize("crash_after", ["zeroed", "files", "queues", "done"])
def test_truncation_survives_a_crash_at_every_step(tmp_path, monkeypatch, crash_after):
    root = str(tmp_path / "s")
    store = make_store(root, FS)
    results = fill(store, 300)
    cut = results[200].wrote_offsets[0]
    store.flush()

    class Crash(Exception):
        pass

    real_truncate_from = store.commitlog.mfq.truncate_from

    def crash_at(step: str):
        if crash_after == step:
            raise Crash(step)

    def truncate_from(offset):
        crash_at("zeroed")                  # after step 1 (the zeroed, msynced range), before the file deletes
        real_truncate_from(offset)
        crash_at("files")
    monkeypatch.setattr(store.commitlog.mfq, "truncate_from", truncate_from)
    real_flush = store._checkpoint.flush

    def checkpoint_flush():
        crash_at("queues")                  # the consume queues are cut, the checkpoint not lowered yet
        real_flush()
    monkeypatch.setattr(store._checkpoint, "flush", checkpoint_flush)
    try:
        truncate_store(store, cut)
    except Crash:
        pass
    abandon(store)
    recovered = make_store(root, FS)        # abnormal recovery
    try:
        assert recovered.commitlog_max_offset() == cut
        assert recovered.get_max_offset("TruncTopic", 0) == 100
        assert recovered.get_max_offset("TruncTopic", 1) == 100
        r = put(recovered, 5000, 1)
        assert r.wrote_offsets[0] == cut and r.queue_offset == 100
    finally:
        recovered.shutdown()


def test_truncation_at_or_past_the_end_changes_nothing(tmp_path):
    store = make_store(str(tmp_path / "s"), FS)
    fill(store, 10)
    mx = store.commitlog_max_offset()
    assert truncate_store(store, mx) == mx and truncate_store(store, mx + 100) == mx
    assert store.get_max_offset("TruncTopic", 0) == 5
    store.shutdown()
    assert truncate_mod.truncate_store is truncate_store
