"""For the kill -9 tests' child processes: a step hook that SIGKILLs the process at a chosen step."""
from __future__ import annotations

import os
import signal
from typing import Callable


def kill_at(step: str, nth: int) -> tuple[Callable[[str], None], list[int]]:
    """(hook, seen): ``hook(name)`` counts the times ``name == step`` in ``seen[0]`` and SIGKILLs this
    process the ``nth`` time."""
    seen = [0]

    def hook(name: str) -> None:
        if name == step:
            seen[0] += 1
            if seen[0] == nth:
                os.kill(os.getpid(), signal.SIGKILL)
    return hook, seen
