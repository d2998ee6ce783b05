"""An event loop (uvloop, as the server runs) on a daemon thread, for in-process servers driven by blocking
clients from the test's thread."""
from __future__ import annotations

import asyncio
import threading
from typing import Any, Awaitable, TypeVar

import uvloop

T = TypeVar("T")


class LoopThread:
    """A uvloop running in a daemon thread; :meth:`call` runs a coroutine on it and waits for its result."""

    def __init__(self, call_timeout: float = 30.0, name: str = "test-loop") -> None:
        """``call_timeout``: how long :meth:`call` waits unless told otherwise."""
        self.call_timeout = call_timeout
        self.loop = uvloop.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name=name, daemon=True)
        self.thread.start()

    def call(self, coro: Awaitable[T], timeout: float | None = None) -> T:
        """``coro``'s result (its exception is raised here); TimeoutError after ``timeout`` seconds."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(  # type: ignore[arg-type]
            self.call_timeout if timeout is None else timeout)

    def stop(self, close: bool = True) -> None:
        """Stop the loop and join its thread (5 s at most); ``close`` closes the loop too."""
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)
        if close:
            self.loop.close()

    def __enter__(self) -> "LoopThread":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()
