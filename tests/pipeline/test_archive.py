"""rmqd pipeline archive in local[2]: the rows read back equal the store's messages byte for byte, a re-run
adds nothing, new segments are added once, a run killed mid-write or mid-commit followed by a re-run gives
the uninterrupted run's rows, damaged records fail or are skipped by --on-corrupt, and outputs that are not
(this) archive are refused before Spark starts."""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid

import pytest

from tests.pipeline.helpers import archive_rows, expected_rows, fill, open_store, sealed_files

pytest.importorskip("pyspark", reason="the spark extra (pip install -e '.[test]') is required")

from rmqd.pipeline.archive import COMMITS, INTENT, KEYINDEX_DDL, MESSAGES_DDL, STAGING, Archive  # noqa: E402
from rmqd.pipeline.errors import PipelineError  # noqa: E402
from rmqd.common.fileutil import copy_sparse

pytestmark = pytest.mark.timeout(300)      # a Spark job's first run on a loaded 2-core host
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _files(out: str) -> dict[str, int]:
    found = {}
    for d in ("messages", "keyindex"):
        for dp, _dn, fn in os.walk(os.path.join(out, d)):
            for f in fn:
                found[os.path.relpath(os.path.join(dp, f), out)] = os.path.getsize(os.path.join(dp, f))
    return found


@pytest.mark.slow
def test_read_back_equals_the_stores_messages_and_a_rerun_adds_nothing(spark, store_dir, archived):
    out, summary = archived
    want = expected_rows(store_dir)
    assert len(sealed_files(store_dir)) >= 8 and len(want) > 1500
    assert summary.rows == len(want) and summary.details["segments"] == len(sealed_files(store_dir))
    assert summary.details["skippedTransactions"] > 0 and summary.details["corrupt"] == []
    assert archive_rows(out) == want                                           # every column, byte for byte
    # Spark reads it back with the connector's column types, partition values unescaped
    df = spark.read.schema(MESSAGES_DDL).parquet(os.path.join(out, "messages"))
    from rmqd.spark.arrow import DDL
    connector = spark.createDataFrame([], DDL).schema
    assert {f.name: f.dataType for f in df.schema.fields if f.name not in ("queueId", "day")} == \
        {f.name: f.dataType for f in connector.fields}
    by_topic = {r["topic"]: r["n"] for r in df.groupBy("topic").count().withColumnRenamed("count", "n").collect()}
    assert by_topic == {t: sum(1 for w in want if w[0] == t) for t in ("PipeA", "PipeB", "%RETRY%pipe_cg", "007")}
    assert {str(d) for d in os.listdir(os.path.join(out, "messages", "topic=PipeA", "queueId=1"))} == \
        {"day=2024-03-01", "day=2024-03-02"}
    assert os.path.isdir(os.path.join(out, "messages", "topic=%25RETRY%25pipe_cg"))
    # the key index: one row per KEYS token, a null key for a keyless message
    import pyarrow as pa
    import pyarrow.dataset as ds
    ki = ds.dataset(os.path.join(out, "keyindex"), format="parquet",
                    partitioning=ds.partitioning(pa.schema([("topic", pa.string())]), flavor="hive")).to_table()
    want_keys = sorted((w[0], tok, w[6], w[1], w[2]) for w in want for tok in (w[3] or b"").decode().split(" ") if tok)
    want_keys += sorted((w[0], None, w[6], w[1], w[2]) for w in want if not (w[3] or b"").strip())
    got_keys = [(r["topic"], r["key"], r["uniqueKey"], r["queueId"], r["offset"]) for r in ki.to_pylist()]
    assert sorted(got_keys, key=repr) == sorted(want_keys, key=repr)
    n = sum(1 for w in want if b"alias4" in (w[3] or b"").split(b" "))
    assert n > 5 and spark.read.schema(KEYINDEX_DDL).parquet(os.path.join(out, "keyindex")) \
        .where("key = 'alias4'").count() == n
    # a re-run finds nothing new: no Spark job, no file touched, one commit
    before = _files(out)
    again = Archive(store_dir, out)
    assert not again.has_work()
    s2 = again.run(None)
    assert s2.rows == 0 and _files(out) == before and len(os.listdir(os.path.join(out, COMMITS))) == 1


@pytest.mark.slow
def test_new_segments_are_added_once(spark, store_dir, archived, tmp_path):
    root, out = str(tmp_path / "store"), str(tmp_path / "arch")
    shutil.copytree(store_dir, root, ignore=shutil.ignore_patterns("lock"), copy_function=copy_sparse)
    shutil.copytree(archived[0], out, copy_function=copy_sparse)
    first = archive_rows(out)
    store = open_store(root, clock_start=1_709_400_000_000)
    fill(store, 700, seed=6, first=2400)
    store.shutdown()
    s = Archive(root, out).run(spark)
    assert 0 < s.details["segments"] < len(sealed_files(root))
    got = archive_rows(out)
    assert got == expected_rows(root) and len(set(got)) == len(got) and set(first) < set(got)
    assert len(os.listdir(os.path.join(out, COMMITS))) == 2


def _marked_pids(marker: str) -> list[int]:
    """Processes whose environment holds ``RMQD_TEST_JOB_MARK=<marker>`` (a job's driver, JVM and workers)."""
    needle = f"RMQD_TEST_JOB_MARK={marker}".encode()
    pids = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == os.getpid():
            continue
        try:
            with open(f"/proc/{name}/environ", "rb") as f:
                if needle in f.read().split(b"\0"):
                    pids.append(int(name))
        except OSError:                      # gone meanwhile, or not ours to read
            continue
    return pids


def _kill_marked(marker: str) -> None:
    """SIGKILL every process of a job, including PySpark's worker daemon and its forks: daemon.py puts
    itself in its own process group, so os.killpg of the driver's group leaves them running."""
    deadline = time.monotonic() + 20
    while True:
        pids = _marked_pids(marker)
        if not pids:
            return
        assert time.monotonic() < deadline, f"processes of the killed job survive: {pids}"
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.1)


def test_task_of_a_dropped_run_does_not_recreate_its_staging_dir(store_dir, tmp_path):
    """An orphan worker of a killed run that wakes after the next run dropped the run: it fails, and the
    run's staging directory stays gone (the driver alone creates it)."""
    from rmqd.pipeline.archive import archive_segments
    from rmqd.pipeline.segments import LocalCommitLog
    out = str(tmp_path / "arch")
    os.makedirs(os.path.join(out, STAGING))
    refs = LocalCommitLog(store_dir).sealed_segments()[:1]
    with pytest.raises(PipelineError, match="staging directory was removed"):
        archive_segments(refs, out, "0000000000000-dropped", "broker-a", "fail")
    assert os.listdir(os.path.join(out, STAGING)) == []


@pytest.mark.slow
def test_kill_9_mid_write_then_rerun_gives_the_uninterrupted_output(spark, store_dir, archived, tmp_path):
    out = str(tmp_path / "arch")
    marker = uuid.uuid4().hex
    env = dict(os.environ, RMQD_PIPELINE_TEST_PAUSE_AFTER_FIRST_FILE="60", PYTHONPATH=REPO,
               RMQD_TEST_JOB_MARK=marker)
    proc = subprocess.Popen([sys.executable, "-m", "rmqd.pipeline", "archive", "--store", store_dir, "--out", out,
                             "--master", "local[1]", "--log-level", "WARNING"], env=env, start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    staged = os.path.join(out, STAGING)
    try:
        deadline = time.monotonic() + 150
        while time.monotonic() < deadline and proc.poll() is None:
            if any(f.endswith(".parquet") for _d, _n, fs in os.walk(staged) for f in fs):
                break
            time.sleep(0.1)
        assert proc.poll() is None, proc.stderr.read().decode()[-2000:]
        assert time.monotonic() < deadline, "no staged file within 150 s"
    finally:
        os.killpg(proc.pid, signal.SIGKILL)            # the job's driver and its JVM
        proc.wait(30)
        _kill_marked(marker)                           # and PySpark's worker daemon, in a group of its own
    assert not os.path.exists(os.path.join(out, "messages"))      # nothing visible, nothing committed
    (run,) = os.listdir(staged)
    assert any(f.endswith(".parquet") for _d, _n, fs in os.walk(os.path.join(staged, run)) for f in fs)
    assert not os.path.exists(os.path.join(out, COMMITS)) or not os.listdir(os.path.join(out, COMMITS))
    s = Archive(store_dir, out).run(spark)
    assert s.details["recovered"] and s.details["recovered"][0].startswith("dropped")
    assert archive_rows(out) == archive_rows(archived[0])
    assert os.listdir(staged) == []


@pytest.mark.slow
def test_crash_after_the_commit_point_is_finished_by_the_next_run(spark, store_dir, archived, tmp_path):
    out = str(tmp_path / "arch")

    class Crash(BaseException):
        pass
    def hook(step):               # crash once two message files (after every key-index file) are in place
        if step == "moved" and sum(1 for f in _files(out) if f.startswith("messages/")) == 2:
            raise Crash()
    with pytest.raises(Crash):
        Archive(store_dir, out, hook=hook).run(spark)
    (run,) = os.listdir(os.path.join(out, STAGING))
    intent = json.load(open(os.path.join(out, STAGING, run, INTENT)))
    visible = _files(out)
    assert 2 < len(visible) < len(intent["files"])      # committed, partly moved into place
    # rmqd pipeline query leaves the half-moved run out whole (no partial rows) until it is completed
    from rmqd.pipeline.query import Query
    topic = visible and next(f for f in visible if f.startswith("messages/")).split("/")[1].split("=", 1)[1]
    from rmqd.pipeline.parquet_out import unescape_value
    q = Query(out, unescape_value(topic), time_from="0", time_to="2100-01-01", limit=100_000)
    assert q.run(spark)[1] == []
    again = Archive(store_dir, out)
    assert not again.has_work()                         # the run is committed: it is finished, not redone
    s = again.run(None)
    assert s.details["recovered"] == [f"finished {run}"]
    assert archive_rows(out) == archive_rows(archived[0])
    rows = Query(out, unescape_value(topic), time_from="0", time_to="2100-01-01", limit=100_000).run(spark)[1]
    assert len(rows) == sum(1 for r in archive_rows(out) if r[0] == unescape_value(topic))


@pytest.mark.slow
def test_corrupt_record_fails_or_is_skipped(spark, store_dir, tmp_path):
    root = str(tmp_path / "store")
    shutil.copytree(store_dir, root, ignore=shutil.ignore_patterns("lock"), copy_function=copy_sparse)
    victim = sealed_files(root)[2]
    with open(victim, "r+b") as f:                    # flip a body byte of the 5th record: its CRC fails
        data = f.read()
        pos = 0
        for _ in range(4):
            pos += int.from_bytes(data[pos:pos + 4], "big")
        f.seek(pos + 100)
        f.write(bytes([data[pos + 100] ^ 0xFF]))
    with pytest.raises(PipelineError, match=rf"corrupt record in {victim} at offset {pos} "):
        Archive(root, str(tmp_path / "a1")).run(spark)
    assert not os.path.exists(os.path.join(tmp_path, "a1", "messages"))
    assert os.listdir(os.path.join(tmp_path, "a1", STAGING)) == []
    s = Archive(root, str(tmp_path / "a2"), on_corrupt="skip").run(spark)
    (bad,) = s.details["corrupt"]
    assert bad["file"] == victim and bad["offset"] == pos
    size = int.from_bytes(data[pos:pos + 4], "big")
    assert bad["skippedBytes"] == size
    want = [w for w in expected_rows(store_dir) if w[9] != int(os.path.basename(victim)) + pos]
    assert archive_rows(str(tmp_path / "a2")) == want


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "rmqd.pipeline", *args], capture_output=True, text=True,
                          timeout=60, env=dict(os.environ, PYTHONPATH=REPO))


@pytest.mark.slow
def test_bad_input_is_refused_before_spark_with_one_clear_line(store_dir, tmp_path):
    cases = [
        (["archive", "--store", str(tmp_path / "none"), "--out", str(tmp_path / "o")], "no such directory"),
        (["archive", "--store", str(tmp_path), "--out", str(tmp_path / "o")], "not a RocketMQ store directory"),
        (["archive", "--store", store_dir, "--out", store_dir], "not empty and not an rmqd archive"),
        (["archive", "--store", store_dir, "--out", str(tmp_path / "o"), "--conf", "nokey"], "expected key=value"),
        (["compact", "--store", store_dir, "--topic", "PipeA"], "no compaction log"),
        (["query", "--archive", str(tmp_path), "--topic", "PipeA", "--key", "k"], "not an rmqd archive"),
    ]
    other = tmp_path / "other"
    (other / "_rmqd").mkdir(parents=True)
    (other / "_rmqd" / "archive.json").write_text(json.dumps({"format": "rmqd-archive", "version": 0,
                                                              "schemas": {"messages": "value binary"}}))
    cases.append((["archive", "--store", store_dir, "--out", str(other), "--json"], "has a different schema"))
    for argv, needle in cases:
        r = _cli(*argv)
        assert r.returncode == 2, (argv, r.stderr[-2000:])
        assert needle in r.stderr and "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1, \
            (argv, r.stderr)
    assert json.loads(r.stdout)["error"].startswith(f"--out {other}: the archive there has a different schema")
