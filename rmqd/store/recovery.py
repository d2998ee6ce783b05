"""Start-up: the store directory's lock and abort marker, and recovery (Java ``DefaultMessageStore.recover``,
``CommitLog.recoverNormally`` / ``recoverAbnormally``).

After a clean shutdown (no ``abort`` file) the last three CommitLog files are verified; after a crash
everything from the checkpoint on, with CRCs. The torn tail is cut, consume queues lose entries beyond
it and damaged ones are rebuilt (:mod:`rmqd.store.cq_check`), and every record the consume queues or
the index may miss is dispatched again through the put engine's C path
(:meth:`~rmqd.cython_ext.store_put.PutEngine.dispatch_range`), one call per CommitLog file.
"""
from __future__ import annotations

import fcntl
import logging
import os
from typing import TYPE_CHECKING

from rmqd.common import progress
from rmqd.store.cq_check import repair_consume_queues

if TYPE_CHECKING:
    from rmqd.cython_ext.store_put import PutEngine
    from rmqd.store.checkpoint import StoreCheckpoint
    from rmqd.store.commitlog import CommitLog
    from rmqd.store.consume_queues import ConsumeQueueTable
    from rmqd.store.index_file import IndexService

log = logging.getLogger(__name__)


class StoreDirLock:
    """``<root>/lock``, held with flock while the store is open: one process per store directory."""

    def __init__(self, root: str) -> None:
        self.path = os.path.join(root, "lock")
        self._fd = -1

    def acquire(self) -> None:
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise RuntimeError(f"store {os.path.dirname(self.path)} is locked by another process")
        self._fd = fd

    def release(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


class AbortFile:
    """``<root>/abort``: present while the store runs, so its presence at start means a crash."""

    def __init__(self, root: str) -> None:
        self.path = os.path.join(root, "abort")

    def exists(self) -> bool:
        return os.path.exists(self.path)

    def create(self) -> None:
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT, 0o644)
        os.fsync(fd)
        os.close(fd)

    def remove(self) -> None:
        os.unlink(self.path)


def recover(commitlog: "CommitLog", consume_queues: "ConsumeQueueTable", index: "IndexService",
            checkpoint: "StoreCheckpoint", engine: "PutEngine", abnormal: bool, check_crc: bool,
            max_record_size: int) -> None:
    """Load the files and bring CommitLog, consume queues and index back in step (module docstring)."""
    cl, ck = commitlog, checkpoint
    cl.mfq.load()
    consume_queues.load()
    index.load()
    files = cl.mfq.files
    if abnormal:
        idx_from = index.destroy_after(ck.index_offset)
        dispatch_from = min(ck.logics_offset, idx_from)
        start = min(ck.physic_offset, dispatch_from)
    else:
        dispatch_from = min(ck.logics_offset, ck.index_offset)
        start = files[max(0, len(files) - 3)].file_from_offset if files else 0
        start = min(start, dispatch_from)
    start = max(start, cl.min_offset())
    valid_end = cl.recover(start, check_crc or abnormal)
    for cq in consume_queues.queues():
        cq.truncate_dirty(valid_end)
    dispatch_from = max(dispatch_from, cl.min_offset())
    redo = repair_consume_queues(consume_queues.queues(), cl, valid_end, max_record_size)
    if redo is not None and max(redo, cl.min_offset()) < dispatch_from:   # rebuild damaged CQs
        dispatch_from = max(redo, cl.min_offset())
        cl.recover(dispatch_from, True)
    redispatch(cl, engine, dispatch_from, valid_end)
    consume_queues.correct_min_offsets(cl.min_offset())
    engine.reset()


def redispatch(commitlog: "CommitLog", engine: "PutEngine", start: int, end: int) -> None:
    """Dispatch the CommitLog records in [start, end) to consume queues and index (no listeners), one
    C call per CommitLog file."""
    pos = commitlog.first_record_at(start) if start < end else end
    if pos >= end:
        return
    log.info("re-dispatching commit log [%d, %d)", pos, end)
    with progress.phase("re-dispatching records", end - pos, "B") as p:
        while pos < end:
            stop = min(end, commitlog.roll_next_file(pos))
            reached = engine.dispatch_range(pos, stop, False)
            p.advance(stop - pos)
            if reached < stop:          # logged by the engine; verified records never stop it
                break
            pos = stop
