"""The index service against seed 003's gaps in Java: newest file first with an early stop at
maxNum, a file that began before the range but reaches into it, and the states of each file."""
from __future__ import annotations

from rmqd.store.tier.backend import MemoryBackend
from rmqd.store.tier.index import layout as L
from rmqd.store.tier.index.service import IndexStoreService
from rmqd.store.tier.metadata import TierMetadata

T0 = 1_800_000_000_000


def service(tmp_path, clock):
    md = TierMetadata(str(tmp_path / "config"))
    svc = IndexStoreService(str(tmp_path), MemoryBackend(), md, "C", "b", slots=8, max_items=40,
                            reserved_hours=72, rolling_interval_hours=24, clock=lambda: clock[0])
    svc.recover()
    return svc, md


def put_and_commit(svc, md, msgs):
    svc.put(msgs)
    entries = svc.checkpoint()
    md.commit({}, entries)
    svc.committed(entries)


def msg(key, offset, ts):
    return ((L.key_hash("T", key),), 1, 0, offset, 100, ts)


def test_newest_file_first_and_early_stop(tmp_path):
    clock = [T0]
    svc, md = service(tmp_path, clock)
    for f in range(3):                         # three files, 30 items of "k" each (full at 39 items)
        clock[0] = T0 + f * 60_000
        put_and_commit(svc, md, [msg("k", f * 1000 + i, clock[0] + i) for i in range(30)])
        svc.seal_requested = True
        svc.maybe_roll()
        put_and_commit(svc, md, [])
    while svc.run_once():
        pass
    assert [f["state"] for f in svc.status()] == ["uploaded"] * 3
    files = list(svc.query("T", "k", 0, 2 ** 62, 5))
    got = []
    for _ts, items in svc.query("T", "k", 0, 2 ** 62, 5):
        got.extend(items)
        if len(got) >= 5:
            break                              # the caller stops: older files are never read
    assert [i[2] for i in got[:5]] == [2029, 2028, 2027, 2026, 2025]   # newest file, newest items first
    assert len(files) == 3
    reads_before = svc.query_reads
    gen = svc.query("T", "k", 0, 2 ** 62, 5)
    next(gen)
    assert svc.query_reads - reads_before == 2                          # one file: slot + run


def test_file_that_began_before_the_range_is_searched(tmp_path):
    clock = [T0 + 3_600_000]                  # the file is created an hour after its messages were stored
    svc, md = service(tmp_path, clock)
    put_and_commit(svc, md, [msg("late", 7, T0 + 10_000)])
    f = svc.files[0]
    assert f.begin_ts > T0 + 10_000            # Java: beginTs outside [begin, end] -> file skipped
    hits = [i for _ts, items in svc.query("T", "late", T0, T0 + 20_000, 10) for i in items]
    assert [h[2] for h in hits] == [7]
    assert hits[0][4] == -3590                 # timeDiff is negative (truncated toward zero)
    assert not list(svc.query("T", "late", T0 + 30_000, T0 + 40_000, 10))


def test_states_and_restart(tmp_path):
    clock = [T0]
    svc, md = service(tmp_path, clock)
    put_and_commit(svc, md, [msg(f"key{i}", i, T0 + i) for i in range(45)])   # fills one file, starts another
    assert [f["state"] for f in svc.status()] == ["writing", "writing"]
    assert svc.files[0].sealed and not svc.files[1].sealed
    svc.run_once()
    assert svc.status()[0]["state"] == "compacted"
    svc.run_once()
    assert svc.status()[0]["state"] == "uploaded"
    items = [f["items"] for f in svc.status()]
    assert sum(items) == 45
    svc.close()
    svc2 = IndexStoreService(str(tmp_path), svc.backend, md, "C", "b", slots=8, max_items=40, reserved_hours=72,
                             rolling_interval_hours=24, clock=lambda: clock[0])
    svc2.recover()
    assert [f["state"] for f in svc2.status()] == ["uploaded", "writing"]
    for i in (0, 20, 44):
        assert [x for _t, it in svc2.query("T", f"key{i}", 0, 2 ** 62, 4) for x in it][0][2] == i
    clock[0] = T0 + 73 * 3_600_000           # past tieredStoreFileReservedTime: the uploaded file goes
    svc2.run_once()
    assert [f["state"] for f in svc2.status()] == ["writing"]
