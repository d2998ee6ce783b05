"""Counts and latencies of a controller's requests and Raft appends, as 5.x's ``ControllerMetricsManager`` keeps
them (``request_total``/``request_latency`` by request type, ``dledger_op_total``/``dledger_op_latency`` for
appends); :mod:`rmqd.metrics.controller_metrics` exports them.

Like 5.x, an operation that returns counts ``success`` (whatever its response code) and records its latency;
one that raises counts ``timeout`` (a wait that ran out) or ``failed``, without a latency sample.
"""
from __future__ import annotations

import asyncio
import bisect
import inspect
import threading
import time
from typing import Any, Awaitable, Callable, Optional

from rmqd.controller.codes import ControllerRequestCode as R

#: microseconds: 1 us .. 10 s, 5.x's latency view
LATENCY_BUCKETS_US: tuple[float, ...] = (1.0, 3.0, 5.0, 10.0, 30.0, 50.0, 100.0, 300.0, 500.0,
                                         1e3, 3e3, 5e3, 1e4, 3e4, 5e4, 1e5, 3e5, 5e5, 1e6, 3e6, 5e6, 1e7)

#: request code -> 5.x's request_type label (``RequestType`` names, which 5.x exports as they are)
REQUEST_TYPES: dict[int, str] = {
    R.CONTROLLER_ALTER_SYNC_STATE_SET: "CONTROLLER_ALTER_SYNC_STATE_SET",
    R.CONTROLLER_ELECT_MASTER: "CONTROLLER_ELECT_MASTER",
    R.CONTROLLER_REGISTER_BROKER: "CONTROLLER_REGISTER_BROKER",
    R.CONTROLLER_GET_REPLICA_INFO: "CONTROLLER_GET_REPLICA_INFO",
    R.CONTROLLER_GET_METADATA_INFO: "CONTROLLER_GET_METADATA_INFO",
    R.CONTROLLER_GET_SYNC_STATE_DATA: "CONTROLLER_GET_SYNC_STATE_DATA",
    R.GET_BROKER_EPOCH_CACHE: "CONTROLLER_GET_BROKER_EPOCH_CACHE",
    R.NOTIFY_BROKER_ROLE_CHANGED: "CONTROLLER_NOTIFY_BROKER_ROLE_CHANGED",
    R.BROKER_HEARTBEAT: "CONTROLLER_BROKER_HEARTBEAT",
    R.UPDATE_CONTROLLER_CONFIG: "CONTROLLER_UPDATE_CONTROLLER_CONFIG",
    R.GET_CONTROLLER_CONFIG: "CONTROLLER_GET_CONTROLLER_CONFIG",
    R.CLEAN_BROKER_DATA: "CONTROLLER_CLEAN_BROKER_DATA",
    R.CONTROLLER_GET_NEXT_BROKER_ID: "CONTROLLER_GET_NEXT_BROKER_ID",
    R.CONTROLLER_APPLY_BROKER_ID: "CONTROLLER_APPLY_BROKER_ID",
}

SUCCESS, FAILED, TIMEOUT = "success", "failed", "timeout"


class OperationMeter:
    """Totals by (kind, status) and a latency histogram by kind; safe from any thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.totals: dict[tuple[str, str], int] = {}
        #: kind -> (non-cumulative bucket counts, len(LATENCY_BUCKETS_US) + 1 of them; sum of the samples in us)
        self.latency: dict[str, tuple[list[int], float]] = {}

    def record(self, kind: str, status: str, elapsed_us: Optional[float] = None) -> None:
        with self._lock:
            self.totals[(kind, status)] = self.totals.get((kind, status), 0) + 1
            if elapsed_us is None:
                return
            counts, total = self.latency.get(kind) or ([0] * (len(LATENCY_BUCKETS_US) + 1), 0.0)
            counts[bisect.bisect_left(LATENCY_BUCKETS_US, elapsed_us)] += 1
            self.latency[kind] = (counts, total + elapsed_us)

    def snapshot(self) -> tuple[dict[tuple[str, str], int], dict[str, tuple[list[int], float]]]:
        with self._lock:
            return dict(self.totals), {k: (list(c), s) for k, (c, s) in self.latency.items()}

    async def timed(self, kind: str, pending: Awaitable[Any], started: Optional[float] = None,
                    timeouts: tuple[type, ...] = ()) -> Any:
        """Await ``pending`` and record it under ``kind`` (its latency from ``started``, a perf_counter value;
        now when None). ``timeouts``: more exception types that count as ``timeout``."""
        t0 = time.perf_counter() if started is None else started
        try:
            result = await pending
        except (asyncio.TimeoutError, *timeouts):
            self.record(kind, TIMEOUT)
            raise
        except asyncio.CancelledError:
            raise
        except Exception:
            self.record(kind, FAILED)
            raise
        self.record(kind, SUCCESS, (time.perf_counter() - t0) * 1e6)
        return result


def metered(meter: OperationMeter, code: int, handler: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
    """``handler`` (sync, or returning an awaitable) counted under ``code``'s request type."""
    kind = REQUEST_TYPES.get(code, str(code))

    def run(conn: Any, request: Any) -> Any:
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
