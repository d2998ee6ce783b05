"""Ending asyncio tasks for good: cancel, wait, and cancel again a task that went on.

A cancel can be lost on Python 3.11: ``asyncio.wait_for`` returns a result that arrived together with the cancel
(gh-86296), so a periodic task whose round was inside such a call carries on with its next round and a plain
``cancel(); await task`` waits forever (a broker's close hung that way).
"""
from __future__ import annotations

import asyncio
import logging
from typing import Iterable

log = logging.getLogger(__name__)

#: how long a cancelled task may take to end before it is cancelled again
CANCEL_AGAIN_S = 0.5


async def cancel_and_wait(tasks: Iterable["asyncio.Task[object]"], what: str = "task") -> None:
    """Cancel ``tasks`` and wait until each has ended (cancelling again any that went on); a task that ended with
    an exception other than the cancel is logged with it."""
    tasks = list(tasks)
    for task in tasks:
        task.cancel()
    for task in tasks:
        while not task.done():
            await asyncio.wait({task}, timeout=CANCEL_AGAIN_S)
            if not task.done():
                log.warning("%s %s went on after its cancel: cancelling it again", what, task.get_name())
                task.cancel()
        if not task.cancelled() and task.exception() is not None:
            log.error("%s %s failed", what, task.get_name(), exc_info=task.exception())
