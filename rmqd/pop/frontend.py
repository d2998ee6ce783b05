"""What both POP front ends (remoting codes, gRPC) share: a bounded executor for the blocking POP
calls, and pop-then-long-poll.

The event loop never runs a pop (it reads the store and appends checkpoint records); it awaits it
in ``PopExecutor``, which refuses work beyond its capacity at once (``Busy``: SYSTEM_BUSY over
remoting, TOO_MANY_REQUESTS over gRPC) instead of queueing without bound.
"""
from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from typing import TYPE_CHECKING, Callable, Optional, TypeVar, TypeVarTuple, Unpack

from rmqd.pop.service import PopResult, PopService

if TYPE_CHECKING:
    from rmqd.store.api import MessageFilter

_T = TypeVar("_T")
_Ts = TypeVarTuple("_Ts")


class Busy(Exception):
    """The POP executor is full."""


class PopExecutor:
    def __init__(self, threads: int = 4, capacity: int = 1024, name: str = "pop") -> None:
        self._pool = concurrent.futures.ThreadPoolExecutor(max_workers=threads, thread_name_prefix=name)
        self.capacity = capacity
        self._inflight = 0
        self._lock = threading.Lock()
        self.rejected = 0

    async def run(self, fn: Callable[[Unpack[_Ts]], _T], *args: Unpack[_Ts]) -> _T:
        """``fn(*args)`` in the pool; raises :class:`Busy` at once when ``capacity`` calls are in flight."""
        with self._lock:
            if self._inflight >= self.capacity:
                self.rejected += 1
                raise Busy(f"too many POP requests in flight ({self.capacity})")
            self._inflight += 1
        try:
            return await asyncio.get_running_loop().run_in_executor(self._pool, fn, *args)
        finally:
            with self._lock:
                self._inflight -= 1

    def shutdown(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)


async def pop_with_polling(service: PopService, executor: PopExecutor, group: str, topic: str, queue_id: int,
                           max_nums: int, invisible_ms: int, message_filter: Optional[MessageFilter], init_mode: int,
                           poll_ms: int, client_host: str = "", deadline: Optional[float] = None,
                           order: bool = False) -> tuple[PopResult, str]:
    """Pop; if nothing came, park up to ``poll_ms`` and pop again when the topic gets a message.

    Returns the result and how it ended: ``"found"``, ``"timeout"`` or ``"full"`` (too many parked)."""
    loop = asyncio.get_running_loop()
    end = loop.time() + max(0, poll_ms) / 1000.0 if deadline is None else deadline
    while True:
        result = await executor.run(service.pop, group, topic, queue_id, max_nums, invisible_ms, message_filter,
                                    init_mode, client_host, order)
        if result.messages:
            return result, "found"
        left = end - loop.time()
        if left <= 0:
            return result, "timeout"
        state = await service.polling.wait(service.wait_topics(group, topic, order), group, queue_id, left,
                                          lambda: service.has_message(group, topic, queue_id, order))
        if state == "full":
            return result, "full"
        if state == "timeout":
            # one last look: a message may have landed between the pop and the park
            result = await executor.run(service.pop, group, topic, queue_id, max_nums, invisible_ms,
                                        message_filter, init_mode, client_host, order)
            return result, "found" if result.messages else "timeout"
