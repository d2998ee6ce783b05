"""rmqd pipeline archive of a store whose oldest CommitLog files local retention deleted after the tier took
their messages: the deleted files are rebuilt from the tier (Posix, and S3 through the tier's backend with
--broker-conf), so the archive holds every message of every sealed file exactly once; a re-run adds nothing;
files deleted after they were archived from local are not archived again from the tier."""
from __future__ import annotations

import json
import os
import uuid

import pytest

from tests.pipeline.helpers import archive_rows, message_row
from tests.tier.conftest import s3_endpoint  # noqa: F401  (the moto S3 server fixture)
from tests.tier.helpers import make_store, put, tier_props

pytest.importorskip("pyspark", reason="the spark extra (pip install -e '.[test]') is required")

from rmqd.pipeline.archive import COMMITS, Archive  # noqa: E402
from rmqd.pipeline.segments import LocalCommitLog  # noqa: E402
from rmqd.store.message import decode_message  # noqa: E402

pytestmark = pytest.mark.timeout(300)
TOPICS = {"ArchTier": 2, "ArchTier2": 1}


def _all_messages(store) -> list[tuple]:
    """Every message of the store's queues from offset 0 (the tier serves what local retention deleted)."""
    rows = []
    for topic, queues in TOPICS.items():
        for q in range(queues):
            off = store.get_min_offset(topic, q)
            assert off == 0
            while off < store.get_max_offset(topic, q):
                r = store.get_messages(topic, q, off, 32)
                rows += [message_row(decode_message(bytes(b))) for b in r.buffers]
                off = r.next_begin_offset
    return rows


def _expected(store, root: str) -> list[tuple]:
    """The messages of every sealed CommitLog file, deleted or not."""
    sealed = LocalCommitLog(root).sealed_segments()
    end = sealed[-1].base + sealed[-1].size
    return sorted(r for r in _all_messages(store) if r[9] < end)


def _manifest_segments(out: str) -> list[dict]:
    return [s for n in sorted(os.listdir(os.path.join(out, COMMITS)))
            for s in json.load(open(os.path.join(out, COMMITS, n)))["segments"]]


def _fill(store, start: int) -> None:
    put(store, "ArchTier", 400, queues=2, start=start)
    put(store, "ArchTier2", 150, queues=1, start=start)


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["posix", "s3"])
def test_local_and_tier_segments_are_archived_each_message_once(spark, kind, tmp_path, request):
    endpoint = request.getfixturevalue("s3_endpoint") if kind == "s3" else ""
    props = tier_props(kind, str(tmp_path / "tier"), endpoint, f"a-{uuid.uuid4().hex[:10]}")
    root, out = str(tmp_path / "store"), str(tmp_path / "arch")
    store = make_store(root, props)
    store.start()
    try:
        _fill(store, 0)
        store.tier.commit_now()
        assert store.execute_delete_files_manually() >= 2              # the oldest files are in the tier only
        _fill(store, 1000)
        first_local = LocalCommitLog(root).sealed_segments()[0].base
        assert first_local > 0
        want = _expected(store, root)
    finally:
        store.shutdown()
    conf = None
    if kind == "s3":
        conf = str(tmp_path / "broker.conf")
        with open(conf, "w") as f:
            f.write("".join(f"{k}={v}\n" for k, v in props.items()))
    s = Archive(root, out, broker_conf=conf).run(spark)
    got = archive_rows(out)
    assert len(set(got)) == len(got) and got == want                   # each message once, byte for byte
    assert any(r[9] < first_local for r in got) and any(r[9] >= first_local for r in got)
    segs = _manifest_segments(out)
    assert {x["source"] for x in segs} == {"local", "tier"} and s.details["segments"] == len(segs)
    assert len({x["segment"] for x in segs}) == len(segs)
    assert all(x["base"] < first_local for x in segs if x["source"] == "tier")
    assert not Archive(root, out, broker_conf=conf).has_work()         # a re-run adds nothing
    if kind == "s3":
        return
    # later: more messages, and retention deletes files that were archived from local: not archived again
    archived_end = max(x["base"] + x["size"] for x in segs)
    store = make_store(root, props)
    store.start()
    try:
        _fill(store, 2000)
        store.tier.commit_now()
        assert store.execute_delete_files_manually() >= 1
        _fill(store, 3000)
        assert LocalCommitLog(root).sealed_segments()[0].base >= archived_end     # archived locally, now deleted
        want = _expected(store, root)
    finally:
        store.shutdown()
    Archive(root, out).run(spark)
    got = archive_rows(out)
    assert len(set(got)) == len(got) and got == want
    again = _manifest_segments(out)
    assert len({x["segment"] for x in again}) == len(again)
    assert {x["segment"]: x["source"] for x in again if x["base"] < archived_end} == \
        {x["segment"]: x["source"] for x in segs}                      # nothing of the first run again
    assert any(x["source"] == "tier" and x["base"] >= archived_end for x in again)
    assert not Archive(root, out).has_work()
