"""cancel_and_wait ends a task whose cancel was lost (it went on with another round)."""
from __future__ import annotations

import asyncio

from rmqd.remoting.tasks import cancel_and_wait


async def test_a_task_that_swallows_its_first_cancel_is_cancelled_again():
    rounds = []

    async def stubborn() -> None:
        while True:
            try:
                await asyncio.sleep(0.05)
            except asyncio.CancelledError:
                if not rounds:                      # as a wait_for that returned a result with the cancel
                    rounds.append("lost")
                    continue
                raise
            rounds.append("round")

    task = asyncio.get_running_loop().create_task(stubborn(), name="stubborn")
    await asyncio.sleep(0.01)
    await asyncio.wait_for(cancel_and_wait([task]), 5)
    assert task.cancelled() and rounds[0] == "lost"


async def test_a_failed_task_is_logged_not_raised(caplog):
    async def fails() -> None:
        raise RuntimeError("boom")

    task = asyncio.get_running_loop().create_task(fails(), name="fails")
    await asyncio.sleep(0)
    await cancel_and_wait([task], "thing")
    assert "thing fails failed" in caplog.text
