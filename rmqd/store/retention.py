"""Retention (Java ``DefaultMessageStore.CleanCommitLogService`` + ``CleanConsumeQueueService``).

Every ``cleanResourceInterval`` the service checks the disk and, at a ``deleteWhen`` hour, above
``diskMaxUsedSpaceRatio`` or after DELETE_EXPIRED_COMMITLOG, deletes CommitLog files older than
``fileReservedTime`` (above ``diskSpaceCleanForciblyRatio`` younger ones too), at most
``deleteCommitLogFilesBatchMax`` per run and never the last. The store layers above are asked first
(:class:`~rmqd.store.layer.RetentionGuard`): a file goes only once they have everything in it. Then
consume-queue and index files wholly below the new CommitLog start go. The disk check also sets the
put engine's "disk full" flag above ``diskSpaceWarningLevelRatio`` (writes refused).
"""
from __future__ import annotations

import logging
import os
import time
from typing import TYPE_CHECKING, Callable

from rmqd.common.fileutil import disk_partition_space_used_percent
from rmqd.common.service_thread import ServiceThread

if TYPE_CHECKING:
    from rmqd.cython_ext.store_put import PutEngine
    from rmqd.store.commitlog import CommitLog
    from rmqd.store.config import StoreConfig
    from rmqd.store.consume_queues import ConsumeQueueTable
    from rmqd.store.index_file import IndexService
    from rmqd.store.layer import RetentionGuard
    from rmqd.store.results import StoreCounters

log = logging.getLogger(__name__)

MAX_MANUAL_DELETE_FILE_TIMES = 20    # retention runs that honour one DELETE_EXPIRED_COMMITLOG (Java's)
NO_LIMIT = 1 << 62


class CleanCommitLogService(ServiceThread):
    def __init__(self, config: "StoreConfig", commitlog: "CommitLog", consume_queues: "ConsumeQueueTable",
                 index: "IndexService", engine: "PutEngine", counters: "StoreCounters",
                 now_ms: Callable[[], int]) -> None:
        super().__init__("rmqd-store-clean", lambda: config.clean_resource_interval_ms / 1000)  # read every round
        self.config = config
        self.commitlog = commitlog
        self.consume_queues = consume_queues
        self.index = index
        self.engine = engine
        self.counters = counters
        self.now_ms = now_ms
        self.guards: list["RetentionGuard"] = []
        self._manual_delete_times = 0
        self._unreadable_paths: set[str] = set()

    def run_once(self) -> None:
        self.run_retention_once()

    # ---- the disk
    def disk_ratio(self, path: str) -> float:
        """Used-space percentage of the disk holding ``path``, as the Java broker computes it
        (:func:`rmqd.common.fileutil.disk_partition_space_used_percent`: a whole percent).  An unreadable
        path (the store directory vanished, I/O error) counts as a full disk, so writes are refused
        instead of failing in odd ways; it is logged once until it becomes readable again."""
        if self.config.disk_usage is not None:
            return float(self.config.disk_usage(path))
        fraction = disk_partition_space_used_percent(path)
        if fraction < 0:
            if path not in self._unreadable_paths:
                self._unreadable_paths.add(path)
                log.error("cannot read the disk usage of %s: treating the disk as full", path)
            return 100.0
        if path in self._unreadable_paths:
            self._unreadable_paths.discard(path)
            log.warning("disk usage of %s is readable again", path)
        return round(fraction * 100)

    def check_disk(self) -> float:
        """The CommitLog disk's used percent; refuses writes above the warning level."""
        ratio = self.disk_ratio(self.config.commitlog_dir)
        warning = self.config.disk_space_warning_level_ratio
        assert warning is not None, "resolve_disk_ratios fills it when the store is made"
        full = ratio > warning
        if full != self.engine.disk_full:
            (log.error if full else log.info)("commit log disk usage %.1f%%: writes %s", ratio,
                                             "refused" if full else "allowed again")
        self.engine.disk_full = full
        self.counters.set(commitlog_disk_ratio=ratio)
        return ratio

    # ---- deleting
    def execute_delete_files_manually(self) -> int:
        """Java's executeDeleteFilesManually (DELETE_EXPIRED_COMMITLOG): expired CommitLog files go now
        and in the next 20 retention runs whatever the hour; returns how many went now."""
        self._manual_delete_times = MAX_MANUAL_DELETE_FILE_TIMES
        return self.run_retention_once()

    def _is_delete_hour(self) -> bool:
        hour = time.localtime(self.now_ms() / 1000).tm_hour
        return any(h.strip().isdigit() and int(h) == hour for h in self.config.delete_when.split(";"))

    def run_retention_once(self) -> int:
        """One retention run (see the module docstring); returns how many CommitLog files went."""
        cfg = self.config
        ratio = self.check_disk()
        space_full = ratio > cfg.disk_max_used_space_ratio
        forcibly = cfg.disk_space_clean_forcibly_ratio
        assert forcibly is not None, "resolve_disk_ratios fills it when the store is made"
        force = ratio > forcibly
        manual = self._manual_delete_times > 0
        if manual:
            self._manual_delete_times -= 1
        deleted = 0
        if space_full or manual or self._is_delete_hour():
            deleted = self._delete_expired(ratio, force)
        cl_min = self.commitlog.min_offset()
        self.consume_queues.delete_expired_files(cl_min)
        self.index.delete_expired(cl_min)
        return deleted

    def _delete_expired(self, ratio: float, force: bool) -> int:
        cfg = self.config
        now = self.now_ms()
        expired_ms = cfg.file_reserved_time_hours * 3600 * 1000
        # the layers first (compaction copies, the tier commits): a file goes only once they have it
        limit = min([g.before_delete() for g in self.guards], default=NO_LIMIT)
        n = 0
        for mf in self.commitlog.mfq.files[:-1]:
            if mf.end_offset > limit:
                log.info("retention: keeping %s and later until the store layers have them (up to %d)",
                         mf.path, limit)
                break
            try:
                mtime = os.path.getmtime(mf.path) * 1000
            except FileNotFoundError:
                log.warning("commit log segment %s vanished", mf.path)
                mtime = 0
            if now >= mtime + expired_ms or force:
                n += 1
                if n >= cfg.delete_files_batch_max:
                    break
            else:
                break
        if not n:
            return 0
        gone = self.commitlog.mfq.remove_first(n)
        log.info("retention: deleted %d commit log segment(s) (disk %.1f%%), min offset now %d",
                 len(gone), ratio, self.commitlog.min_offset())
        return len(gone)

    def keeps_queue(self, topic: str, queue_id: int, max_offset: int) -> bool:
        """A layer still serves the records of this emptied consume queue."""
        return any(g.keeps_queue(topic, queue_id, max_offset) for g in self.guards)
