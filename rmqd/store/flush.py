"""Flushing (Java ``CommitLog.FlushRealTimeService`` / ``GroupCommitService``, ``FlushConsumeQueueService``).

:class:`StoreFlusher` knows what a flush writes: the CommitLog (msync, then its checkpoint fields) and
the "logics" (consume queues, index files, their checkpoint fields, the checkpoint file). Three
services drive it: :class:`FlushRealTimeService` (ASYNC_FLUSH: every ``flushIntervalCommitLog`` when at
least ``flushCommitLogLeastPages`` are dirty, thoroughly every ``flushCommitLogThoroughInterval``),
:class:`GroupCommitService` (SYNC_FLUSH: one msync answers every put waiting for it; it is the first
:class:`~rmqd.store.durability.CommitWait` stage) and :class:`FlushConsumeQueueService`.
"""
from __future__ import annotations

import logging
import threading
import time
from typing import TYPE_CHECKING, Callable, Optional

from rmqd.common.service_thread import ServiceThread
from rmqd.store.commitlog import PAGE
from rmqd.store.results import PutMessageStatus

if TYPE_CHECKING:
    from rmqd.store.durability import Durability

if TYPE_CHECKING:
    from rmqd.cython_ext.store_put import PutEngine
    from rmqd.store.checkpoint import StoreCheckpoint
    from rmqd.store.commitlog import CommitLog
    from rmqd.store.config import StoreConfig
    from rmqd.store.consume_queues import ConsumeQueueTable
    from rmqd.store.index_file import IndexService

log = logging.getLogger(__name__)


class StoreFlusher:
    """Flushes the CommitLog and the logics and records how far in the checkpoint."""

    def __init__(self, commitlog: "CommitLog", consume_queues: "ConsumeQueueTable", index: "IndexService",
                 checkpoint: "StoreCheckpoint", engine: "PutEngine", put_lock: threading.Lock) -> None:
        self.commitlog = commitlog
        self.consume_queues = consume_queues
        self.index = index
        self.checkpoint = checkpoint
        self.engine = engine
        self.put_lock = put_lock
        #: where the checkpoint's confirmOffset comes from (a controller-mode HA service), read at each logics flush
        self.confirm_offset: Optional[Callable[[], int]] = None

    def flush_commitlog(self) -> None:
        ts = self.engine.last_store_ts
        self.commitlog.flush()
        ck = self.checkpoint
        ck.physic_msg_timestamp = max(ck.physic_msg_timestamp, ts)
        ck.physic_offset = self.commitlog.flushed_where

    def flush_logics(self) -> None:
        with self.put_lock:                 # everything below this offset is dispatched
            disp = self.commitlog.max_offset()
            ts = self.engine.last_store_ts
        self.consume_queues.flush()
        self.index.flush()
        ck = self.checkpoint
        ck.logics_offset = ck.index_offset = disp
        ck.logics_msg_timestamp = ck.index_msg_timestamp = ts
        ck.physic_offset = self.commitlog.flushed_where
        if self.confirm_offset is not None:
            ck.confirm_offset = self.confirm_offset()
        ck.flush()

    def flush_all(self) -> None:
        self.flush_commitlog()
        self.flush_logics()


class FlushRealTimeService(ServiceThread):
    """ASYNC_FLUSH: msync the CommitLog when enough is dirty, and thoroughly now and then."""

    def __init__(self, config: "StoreConfig", flusher: StoreFlusher) -> None:
        # the interval is read from the config every round, so runtime updates apply
        super().__init__("rmqd-store-flush-commitlog", lambda: config.flush_interval_commitlog_ms / 1000)
        self.config = config
        self.flusher = flusher
        self._last_thorough = 0.0

    def run_once(self) -> None:
        cfg = self.config
        now = time.monotonic()
        thorough = now - self._last_thorough >= cfg.flush_commitlog_thorough_interval_ms / 1000
        if thorough or self.flusher.commitlog.dirty_bytes() >= cfg.flush_least_pages * PAGE:
            self.flusher.flush_commitlog()
            if thorough:
                self._last_thorough = now


class FlushConsumeQueueService(ServiceThread):
    """Flush consume queues, index files and the checkpoint every ``flushIntervalConsumeQueue``."""

    def __init__(self, config: "StoreConfig", flusher: StoreFlusher) -> None:
        super().__init__("rmqd-store-flush-cq", lambda: config.flush_interval_consume_queue_ms / 1000)
        self.config = config
        self.flusher = flusher

    def run_once(self) -> None:
        self.flusher.flush_logics()


class GroupCommitService(ServiceThread):
    """SYNC_FLUSH group commit: one msync covers every pending request.

    A request is an end offset, a deadline and a callback ``done(flushed: bool)`` run on this thread
    once the CommitLog is flushed past the offset (True) or the deadline passed first (False).
    Requests that arrive while a flush runs share the next one."""

    timeout_status = PutMessageStatus.FLUSH_DISK_TIMEOUT

    def __init__(self, config: "StoreConfig", flusher: StoreFlusher) -> None:
        super().__init__("rmqd-store-group-commit", interval=1.0)
        self.config = config
        self.flusher = flusher
        self._lock = threading.Lock()
        self._reqs: list[tuple[int, float, Callable[[bool], None]]] = []

    # ---- the CommitWait stage
    def on_reached(self, offset: int, done: Callable[[bool], None]) -> None:
        """Call ``done(True)`` once everything before ``offset`` is on disk (``done(False)`` after
        ``syncFlushTimeout``); never blocks."""
        with self._lock:
            if not self.stopped:
                self._reqs.append((offset, time.monotonic() + self.config.sync_flush_timeout_ms / 1000, done))
                self.wakeup()
                return
        self._call(done, self.flusher.commitlog.flushed_where >= offset)

    @staticmethod
    def _call(done: Callable[[bool], None], flushed: bool) -> None:
        try:
            done(flushed)
        except Exception:
            log.exception("group commit callback failed")

    # ---- the service
    def run_once(self) -> None:
        self._commit(final=False)

    def on_shutdown(self) -> None:
        self._commit(final=True)

    def _commit(self, final: bool) -> None:
        with self._lock:
            batch, self._reqs = self._reqs, []
        if not batch:
            return
        try:
            self.flusher.flush_commitlog()
        except Exception:
            log.exception("group commit flush failed; %d putters will time out", len(batch))
        flushed = self.flusher.commitlog.flushed_where
        now = time.monotonic()
        retry = []
        for req in batch:
            if req[0] <= flushed:
                self._call(req[2], True)
            elif now >= req[1] or final:
                self._call(req[2], False)
            else:
                retry.append(req)
        if retry:
            with self._lock:
                self._reqs[:0] = retry
            time.sleep(0.001)      # a failing flush must not spin
            self.wakeup()


def flush_services(config: "StoreConfig", flusher: StoreFlusher, durability: "Durability") -> list[ServiceThread]:
    """The flush services of a store (not started): under SYNC_FLUSH the group commit, which becomes the
    first durability stage, else the real-time flusher; and the consume-queue flusher."""
    if config.sync_flush:
        gc = GroupCommitService(config, flusher)
        durability.add_stage(gc)
        return [gc, FlushConsumeQueueService(config, flusher)]
    return [FlushRealTimeService(config, flusher), FlushConsumeQueueService(config, flusher)]
