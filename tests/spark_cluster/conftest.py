"""The session's Spark standalone cluster (one Master, two Workers of two cores each, from pyspark's own
launcher; Worker 1 cannot see the directory ``hidden``), the two Pythons its executors run (one with rmqd
installed, one with only pyspark's needs), the ``--py-files`` archive, the stores and an embedded rmqd.

Everything is made once per session and stopped at its end, leaving no process behind (the cluster
fixture fails the session's last test if any of its processes had to be killed or survived)."""
from __future__ import annotations

import concurrent.futures
import json
import os
import shutil
import signal
import subprocess
import threading
import time

import pytest

pytest.importorskip("pyspark", reason="the spark extra (pip install -e '.[test]') is required")

import rmqd  # noqa: E402
from tests.kit.clients import create_topic  # noqa: E402
from tests.pipeline.index_helpers import unindexed_tier  # noqa: E402
from tests.spark_cluster import data  # noqa: E402
from tests.spark_cluster.standalone import (PYSPARK_NEEDS, StandaloneCluster, clean_env, cmdline,  # noqa: E402
                                      descendants, live, make_venv, processes_inside, requirement_closure,
                                      spark_home)

REPO = os.path.dirname(os.path.dirname(os.path.abspath(rmqd.__file__)))     # the tree under test
HERE = os.path.dirname(os.path.abspath(__file__))
JOBS = os.path.join(HERE, "cluster_jobs.py")
MODES = ["installed", "zip"]


@pytest.fixture(scope="session")
def cluster(tmp_path_factory):
    root = tmp_path_factory.mktemp("spark-cluster")
    hidden = root / "hidden"
    hidden.mkdir()
    # two cores and 1 GB per Worker: room for one executor (1 core, EXECUTOR_MEMORY) of each of the two
    # applications, which run side by side
    c = StandaloneCluster(str(root / "cluster"), workers=2, cores=2, memory="1g", hidden={1: [str(hidden)]})
    c.hidden_dir = str(hidden)
    # The daemons' JVMs start while the other session fixtures (the Pythons, the archive, the stores) are made:
    # ``apps`` waits for ``c.starting`` before it submits anything. The daemons die with the thread that started
    # them (PR_SET_PDEATHSIG), so they are stopped before that thread ends with the pool.
    with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="spark-cluster-start") as pool:
        c.starting = pool.submit(c.start)
        try:
            yield c
        finally:
            failed = c.starting.exception()        # a start still under way ends (or fails and stops) first
        if failed is not None:
            return                                 # start() stopped what it had started; apps reported the error
        daemons = [c.master.pid] + [w.proc.pid for w in c.nodes]
        killed = c.stop()
    left = live(processes_inside(c.root) | set(daemons) | descendants(daemons))
    assert not left, f"cluster processes still running after stop: {sorted(left)}"
    assert not killed, f"cluster processes that did not stop by themselves (killed): {sorted(killed)}"


@pytest.fixture(scope="session")
def pythons(tmp_path_factory):
    """{"installed": a Python with rmqd installed (this tree, as `pip install -e .` links it) and its
    dependencies, "bare": a Python with only what PySpark with Arrow needs (no rmqd, no orjson)}."""
    d = tmp_path_factory.mktemp("pythons")
    bare_dists = requirement_closure(PYSPARK_NEEDS)
    rmqd_dists = [n for n in requirement_closure(["rmqd[spark]"]) if n != "rmqd"]
    out = {"installed": make_venv(str(d / "installed"), rmqd_dists, pth=[REPO]),
           "bare": make_venv(str(d / "bare"), bare_dists)}
    probe = "import importlib.util as u, json; print(json.dumps({m: bool(u.find_spec(m)) for m in " \
            "['rmqd', 'orjson', 'pyspark', 'pyarrow', 'pandas']}))"
    for name, py in out.items():
        r = subprocess.run([py, "-c", probe], capture_output=True, text=True, env=clean_env(), timeout=60, cwd=d)
        found = json.loads(r.stdout)
        assert found["pyspark"] and found["pyarrow"] and found["pandas"], (name, found, r.stderr)
        assert found["rmqd"] == found["orjson"] == (name == "installed"), (name, found)
    r = subprocess.run([out["installed"], "-c", "import rmqd; print(rmqd.__file__)"], capture_output=True, text=True,
                       env=clean_env(), timeout=60, cwd=d)
    assert r.stdout.strip() == os.path.join(REPO, "rmqd", "__init__.py"), r
    return out


@pytest.fixture(scope="session")
def pyfiles(pythons, tmp_path_factory):
    """(archive, driver script) from ``python -m rmqd.spark.pyfiles -o DIR`` run where rmqd is installed,
    as docs/spark-cluster.md says."""
    d = tmp_path_factory.mktemp("dist")
    r = subprocess.run([pythons["installed"], "-m", "rmqd.spark.pyfiles", "-o", str(d)], capture_output=True,
                       text=True, env=clean_env(), timeout=120, cwd=d)
    assert r.returncode == 0, r.stderr
    zip_path = r.stdout.strip().splitlines()[-1]
    assert zip_path.endswith(".zip") and os.path.isfile(zip_path), r.stdout
    return zip_path, str(d / "rmqd_pipeline.py")


@pytest.fixture(scope="session")
def stores(tmp_path_factory):
    """The base stores (never written by a job: tests copy them) and what the jobs must give."""
    d = tmp_path_factory.mktemp("cluster-stores")
    out = {"dir": d,
           "archive": data.make_archive_store(str(d / "archive")),
           "index_base": data.make_index_base(str(d / "index-base")),
           "compact": data.make_compact_store(str(d / "compact"))}
    reference = data.broker_compacted(out["compact"], str(d / "compact-broker"))
    out["compact_tree"] = data.compaction_tree(reference)
    out["compact_table"] = data.compaction_table(reference)
    out["archive_rows"] = data.expected_rows(out["archive"])
    out["index"] = data.index_expectation(out["index_base"])
    return out


@pytest.fixture(scope="session")
def broker(tmp_path_factory):
    from rmqd.testing import EmbeddedServer
    server = EmbeddedServer(store_dir=str(tmp_path_factory.mktemp("cluster-broker")),
                            broker_properties=dict(mapedFileSizeCommitLog=256 * 1024, flushIntervalCommitLog=50)).start()
    yield server
    server.stop()


def submit_command(mode: str, cluster, pythons, pyfiles, script: str, args: list) -> tuple[list, dict]:
    """The command and environment that run a driver ``script`` on the cluster the way the mode says
    (docs/spark-cluster.md): rmqd installed -> that Python runs the script and the executors
    (PYSPARK_PYTHON); rmqd in the archive -> spark-submit --py-files with the bare Python everywhere, and the
    archive on the driver's PYTHONPATH (Spark's driver-side Python helpers, which find ``format("rocketmq")``
    and plan a stream, do not get the --py-files)."""
    if mode == "installed":
        return [pythons["installed"], script] + args, clean_env({"PYSPARK_PYTHON": pythons["installed"]})
    return ([os.path.join(spark_home(), "bin", "spark-submit"), "--master", cluster.master_url,
             "--py-files", pyfiles[0], script] + args,
            clean_env({"PYSPARK_PYTHON": pythons["bare"], "PYSPARK_DRIVER_PYTHON": pythons["bare"],
                       "PYTHONPATH": pyfiles[0]}))


def holding_executor(cluster, job: str, hold: str, deadline: float) -> tuple[str, str]:
    """(application id, executor id) of an executor with a task of ``job`` holding on ``hold`` now (its
    "holding on <hold> (<job>)" line in the executor's log)."""
    marker = f"holding on {hold} ({job})"
    while time.monotonic() < deadline:
        for path, text in cluster.app_logs().items():
            if marker in text:
                exec_dir = os.path.dirname(path)
                return os.path.basename(os.path.dirname(exec_dir)), os.path.basename(exec_dir)
        time.sleep(0.1)
    raise AssertionError(f"no task of {job} held in time")


def executor_pid(cluster, app: str, executor: str) -> int:
    for pids in cluster.executors().values():
        for p in pids:
            if f"--app-id {app}" in cmdline(p) and f"--executor-id {executor} " in cmdline(p) + " ":
                return p
    raise AssertionError(f"no JVM for executor {executor} of {app}")


def run_driver(cmd: list, env: dict, log_dir, cluster, timeout: float = 1500) -> dict:
    """Run a cluster_jobs.py driver (its own process group: on a timeout its JVM goes too). For each step it
    begins with a hold file (``BEGIN <step> <hold>``), wait until one of the step's tasks holds, kill -9
    that executor's JVM, then remove the hold file. Returns the exit code, the driver's stderr, the kills
    ({step: (application, executor, whether the step had ended)}) and the steps that ended."""
    err = os.path.join(log_dir, "driver.stderr")
    killed: dict = {}
    ended: list = []
    deadline = time.monotonic() + timeout
    with open(err, "w") as fe, open(os.path.join(log_dir, "driver.stdout"), "w") as fo:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=fe, text=True, env=env, cwd=str(log_dir),
                                start_new_session=True)
        try:
            for line in proc.stdout:
                fo.write(line)
                words = line.split()
                if words[:1] == ["BEGIN"] and words[2] != "-":
                    step, hold = words[1], words[2]
                    app, executor = holding_executor(cluster, step, hold, deadline)
                    os.kill(executor_pid(cluster, app, executor), signal.SIGKILL)
                    killed[step] = (app, executor, step in ended)
                    os.unlink(hold)                   # the other tasks, and the retries, go on
                elif words[:1] == ["END"]:
                    ended.append(words[1])
            code = proc.wait(max(1.0, deadline - time.monotonic()))
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(30)
    return {"code": code, "stderr": open(err).read(), "killed": killed, "ended": ended}


@pytest.fixture(scope="session", params=MODES)
def mode(request):
    return request.param


@pytest.fixture(scope="session")
def apps(cluster, pythons, pyfiles, stores, broker, tmp_path_factory):
    """mode -> its application. Both run side by side from the first use on (each with one executor of one
    core on each Worker: ``APP_CONF``), which halves the tests' wall time on a 2-core machine."""
    dirs = {m: tmp_path_factory.mktemp(f"jobs-{m}") for m in MODES}
    cluster.starting.result()
    with concurrent.futures.ThreadPoolExecutor(len(MODES), thread_name_prefix="spark-app") as pool:
        runs = {m: pool.submit(_run_jobs, m, dirs[m], cluster, pythons, pyfiles, stores, broker) for m in MODES}
        yield lambda mode: runs[mode].result()


@pytest.fixture(scope="session")
def jobs(mode, apps):
    return apps(mode)


_BROKER_SETUP = threading.Lock()
EXECUTOR_MEMORY = "512m"
APP_CONF = {"spark.executor.cores": "1", "spark.cores.max": "2", "spark.executor.memory": EXECUTOR_MEMORY,
            "spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "4"}


def _run_jobs(mode, d, cluster, pythons, pyfiles, stores, broker) -> dict:
    """One application per mode, with the cluster's master URL: archive, query (of that archive), index,
    compact and the connector (batch reads from the broker and the store directory, an AvailableNow stream,
    the sink, the stream restarted from its checkpoint).

    rmqd installed: the installed Python runs ``cluster_jobs.py`` and the executors (PYSPARK_PYTHON); archive,
    index and compact each get an executor killed (-9) while their tasks are mid-way (held after their first
    output file: the only setting added is the executors' RMQD_PIPELINE_TEST_HOLD); then an archive of a store
    in ``hidden``, which Worker 1 cannot see.
    rmqd in the archive: ``spark-submit --py-files <zip> cluster_jobs.py`` with the bare Python everywhere,
    nothing else changed."""
    out = str(d / "archive")
    index_store = unindexed_tier(stores["index_base"], str(d / "index"))
    compact_store = data.copy(stores["compact"], str(d / "compact"))
    topic = f"Cluster_{mode}"
    with _BROKER_SETUP:                        # the applications' threads: one at a time on the embedded broker
        create_topic(broker.broker_addr, topic)
        sent = data.send(broker.broker_addr, topic, 600, seed=7 if mode == "zip" else 5)
        broker.broker.store.flush()
    faults = mode == "installed"
    hold = str(d / "hold")
    steps = [{"job": "archive", "args": ["--store", stores["archive"], "--out", out], "hold": faults, "executors": 2},
             {"job": "query", "args": ["--archive", out, "--topic", "PipeA", "--key", "alias4"]},
             {"job": "index", "args": ["--store", index_store, "--messages-per-task", "40"], "hold": faults},
             {"job": "compact", "args": ["--store", compact_store, "--topic", data.COMPACT_TOPIC,
                                         "--rows-per-shard", "700"], "hold": faults},
             {"job": "connector", "connector": {
                 "nameServer": broker.namesrv_addr, "topic": topic, "storePath": broker.store_dir,
                 "streamOut": str(d / "stream-out"), "checkpoint": str(d / "checkpoint"), "perTrigger": 400,
                 "sinkRows": 120}}]
    blind_store = os.path.join(cluster.hidden_dir, f"store-{mode}")
    if faults:
        data.copy(stores["archive"], blind_store)
        steps.append({"job": "archive", "name": "blind", "executors": 2,
                      "args": ["--store", blind_store, "--out", str(d / "blind-out")]})
    spec = {"master": cluster.master_url if mode == "installed" else None, "result": str(d / "result.json"),
            "hold": hold if faults else None, "steps": steps,
            "conf": dict(APP_CONF, **({"spark.executorEnv.RMQD_PIPELINE_TEST_HOLD": hold} if faults else {}))}
    with open(d / "spec.json", "w") as f:
        json.dump(spec, f)
    cmd, env = submit_command(mode, cluster, pythons, pyfiles, JOBS, [str(d / "spec.json")])
    if faults:
        env["RMQD_SPARK_LOG_LEVEL"] = "WARN"          # Spark's "Lost task ... ExecutorLostFailure" lines
    try:
        run = run_driver(cmd, env, d, cluster)
    finally:
        if faults:
            shutil.rmtree(blind_store)
    results = json.load(open(spec["result"])) if os.path.exists(spec["result"]) else None
    return {"dir": d, "spec": spec, "results": results, "run": run, "sent": sent, "topic": topic, "out": out,
            "index_store": index_store, "compact_store": compact_store, "blind_store": blind_store,
            "blind_out": str(d / "blind-out")}
