"""The Java RocketMQ 4.9.8 kit in tests: our Java programs, mqadmin, and the reference cluster.

The kit (``../shared/rocketmq-4.9.8`` beside the repository, or ``$RMQD_JAVA_KIT``) holds the Java
client library, mqadmin, the benchmark tools and the real Java name server + broker. Java tests are
core tests: when ``java``/``javac`` or the kit is missing they fail with a clear message
(:func:`require_kit`), they never skip.

- :func:`compile_java` compiles ``compat_tests/java/src/*.java`` once per source hash into a cache
  directory; :func:`run_java` runs one of those programs (JSON lines on stdout, as the C++ runner).
- :func:`mqadmin` runs ``bin/mqadmin`` with a hard timeout.
- :class:`ReferenceCluster` starts ``bin/reference-cluster`` on free loopback ports (the
  ``reference_cluster`` session fixture in ``compat_tests/conftest.py`` starts one per test session).
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import tempfile
import threading
import time
from functools import lru_cache
from pathlib import Path
from typing import Mapping, Sequence

REPO = Path(__file__).resolve().parent.parent
JAVA_SRC = Path(__file__).resolve().parent / "java" / "src"

# Bounds of the one-time setup steps: compiling our programs, starting the session's reference cluster and
# the session's mqadmin JVM. pytest-timeout counts a fixture's setup in the first test that needs it, so a
# module's explicit timeout is SETUP_BUDGET + the bounded waits of its longest test.
JAVAC_TIMEOUT = 180.0
REFERENCE_START_TIMEOUT = 120.0
SHELL_START_TIMEOUT = 120.0
SETUP_BUDGET = JAVAC_TIMEOUT + REFERENCE_START_TIMEOUT + SHELL_START_TIMEOUT

# The session reference broker's settings beyond the kit's broker.conf: what the Java client scenarios need
# to run on it in seconds (1 s delay levels, transaction check-back after 1 s, SQL92 filtering on). rmqd
# servers compared with it take the same (``rmqd_broker(**REFERENCE_BROKER_PROPERTIES)``), so that
# GET_BROKER_CONFIG can be compared value by value.
FAST_DELAY_LEVELS = " ".join(["1s"] * 18)
REFERENCE_BROKER_PROPERTIES = {"messageDelayLevel": FAST_DELAY_LEVELS, "transactionCheckInterval": "1000",
                               "transactionTimeOut": "1000", "enablePropertyFilter": "true"}


def reference_conf_lines() -> list[str]:
    """REFERENCE_BROKER_PROPERTIES as broker.conf lines."""
    return [f"{k}={v}" for k, v in REFERENCE_BROKER_PROPERTIES.items()]


def kit_dir() -> Path | None:
    """The kit's root, or None when it cannot be found."""
    candidates = [os.environ.get("RMQD_JAVA_KIT", ""), str(REPO.parent / "shared" / "rocketmq-4.9.8"),
                  "/work/shared/rocketmq-4.9.8"]
    for c in candidates:
        if c and (Path(c) / "lib").is_dir() and (Path(c) / "bin" / "common.sh").is_file():
            return Path(c).resolve()
    return None


def missing_reason() -> str | None:
    """Why the Java tests cannot run here, or None when they can."""
    for tool in ("java", "javac"):
        if shutil.which(tool) is None:
            return f"`{tool}` is not on PATH: the Java compatibility tests need a JDK 17 (apt install openjdk-17-jdk)"
    if kit_dir() is None:
        return ("the RocketMQ 4.9.8 Java kit was not found (looked in $RMQD_JAVA_KIT and "
                f"{REPO.parent / 'shared' / 'rocketmq-4.9.8'}); the Java compatibility tests need it")
    return None


def require_kit() -> Path:
    """The kit's root; fails the calling test (does not skip) when Java or the kit is missing."""
    import pytest

    reason = missing_reason()
    if reason:
        pytest.fail(reason, pytrace=False)
    return kit_dir()  # type: ignore[return-value]


@lru_cache(maxsize=1)
def jdk17_opts() -> tuple[str, ...]:
    """The ``--add-opens`` flags RocketMQ 4.9.8 needs on Java 17, read from the kit's common.sh."""
    common = kit_dir() / "bin" / "common.sh"  # type: ignore[operator]
    out = subprocess.run(["bash", "-c", f'. "{common}"; printf "%s\\n" "${{JDK17_OPTS[@]}}"'],
                         capture_output=True, text=True, timeout=30, check=True).stdout
    return tuple(line for line in out.splitlines() if line)


def classpath(*extra: str | Path) -> str:
    kit = kit_dir()
    return os.pathsep.join([str(kit / "conf"), str(kit / "lib" / "*"), *map(str, extra)])


def compile_java(src_dir: Path = JAVA_SRC, timeout: float = JAVAC_TIMEOUT, cp: str | None = None) -> Path:
    """Compile every ``.java`` under ``src_dir`` against ``cp`` (the 4.9.8 kit's classpath by default), once
    per content hash and classpath; returns the classes dir."""
    sources = sorted(src_dir.rglob("*.java"))
    if not sources:
        raise FileNotFoundError(f"no Java sources under {src_dir}")
    cp = classpath() if cp is None else cp
    digest = hashlib.sha256(cp.encode())
    for s in sources:
        digest.update(s.name.encode() + b"\0" + s.read_bytes())
    out = Path(tempfile.gettempdir()) / f"rmqd-java-classes-{digest.hexdigest()[:16]}"
    if (out / ".done").exists():
        return out
    tmp = Path(tempfile.mkdtemp(prefix="rmqd-javac-"))
    res = subprocess.run(["javac", "-nowarn", "-encoding", "UTF-8", "-cp", cp, "-d", str(tmp),
                          *map(str, sources)], capture_output=True, text=True, timeout=timeout)
    if res.returncode != 0:
        shutil.rmtree(tmp, ignore_errors=True)
        raise RuntimeError(f"javac failed:\n{res.stdout}\n{res.stderr}")
    (tmp / ".done").write_text("ok")
    try:
        tmp.rename(out)
    except OSError:          # a concurrent session compiled the same sources first
        shutil.rmtree(tmp, ignore_errors=True)
    return out


class JavaRun(subprocess.CompletedProcess):
    """A finished Java program: ``events`` are the JSON objects it printed one per line."""

    def __init__(self, args, returncode, stdout, stderr, timed_out: bool) -> None:
        super().__init__(args, returncode, stdout, stderr)
        self.timed_out = timed_out
        self.events = []
        for line in stdout.splitlines():
            if line.startswith("{"):
                try:
                    self.events.append(json.loads(line))
                except ValueError:        # e.g. mqadmin's pretty-printed JSON: not an event line
                    pass

    def events_of(self, op: str) -> list[dict]:
        return [e for e in self.events if e.get("op") == op]


def work_dir() -> str:
    """The working directory of every Java process we start: mqadmin writes files into its current
    directory (``consumerStatus`` writes ``<timestamp>/<clientId>``), which must never be the repository."""
    d = Path(tempfile.gettempdir()) / "rmqd-java-cwd"
    d.mkdir(exist_ok=True)
    return str(d)


def _java_env(home: str | None, env: Mapping[str, str] | None) -> dict[str, str]:
    full_env = dict(os.environ)
    if home:
        full_env["HOME"] = home   # client logs go to $HOME/logs/rocketmqlogs
    full_env.update(env or {})
    return full_env


def _run(cmd: Sequence[str], timeout: float, env: Mapping[str, str] | None, home: str | None) -> JavaRun:
    proc = subprocess.Popen(list(cmd), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=_java_env(home, env), start_new_session=True, cwd=work_dir())
    try:
        out, err = proc.communicate(timeout=timeout)
        timed_out = False
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, 9)
        out, err = proc.communicate()
        timed_out = True
    return JavaRun(list(cmd), proc.returncode, out, err, timed_out)


def java_command(main_class: str, *args: str, heap: str = "-Xmx256m",
                 system_props: Mapping[str, str] | None = None) -> list[str]:
    """The command line that runs one of our compiled programs (``compat_tests/java/src``)."""
    classes = compile_java()
    props = [f"-D{k}={v}" for k, v in (system_props or {}).items()]
    return ["java", heap, "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", *jdk17_opts(), *props,
            "-Drocketmq.client.logUseSlf4j=false", "-cp", classpath(classes), main_class, *args]


def run_java(main_class: str, *args: str, timeout: float = 60.0, env: Mapping[str, str] | None = None,
             heap: str = "-Xmx256m", system_props: Mapping[str, str] | None = None) -> JavaRun:
    """Run one of our compiled programs (``compat_tests/java/src``) with a hard timeout."""
    require_kit()
    cmd = java_command(main_class, *args, heap=heap, system_props=system_props)
    return _run(cmd, timeout, env, home=tempfile.gettempdir())


class JavaProcess:
    """One of our programs running in the background (a consumer that stays online while the test
    acts): JSON lines it prints are read by a thread; :meth:`wait_for` polls them with a deadline."""

    def __init__(self, main_class: str, *args: str, env: Mapping[str, str] | None = None,
                 system_props: Mapping[str, str] | None = None, cmd: Sequence[str] | None = None) -> None:
        """Runs ``main_class`` of our 4.9.8 programs, or ``cmd`` as given (another kit's program)."""
        if cmd is None:
            require_kit()
            cmd = java_command(main_class, *args, system_props=system_props)
        self.cmd = list(cmd)
        self.proc = subprocess.Popen(self.cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True, env=_java_env(tempfile.gettempdir(), env),
                                     start_new_session=True, cwd=work_dir())
        self.events: list[dict] = []
        self.stdout_lines: list[str] = []
        self.stderr_tail: list[str] = []
        self._cond = threading.Condition()
        threading.Thread(target=self._read, args=(self.proc.stdout, True), daemon=True).start()
        threading.Thread(target=self._read, args=(self.proc.stderr, False), daemon=True).start()

    def _read(self, stream, is_stdout: bool) -> None:
        for line in stream:
            with self._cond:
                if not is_stdout:
                    self.stderr_tail = (self.stderr_tail + [line])[-200:]
                    continue
                self.stdout_lines.append(line)
                if line.startswith("{"):
                    try:
                        self.events.append(json.loads(line))
                    except ValueError:
                        pass
                self._cond.notify_all()
        with self._cond:
            self._cond.notify_all()

    def send(self, line: str) -> None:
        """Write one command line to the program's stdin."""
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()

    def wait_for(self, predicate, timeout: float, what: str):
        """Wait until ``predicate(events)`` returns something truthy (returned); fails the test after
        ``timeout`` seconds or when the program exits first."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                got = predicate(self.events)
                if got:
                    return got
                left = deadline - time.monotonic()
                if left <= 0 or (self.proc.poll() is not None and not got):
                    break
                self._cond.wait(min(left, 0.5))
        raise AssertionError(f"{what}: not seen within {timeout:.0f}s (exit {self.proc.poll()}); "
                             f"events {self.events[-10:]}; stderr {''.join(self.stderr_tail)[-3000:]}")

    def stop(self) -> None:
        """Close stdin (the program's cue to shut down) and wait; kill it if it lingers."""
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, 9)
            self.proc.wait()

    def __enter__(self) -> "JavaProcess":
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def mqadmin(*args: str, timeout: float = 60.0, env: Mapping[str, str] | None = None,
            home: str | Path | None = None) -> JavaRun:
    """Run the kit's ``bin/mqadmin`` (e.g. ``mqadmin('topicList', '-n', addr)``); with ``home`` (a
    :func:`shadow_home`), mqadmin reads that ``conf/tools.yml`` (ACL credentials) instead of the kit's."""
    kit = require_kit()
    if home is not None:
        env = dict(env or {}, JAVA_OPT_EXT=f"-Drocketmq.home.dir={home}")
    return _run([str(kit / "bin" / "mqadmin"), *args], timeout, env, home=tempfile.gettempdir())


class MqadminShell:
    """The kit's mqadmin with one JVM for many sub-commands (``MqadminShell.java`` runs each through
    ``MQAdminStartup.main0``, the entry point ``bin/mqadmin`` runs): a mqadmin start costs seconds on a
    busy 2-core machine, a sub-command in a warm JVM a fraction of that. ``run`` answers like
    :func:`mqadmin` (``stdout`` holds everything the sub-command printed; ``returncode`` 0, or -1 when
    it timed out). Exceptions are printed, as bin/mqadmin does."""

    def __init__(self, home: str | Path | None = None, cmd: Sequence[str] | None = None) -> None:
        """``home``: a :func:`shadow_home` whose ``conf/tools.yml`` (ACL credentials) every sub-command signs
        with, as :func:`mqadmin`'s; the kit's by default. ``cmd``: the command that runs MqadminShell on
        another kit's classpath (java5kit's 5.x mqadmin); the 4.9.8 kit's by default."""
        if cmd is None:
            kit = require_kit()
            self.proc = JavaProcess("MqadminShell", system_props={"rocketmq.home.dir": str(home or kit)})
        else:
            self.proc = JavaProcess("MqadminShell", cmd=cmd)
        self.proc.wait_for(lambda ev: any(e.get("ready") for e in ev), SHELL_START_TIMEOUT, "mqadmin shell start")
        self._next_id = 0

    def run(self, *args: str, timeout: float = 60.0) -> JavaRun:
        """Run ``mqadmin <args>`` in the shared JVM."""
        self._next_id += 1
        rid = self._next_id
        self.proc.send(json.dumps({"id": rid, "args": list(args), "timeoutMs": int(timeout * 1000)}))
        ev = self.proc.wait_for(lambda evs: next((e for e in reversed(evs) if e.get("id") == rid), None),
                                timeout + 30, f"mqadmin {' '.join(args[:1])}")
        return JavaRun(["mqadmin", *args], -1 if ev["timedOut"] else 0, ev["out"], "", ev["timedOut"])

    def close(self) -> None:
        self.proc.stop()

    def __enter__(self) -> "MqadminShell":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def shadow_home(directory: str | Path, conf_files: Mapping[str, str]) -> Path:
    """A ROCKETMQ_HOME of our own (the kit is read-only): ``conf/`` holds copies of the kit's conf
    files, replaced or completed by ``conf_files`` (e.g. ``{"tools.yml": ..., "plain_acl.yml": ...}``).
    Java programs, mqadmin and the reference broker read it with ``-Drocketmq.home.dir``."""
    kit = require_kit()
    home = Path(directory)
    conf = home / "conf"
    conf.mkdir(parents=True, exist_ok=True)
    for f in (kit / "conf").iterdir():
        if f.is_file():
            (conf / f.name).write_bytes(f.read_bytes())
    for name, text in conf_files.items():
        (conf / name).parent.mkdir(parents=True, exist_ok=True)
        (conf / name).write_text(text)
    return home


def free_port_block(count: int = 4) -> int:
    """A base port such that ``base .. base+count-1`` are all free on loopback, below the ephemeral range
    (a restarted broker finds its ports still free)."""
    from rmqd.common.localports import free_port_block as block
    return block(count)


def disk_ratio_system_properties() -> dict[str, str]:
    """The Java broker's disk thresholds as system properties, from the ``ROCKETMQ_BROKER_DISKSPACE...``
    variables rmqd's brokers read (the root conftest sets them for the suite), so both brokers of a
    differential test refuse writes at the same disk usage."""
    from rmqd.store.message_store import JAVA_DISK_RATIO_DEFAULTS, disk_ratio_property, disk_ratio_variable
    return {"rocketmq.broker." + name: f"{disk_ratio_property(name) / 100:.4f}"
            for name in JAVA_DISK_RATIO_DEFAULTS if os.environ.get(disk_ratio_variable(name), "").strip()}


def _wait_dead(pid: int, timeout: float) -> None:
    """Until ``pid`` is gone or a zombie (its parent, the kit's script, has exited: init reaps it)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            return
        if state in ("Z", "X"):
            return
        time.sleep(0.05)


class ReferenceCluster:
    """The kit's real Java name server + broker on free loopback ports, in ``workdir``.

    ``extra_conf`` lines are appended to the broker's broker.conf (e.g. ``aclEnable=true``); ``home``
    (a :func:`shadow_home`) replaces the kit's ROCKETMQ_HOME (where the broker finds plain_acl.yml);
    ``system_props`` are given to both JVMs (e.g. ``tls.server.mode``)."""

    def __init__(self, workdir: str | Path, extra_conf: Sequence[str] = (), home: str | Path | None = None,
                 system_props: Mapping[str, str] | None = None) -> None:
        self.kit = require_kit()
        self.workdir = Path(workdir)
        self.extra_conf = list(extra_conf)
        self.home = home
        self.system_props = dict(system_props or {})
        base = free_port_block(5)
        self.namesrv_port, self.broker_port = base, base + 3   # broker uses bp-2 (VIP), bp, bp+1 (HA)
        self.namesrv_addr = f"127.0.0.1:{self.namesrv_port}"
        self.broker_addr = f"127.0.0.1:{self.broker_port}"
        self.started = False

    def start(self, timeout: float = REFERENCE_START_TIMEOUT) -> "ReferenceCluster":
        self.workdir.mkdir(parents=True, exist_ok=True)
        args = [str(self.kit / "bin" / "reference-cluster"), "start", str(self.workdir),
                "--namesrv-port", str(self.namesrv_port), "--broker-port", str(self.broker_port)]
        if self.extra_conf:
            conf = self.workdir / "extra-broker.conf"
            conf.write_text("".join(line + "\n" for line in self.extra_conf))
            args += ["--conf", str(conf)]
        env = dict(os.environ)
        opts = [f"-D{prop}={value}" for prop, value in {**disk_ratio_system_properties(), **self.system_props}.items()]
        if self.home is not None:
            opts.append(f"-Drocketmq.home.dir={self.home}")
        if opts:
            env["JAVA_OPT_EXT"] = " ".join(opts)
        res = subprocess.run(args, capture_output=True, text=True, timeout=timeout, env=env)
        if res.returncode != 0:
            self.stop()
            raise RuntimeError(f"reference cluster did not start: {res.stdout}\n{res.stderr}")
        self.started = True
        return self

    def stop(self) -> None:
        subprocess.run([str(self.kit / "bin" / "reference-cluster"), "stop", str(self.workdir)],
                       capture_output=True, text=True, timeout=60)
        self.started = False

    def kill(self) -> None:
        """Crash both JVMs (SIGKILL): a test's throwaway cluster need not spend the broker's ~10 s graceful
        shutdown. Only the pids of the kit's own name server and broker main classes are signalled."""
        for pid_file, main_class in (("broker.pid", "BrokerStartup"), ("namesrv.pid", "NamesrvStartup")):
            path = self.workdir / pid_file
            try:
                pid = int(path.read_text().strip())
                cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
            except (OSError, ValueError):
                continue                                # never started, or already gone
            if main_class.encode() in cmdline:
                os.kill(pid, 9)
                _wait_dead(pid, 10.0)
            path.unlink(missing_ok=True)
        self.started = False

    def __enter__(self) -> "ReferenceCluster":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
