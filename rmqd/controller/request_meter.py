"""Counts and latencies of a controller's requests and Raft appends, as 5.x's ``ControllerMetricsManager`` keeps
them (``request_total``/``request_latency`` by request type, ``dledger_op_total``/``dledger_op_latency`` for
appends); :mod:`rmqd.metrics.controller_metrics` exports them.

Like 5.x, an operation that returns counts ``success`` (whatever its response code) and records its latency;
one that raises counts ``timeout`` (a wait that ran out) or ``failed``, without a latency sample.
"""
from __future__ import annotations

import asyncio
import inspect
import threading
import time
from typing import TYPE_CHECKING, Awaitable, Optional, TypeVar

from rmqd.controller.codes import ControllerRequestCode as R
from rmqd.metrics.histogram import Histogram

if TYPE_CHECKING:
    from rmqd.remoting.command import RemotingCommand
    from rmqd.remoting.connection import Connection
    from rmqd.remoting.dispatch import Handler, HandlerResult

T = TypeVar("T")

#: microseconds: 1 us .. 10 s, 5.x's latency view
LATENCY_BUCKETS_US: tuple[float, ...] = (1.0, 3.0, 5.0, 10.0, 30.0, 50.0, 100.0, 300.0, 500.0,
                                         1e3, 3e3, 5e3, 1e4, 3e4, 5e4, 1e5, 3e5, 5e5, 1e6, 3e6, 5e6, 1e7)

#: request code -> 5.x's request_type label: its ``RequestType`` names (exported as they are), the code's name with
#: a ``CONTROLLER_`` prefix (``BROKER_HEARTBEAT`` -> ``CONTROLLER_BROKER_HEARTBEAT``)
REQUEST_TYPES: dict[int, str] = {c: c.name if c.name.startswith("CONTROLLER_") else f"CONTROLLER_{c.name}" for c in R}

SUCCESS, FAILED, TIMEOUT = "success", "failed", "timeout"


class OperationMeter:
    """Totals by (kind, status) and a latency histogram by kind; safe from any thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.totals: dict[tuple[str, str], int] = {}
        self.latency = Histogram(LATENCY_BUCKETS_US)        # (kind,) -> microseconds

    def record(self, kind: str, status: str, elapsed_us: Optional[float] = None) -> None:
        with self._lock:
            self.totals[(kind, status)] = self.totals.get((kind, status), 0) + 1
            if elapsed_us is not None:
                self.latency.observe((kind,), elapsed_us)

    def snapshot(self) -> tuple[dict[tuple[str, str], int], dict[tuple[str, ...], tuple[list[int], float]]]:
        """Totals, and per ``(kind,)`` the non-cumulative bucket counts and the sum in microseconds."""
        with self._lock:
            return dict(self.totals), {k: (list(c), s) for k, (c, s) in self.latency.series.items()}

    async def timed(self, kind: str, pending: Awaitable[T], started: Optional[float] = None,
                    timeouts: tuple[type[BaseException], ...] = ()) -> T:
        """Await ``pending`` and record it under ``kind`` (its latency from ``started``, a perf_counter value;
        now when None). ``timeouts``: more exception types that count as ``timeout``."""
        t0 = time.perf_counter() if started is None else started
        timeout_types: tuple[type[BaseException], ...] = (asyncio.TimeoutError, *timeouts)
        try:
            result = await pending
        except timeout_types:
            self.record(kind, TIMEOUT)
            raise
        except Exception:                       # (a cancellation is a BaseException: not counted)
            self.record(kind, FAILED)
            raise
        self.record(kind, SUCCESS, (time.perf_counter() - t0) * 1e6)
        return result


def metered(meter: OperationMeter, code: int, handler: Handler) -> Handler:
    """``handler`` (sync, or returning an awaitable) counted under ``code``'s request type."""
    kind = REQUEST_TYPES.get(code, str(code))

    def run(conn: Connection, request: RemotingCommand) -> HandlerResult:
        t0 = time.perf_counter()
        try:
            out = handler(conn, request)
        except Exception:
            meter.record(kind, FAILED)
            raise
        if inspect.isawaitable(out):
            return meter.timed(kind, out, t0)
        meter.record(kind, SUCCESS, (time.perf_counter() - t0) * 1e6)
        return out
    return run
