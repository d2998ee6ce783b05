"""PageWarmer: pre-faults mapped pages just ahead of the writers, off the put path.

The first write to a page of a file mapping costs a page fault (15–20 µs on a VM, more than a
whole 1 KiB put).  This thread keeps ``ahead`` bytes past each write position already faulted in
with ``MADV_POPULATE_WRITE`` (no data is written, GIL released during the madvise): the commit
log's last segment (and the first bytes of the preallocated next one), the index file's slot
table (hit at random) and items, and the consume queues written since the last pass.
Pages populated but never written stay zero, exactly like the sparse file they stand for.
"""
from __future__ import annotations

import errno
import logging
import os
import threading
import time
from typing import TYPE_CHECKING

from rmqd.cython_ext.store_put import populate
from rmqd.common.service_thread import ServiceThread

if TYPE_CHECKING:
    from rmqd.store.mapped_file import MappedFile
    from rmqd.store.message_store import MessageStore

log = logging.getLogger(__name__)

CHUNK = 1 << 20


class PageWarmer(ServiceThread):
    def __init__(self, store: "MessageStore", interval_s: float = 0.005,
                 commitlog_ahead: int = 16 << 20, index_ahead: int = 1 << 20,
                 cq_ahead: int = 64 << 10):
        super().__init__("rmqd-store-page-warmer", interval=interval_s, join_timeout=5.0)
        self.store = store
        self.interval_s = interval_s
        self.commitlog_ahead = commitlog_ahead
        self.index_ahead = index_ahead
        self.cq_ahead = cq_ahead
        self._done: dict[MappedFile, int] = {}          # populated up to (file-relative)
        self._supported = True
        self._pass = 0
        self._niced = False
        self._last_error = 0.0
        self._last_pos = -1

    def run_once(self) -> None:
        if not self._niced:
            # Background work: let the loop and the put path have the CPU first (nice 19 for this thread).
            self._niced = True
            try:
                os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 19)
            except OSError as exc:
                log.info("page warmer keeps normal priority: %s", exc)
        # Idle store: look ten times less often (16 MB ahead lasts far longer than that).
        pos = self.store.commitlog.max_offset()
        self.interval = self.interval_s if pos != self._last_pos else self.interval_s * 10
        self._last_pos = pos
        try:
            self.warm_once()
        except Exception:
            now = time.monotonic()
            if now - self._last_error > 60:     # a file closed under us; do not flood the log
                self._last_error = now
                log.exception("page warmer pass failed (further failures muted for 60 s)")
        if not self._supported:
            self.shutdown()                    # the kernel cannot populate: nothing left to do

    def _warm(self, mf: "MappedFile", upto: int, floor: int = -1) -> None:
        """Populate ``mf`` from where we stopped last time (or its write position) up to ``upto``."""
        if mf.closed:
            return
        upto = min(upto, mf.file_size)
        start = max(self._done.get(mf, 0), mf.wrote_pos if floor < 0 else floor)
        while start < upto and not self.stopped:
            end = min(upto, start + CHUNK)
            rc = populate(mf.ptr, start, end)
            if rc:
                if rc == errno.EINVAL:
                    log.info("MADV_POPULATE_WRITE unsupported; page warming disabled")
                    self._supported = False
                else:
                    log.warning("populating %s [%d, %d) failed: errno %d", mf.path, start, end, rc)
                return
            start = end
        self._done[mf] = max(self._done.get(mf, 0), start)

    def warm_once(self) -> None:
        st = self.store
        live = set()
        mf = st.commitlog.mfq.last()
        if mf is not None:
            live.add(mf)
            self._warm(mf, mf.wrote_pos + self.commitlog_ahead)
            if mf.file_size - mf.wrote_pos < self.commitlog_ahead:
                nxt = st.commitlog.allocator.ready_file()
                if nxt is not None:
                    live.add(nxt)
                    self._warm(nxt, self.commitlog_ahead)
        files = st.index.files
        if files and st.config.message_index_enable:
            f = files[-1]
            if f.mf.closed:
                return
            live.add(f.mf)
            items = 40 + f.slots * 4
            if self._done.get(f.mf, 0) < items:     # the slot table is written at random
                self._warm(f.mf, items, 0)
            pos = items + f.index_count * 20
            self._warm(f.mf, pos + self.index_ahead, pos)
        self._pass += 1
        if self._pass % 10 == 0:
            for cq_mf in st.put_engine.active_cq_files():
                live.add(cq_mf)
                self._warm(cq_mf, cq_mf.wrote_pos + self.cq_ahead)
            self._done = {k: v for k, v in self._done.items() if k in live}
