"""What every pipeline job shares: the SparkSession, progress from Spark's status tracker, the summary.

- :func:`spark_session`: ``--master`` (default ``local[*]``; under ``spark-submit`` its own master) and
  ``--conf k=v`` go straight to the builder. Local masters bind the driver to 127.0.0.1 and leave the
  web UI off unless a ``--conf`` says otherwise; Spark's own console bar is off (ours replaces it).
- :class:`SparkProgress`: a bar on a terminal, a plain log line every few seconds otherwise
  (:mod:`rmqd.common.progress`), showing the stage, tasks, rows and bytes of the job group it watches.
- :class:`JobSummary`: rows, bytes, seconds and output paths, as text or ``--json``.
"""
from __future__ import annotations

import logging
import os
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Optional, ParamSpec, Sequence, TypeVar

from rmqd.common import progress
from rmqd.pipeline.errors import PipelineError, user_error

if TYPE_CHECKING:
    from pyspark import Accumulator, SparkContext
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

DEFAULT_MASTER = "local[*]"
_P = ParamSpec("_P")
_R = TypeVar("_R")
_T = TypeVar("_T")


def under_spark_submit() -> bool:
    """spark-submit starts the Python driver with a gateway to its JVM (and chose the master)."""
    return "PYSPARK_GATEWAY_PORT" in os.environ


def parse_conf(items: Sequence[str]) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    for item in items:
        k, sep, v = item.partition("=")
        if not sep or not k.strip():
            raise PipelineError(f"--conf {item!r}: expected key=value (e.g. spark.executor.memory=4g)")
        out.append((k.strip(), v))
    return out


def spark_session(master: Optional[str] = None, conf: Sequence[tuple[str, str]] = (),
                  app: str = "rmqd pipeline") -> SparkSession:
    """A SparkSession for a job (the existing one if this process already has it)."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)          # local executors: this interpreter
    from pyspark.sql import SparkSession
    builder = SparkSession.builder.appName(app)
    effective = master or (None if under_spark_submit() else DEFAULT_MASTER)
    if effective:
        builder = builder.master(effective)
    settings = {"spark.ui.showConsoleProgress": "false"}
    if effective and effective.startswith("local"):
        settings.update({"spark.driver.host": "127.0.0.1", "spark.driver.bindAddress": "127.0.0.1",
                         "spark.ui.enabled": "false"})
    settings.update(dict(conf))
    for k, v in settings.items():
        builder = builder.config(k, v)
    t0 = time.perf_counter()
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel(os.environ.get("RMQD_SPARK_LOG_LEVEL", "ERROR"))
    log.info("Spark %s (%s) ready in %.1f s", session.version, session.sparkContext.master,
             time.perf_counter() - t0)
    return session


def human_bytes(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if abs(n) < 1024 or unit == "TB":
            return f"{int(n)} B" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TB"


@dataclass
class JobSummary:
    job: str
    rows: int = 0
    bytes: int = 0
    seconds: float = 0.0
    outputs: list[str] = field(default_factory=list)
    details: dict[str, object] = field(default_factory=dict)

    def to_json(self) -> dict[str, object]:
        return {"job": self.job, "rows": self.rows, "bytes": self.bytes, "seconds": round(self.seconds, 3),
                "outputs": self.outputs, **self.details}

    def text(self) -> str:
        rate = f", {self.bytes / 1e6 / self.seconds:.1f} MB/s" if self.seconds > 0 and self.bytes else ""
        lines = [f"{self.job}: {self.rows:,} rows, {human_bytes(self.bytes)} in {self.seconds:.1f} s{rate}"]
        for k, v in self.details.items():
            if isinstance(v, (list, dict)):
                if v:
                    lines.append(f"  {k}: {len(v)} (see --json)" if len(str(v)) > 200 else f"  {k}: {v}")
            else:
                lines.append(f"  {k}: {v}")
        lines += [f"  output: {o}" for o in self.outputs]
        return "\n".join(lines)


class SparkProgress:
    """Watches one job group: stage n of m, tasks done, rows and bytes (accumulators) against a total."""

    def __init__(self, sc: SparkContext, name: str, total_bytes: int, rows_acc: Optional[Accumulator[int]] = None,
                 bytes_acc: Optional[Accumulator[int]] = None,
                 reporter: Optional[progress.Reporter] = None) -> None:
        self.sc, self.name = sc, name
        self.rows_acc, self.bytes_acc = rows_acc, bytes_acc
        self.group = f"rmqd-{uuid.uuid4().hex[:12]}"
        self.phase = reporter.phase(name, total_bytes, "B") if reporter else progress.phase(name, total_bytes, "B")
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None
        self._last_bytes = 0
        self._failed = 0                          # failed task attempts seen in the group's stages
        self.task_error: Optional[str] = None     # a task's PipelineError, which ended the job

    def _stages(self) -> list[int]:
        tracker = self.sc.statusTracker()
        stages: list[int] = []
        for jid in tracker.getJobIdsForGroup(self.group) or []:
            info = tracker.getJobInfo(jid)
            if info is not None:
                stages += list(info.stageIds)
        return sorted(set(stages))

    def _watch_failures(self, stages: list[int]) -> None:
        """A task that failed with a PipelineError (bad input, a damaged segment, a store its host cannot
        see) fails the same way on every attempt: end the job at the first one (cancel the group) instead of
        after ``spark.task.maxFailures`` attempts, some of which may land on executors where it would not
        fail. Other failures (a lost executor) are left to Spark's retries."""
        tracker = self.sc.statusTracker()
        infos = [(s, tracker.getStageInfo(s)) for s in stages]
        failed = sum(i.numFailedTasks for _s, i in infos if i is not None)
        if failed <= self._failed:
            return
        self._failed = failed
        for sid, info in infos:
            if info is None or not info.numFailedTasks:
                continue
            tasks = self.sc._jsc.sc().statusStore().taskList(sid, info.currentAttemptId, 1000)
            for i in range(tasks.size()):
                err = tasks.apply(i).errorMessage()
                msg = user_error(Exception(err.get())) if err.isDefined() else None
                if msg is not None:
                    self.task_error = msg
                    log.info("%s: a task failed with %s; cancelling the job", self.name, msg)
                    self.sc.cancelJobGroup(self.group)
                    return

    def _status(self) -> str:
        tracker = self.sc.statusTracker()
        stages = self._stages()
        if self.task_error is None:
            try:
                self._watch_failures(stages)
            except Exception as exc:              # Spark's internal status store moved: its retries remain
                log.debug("progress: cannot read failed tasks: %s", exc)
        active = [s for s in tracker.getActiveStageIds() if s in stages]
        text = ""
        if active:
            st = tracker.getStageInfo(active[0])
            if st is not None:
                text = f"stage {stages.index(active[0]) + 1}/{len(stages)}: {st.numCompletedTasks}/{st.numTasks} tasks"
        rows = self.rows_acc.value if self.rows_acc is not None else None
        return ", ".join(p for p in (text, f"{rows:,} rows" if rows is not None else "") if p)

    def _tick(self) -> None:
        try:
            status = self._status()
        except Exception as exc:                  # the tracker can race the job's end; say why we skip
            log.debug("progress: status tracker unavailable: %s", exc)
            return
        self.phase.name = f"{self.name} [{status}]" if status else self.name
        done = self.bytes_acc.value if self.bytes_acc is not None else 0
        self.phase.advance(done - self._last_bytes)
        self._last_bytes = done

    def _loop(self) -> None:
        period = min(0.5, self.phase.reporter.interval)
        while not self._stop.wait(period):
            self._tick()

    def run(self, description: str, action: Callable[[], _T]) -> _T:
        """Run ``action`` (a Spark action) in this progress' job group, showing progress meanwhile."""
        self.sc.setJobGroup(self.group, description, interruptOnCancel=True)
        self._thread = threading.Thread(target=self._loop, name="rmqd-pipeline-progress", daemon=True)
        self._thread.start()
        ok = False
        try:
            result = action()
            ok = True
            return result
        except Exception:
            if self.task_error is not None:          # we cancelled it: the task's own error says why
                raise PipelineError(self.task_error) from None
            raise
        finally:
            self._stop.set()
            self._thread.join(2)
            if ok:
                self._tick()
            self.phase.__exit__(None if ok else RuntimeError, None, None)
            # pyspark annotates the value as str, but None is what removes a local property (the JVM side)
            self.sc.setLocalProperty("spark.jobGroup.id", None)  # type: ignore[arg-type]


TASK_BYTES = 256 << 20
HOLD_LIMIT_S = 120.0


def held_for_tests() -> bool:
    return bool(os.environ.get("RMQD_PIPELINE_TEST_PAUSE_AFTER_FIRST_FILE") or
                os.environ.get("RMQD_PIPELINE_TEST_HOLD"))


def hold_for_tests() -> None:
    """Tests only: a task that has written its first output file waits here, so a test can kill the job's
    driver or one of its executors mid-way. ``RMQD_PIPELINE_TEST_PAUSE_AFTER_FIRST_FILE=<seconds>`` sleeps
    that long; ``RMQD_PIPELINE_TEST_HOLD=<file>`` waits while that file exists (at most HOLD_LIMIT_S), saying so on
    stderr with the file's content (on a cluster: in the executor's log)."""
    pause = float(os.environ.get("RMQD_PIPELINE_TEST_PAUSE_AFTER_FIRST_FILE", "0") or 0)
    hold = os.environ.get("RMQD_PIPELINE_TEST_HOLD")
    if hold and os.path.exists(hold):
        try:
            with open(hold) as f:
                what = f.read(200).strip()
        except FileNotFoundError:                # removed meanwhile: nothing to wait for
            what = None
        if what is not None:
            print(f"rmqd-pipeline-test: holding on {hold} ({what}) in pid {os.getpid()}", file=sys.stderr,
                  flush=True)
        deadline = time.monotonic() + HOLD_LIMIT_S
        while os.path.exists(hold) and time.monotonic() < deadline:
            time.sleep(0.05)
    if pause:
        print(f"rmqd-pipeline-test: paused {pause:g} s (pid {os.getpid()})", file=sys.stderr, flush=True)
        time.sleep(pause)


def task_groups(items: Sequence[_T], size: Callable[[_T], int], parallelism: int,
                task_bytes: int = TASK_BYTES) -> list[list[_T]]:
    """Consecutive items grouped into Spark tasks: at least two tasks per core when there are enough
    items, else tasks of about ``task_bytes`` (a task costs ~0.1 s to schedule: small segments share one)."""
    if not items:
        return []
    total = sum(size(i) for i in items)
    n = min(len(items), max(2 * max(parallelism, 1), -(-total // task_bytes)))
    per = total / n
    groups: list[list[_T]] = [[]]
    acc = 0.0
    for it in items:
        if groups[-1] and acc >= per * len(groups) and len(groups) < n:
            groups.append([])
        groups[-1].append(it)
        acc += size(it)
    return groups


def spark_errors(job: str) -> Callable[[Callable[_P, _R]], Callable[_P, _R]]:
    """Decorator: a PipelineError raised on an executor comes back as that PipelineError."""
    def wrap(fn: Callable[_P, _R]) -> Callable[_P, _R]:
        def inner(*a: _P.args, **kw: _P.kwargs) -> _R:
            try:
                return fn(*a, **kw)
            except PipelineError:
                raise
            except Exception as exc:
                msg = user_error(exc)
                if msg is not None:
                    raise PipelineError(msg) from None
                raise
        inner.__name__, inner.__doc__ = fn.__name__, fn.__doc__
        return inner
    return wrap
