"""HA settings under Java's MessageStoreConfig names, and their mapping from broker.conf."""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rmqd.config import BrokerConfig


@dataclass
class HAConfig:
    """Times in milliseconds, sizes in bytes (Java's units)."""

    listen_host: str = "127.0.0.1"
    listen_port: int = 10912                 # haListenPort: listenPort + 1 (BrokerStartup)
    send_heartbeat_interval_ms: int = 5000   # haSendHeartbeatInterval
    housekeeping_interval_ms: int = 20000    # haHousekeepingInterval
    transfer_batch_size: int = 32 * 1024     # haTransferBatchSize
    slave_fallbehind_max: int = 256 * 1024 * 1024   # haSlaveFallbehindMax
    slave_timeout_ms: int = 3000             # slaveTimeout (the SYNC_MASTER wait)
    commitlog_file_size: int = 1 << 30       # mapedFileSizeCommitLog (a fresh slave starts at the file boundary)
    #: rmqd: a writer round sends up to this many bytes (several transfers) in one sendmsg
    max_round_bytes: int = 1024 * 1024


def ha_config_from(c: "BrokerConfig") -> HAConfig:
    """The HA settings of a :class:`rmqd.config.BrokerConfig` (Java property names)."""
    return HAConfig(
        listen_host=str(c.brokerIP2 or c.brokerIP1 or "127.0.0.1"),
        listen_port=int(c.haListenPort),
        send_heartbeat_interval_ms=int(c.haSendHeartbeatInterval),
        housekeeping_interval_ms=int(c.haHousekeepingInterval),
        transfer_batch_size=max(1, int(c.haTransferBatchSize)),
        slave_fallbehind_max=int(c.haSlaveFallbehindMax),
        slave_timeout_ms=int(c.slaveTimeout),
        commitlog_file_size=int(c.mapedFileSizeCommitLog),
    )
