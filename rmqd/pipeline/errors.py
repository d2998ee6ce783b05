"""The pipeline's user-facing errors. Raised on an executor, they reach the driver inside Spark's
exception text; :func:`user_error` finds them there again so the CLI prints one clear line."""
from __future__ import annotations

import contextlib
import fcntl
import os
import re
from typing import Callable, Iterator, Optional, ParamSpec, TypeVar

MARK = "rmqd-pipeline-error"
_FOUND = re.compile(MARK + r": (.*?)(?:\n|$)")
_P = ParamSpec("_P")
_R = TypeVar("_R")


class PipelineError(Exception):
    """Bad input or a refused operation: the message says what and where (the CLI exits 2)."""

    def tagged(self) -> str:
        return f"{MARK}: {self}"


class CorruptSegment(PipelineError):
    """A damaged record in a segment (the message names the file and offset)."""


class TaskError(Exception):
    """A PipelineError raised inside a Spark task, carried to the driver in the exception text."""

    def __init__(self, err: PipelineError) -> None:
        super().__init__(err.tagged())


def in_task(fn: Callable[_P, _R]) -> Callable[_P, _R]:
    """``fn`` for a Spark task: a PipelineError it raises travels to the driver tagged (see user_error)."""
    def run(*a: _P.args, **kw: _P.kwargs) -> _R:
        try:
            return fn(*a, **kw)
        except PipelineError as exc:
            raise TaskError(exc) from None
    return run


@contextlib.contextmanager
def exclusive_lock(path: str, busy: str) -> Iterator[None]:
    """Hold an exclusive flock on ``path`` (created if missing) for the block; PipelineError(``busy``)
    at once when another process holds it."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise PipelineError(busy) from None
        yield
    finally:
        os.close(fd)


def user_error(exc: BaseException) -> Optional[str]:
    """The PipelineError message inside a (Spark) exception's text, if there is one."""
    m = _FOUND.search(str(exc))
    return m.group(1).strip() if m else None


_EXC_LINE = re.compile(r"^([A-Za-z_][\w.]*(?:Error|Exception|Interrupt)): (.*)$")


def describe(exc: BaseException) -> str:
    """One line for an unexpected failure: the exception, and for a Spark task's failure the Python
    exception that ended the task (the last ``SomethingError: ...`` line of the worker's traceback)."""
    text = str(exc)
    head = (text.strip().splitlines() or [""])[0]
    inner = [m.group(0) for m in (_EXC_LINE.match(line.strip()) for line in text.splitlines())
             if m and not m.group(1).startswith(("org.", "java.", "py4j.", "scala."))]
    detail = f" ({inner[-1]})" if inner and inner[-1] not in head else ""
    return f"{type(exc).__name__}: {head[:300]}{detail[:500]}"
