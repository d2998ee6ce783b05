"""The store's settings (Java ``MessageStoreConfig``): a plain dataclass, plus the delay-level table and the
disk thresholds Java reads from system properties.

Nothing here reads the environment at construction: :func:`resolve_disk_ratios` does, once, when the
store is built, for the thresholds a caller left unset.
"""
from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass, field
from typing import Callable, Optional

from rmqd.common.constants import SCHEDULE_TOPIC
from rmqd.store.consume_queue import CQ_UNIT
from rmqd.store.message import find_property, tags_code_of

log = logging.getLogger(__name__)

#: Java MessageStoreConfig.messageDelayLevel
DEFAULT_DELAY_LEVELS = "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"
_UNIT_MS = {"s": 1000, "m": 60000, "h": 3600000, "d": 86400000}

#: The Java 4.9.8 broker's disk thresholds (percent), the defaults of its system properties rocketmq.broker.<name>.
JAVA_DISK_RATIO_DEFAULTS = {"diskSpaceWarningLevelRatio": 90, "diskSpaceCleanForciblyRatio": 85}


def parse_delay_levels(spec: str) -> list[int]:
    """``"1s 5s ... 2h"`` → list of delays in ms (level i = index i-1)."""
    return [int(tok[:-1]) * _UNIT_MS[tok[-1]] for tok in spec.split()]


class DelayLevelTable:
    """Java's delayLevelTable: a SCHEDULE_TOPIC_XXXX message's ConsumeQueue tags code is its delivery
    time, its store time plus the delay of its DELAY level (clamped to the table)."""

    def __init__(self, spec: str) -> None:
        self.levels = parse_delay_levels(spec)

    def tags_code(self, topic: str, properties: str, store_ts: int) -> int:
        """The put engine's callback (any topic: the TAGS hash when it is not a delayed message)."""
        if topic == SCHEDULE_TOPIC:
            lvl = find_property(properties, "DELAY")
            if lvl and lvl.lstrip("-").isdigit():
                level = min(max(int(lvl), 1), len(self.levels))
                return store_ts + self.levels[level - 1]
        return tags_code_of(properties)


def wall_clock_ms() -> int:
    """Milliseconds since the epoch (the store's default clock)."""
    return int(time.time() * 1000)


def disk_ratio_variable(name: str) -> str:
    """The environment variable rmqd reads for Java's system property ``rocketmq.broker.<name>``."""
    return "ROCKETMQ_BROKER_" + name.upper()


def disk_ratio_property(name: str) -> float:
    """A disk threshold of :data:`JAVA_DISK_RATIO_DEFAULTS` in percent, from the environment.

    The Java 4.9.8 broker reads them from JVM system properties (``-Drocketmq.broker.diskSpaceWarningLevelRatio
    =0.95``); rmqd reads the same names from the environment (:func:`disk_ratio_variable`), like
    ``ROCKETMQ_BROKER_REBALANCE_LOCKMAXLIVETIME``. The value is a fraction as Java writes it (``0.95``) or a
    percent (``95``); anything else is logged and Java's default used."""
    default = JAVA_DISK_RATIO_DEFAULTS[name]
    var = disk_ratio_variable(name)
    raw = os.environ.get(var, "").strip()
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        value = float("nan")
    percent = value * 100 if value <= 1 else value
    if not 0 < percent <= 100:
        log.error("%s=%r is neither a fraction nor a percent of the disk: using %g %%", var, raw, default)
        return default
    return percent


@dataclass
class StoreConfig:
    """Java ``MessageStoreConfig`` under Python names (the broker maps broker.conf onto it)."""
    store_root_dir: str
    mapped_file_size_commitlog: int = 1 << 30
    mapped_file_size_consume_queue: int = 300000 * CQ_UNIT
    flush_disk_type: str = "ASYNC_FLUSH"
    flush_interval_commitlog_ms: int = 500
    flush_commitlog_thorough_interval_ms: int = 10000
    flush_least_pages: int = 4
    flush_interval_consume_queue_ms: int = 1000
    sync_flush_timeout_ms: int = 5000
    max_message_size: int = 4 * 1024 * 1024
    file_reserved_time_hours: float = 72
    delete_when: str = "04"
    disk_max_used_space_ratio: int = 75
    # percents; None: Java's system property from the environment, else Java's default (resolve_disk_ratios)
    disk_space_clean_forcibly_ratio: Optional[float] = None
    disk_space_warning_level_ratio: Optional[float] = None
    clean_resource_interval_ms: int = 10000
    delete_files_batch_max: int = 10
    max_hash_slot_num: int = 5_000_000
    max_index_num: int = 20_000_000
    message_index_enable: bool = True
    check_crc_on_recover: bool = True
    max_transfer_bytes_on_message_in_memory: int = 256 * 1024
    max_transfer_count_on_message_in_memory: int = 32
    message_delay_level: str = DEFAULT_DELAY_LEVELS
    clock: Callable[[], int] = wall_clock_ms
    disk_usage: Optional[Callable[[str], float]] = None   # path -> used percent (0..100)
    warm_mapped_pages: bool = True     # pre-fault pages ahead of the writers (PageWarmer)
    access_message_in_memory_max_ratio: int = 40   # % of RAM behind the CommitLog head that counts as hot

    # the directories under store_root_dir (set from it once made)
    commitlog_dir: str = field(init=False)
    consume_queue_dir: str = field(init=False)
    compaction_dir: str = field(init=False)         # per-(topic, queue) compaction logs (5.x compaction topics)
    index_dir: str = field(init=False)
    config_dir: str = field(init=False)

    def __post_init__(self) -> None:
        root = self.store_root_dir
        self.commitlog_dir = os.path.join(root, "commitlog")
        self.consume_queue_dir = os.path.join(root, "consumequeue")
        self.compaction_dir = os.path.join(root, "compaction")
        self.index_dir = os.path.join(root, "index")
        self.config_dir = os.path.join(root, "config")

    @property
    def sync_flush(self) -> bool:
        return self.flush_disk_type == "SYNC_FLUSH"


_RATIO_PROPERTIES = {"disk_space_warning_level_ratio": "diskSpaceWarningLevelRatio",
                     "disk_space_clean_forcibly_ratio": "diskSpaceCleanForciblyRatio"}


def resolve_disk_ratios(config: StoreConfig) -> StoreConfig:
    """Fill the disk thresholds ``config`` leaves unset (None) from Java's system properties in the
    environment (:func:`disk_ratio_property`); returns ``config``."""
    for name, prop in _RATIO_PROPERTIES.items():
        if getattr(config, name) is None:
            setattr(config, name, disk_ratio_property(prop))
    return config
