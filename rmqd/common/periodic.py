"""run_every: one asyncio task's periodic loop (the asyncio counterpart of :class:`~rmqd.common.service_thread.ServiceThread`).

The loop waits, runs one round, and goes on until its task is cancelled; a round that raises is logged with what it
is and the next round runs, so one bad round never ends the loop silently. Cancellation is never swallowed.
"""
from __future__ import annotations

import asyncio
import logging
from typing import Awaitable, Callable, Optional

log = logging.getLogger(__name__)


async def run_every(interval_s: "float | Callable[[], float]", fn: "Callable[[], Awaitable[None] | None]", what: str,
                    *, first_delay_s: Optional[float] = None, logger: Optional[logging.Logger] = None) -> None:
    """Call ``fn`` (a coroutine function or a plain one) every ``interval_s`` seconds: a number, or a callable read
    before each wait. The first round runs after ``first_delay_s`` (default: one interval). A failed round is logged
    as ``"<what> failed"`` on ``logger`` (the caller's; default this module's)."""
    delay = first_delay_s
    while True:
        if delay is None:
            delay = interval_s() if callable(interval_s) else interval_s
        await asyncio.sleep(delay)
        delay = None
        try:
            result = fn()
            if result is not None:
                await result
        except asyncio.CancelledError:
            raise
        except Exception:
            (logger or log).exception("%s failed", what)
