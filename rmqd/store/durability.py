"""When a put may be answered: "durable at offset X" (Java ``CommitLog.handleDiskFlushAndHA``).

A put's bytes are in the CommitLog as soon as the put engine returns. Before the producer is told, it may
have to wait for more: under SYNC_FLUSH for the group commit to have flushed the CommitLog past it
(:class:`rmqd.store.flush.GroupCommitService`); under SYNC_MASTER, once replication exists, also for the
in-sync replicas to have acknowledged it. Each such wait is a :class:`CommitWait` stage; a put is durable
when every stage reached its end offset, in order. The first stage that times out gives the put's status
(FLUSH_DISK_TIMEOUT, FLUSH_SLAVE_TIMEOUT, ...): the message is stored either way.

The seam for replication: an HA service adds its stage with :meth:`Durability.add_stage` (for instance
``store.durability.add_stage(transfer_wait)`` whose ``timeout_status`` is FLUSH_SLAVE_TIMEOUT); nothing in
the put path changes.
"""
from __future__ import annotations

import logging
import threading
import time
from typing import TYPE_CHECKING, Callable, Protocol, Sequence

from rmqd.store.message import find_property
from rmqd.store.results import PutMessageStatus

if TYPE_CHECKING:
    from rmqd.cython_ext.store_put import MessageToStore, PutEngine, PutMessageResult

log = logging.getLogger(__name__)


class CommitWait(Protocol):
    """One condition a put waits for before it is answered."""

    #: the put's status when this stage does not complete in time
    timeout_status: PutMessageStatus

    def on_reached(self, offset: int, done: Callable[[bool], None]) -> None:
        """Call ``done(True)`` once the condition holds for everything before CommitLog ``offset``,
        ``done(False)`` when it timed out; never blocks (``done`` runs on the stage's thread)."""


class Durability:
    """The stages a put waits for, in order (none under ASYNC_FLUSH without replication)."""

    def __init__(self) -> None:
        self._stages: list[CommitWait] = []

    def add_stage(self, stage: CommitWait) -> None:
        self._stages = self._stages + [stage]

    @property
    def waits(self) -> bool:
        """Puts have something to wait for."""
        return bool(self._stages)

    def on_durable(self, offset: int, done: Callable[[PutMessageStatus], None]) -> None:
        """``done(PUT_OK)`` once every stage reached ``offset``, else ``done`` with the status of the first
        stage that timed out; at once with PUT_OK when there is no stage. Never blocks."""
        stages = self._stages

        def step(i: int) -> None:
            if i == len(stages):
                done(PutMessageStatus.PUT_OK)
                return
            stage = stages[i]

            def reached(ok: bool) -> None:
                if ok:
                    step(i + 1)
                else:
                    done(stage.timeout_status)
            stage.on_reached(offset, reached)
        step(0)

    def wait_durable(self, offset: int, timeout_s: float) -> PutMessageStatus:
        """:meth:`on_durable`, blocking the caller; ``timeout_s`` bounds the wait beyond the stages' own
        timeouts (a stage that never calls back counts as the first stage timing out)."""
        ev = threading.Event()
        result = [self._stages[0].timeout_status if self._stages else PutMessageStatus.PUT_OK]

        def done(status: PutMessageStatus) -> None:
            result[0] = status
            ev.set()
        self.on_durable(offset, done)
        if not ev.wait(timeout_s):
            log.error("no durability answer for offset %d within %.1f s", offset, timeout_s)
        return result[0]


def put_durable(engine: "PutEngine", durability: Durability, msgs: Sequence["MessageToStore"],
                timeout_ms: int) -> "PutMessageResult":
    """Append ``msgs`` and wait until they are durable (unless the first carries ``WAIT=false``); a
    stage's timeout becomes the result's status (stored all the same). The engine counts the latency
    of the put and the wait together."""
    t0 = time.perf_counter()
    r = engine.put_messages(msgs)
    if r.status is not PutMessageStatus.PUT_OK:
        return r
    if find_property(msgs[0].properties or "", "WAIT") != "false":
        status = durability.wait_durable(r.end_offset, timeout_ms / 1000 + 1.0)
        if status is not PutMessageStatus.PUT_OK:
            r.status = status
            r.remark = (f"flush did not complete within {timeout_ms} ms" if status is PutMessageStatus.FLUSH_DISK_TIMEOUT
                        else f"{status.name}: not durable within the wait")
            log.warning("%s for offset %d", status.name, r.end_offset)
    engine.record_latency((time.perf_counter() - t0) * 1000)
    return r


def notify_durable(engine: "PutEngine", durability: Durability, end_offset: int,
                   done: Callable[[bool], None]) -> None:
    """``done(True)`` once the bytes before ``end_offset`` are durable, ``done(False)`` when a stage timed
    out (at once True without stages); never blocks. The engine counts the wait as the put's latency."""
    if not durability.waits:
        done(True)
        return
    t0 = time.perf_counter()

    def finished(status: PutMessageStatus) -> None:
        if status is not PutMessageStatus.PUT_OK:
            log.warning("%s for offset %d", status.name, end_offset)
        engine.record_latency((time.perf_counter() - t0) * 1000)
        done(status is PutMessageStatus.PUT_OK)
    durability.on_durable(end_offset, finished)
