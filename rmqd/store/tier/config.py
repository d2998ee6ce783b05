"""The tiered store's settings (RocketMQ 5.x ``tieredstore``'s ``MessageStoreConfig``, plus rmqd's
``--tier-dir``); ``rmqd.config.tier_config_from`` maps them from broker.conf."""
from __future__ import annotations

import enum
from dataclasses import dataclass


# messageStorePlugIn values that switch the tier on: Java's class name, rmqd's short names
PLUGIN_NAMES = ("org.apache.rocketmq.tieredstore.TieredMessageStore", "TieredMessageStore", "tiered", "tier")
MB = 1024 * 1024

# broker.conf tieredBackendServiceProvider: Java class names and rmqd's short names
PROVIDERS = {
    "org.apache.rocketmq.tieredstore.provider.PosixFileSegment": "posix",
    "org.apache.rocketmq.tieredstore.provider.MemoryFileSegment": "memory",
    "org.apache.rocketmq.tieredstore.provider.posix.PosixFileSegment": "posix",
    "org.apache.rocketmq.tieredstore.provider.memory.MemoryFileSegment": "memory",
    "posix": "posix", "memory": "memory", "s3": "s3",
}


def provider_name(value: str) -> str:
    """``posix``, ``memory`` or ``s3`` for a tieredBackendServiceProvider value."""
    name = PROVIDERS.get((value or "").strip()) or PROVIDERS.get((value or "").strip().lower())
    if name is None:
        raise ValueError(f"unknown tieredBackendServiceProvider {value!r}: use posix, memory, s3 or "
                         "Java's PosixFileSegment/MemoryFileSegment class names")
    return name


class TieredStorageLevel(enum.IntEnum):
    """When pulls read the tier (Java ``TieredStorageLevel``)."""
    DISABLE = 0        # never (the tier is still written)
    NOT_IN_DISK = 1    # when the message is no longer in the local store (default)
    NOT_IN_MEM = 2     # also when it is not in memory (cold)
    FORCE = 3          # whenever the tier has it

    @classmethod
    def parse(cls, value: object) -> "TieredStorageLevel":
        text = str(value).strip().upper()
        if text.isdigit():
            return cls(int(text))
        try:
            return cls[text]
        except KeyError:
            raise ValueError(f"tieredStorageLevel must be one of DISABLE, NOT_IN_DISK, NOT_IN_MEM, FORCE: "
                             f"{value!r}") from None


@dataclass
class TierConfig:
    """The tier's settings; ``rmqd.config.tier_config_from`` maps them from their broker.conf names."""
    enabled: bool = False
    cluster: str = "DefaultCluster"
    broker: str = "broker-a"
    provider: str = "memory"
    file_path: str = ""
    storage_level: TieredStorageLevel = TieredStorageLevel.NOT_IN_DISK
    commitlog_max_size: int = 1024 * MB
    consume_queue_max_size: int = 100 * MB
    index_slots: int = 5_000_000
    index_max_items: int = 20_000_000
    file_reserved_hours: float = 72
    delete_file_interval_ms: int = 3_600_000
    rolling_interval_hours: float = 24
    rolling_min_size: int = 16 * MB
    group_commit_count: int = 4096
    group_commit_size: int = 4 * MB
    group_commit_timeout_ms: int = 30_000
    message_index_enable: bool = True
    endpoint: str = ""
    bucket: str = ""
    access_key: str = ""
    secret_key: str = ""
    region: str = ""
    dispatch_interval_ms: int = 1000         # rmqd: how often the copier looks for new messages
    index_service_interval_ms: int = 1000    # rmqd: seal/compact/upload/expire check (Java: 10 s)

    def __post_init__(self) -> None:
        if self.index_slots <= 0 or self.index_max_items <= 1:
            raise ValueError("tieredStoreIndexFileMaxHashSlotNum must be > 0 and tieredStoreIndexFileMaxIndexNum > 1")
        if 28 + self.index_slots * 8 + self.index_max_items * 32 >= 1 << 31:
            raise ValueError("tiered index file too large: 28 + slots*8 + maxIndexNum*32 must stay below 2 GiB "
                             "(Java's int positions)")

    @property
    def consume_queue_file_size(self) -> int:
        return max(20, self.consume_queue_max_size - self.consume_queue_max_size % 20)


def is_plugin_enabled(value: object) -> bool:
    v = str(value or "").strip()
    return any(v == n or v.endswith("." + n) for n in PLUGIN_NAMES) or v.lower() in ("tiered", "tier")
