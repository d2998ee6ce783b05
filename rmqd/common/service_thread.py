"""ServiceThread: one background loop with start, wake-up and a bounded, logged shutdown (Java's ServiceThread).

A service subclasses it and implements :meth:`run_once` (one round of work), or passes ``target``; the loop calls
it, then waits up to ``interval`` seconds (a number, or a function read before every wait, such as a config value
that may change at runtime) or until :meth:`wakeup`.  An exception in a round is logged with the
service's name and the loop goes on, so one bad round never ends a service silently.  :meth:`shutdown` stops the
loop and joins it within ``join_timeout``; a thread that does not stop in time is logged.
"""
from __future__ import annotations

import logging
import sys
import threading
import traceback
from typing import Callable, Optional

log = logging.getLogger(__name__)


class ServiceThread:
    """A daemon thread running ``run_once`` every ``interval`` seconds until shut down."""

    def __init__(self, name: str, interval: "float | Callable[[], float]" = 1.0,
                 target: Optional[Callable[[], None]] = None, join_timeout: float = 10.0) -> None:
        self.name = name
        self.interval = interval
        self.join_timeout = join_timeout
        self._target = target
        self._cond = threading.Condition()
        self._stopped = False
        self._notified = False
        self._thread: Optional[threading.Thread] = None

    # -- to override
    def run_once(self) -> None:
        """One round of the service's work."""
        if self._target is None:
            raise NotImplementedError(f"{type(self).__name__}.run_once")
        self._target()

    def on_shutdown(self) -> None:
        """Called in the caller's thread after the loop has ended (persist state here)."""

    # -- lifecycle
    @property
    def stopped(self) -> bool:
        return self._stopped

    @property
    def alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def start(self) -> None:
        if self._thread is not None:
            return
        self._stopped = False
        self._thread = threading.Thread(target=self._loop, name=self.name, daemon=True)
        self._thread.start()

    def wakeup(self) -> None:
        """End the current wait early (the next round starts at once)."""
        with self._cond:
            self._notified = True
            self._cond.notify_all()

    def wait_for_running(self, timeout: float) -> bool:
        """Wait up to ``timeout`` s or until woken or stopped; True while the service should keep running."""
        with self._cond:
            if not self._notified and not self._stopped:
                self._cond.wait(timeout)
            self._notified = False
            return not self._stopped

    def shutdown(self) -> None:
        with self._cond:
            self._stopped = True
            self._cond.notify_all()
        t, self._thread = self._thread, None
        if t is not None and t is not threading.current_thread():
            t.join(self.join_timeout)
            if t.is_alive():
                log.error("service thread %s did not stop within %.1f s; it is at:\n%s", self.name,
                          self.join_timeout, thread_stack(t))
        self.on_shutdown()

    # -- the loop
    def _loop(self) -> None:
        while not self._stopped:
            try:
                self.run_once()
            except Exception:
                log.exception("service thread %s: a round failed", self.name)
            interval = self.interval
            if not self.wait_for_running(interval() if callable(interval) else interval):
                break


def thread_stack(t: threading.Thread) -> str:
    """Where a live thread is now (its Python stack), for a log line about a thread that did not stop."""
    frame = sys._current_frames().get(t.ident or -1)
    return "".join(traceback.format_stack(frame)) if frame is not None else "(no Python frame)"
