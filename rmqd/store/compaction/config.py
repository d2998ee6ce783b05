"""The compaction store's settings (:class:`CompactionConfig`), apart from the store so that reading
broker.conf (:mod:`rmqd.config`) does not load the compaction store."""
from __future__ import annotations

import os
from dataclasses import dataclass

#: the directory under the compaction root where `rmqd pipeline compact` leaves its outputs for adoption
PIPELINE_DIR = "pipeline"


@dataclass
class CompactionConfig:
    """broker.conf names: enableCompaction, compactionMappedFileSize, compactionCqMappedFileSize,
    compactionScheduleInternal (ms), maxOffsetMapSize (bytes, shared by the threads),
    compactionThreadNum (capped at the CPU count)."""
    enabled: bool = True
    log_file_size: int = 100 * 1024 * 1024
    cq_file_size: int = 10 * 1024 * 1024
    schedule_interval_ms: int = 15 * 60 * 1000
    max_offset_map_size: int = 100 * 1024 * 1024
    thread_num: int = 6
    copy_interval_ms: int = 1000

    @property
    def threads(self) -> int:
        return max(1, min(self.thread_num, os.cpu_count() or 1))

    @property
    def map_bytes_per_run(self) -> int:
        from rmqd.cython_ext import compaction as _cx      # the offset map's entry size (compiled module)
        return max(self.max_offset_map_size // self.threads, 128 * _cx.OFFSET_MAP_ENTRY_SIZE)
