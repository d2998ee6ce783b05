"""The connector and ``rmqd pipeline`` on a real Spark standalone cluster (conftest.py: a Master and two
Workers from pyspark's spark-class; every application has one executor JVM of one core on each Worker, with
its own Python workers), with the cluster's master URL, in the two ways docs/spark-cluster.md gives to bring
rmqd to the executors: installed in their Python, and shipped only as the ``--py-files`` archive to executors
whose Python has no rmqd (nor orjson). One application per way runs every pipeline job and the connector; the
two run side by side.

Faults (in the installed way's application): an executor JVM killed (-9) while the tasks of archive, index
and compact are mid-way is retried by Spark and the outputs are exactly once (the same checks as every run:
archive manifest and rows, the compaction the broker would make, the index the broker adopts); a Worker that
cannot see the store fails the job with an error naming the path and the host."""
from __future__ import annotations

import os
import re
import socket
import time

import pytest

from tests.spark_cluster import data
from tests.spark_cluster.conftest import MODES, REPO
from tests.spark_cluster.standalone import cmdline, descendants, live, processes_inside

pytestmark = [pytest.mark.timeout(3000), pytest.mark.slow]


def results_of(jobs: dict) -> dict:
    run, res = jobs["run"], jobs["results"]
    assert run["code"] == 0 and res is not None, f"exit {run['code']}\n{run['stderr'][-4000:]}"
    return res


def check_archive(out: str, store: str, want_rows: list) -> None:
    """Exactly once: every sealed segment in the manifest once, every row once, no file outside the
    manifest, nothing left staged."""
    assert data.archive_rows(out) == want_rows
    segs, files = data.manifest(out)
    assert sorted(segs) == ["local:" + n for n in data.sealed_segment_names(store)]
    assert sorted(files) == data.data_files(out)
    assert os.listdir(os.path.join(out, "_rmqd", "staging")) == []


def check_index(index_store: str, summary: dict, stores: dict, every_key: bool = False) -> None:
    """The items the broker's rule gives, and the broker, adopting the output as it starts, answers each key
    with exactly its messages."""
    keyed, items, skipped = stores["index"]
    assert summary["items"] == items and summary["skippedMessages"] == skipped and summary["rows"] == 420
    keys = sorted(keyed) if every_key else sorted(keyed)[::7]
    got = data.index_answers(index_store, keys)
    assert got["answers"] == {k: keyed[k] for k in keys}
    assert got["states"] == {"compacted"} and got["covered"]


def check_compaction(compact_store: str, stores: dict) -> None:
    """What the broker's own compaction of the same store gives, byte for byte (adopted as the store opens)."""
    assert data.compaction_table(compact_store) == stores["compact_table"]
    assert data.compaction_tree(compact_store) == stores["compact_tree"]


# ---------------------------------------------------------------------------------------------- both ways
def test_pipeline_archive_and_query(mode, jobs, stores):
    res = results_of(jobs)
    a = res["archive"]
    assert a["exitCode"] == 0, a
    assert a["summary"]["rows"] == len(stores["archive_rows"])
    assert a["summary"]["segments"] == len(data.sealed_segment_names(stores["archive"]))
    check_archive(jobs["out"], stores["archive"], stores["archive_rows"])
    q = res["query"]
    assert q["exitCode"] == 0, q
    found = sorted((m["queueId"], m["offset"]) for m in q["summary"]["messages"])
    want = data.messages_with_key(stores["archive"], "PipeA", "alias4")
    assert found == want and len(want) > 10


def test_pipeline_index_and_compact(mode, jobs, stores):
    res = results_of(jobs)
    assert res["index"]["exitCode"] == 0 and res["compact"]["exitCode"] == 0, (res["index"], res["compact"])
    assert res["index"]["summary"]["files"] >= 4
    check_index(jobs["index_store"], res["index"]["summary"], stores)
    assert res["compact"]["summary"]["segmentsRewritten"] > 5
    check_compaction(jobs["compact_store"], stores)


def test_connector_batch_stream_restart_and_sink(mode, jobs):
    import pyarrow.parquet as pq
    c = results_of(jobs)["connector"]
    sent = jobs["sent"]
    assert [tuple(r) for r in c["batch"]] == sorted(sent)
    assert len({loc for loc, _n in c["batchPartitions"]}) == 2           # the read ran on both executors
    assert sum(n for _loc, n in c["batchPartitions"]) == len(sent) and len(c["batchPartitions"]) >= 12
    assert [tuple(r) for r in c["pathRead"]] == sorted((q, o, h) for q, o, h, _k in sent)
    assert c["streamFirstRun"] == len(sent)
    t = pq.read_table(jobs["spec"]["steps"][4]["connector"]["streamOut"]).to_pylist()
    seen = [(r["partition"], r["offset"]) for r in t]
    assert len(seen) == len(set(seen)) == len(sent) + 120                # no gap, no duplicate across the restart
    old = {(q, o) for q, o, _h, _k in sent}
    new = sorted((r["key"].decode() if isinstance(r["key"], bytes) else r["key"], r["value"]) for r in t
                 if (r["partition"], r["offset"]) not in old)
    assert new == sorted((f"sk-{i}", f"sink-{i}".encode()) for i in range(120))


def test_the_executors_run_rmqd_from_where_the_mode_puts_it(mode, jobs, pyfiles):
    res = results_of(jobs)
    where = res["where"]
    executors = {loc for loc, *_ in where}
    assert len(executors) == 2 and all(re.search(r"executor \d+$", loc) for loc in executors), executors
    if mode == "zip":
        inside = os.path.basename(pyfiles[0]) + os.sep          # each executor's copy of the archive
        built = os.path.dirname(pyfiles[0]) + os.sep            # not the driver's (its PYTHONPATH)
        assert all(inside in f and not f.startswith(built) for _loc, rf, of, _p in where for f in (rf, of)), where
        assert inside in res["driverRmqd"]
    else:
        assert {rf for _loc, rf, _of, _p in where} == {os.path.join(REPO, "rmqd", "__init__.py")}
        assert res["driverRmqd"] == os.path.join(REPO, "rmqd", "__init__.py")


def test_no_executor_or_python_worker_outlives_its_application(apps, cluster):
    """Once both applications have ended the cluster runs its daemons only: the executors (and their Python
    workers) of finished applications are gone."""
    for m in MODES:
        results_of(apps(m))
    daemons = {cluster.master.pid} | {w.proc.pid for w in cluster.nodes}
    deadline = time.monotonic() + 60
    while True:
        running = live((processes_inside(cluster.root) | descendants(daemons)) - daemons)
        if not running or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert not running, [(p, cmdline(p)[:200]) for p in running]


# ---------------------------------------------------------------------------------------------- faults
@pytest.fixture(scope="module")
def installed(apps):
    return apps("installed")


def test_executor_killed_mid_job_is_retried_and_the_output_is_exactly_once(installed, cluster, stores):
    """In archive, index and compact, once a task holds with its first output written, its executor JVM gets
    kill -9; the job still succeeds (Spark retries the lost tasks on the other executor and on the replacement
    the Worker starts) and its output is what an undisturbed run gives."""
    res, run = results_of(installed), installed["run"]
    killed = run["killed"]
    assert sorted(killed) == ["archive", "compact", "index"]
    assert not any(done for _app, _ex, done in killed.values())      # each kill came while its job ran
    for job, (_app, executor, _done) in killed.items():
        assert re.search(rf"executor {executor}\): ExecutorLostFailure", run["stderr"]), (job, executor)
        assert res[job]["exitCode"] == 0, res[job]
    app = res["applicationId"]
    launched = sum(len([e for e in os.listdir(os.path.join(w.work_dir, app)) if e.isdigit()])
                   for w in cluster.nodes if os.path.isdir(os.path.join(w.work_dir, app)))
    assert launched >= 5                                   # two, and a replacement after each kill
    check_archive(installed["out"], stores["archive"], stores["archive_rows"])
    check_compaction(installed["compact_store"], stores)
    check_index(installed["index_store"], res["index"]["summary"], stores, every_key=True)


def test_a_worker_that_cannot_see_the_store_fails_the_job_naming_path_and_host(installed, cluster):
    """The store in ``hidden`` is the driver's and Worker 0's, not Worker 1's (an empty tmpfs in its mount
    namespace): the job fails at the first task there (not after Spark's retries, which could land on
    Worker 0), naming the store, the host and the executor, and commits nothing."""
    res = results_of(installed)
    blind = res["blind"]
    assert res["executorsBefore"]["blind"] == 2 and blind["exitCode"] == 2, blind
    error = blind["summary"]["error"]
    m = re.search(r"--store (\S+) is not visible on host (\S+) \(127\.0\.0\.1\), executor (\d+): ", error)
    assert m and m.group(1) == installed["blind_store"] and m.group(2) == socket.gethostname(), error
    worker = [w for w in cluster.nodes if w.hidden][0]
    assert m.group(3) in os.listdir(os.path.join(worker.work_dir, res["applicationId"])), error
    assert "shared file system" in error
    out = installed["blind_out"]
    assert not os.path.exists(os.path.join(out, "messages"))
    assert os.listdir(os.path.join(out, "_rmqd", "staging")) == []
    commits = os.path.join(out, "_rmqd", "commits")
    assert not os.path.exists(commits) or not os.listdir(commits)
