"""Compaction topics in the store: the newest value per key survives, offsets stay, reads route."""
from __future__ import annotations

import os

from rmqd.store.message_store import GetMessageStatus
from tests.compaction.helpers import TOPIC, newest_per_key, open_store, put, read_all


def _fill(store, versions=50, keys=10, filler=400, size=100):
    sent = []
    for v in range(versions):
        for k in range(keys):
            val = f"k{k}-v{v}-".encode() + b"x" * size
            sent.append((put(store, f"key-{k}", val), f"key-{k}", val))
    for f in range(filler):                      # unique keys: roll the log files
        val = f"f{f}".encode() + b"y" * size
        sent.append((put(store, f"filler-{f}", val), f"filler-{f}", val))
    return sent


def _expected(store, sent):
    """What a consumer from the start must see: the newest value per key for the sealed files,
    everything in the file still being written (Java leaves the active file alone)."""
    qlog = store.compaction.logs[(TOPIC, 0)]
    active_from = qlog.segments[-1].qoffs[0]
    table = newest_per_key([s for s in sent if s[0] < active_from])
    want = sorted((off, k, v) for k, (off, v) in table.items())
    return want + [s for s in sent if s[0] >= active_from]


def _fill_interleaved(store, versions=50, keys=10, filler=300, size=100):
    """Each key write is followed by a unique filler, so after compaction the survivors (fillers and each
    key's newest value) sit at increasing offsets with a gap wherever an old version was dropped."""
    sent = []
    n = 0
    for v in range(versions):
        for k in range(keys):
            val = f"k{k}-v{v}-".encode() + b"x" * size
            sent.append((put(store, f"key-{k}", val), f"key-{k}", val))
            val = f"i{n}".encode() + b"y" * size
            sent.append((put(store, f"inter-{n}", val), f"inter-{n}", val))
            n += 1
    for f in range(filler):                      # unique keys: roll the log files
        val = f"f{f}".encode() + b"y" * size
        sent.append((put(store, f"filler-{f}", val), f"filler-{f}", val))
    return sent


def test_newest_value_per_key_with_original_offsets(tmp_path):
    store = open_store(tmp_path / "s")
    sent = _fill_interleaved(store)
    before = read_all(store)
    assert before == sent                            # not compacted yet: everything, in order
    (q, res), = store.compaction.compact(TOPIC, 0)
    assert res.segments_rewritten > 0 and res.records_out < res.records_in
    got = read_all(store)
    assert got == _expected(store, sent)
    offs = [g[0] for g in got]
    assert offs == sorted(offs) and len(set(offs)) == len(offs)
    newest = newest_per_key(sent)
    for k in range(10):
        assert newest[f"key-{k}"] in [(o, v) for o, kk, v in got if kk == f"key-{k}"]
    # the first record (key-0's first version) is gone: the min offset is the first survivor's
    assert store.get_min_offset(TOPIC, 0) == got[0][0] == 1
    # a pull inside a gap returns the next surviving record, for every gap of the compacted part
    gaps = [(a, b) for a, b in zip(offs, offs[1:]) if b - a > 1]
    assert len(gaps) >= 400, len(gaps)               # every old key version left one
    for a, b in gaps:
        r = store.get_messages(TOPIC, 0, a + 1, 1)
        assert r.status is GetMessageStatus.FOUND and r.queue_offsets == [b], (a, b, r.status)
        assert r.next_begin_offset == b + 1
    # below the min offset as well
    r = store.get_messages(TOPIC, 0, 0, 1)
    assert r.status is GetMessageStatus.FOUND and r.queue_offsets == [1]
    mx = store.get_max_offset(TOPIC, 0)
    assert mx == len(sent)
    assert store.get_messages(TOPIC, 0, mx, 32).status is GetMessageStatus.OFFSET_OVERFLOW_ONE
    # live tail after compaction
    off = put(store, "key-3", b"live")
    assert read_all(store, start=off) == [(off, "key-3", b"live")]
    # the checkpoint and files are Java's layout
    root = tmp_path / "s" / "compaction"
    assert (root / "position-checkpoint").exists()
    assert os.listdir(root / "compactionLog" / TOPIC / "0") and os.listdir(root / "compactionCq" / TOPIC / "0")
    store.shutdown()


def test_second_run_is_incremental_and_stable(tmp_path):
    store = open_store(tmp_path / "s")
    sent = _fill(store)
    store.compaction.compact(TOPIC)
    first = read_all(store)
    (_, res), = store.compaction.compact(TOPIC, 0)
    assert res.segments_rewritten == 0
    assert read_all(store) == first
    sent += _fill(store, versions=5, filler=400)
    store.compaction.compact(TOPIC, 0)
    assert read_all(store) == _expected(store, sent)
    store.shutdown()


def test_tombstone_removes_the_key(tmp_path):
    store = open_store(tmp_path / "s")
    sent = _fill(store, versions=3)
    put(store, "key-4", b"")                                  # empty body: delete key-4
    sent2 = _fill(store, versions=0, filler=500)
    store.compaction.compact(TOPIC, 0)
    got = read_all(store)
    keys = [k for _o, k, _v in got]
    assert "key-4" not in keys and "key-3" in keys
    assert len(keys) == len(set(keys))               # each key once: the fillers after it are unique
    want = _expected(store, sent + [(sent2[0][0] - 1, "key-4", b"")] + sent2)
    assert got == [w for w in want if w[2]]          # the tombstone itself is dropped with its key
    store.shutdown()


def test_tag_and_sql_filters_apply_to_compacted_reads(tmp_path):
    from rmqd.filter.message_filter import ExpressionMessageFilter
    store = open_store(tmp_path / "s")
    for v in range(30):
        for k in range(6):
            put(store, f"key-{k}", f"v{v}".encode() + b"z" * 200, tags="even" if k % 2 == 0 else "odd")
    for f in range(400):
        put(store, f"filler-{f}", b"f" * 200, tags="filler")
    store.compaction.compact(TOPIC, 0)
    want = [g for g in read_all(store) if g[1].startswith("key-") and int(g[1][4:]) % 2 == 0]
    assert len(want) == 3
    tag = ExpressionMessageFilter("TAG", "even")
    assert [g for g in read_all(store, message_filter=tag) if g[1].startswith("key-")] == want
    sql = ExpressionMessageFilter("SQL92", "TAGS = 'even'")
    assert [g for g in read_all(store, message_filter=sql) if g[1].startswith("key-")] == want
    store.shutdown()


def test_restart_after_compaction(tmp_path):
    store = open_store(tmp_path / "s")
    sent = _fill(store)
    store.compaction.compact(TOPIC, 0)
    want = read_all(store)
    store.shutdown()
    store = open_store(tmp_path / "s")
    assert read_all(store) == want
    assert store.get_max_offset(TOPIC, 0) == len(sent)
    off = put(store, "key-1", b"after-restart")
    assert off == len(sent)
    store.shutdown()


def test_table_survives_commitlog_retention(tmp_path):
    store = open_store(tmp_path / "s", commitlog_size=64 * 1024, file_reserved_time_hours=0)
    sent = _fill(store)
    put(store, "other", b"x", topic="Plain")
    assert store.commitlog_min_offset() == 0
    store.execute_delete_files_manually()
    store.run_retention_once()                    # the copier runs first, then files go
    assert store.commitlog_min_offset() > 0
    store.compaction.compact(TOPIC, 0)
    got = read_all(store)
    assert got == _expected(store, sent)
    assert store.get_min_offset(TOPIC, 0) == got[0][0]
    ts = store.get_earliest_message_time(TOPIC, 0)
    assert ts > 0 and store.get_offset_by_time(TOPIC, 0, ts) == got[0][0]
    store.shutdown()


def test_keyless_records_are_left_out_and_plain_topics_untouched(tmp_path):
    store = open_store(tmp_path / "s")
    put(store, None, b"no key")
    put(store, "a", b"1")
    store.compaction.catch_up(TOPIC, 0)
    assert store.compaction.logs[(TOPIC, 0)].record_count() == 1
    put(store, "a", b"1", topic="Plain")
    assert store.get_messages_resident("Plain", 0, 0, 32, None) is not None
    assert store.get_messages_resident(TOPIC, 0, 0, 32, None) is None
    store.shutdown()


def test_negative_offset_before_the_first_copy_is_answered_like_a_plain_topic(tmp_path):
    """A pull at offset -1 on a compaction topic whose log has nothing copied yet gets the local queue's
    answer, as a plain topic does (it raised AttributeError on the missing log)."""
    store = open_store(tmp_path / "s")
    try:
        put(store, "k", b"v")
        put(store, "k", b"v", topic="Plain")
        assert (TOPIC, 0) not in store.compaction.logs
        got = store.get_messages(TOPIC, 0, -1, 32)
        plain = store.get_messages("Plain", 0, -1, 32)
        assert got.status is plain.status is GetMessageStatus.OFFSET_TOO_SMALL
        assert (got.next_begin_offset, got.min_offset, got.max_offset) == (0, 0, 1)
    finally:
        store.shutdown()


def test_status_rows_carry_every_queue_stats_field(tmp_path):
    """``status()`` lists the QueueStats fields one by one (a typed row): none may be left out."""
    from dataclasses import fields

    from rmqd.store.compaction.store import QueueStats, QueueStatus
    store = open_store(tmp_path / "s")
    try:
        put(store, "k", b"v")
        store.compaction.catch_up_all()
        (row,) = store.compaction.status(TOPIC)
        assert {f.name for f in fields(QueueStats)} <= set(row)
        assert list(row) == list(QueueStatus.__annotations__)
    finally:
        store.shutdown()
