"""Start rmqd processes (`rmqd namesrv`, `rmqd broker`, `rmqd serve`) for multi-process scenarios: the kit's
(tests/kit/processes.py), started at once, logging at WARNING to nowhere."""
from __future__ import annotations

from tests.kit.processes import RmqdProcess as _RmqdProcess


class RmqdProcess(_RmqdProcess):
    """A running ``python -m rmqd.runtime.cli ARGS``; ``addr`` is the first address it printed, ``lines`` its stdout."""

    def __init__(self, *args: str, timeout: float = 15.0) -> None:
        super().__init__(*args)
        self.start(timeout)

    def stop(self, timeout: float = 15.0) -> int:
        return super().stop(timeout)
