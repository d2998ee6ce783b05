"""A real Spark standalone cluster on this machine, started from pyspark's own launcher exactly as
docs/spark-cluster.md shows: one Master and N Workers (``spark-class org.apache.spark.deploy.master.Master`` /
``...worker.Worker``), bound to 127.0.0.1, each Worker with its own work and local directories, so every
application gets one executor JVM per Worker (with its own Python workers). Also the Pythons the executors
run: :func:`make_venv` builds a virtual environment holding only the distributions it is given.

Used by tests/spark_cluster (one cluster per test session) and scripts/bench_pipeline_cluster.py.

Processes: every daemon is a session leader with ``PR_SET_PDEATHSIG`` (it dies with the process that
started it, even on kill -9 of that process); :meth:`StandaloneCluster.stop` stops the daemons, then kills
whatever is left that belongs to the cluster (descendants, and any process whose working directory or
command line is inside the cluster's directory: executors and their Python daemons), and returns what it
had to kill.
"""
from __future__ import annotations

import ctypes
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from typing import Iterable, Optional

from tests.kit.processes import tail

MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"
EXECUTOR_CLASS = "org.apache.spark.executor.CoarseGrainedExecutorBackend"


def spark_home() -> str:
    import pyspark
    return os.path.dirname(os.path.realpath(pyspark.__file__))


def clean_env(extra: Optional[dict] = None) -> dict:
    """This process' environment without anything that points Python at a source tree or an interpreter
    (PYTHONPATH, PYSPARK_PYTHON, ...): what a daemon or a job gets is said explicitly."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PYTHON", "PYSPARK_", "SPARK_", "VIRTUAL_ENV"))}
    env.update({"SPARK_HOME": spark_home(), "SPARK_LOCAL_IP": "127.0.0.1", "PYTHONUNBUFFERED": "1"})
    env.update(extra or {})
    return env


def _die_with_parent() -> None:
    """In the child before exec: SIGKILL when the parent (this test process) dies, however it dies."""
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)      # PR_SET_PDEATHSIG
    except OSError:
        pass


# ------------------------------------------------------------------------------------------ processes
def _ppids() -> dict[int, int]:
    out = {}
    for p in os.listdir("/proc"):
        if p.isdigit():
            try:
                with open(f"/proc/{p}/stat") as f:
                    out[int(p)] = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
    return out


def descendants(pids: Iterable[int]) -> set[int]:
    parents = _ppids()
    found, frontier = set(), set(pids)
    while frontier:
        nxt = {c for c, pp in parents.items() if pp in frontier} - found
        found |= nxt
        frontier = nxt
    return found


def cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode("utf-8", "replace")
    except OSError:
        return ""


def processes_inside(root: str) -> set[int]:
    """Processes whose working directory or command line is inside ``root`` (not this one)."""
    root = os.path.realpath(root)
    out = set()
    for p in os.listdir("/proc"):
        if not p.isdigit() or int(p) == os.getpid():
            continue
        try:
            cwd = os.path.realpath(os.readlink(f"/proc/{p}/cwd"))
        except OSError:
            cwd = ""
        if cwd == root or cwd.startswith(root + os.sep) or root in cmdline(int(p)):
            out.add(int(p))
    return out


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def live(pids: Iterable[int]) -> set[int]:
    """The pids that are running (not exited, not zombies waiting to be reaped)."""
    return {p for p in pids if _alive(p)}


def _kill(pids: Iterable[int], sig: int) -> None:
    for pid in pids:
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass


def _wait_gone(pids: set[int], timeout: float) -> set[int]:
    deadline = time.monotonic() + timeout
    left = {p for p in pids if _alive(p)}
    while left and time.monotonic() < deadline:
        time.sleep(0.1)
        left = {p for p in left if _alive(p)}
    return left


# ------------------------------------------------------------------------------------------ the cluster
@dataclass
class Worker:
    index: int
    dir: str
    hidden: tuple = ()
    proc: Optional[subprocess.Popen] = None

    @property
    def log(self) -> str:
        return os.path.join(self.dir, "worker.log")

    @property
    def work_dir(self) -> str:
        return os.path.join(self.dir, "work")


@dataclass
class StandaloneCluster:
    """``root``: the cluster's directory (logs, work and local directories). ``hidden``: per Worker index,
    directories that Worker (and its executors) cannot see: a private mount namespace with an empty tmpfs
    over each (a Worker whose host lacks the shared file system)."""
    root: str
    workers: int = 2
    cores: int = 1
    memory: str = "1g"
    hidden: dict = field(default_factory=dict)
    daemon_memory: str = "256m"
    master_url: str = ""
    master: Optional[subprocess.Popen] = None
    nodes: list = field(default_factory=list)

    def _spawn(self, cmd: list[str], log: str, cwd: str, env: dict) -> subprocess.Popen:
        with open(log, "ab") as out:
            return subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=cwd,
                                    env=env, start_new_session=True, preexec_fn=_die_with_parent)

    def _wait_log(self, path: str, pattern: str, proc: subprocess.Popen, deadline: float) -> re.Match:
        rx = re.compile(pattern)
        while True:
            with open(path, errors="replace") as f:
                m = rx.search(f.read())
            if m:
                return m
            if proc.poll() is not None:
                raise RuntimeError(f"{proc.args[:3]} exited with {proc.returncode}; log {path}:\n{tail(path)}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"no {pattern!r} in {path} in time; log:\n{tail(path)}")
            time.sleep(0.2)

    def start(self, timeout: float = 240.0) -> "StandaloneCluster":
        os.makedirs(self.root, exist_ok=True)
        spark_class = os.path.join(spark_home(), "bin", "spark-class")
        deadline = time.monotonic() + timeout
        env = clean_env({"SPARK_DAEMON_MEMORY": self.daemon_memory})
        try:
            mlog = os.path.join(self.root, "master.log")
            self.master = self._spawn([spark_class, MASTER_CLASS, "--host", "127.0.0.1", "--port", "0",
                                       "--webui-port", "0"], mlog, self.root, env)
            self.master_url = self._wait_log(mlog, r"Starting Spark master at (spark://\S+)", self.master,
                                             deadline).group(1)
            for i in range(self.workers):
                w = Worker(i, os.path.join(self.root, f"worker-{i}"), tuple(self.hidden.get(i, ())))
                os.makedirs(w.work_dir, exist_ok=True)
                os.makedirs(os.path.join(w.dir, "local"), exist_ok=True)
                cmd = [spark_class, WORKER_CLASS, self.master_url, "--host", "127.0.0.1", "--port", "0",
                       "--webui-port", "0", "--cores", str(self.cores), "--memory", self.memory,
                       "--work-dir", w.work_dir]
                wenv = dict(env, SPARK_LOCAL_DIRS=os.path.join(w.dir, "local"))
                if w.hidden:
                    wenv["RMQD_HIDE"] = " ".join(w.hidden)
                    cmd = ["unshare", "--mount", "--propagation", "private", "--", "sh", "-c",
                           'for d in $RMQD_HIDE; do mount -t tmpfs -o size=1m,mode=0755 rmqd-hidden "$d" || exit 97; '
                           'done; exec "$@"', "sh"] + cmd
                w.proc = self._spawn(cmd, w.log, w.dir, wenv)
                self.nodes.append(w)
            for w in self.nodes:
                self._wait_log(w.log, r"Successfully registered with master", w.proc, deadline)
        except BaseException:
            self.stop()
            raise
        return self

    # -------------------------------------------------------------------------------- observing
    def executors(self) -> dict[int, list[int]]:
        """Worker index -> pids of its executor JVMs now running."""
        out: dict[int, list[int]] = {}
        for w in self.nodes:
            if w.proc is None:
                continue
            out[w.index] = sorted(p for p in descendants([w.proc.pid]) if EXECUTOR_CLASS in cmdline(p))
        return out

    def wait_executors(self, count: int, timeout: float = 120.0, exclude: Iterable[int] = ()) -> dict[int, list[int]]:
        """Wait until ``count`` executor JVMs run (not counting pids in ``exclude``)."""
        deadline = time.monotonic() + timeout
        skip = set(exclude)
        while True:
            ex = {i: [p for p in ps if p not in skip] for i, ps in self.executors().items()}
            if sum(len(ps) for ps in ex.values()) >= count:
                return ex
            if time.monotonic() > deadline:
                raise TimeoutError(f"{count} executors did not start in {timeout:.0f} s (running: {ex})")
            time.sleep(0.2)

    def app_logs(self, pattern: str = "stderr") -> dict[str, str]:
        """The executors' logs of every application: path -> text."""
        out = {}
        for w in self.nodes:
            for dp, _dn, files in os.walk(w.work_dir):
                for f in files:
                    if f == pattern:
                        with open(os.path.join(dp, f), errors="replace") as fh:
                            out[os.path.join(dp, f)] = fh.read()
        return out

    # -------------------------------------------------------------------------------- stopping
    def stop(self, timeout: float = 20.0) -> set[int]:
        """Stop the daemons (a Worker stops its executors), then kill anything of the cluster left; returns
        the pids that had to be killed (after the daemons' own shutdown)."""
        daemons = [p for p in [self.master] + [w.proc for w in self.nodes] if p is not None and p.poll() is None]
        everything = descendants(p.pid for p in daemons) | processes_inside(self.root) | {p.pid for p in daemons}
        workers_first = [w.proc for w in self.nodes if w.proc is not None and w.proc.poll() is None]
        _kill((p.pid for p in workers_first), signal.SIGTERM)
        _wait_gone({p.pid for p in workers_first}, timeout / 2)
        if self.master is not None and self.master.poll() is None:
            self.master.terminate()
        left = _wait_gone(everything | processes_inside(self.root), timeout / 2)
        killed = set(left)
        for _ in range(3):
            if not left:
                break
            _kill(left, signal.SIGKILL)
            left = _wait_gone(left | processes_inside(self.root), 5.0)
            killed |= left
        for p in daemons:
            try:
                p.wait(5)
            except subprocess.TimeoutExpired:
                pass
        self.master, self.nodes = None, []
        return killed


# ------------------------------------------------------------------------------------------ Pythons
PYSPARK_NEEDS = ["pyspark[sql]"]          # what every PySpark job using Arrow needs: py4j, pyarrow, pandas, numpy


def requirement_closure(requirements: Iterable[str]) -> list[str]:
    """The installed distributions ``requirements`` pull in (with extras, markers evaluated here)."""
    from importlib.metadata import PackageNotFoundError, distribution
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name
    seen: dict[str, None] = {}
    todo = [(Requirement(r), "") for r in requirements]
    while todo:
        req, extra = todo.pop()
        if req.marker is not None and not req.marker.evaluate({"extra": extra}):
            continue
        name = canonicalize_name(req.name)
        extras = sorted(req.extras)
        key = name + "[" + ",".join(extras) + "]"
        if key in seen:
            continue
        seen[key] = None
        try:
            dist = distribution(req.name)
        except PackageNotFoundError:
            raise RuntimeError(f"{req.name} is not installed in {sys.executable}") from None
        for r in dist.requires or []:
            rr = Requirement(r)
            if canonicalize_name(rr.name) == name:          # rmqd[test] -> rmqd[console], ...
                continue
            for e in extras or [""]:
                todo.append((rr, e))
    return sorted({k.split("[")[0] for k in seen})


def make_venv(path: str, distributions: Iterable[str], pth: Iterable[str] = ()) -> str:
    """A virtual environment at ``path`` with only the given installed distributions (their files linked
    from this interpreter's site-packages) and ``.pth`` entries; returns its python."""
    from importlib.metadata import distribution
    shutil.rmtree(path, ignore_errors=True)
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", path], check=True, env=clean_env(),
                   timeout=120)
    py = os.path.join(path, "bin", "python")
    site = subprocess.run([py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], check=True,
                          capture_output=True, text=True, env=clean_env(), timeout=60).stdout.strip()
    for name in distributions:
        dist = distribution(name)
        base = str(dist.locate_file(""))
        tops = {str(f).split("/")[0] for f in dist.files or [] if not str(f).startswith("..")}
        for top in sorted(tops - {"__pycache__"}):
            src, dst = os.path.join(base, top), os.path.join(site, top)
            if os.path.exists(src) and not os.path.lexists(dst):
                os.symlink(src, dst)
    entries = list(pth)
    if entries:
        with open(os.path.join(site, "rmqd-under-test.pth"), "w") as f:
            f.write("\n".join(entries) + "\n")
    return py
