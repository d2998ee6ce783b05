"""Each local retention trigger deletes a CommitLog file only once the tier has everything in it:
the ``deleteWhen`` hour (an injected clock) and the disk ratios (an injected disk usage), with the
tier partly committed and then unable to write (backend down), then back."""
from __future__ import annotations

import time

import pytest

from rmqd.store.message import decode_message
from rmqd.store.message_store import GetMessageStatus as S
from tests.tier.helpers import SEG, make_store, put, tier_props

TOPIC = "RetentionTopic"
N = 600                     # about 4 local CommitLog files of 64 KiB


def at_local_hour(hour: int) -> int:
    """Milliseconds of a moment tomorrow at ``hour`` local time (after every file's mtime)."""
    t = time.localtime(time.time() + 86400)
    return int(time.mktime((t.tm_year, t.tm_mon, t.tm_mday, hour, 30, 0, 0, 0, -1)) * 1000)


def backend_down(step: str) -> None:
    if step == "dispatch.commitlog":
        raise OSError("backend down")


def records_from_zero(store, qid: int) -> list:
    off, out = 0, []
    while off < store.get_max_offset(TOPIC, qid):
        r = store.get_messages(TOPIC, qid, off, 32)
        assert r.status is S.FOUND, (qid, off, r.status)
        out.extend(int(decode_message(b).body[:6]) for b in r.buffers)
        off = r.next_begin_offset
    return out


def check_held_then_released(store, run, first_half: int) -> None:
    """The first half is in the tier, the rest is not and cannot get there: ``run()`` (one
    retention run) deletes only files the tier has; once the tier is back, the rest goes."""
    limit = store.tier.retention_limit()
    assert 0 < limit < store.commitlog.max_offset()
    store.tier.step_hook = backend_down
    deleted = run()
    assert deleted >= 1                                     # files wholly in the tier went ...
    assert store.commitlog.min_offset() <= limit            # ... the first one it lacks stayed
    assert store.commitlog.min_offset() + SEG > limit
    assert "backend down" in store.tier.last_error
    assert store.tier.queues[(TOPIC, 0)].max_offset == first_half // 2     # nothing new committed
    store.tier.step_hook = None
    assert run() >= 1                                       # back: copied first, then deleted
    assert store.commitlog.min_offset() > limit
    for q in (0, 1):                                        # every record, from the tier and locally
        assert records_from_zero(store, q) == list(range(q, N, 2))


def test_delete_when_hour(tmp_path):
    now = [at_local_hour(12)]
    store = make_store(str(tmp_path / "store"), tier_props("posix", str(tmp_path / "tier")),
                       clock=lambda: now[0], delete_when="04", disk_usage=lambda _p: 10.0)
    store.start()
    try:
        put(store, TOPIC, N // 2)
        store.tier.commit_now()
        put(store, TOPIC, N // 2, start=N // 2)
        asked = []
        store.tier.step_hook = asked.append
        assert store.run_retention_once() == 0                  # 12:30 is not the deleteWhen hour
        assert store.commitlog.min_offset() == 0 and asked == []   # and the tier was not even asked
        now[0] = at_local_hour(4)
        check_held_then_released(store, store.run_retention_once, N // 2)
    finally:
        store.shutdown()


@pytest.mark.parametrize("usage,reserved_h", [(80, 0), (88, 72)], ids=["diskMaxUsedSpaceRatio", "cleanForcibly"])
def test_disk_ratio(tmp_path, usage, reserved_h):
    """Above diskMaxUsedSpaceRatio (75) expired files go whatever the hour; above the forcible
    ratio (85) unexpired ones too; either way only what the tier has."""
    disk = [10.0]
    store = make_store(str(tmp_path / "store"), tier_props("posix", str(tmp_path / "tier")),
                       delete_when="", file_reserved_time_hours=reserved_h, disk_usage=lambda _p: disk[0],
                       disk_space_clean_forcibly_ratio=85)   # Java's
    store.start()
    try:
        put(store, TOPIC, N // 2)
        store.tier.commit_now()
        put(store, TOPIC, N // 2, start=N // 2)
        assert store.run_retention_once() == 0                  # disk at 10 %: no trigger
        disk[0] = usage
        if reserved_h:
            disk[0] = 80
            store.tier.step_hook = backend_down
            assert store.run_retention_once() == 0              # above 75 % but nothing expired yet
            store.tier.step_hook = None
            disk[0] = usage
        check_held_then_released(store, store.run_retention_once, N // 2)
    finally:
        store.shutdown()
