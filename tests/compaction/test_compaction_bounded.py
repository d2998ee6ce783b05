"""1,000,000 distinct keys compact correctly with an OffsetMap that holds 100,000 (rounds)."""
from __future__ import annotations

import time

import pytest

from rmqd.cython_ext import compaction as _cx
from rmqd.cython_ext import message_codec as _codec
from rmqd.store.message import MessageToStore
from tests.compaction.helpers import TOPIC, open_store

KEYS = 1_000_000
MAP_KEYS = 100_000


def keys_and_bodies(log: bytes):
    """(KEYS, body) of each record of a compaction log segment: decode_messages' record decoder without building
    a StoredMessage per record (1.15 million of them here)."""
    mv = memoryview(log)
    pos, end = 0, len(log)
    while pos < end:
        f = _codec.decode_record(log, pos)
        yield _codec.decode_properties(f[17].decode("utf-8"))["KEYS"], bytes(mv[f[14]:f[14] + f[15]])
        pos += f[0]


@pytest.mark.slow
@pytest.mark.timeout(300)     # ~25 s on a quiet 2-core machine; past the 120 s default at load 15-25
def test_million_keys_in_bounded_memory(tmp_path):
    store = open_store(tmp_path / "s", log_file_size=16 << 20, commitlog_size=256 << 20,
                       map_bytes=(MAP_KEYS * 4 // 3 + 1) * _cx.OFFSET_MAP_ENTRY_SIZE)
    assert _cx.OffsetMap(store.compaction.compaction_config.map_bytes_per_run).capacity <= MAP_KEYS
    batch = []
    for i in range(KEYS):
        batch.append(MessageToStore.create(TOPIC, 0, b"%d" % i, {"KEYS": "k%07d" % i}))
        if len(batch) == 1000:
            store.put_messages(batch)
            batch = []
    # newer values for every 1000th key, and enough fresh keys to seal the file they land in
    for i in range(0, KEYS, 1000):
        store.put_message(MessageToStore.create(TOPIC, 0, b"new-%d" % i, {"KEYS": "k%07d" % i}))
    for j in range(0, 150_000, 1000):
        store.put_messages([MessageToStore.create(TOPIC, 0, b"t", {"KEYS": "t%06d" % (j + n)})
                            for n in range(1000)])
    t0 = time.perf_counter()
    (_, res), = store.compaction.compact(TOPIC, 0)
    elapsed = time.perf_counter() - t0
    assert res.rounds >= KEYS // MAP_KEYS, res
    qlog = store.compaction.logs[(TOPIC, 0)]
    active_from = qlog.segments[-1].qoffs[0]
    assert active_from > KEYS + KEYS // 1000          # the updates are all in sealed files
    seen = {}
    for seg in qlog.segments[:-1]:
        for k, body in keys_and_bodies(seg.read_log()[:seg.log_size]):
            assert k not in seen, f"{k} survived twice"
            seen[k] = body
    main = {k: v for k, v in seen.items() if k.startswith("k")}
    assert len(main) == KEYS
    assert all(main["k%07d" % i] == b"new-%d" % i for i in range(0, KEYS, 1000))
    assert main["k0000001"] == b"1" and main["k0999999"] == b"999999"
    print(f"compacted {res.records_in} records in {elapsed:.1f}s, {res.rounds} rounds")
    store.shutdown()
