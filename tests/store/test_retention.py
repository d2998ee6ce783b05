import os

from rmqd.store.message import MessageToStore
from rmqd.store.message_store import GetMessageStatus as G
from rmqd.store.message_store import PutMessageStatus as P

from tests.store.conftest import FakeClock

HOUR = 3600 * 1000


def _fill(s, n=300):
    for i in range(n):
        assert s.put_message(MessageToStore.create("T", 0, b"r" * 1000, {"KEYS": "k%d" % i})).ok


def test_retention_by_age_at_delete_hour(make_store):
    import time as _t
    clock = FakeClock()
    # choose a clock value whose local hour is the delete hour
    hour = _t.localtime(clock.now / 1000).tm_hour
    s = make_store(clock=clock, delete_when=f"{(hour + 1) % 24:02d}", disk_usage=lambda p: 10.0,
                   mapped_file_size_consume_queue=20 * 20, max_index_num=50)
    _fill(s)
    files = s.commitlog.mfq.files
    assert len(files) >= 5
    for mf in files[:3]:
        os.utime(mf.path, (clock.now / 1000 - 80 * 3600, clock.now / 1000 - 80 * 3600))
    assert s.run_retention_once() == 0            # not the delete hour, disk fine
    clock.advance(HOUR)                           # now it is the delete hour
    n_cq_before = len(s.consume_queues.get("T", 0).mfq.files)
    n_idx_before = len(s.index.files)
    assert s.run_retention_once() == 3            # only the old ones; stop at the first young one
    assert s.commitlog_min_offset() == files[3].file_from_offset
    assert not os.path.exists(files[0].path)
    cq = s.consume_queues.get("T", 0)
    assert len(cq.mfq.files) < n_cq_before and len(s.index.files) < n_idx_before
    mn = s.get_min_offset("T", 0)
    assert mn > 0
    g = s.get_messages("T", 0, mn, 1)
    assert g.status == G.FOUND
    assert s.get_messages("T", 0, mn - 1, 1).status == G.OFFSET_TOO_SMALL
    assert s.query_message("T", "k0", 5).messages == []
    assert s.query_message("T", "k299", 5).messages


def test_retention_by_disk_ratio_and_refusal(make_store):
    clock = FakeClock()
    usage = {"v": 50.0}
    s = make_store(clock=clock, delete_when="99", disk_usage=lambda p: usage["v"],
                   disk_space_clean_forcibly_ratio=85, disk_space_warning_level_ratio=90)   # Java's
    _fill(s)
    nfiles = len(s.commitlog.mfq.files)
    assert s.run_retention_once() == 0
    usage["v"] = 80.0          # > 75 but young files: nothing expired yet
    assert s.run_retention_once() == 0
    usage["v"] = 88.0          # > 85: clean forcibly, oldest first (never the active segment)
    deleted = s.run_retention_once()
    assert deleted == nfiles - 1
    assert s.put_message(MessageToStore.create("T", 0, b"ok")).ok
    usage["v"] = 95.0          # > 90: refuse writes
    s.run_retention_once()
    r = s.put_message(MessageToStore.create("T", 0, b"no"))
    assert r.status == P.SERVICE_NOT_AVAILABLE and "disk" in r.remark
    usage["v"] = 50.0
    s.run_retention_once()
    assert s.put_message(MessageToStore.create("T", 0, b"ok again")).ok
    # everything still readable from the new min offset
    mn = s.get_min_offset("T", 0)
    g = s.get_messages("T", 0, mn, 32)
    assert g.status == G.FOUND


def test_clean_expired_consume_queues_drops_what_retention_emptied(make_store):
    """Java's cleanExpiredConsumerQueue: a queue whose last message ends below the CommitLog's min offset
    goes (its offsets restart at 0, as Java's); queues with live messages and SCHEDULE_TOPIC_XXXX stay."""
    s = make_store(delete_when="99", disk_usage=lambda p: 10.0, file_reserved_time_hours=0)
    for i in range(60):
        assert s.put_message(MessageToStore.create("Old", i % 2, b"o" * 1000)).ok
    assert s.put_message(MessageToStore.create("SCHEDULE_TOPIC_XXXX", 0, b"d" * 100)).ok
    assert s.clean_expired_consume_queues() == []             # nothing expired yet
    _fill(s)                                                   # topic T rolls the CommitLog further
    assert s.execute_delete_files_manually() > 0
    assert s.commitlog_min_offset() > 0
    assert s.clean_expired_consume_queues() == [("Old", 0), ("Old", 1)]
    assert "Old" not in s.topics() and not os.path.exists(os.path.join(s.config.consume_queue_dir, "Old"))
    assert s.consume_queues.get("T", 0) is not None and s.consume_queues.get("SCHEDULE_TOPIC_XXXX", 0) is not None
    r = s.put_message(MessageToStore.create("Old", 0, b"again"))
    assert r.ok and r.queue_offset == 0
    assert s.get_messages("Old", 0, 0, 1).status == G.FOUND
    assert s.clean_expired_consume_queues() == []
