"""rmqd pipeline compact in local[2] against the broker's own compaction on copies of one store: the same
surviving (key, offset) set and byte-identical compaction logs, twice (the second time incremental); the
broker adopts the output at start, atomically under kill -9 at every adoption step; a stale output is set
aside; a damaged CQ fails the job naming the file."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap

import pytest

from tests.compaction.helpers import TOPIC, fill_rewritten_keys, open_store, read_all
from tests.kit.processes import child_env

pytest.importorskip("pyspark", reason="the spark extra (pip install -e '.[test]') is required")

from rmqd.pipeline.compact import Compact  # noqa: E402
from rmqd.pipeline.errors import PipelineError  # noqa: E402
from rmqd.store.compaction import adopt as _adopt  # noqa: E402
from rmqd.common.fileutil import copy_sparse  # noqa: E402

pytestmark = pytest.mark.timeout(300)      # a Spark job's first run on a loaded 2-core host
LOG_FILE = 16 * 1024


def _open(root):
    return open_store(root, log_file_size=LOG_FILE, map_bytes=300 * 24)      # the broker runs in rounds


def _fill(root, n, seed, first=0):
    store = _open(root)
    fill_rewritten_keys(store, n, seed, first)
    store.shutdown()


def _tree(root):
    out = {}
    for d in ("compactionLog", "compactionCq"):
        for dp, _dn, fn in os.walk(os.path.join(root, "compaction", d, TOPIC)):
            for f in fn:
                out[os.path.relpath(os.path.join(dp, f), root)] = open(os.path.join(dp, f), "rb").read()
    return out


def _table(root):
    store = _open(root)
    try:
        return {q: [(o, k) for o, k, _v in read_all(store, q)] for q in (0, 1)}
    finally:
        store.shutdown()


def _copy(src, dst):
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns("lock"), copy_function=copy_sparse)


def _broker_compact(root):
    store = _open(root)
    store.compaction.compact(TOPIC)
    store.shutdown()


@pytest.fixture(scope="module")
def compacted(spark, tmp_path_factory):
    """A store; a copy compacted by the broker; a copy with the job's output, not adopted yet."""
    base = tmp_path_factory.mktemp("pipe-compact")
    root = str(base / "store")
    _fill(root, 3000, seed=3)
    _copy(root, str(base / "broker"))
    _broker_compact(str(base / "broker"))
    _copy(root, str(base / "job"))
    summary = Compact(str(base / "job"), TOPIC, rows_per_shard=700).run(spark)
    _copy(str(base / "job"), str(base / "pending"))          # kept for the adoption tests,
    _copy(str(base / "broker"), str(base / "reference"))     # with what adoption must give
    return base, summary


@pytest.mark.slow
def test_spark_compaction_equals_broker_compaction(spark, compacted):
    base, summary = compacted
    (out,) = summary.outputs
    assert 2000 < summary.rows < 3000 and summary.details["segmentsRewritten"] > 5     # the sealed segments
    assert os.path.isfile(os.path.join(out, _adopt.MANIFEST)) and summary.details["recordsAfter"] < summary.rows
    job, broker = str(base / "job"), str(base / "broker")
    assert _tree(job) != _tree(broker)                    # not adopted yet
    want = _table(broker)
    assert _table(job) == want                            # opening the store adopted the output
    assert not os.path.exists(out)
    assert _tree(job) == _tree(broker)                    # byte for byte, files and names
    keys = [k for q in want.values() for _o, k in q]
    assert len(keys) > 300 and all(want[q] == sorted(want[q]) for q in want)
    # round two: more records, then both compact again (the broker from its checkpoint)
    _fill(broker, 1500, seed=4, first=3000)
    shutil.rmtree(job)
    _copy(broker, job)                                    # the same records (and store times) in both
    _broker_compact(broker)
    s2 = Compact(job, TOPIC, rows_per_shard=700).run(spark)
    assert s2.details["segmentsRewritten"] > 0
    assert _table(job) == _table(broker) and _tree(job) == _tree(broker)


CHILD = textwrap.dedent("""
    import os
    from tests.compaction.helpers import open_store
    from rmqd.store.compaction.store import CompactionStore
    seen = {{}}
    def hook(step):
        seen[step] = seen.get(step, 0) + 1
        if step == {step!r} and seen[step] == {nth}:
            os._exit(9)
    start = CompactionStore.start
    def start_with_hook(self):
        self.step_hook = hook
        start(self)
    CompactionStore.start = start_with_hook
    open_store({root!r}, log_file_size={log_file}, map_bytes=300 * 24)
    os._exit(3)
""")


@pytest.mark.slow
@pytest.mark.parametrize("step,nth", [("adopt-marked", 1), ("adopt-placed", 3), ("moved-log", 2),
                                      ("adopt-segment", 4), ("adopt-queue", 1)])
def test_adoption_at_start_survives_kill_9(compacted, tmp_path, step, nth):
    base, _ = compacted
    root = str(tmp_path / "s")
    _copy(str(base / "pending"), root)
    script = CHILD.format(root=root, log_file=LOG_FILE, step=step, nth=nth)
    rc = subprocess.run([sys.executable, "-c", script], timeout=60, env=child_env()).returncode
    assert rc == 9, f"child exited {rc}, not killed at {step}"
    assert _table(root) == _table(str(base / "reference"))   # the restart rolled the adoption forward
    assert _tree(root) == _tree(str(base / "reference"))
    assert os.listdir(os.path.join(root, "compaction", _adopt.PIPELINE_DIR)) == []


def test_stale_output_is_set_aside(compacted, tmp_path):
    base, _ = compacted
    root = str(tmp_path / "s")
    _copy(str(base / "pending"), root)
    pending = os.path.join(root, "compaction", _adopt.PIPELINE_DIR)
    aside = str(tmp_path / "outputs")
    shutil.move(pending, aside)                           # out of the broker's way at start
    before = _tree(root)
    store = _open(root)
    try:
        store.compaction.compact(TOPIC)                   # the broker compacts the job's input meanwhile
        compacted_by_broker = _tree(root)
        (res,) = store.compaction.adopt_pending(TOPIC, aside)
        assert not res["adopted"] and "changed since the job read it" in res["error"]
    finally:
        store.shutdown()
    assert compacted_by_broker != before and _tree(root) == compacted_by_broker
    assert [n for n in os.listdir(aside)] == [os.path.basename(res["output"]) + _adopt.STALE_SUFFIX]


def test_damaged_cq_fails_the_job_naming_the_file(spark, compacted, tmp_path):
    base, _ = compacted
    root = str(tmp_path / "s")
    _copy(str(base / "reference"), root)
    cq_dir = os.path.join(root, "compaction", "compactionCq", TOPIC, "1")
    victim = os.path.join(cq_dir, sorted(os.listdir(cq_dir))[1])
    with open(victim, "r+b") as f:
        f.seek(46 * 3)
        f.write((10 ** 12).to_bytes(8, "big"))            # unit 3 points far outside its log
    out_root = os.path.join(root, "compaction", _adopt.PIPELINE_DIR)
    crashed_drop = os.path.join(out_root, f".{TOPIC}-0000000000001-dead.tmp.dropped-0badc0de.tmp")
    (output,) = _adopt.pending_outputs(os.path.join(str(base / "pending"), "compaction", _adopt.PIPELINE_DIR))
    shutil.copytree(output, crashed_drop)                # a drop cut short by a crash: complete, manifest and all
    assert _adopt.pending_outputs(out_root) == []        # never adopted
    with pytest.raises(PipelineError, match=rf"{victim} unit 3 \(byte 138\) points outside"):
        Compact(root, TOPIC).run(spark)
    assert [n for n in os.listdir(out_root)] == []        # the leftover and the failed job's output are gone
