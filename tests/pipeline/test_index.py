"""rmqd pipeline index in local[2] against the broker's own index of the same messages.

Two copies of one store get a Posix tier whose clock is frozen at the same instant: broker A copies with
messageIndexEnable=true in one round (the copier's catch-up order), seals, compacts and uploads its index;
broker B copies with the index off, and the job indexes B's tier with the same clock. The job's files
equal A's byte for byte (names too: several full files, a message with more keys than a file takes is
skipped by both). B adopts them at its start, uploads them as its own, and answers key queries as A does;
a killed job leaves nothing adoptable and its re-run gives the same files; adoption killed (-9) at each
step loses and duplicates nothing; an output whose ranges are indexed already is set aside."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from tests.kit.processes import child_env
from tests.pipeline.index_helpers import (MAX_ITEMS, T_INDEX, TOPICS, copy_store, fill_base, local_copy_paths,
                                          tier_store, unindexed_tier, upload_all, uploaded_files)

pytest.importorskip("pyspark", reason="the spark extra (pip install -e '.[test]') is required")

from rmqd.common.fileutil import copy_sparse  # noqa: E402
from rmqd.pipeline.errors import PipelineError  # noqa: E402
from rmqd.pipeline.index import Index  # noqa: E402
from rmqd.store.message import decode_message  # noqa: E402
from rmqd.store.tier.index.adopt import MANIFEST, STALE_SUFFIX, output_root  # noqa: E402

pytestmark = pytest.mark.timeout(300)
KEYS = [("IdxA", "shared"), ("IdxB", "shared"), ("IdxB", "k7"), ("IdxB", "g3"), ("IdxA", "m82x5"),
        ("IdxA", "AC11000100002A9F0000000000000000"), ("IdxA", "huge3")]


def _queried(store) -> dict:
    """Per sample key, the (queueId, queueOffset) of what the tier index finds (each once)."""
    out = {}
    for topic, key in KEYS:
        recs = store.tier.reads.tier_query(topic, key, 10_000, 0, 2 ** 62)
        out[(topic, key)] = sorted((decode_message(r).queue_id, decode_message(r).queue_offset) for r in recs)
    return out


def _job_files(out_dir: str) -> dict[int, bytes]:
    return {int(n): open(os.path.join(out_dir, n), "rb").read() for n in os.listdir(out_dir) if n.isdigit()}


@pytest.fixture(scope="module")
def reference(spark, tmp_path_factory):
    """(base store, broker A's uploaded files, A's query answers, job summary, job output files, store B)."""
    d = tmp_path_factory.mktemp("pipe-index")
    base = str(d / "base")
    fill_base(base)
    a_root = copy_store(base, str(d / "a"))
    a = tier_store(a_root, str(d / "a-tier"), index=True)
    a.start()
    total = sum(cq.max_offset - cq.min_offset for cq in a.local_queues())
    assert a.tier.dispatcher.run_once(force=True) == total              # every queue in one round
    a.tier.index.seal_requested = True
    a.tier.dispatcher.run_once(force=True)
    upload_all(a)
    broker = uploaded_files(a)
    answers = _queried(a)
    a.shutdown()
    b = unindexed_tier(base, str(d / "b"))
    summary = Index(b, clock=lambda: T_INDEX, messages_per_task=50).run(spark)
    (out,) = summary.outputs
    # B adopts (and removes) ``out``
    saved = shutil.copytree(out, str(d / "saved-output"), copy_function=copy_sparse)
    return {"dir": d, "base": base, "broker": broker, "answers": answers, "summary": summary,
            "out": out, "saved": saved, "files": _job_files(out), "a": a_root, "b": b}


@pytest.mark.slow
def test_bulk_index_equals_the_brokers_byte_for_byte(reference):
    broker, files, s = reference["broker"], reference["files"], reference["summary"]
    assert len(broker) >= 4 and all(b[:4] == bytes.fromhex("BCC50285") for b in broker.values())
    assert sorted(files) == sorted(broker)                                  # same names (begin times)
    for ts in broker:
        assert files[ts] == broker[ts], ts                                  # same bytes
    assert s.details["files"] == len(broker) and s.details["skippedMessages"] == 1
    assert s.details["items"] == sum(int.from_bytes(b[24:28], "big") for b in broker.values())
    assert s.rows == 420 and s.details["queues"] == 6
    m = json.load(open(os.path.join(reference["saved"], MANIFEST)))
    assert sorted((q["topic"], q["queueId"]) for q in m["queues"]) == sorted((t, q) for t in TOPICS for q in range(3))


def test_the_broker_adopts_the_output_and_serves_queries_from_it(spark, reference):
    b = reference["b"]
    store = tier_store(b, b + "-tier", index=False)
    store.start()                                                           # adopts at start
    try:
        st = {f["beginTs"]: f for f in store.tier.index.status()}
        assert sorted(st) == sorted(reference["broker"]) and {f["state"] for f in st.values()} == {"compacted"}
        assert not os.path.exists(reference["out"])
        assert _queried(store) == reference["answers"]                      # served from the local compacted files
        upload_all(store)
        assert uploaded_files(store) == reference["broker"]                 # uploaded as the broker's own
        assert _queried(store) == reference["answers"]
        assert len(reference["answers"][("IdxA", "shared")]) > 10 and all(v for k, v in reference["answers"].items() if k[1] != "huge3")
        assert reference["answers"][("IdxA", "huge3")] == []               # more keys than a file takes: skipped
        assert all(tq.unindexed(tq.min_offset, tq.max_offset) == [] for tq in store.tier.queues.values())
    finally:
        store.shutdown()
    again = Index(b, clock=lambda: T_INDEX)
    assert not again.has_work() and again.run(None).details["files"] == 0   # nothing left to index


@pytest.mark.slow
def test_a_killed_job_leaves_nothing_adoptable_and_a_rerun_gives_the_same_files(spark, reference):
    root = unindexed_tier(reference["base"], str(reference["dir"] / "killed"))

    class Kill(BaseException):
        pass

    def hook(step):
        if step == "manifest":
            raise Kill()
    with pytest.raises(Kill):
        Index(root, clock=lambda: T_INDEX, hook=hook).run(spark)
    (left,) = [n for n in os.listdir(output_root(root)) if not n.startswith(".")]
    assert left.endswith(".tmp") and os.path.exists(os.path.join(output_root(root), left, MANIFEST))
    store = tier_store(root, root + "-tier", index=False)
    store.start()
    assert store.tier.index.files == []                                     # a .tmp output is never adopted
    store.shutdown()
    s = Index(root, clock=lambda: T_INDEX).run(spark)
    assert [n for n in os.listdir(output_root(root)) if not n.startswith(".")] == [os.path.basename(s.outputs[0])]
    assert _job_files(s.outputs[0]) == reference["broker"]


@pytest.mark.slow
@pytest.mark.parametrize("step,nth", [("adopt.link", 2), ("adopt.commit", 1), ("adopt.committed", 1)])
def test_kill_9_during_adoption_loses_and_duplicates_nothing(reference, step, nth, tmp_path):
    root = unindexed_tier(reference["base"], str(tmp_path / "b"))
    os.makedirs(output_root(root))
    job_dir = os.path.join(output_root(root), "0000000000001-job")
    shutil.copytree(reference["saved"], job_dir, copy_function=copy_sparse)
    r = subprocess.run([sys.executable, "-m", "tests.pipeline.index_adopt_child", root, root + "-tier", step,
                        str(nth)], capture_output=True, text=True, timeout=120, env=child_env())
    assert r.returncode == -9, r.stderr[-2000:]
    store = tier_store(root, root + "-tier", index=False)
    store.start()                                                           # recovery, then adoption again
    try:
        md = store.tier.metadata
        assert sorted(md.index_files) == sorted(reference["broker"])
        assert local_copy_paths(root) == sorted(str(t) for t in reference["broker"])
        assert not os.path.exists(job_dir)
        upload_all(store)
        assert uploaded_files(store) == reference["broker"]
        assert _queried(store) == reference["answers"]
    finally:
        store.shutdown()


def test_an_output_whose_ranges_are_indexed_already_is_set_aside(reference):
    a = reference["a"]                                   # broker A indexed everything itself
    target = os.path.join(output_root(a), "0000000000002-job")
    shutil.copytree(reference["saved"], target, copy_function=copy_sparse)
    store = tier_store(a, str(reference["dir"] / "a-tier"), index=True)
    store.start()
    try:
        assert sorted(f.begin_ts for f in store.tier.index.files) == sorted(reference["broker"])
        assert os.path.isdir(target + STALE_SUFFIX) and not os.path.exists(target)
        assert _queried(store) == reference["answers"]
    finally:
        store.shutdown()


def test_a_running_broker_adopts_on_rmqd_admin_adopt_tier_index(reference, tmp_path):
    import contextlib
    import io

    from rmqd.admin.main import main as admin_cli
    from rmqd.testing.embedded import EmbeddedServer
    from tests.tier.helpers import tier_props
    from tests.pipeline.index_helpers import SLOTS
    root = unindexed_tier(reference["base"], str(tmp_path / "b"))
    props = tier_props("posix", root + "-tier", tieredStoreIndexFileMaxHashSlotNum=SLOTS,
                       tieredStoreIndexFileMaxIndexNum=MAX_ITEMS, messageIndexEnable="false",
                       mappedFileSizeCommitLog=64 * 1024, mappedFileSizeConsumeQueue=100 * 20)

    def admin(ns, *args):
        out = io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
            rc = admin_cli([*args, "-n", ns])
        return rc, out.getvalue()
    with EmbeddedServer(store_dir=root, broker_properties=props) as server:
        tier = server.broker.store.tier
        assert tier.index.files == []
        rc, out = admin(server.namesrv_addr, "adoptTierIndex")
        assert rc == 0 and "no index output to adopt" in out
        shutil.copytree(reference["saved"], os.path.join(output_root(root), "0000000000003-job"))
        rc, out = admin(server.namesrv_addr, "adoptTierIndex")
        assert rc == 0 and f"{len(reference['broker'])} index file(s)" in out, out
        assert sorted(f.begin_ts for f in tier.index.files) == sorted(reference["broker"])
        assert _queried(server.broker.store) == reference["answers"]
        rc, out = admin(server.namesrv_addr, "tierStatus")
        assert rc == 0 and all(str(ts) in out for ts in reference["broker"])     # compacted, or uploaded by now


def test_bad_input(tmp_path, reference):
    from rmqd.pipeline.cli import main
    with pytest.raises(PipelineError, match="no tier in it"):
        Index(reference["base"])
    with pytest.raises(PipelineError, match="not a RocketMQ store directory"):
        Index(str(tmp_path))
    assert main(["index", "--store", str(tmp_path), "--json"]) == 2
    assert MAX_ITEMS > 100
