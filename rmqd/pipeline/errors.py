"""The pipeline's user-facing errors. Raised on an executor, they reach the driver inside Spark's
exception text; :func:`user_error` finds them there again so the CLI prints one clear line."""
from __future__ import annotations

import re
from typing import Optional

MARK = "rmqd-pipeline-error"
_FOUND = re.compile(MARK + r": (.*?)(?:\n|$)")


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


def user_error(exc: BaseException) -> Optional[str]:
    """The PipelineError message inside a (Spark) exception's text, if there is one."""
    m = _FOUND.search(str(exc))
    return m.group(1).strip() if m else None
