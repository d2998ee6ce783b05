"""Bounded waits: every wait in the tests ends by its deadline.

* :func:`wait_until` returns the first truthy value of ``pred()`` or fails with :class:`WaitTimeout`;
* :func:`poll` returns the first truthy value or, at the deadline, whatever ``pred()`` says then (the test asserts);
* :func:`eventually` retries a check that raises until it passes.
"""
from __future__ import annotations

import time
from typing import Callable, TypeVar

T = TypeVar("T")


class WaitTimeout(AssertionError, TimeoutError):
    """A wait that ran out: the test's failure (an AssertionError), and a TimeoutError for callers that catch one
    (a fault round that carries on without a new master, a process that did not start)."""


def wait_until(pred: Callable[[], T], timeout: float, *, what: str | Callable[[], str] = "condition",
               interval: float = 0.05) -> T:
    """``pred()``'s first truthy value, asked every ``interval`` seconds; :class:`WaitTimeout` after ``timeout``,
    naming ``what`` (a callable is asked then, for a message with the state at the deadline)."""
    deadline = time.monotonic() + timeout
    while True:
        got = pred()
        if got:
            return got
        if time.monotonic() > deadline:
            raise WaitTimeout(f"{what() if callable(what) else what}: not within {timeout} s")
        time.sleep(interval)


def poll(pred: Callable[[], T], timeout: float, *, interval: float = 0.05) -> T:
    """``pred()``'s first truthy value within ``timeout`` seconds, else its value at the deadline."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = pred()
        if got:
            return got
        time.sleep(interval)
    return pred()


def eventually(check: Callable[[], T], timeout: float, *, interval: float = 0.2,
               errors: tuple[type[BaseException], ...] = (AssertionError,), what: str = "check") -> T:
    """``check()``'s value once it stops raising one of ``errors``; after ``timeout`` seconds its last error,
    wrapped in :class:`WaitTimeout`."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return check()
        except errors as exc:
            if time.monotonic() > deadline:
                raise WaitTimeout(f"{what}: not passed within {timeout} s: {exc!r}") from exc
            time.sleep(interval)
