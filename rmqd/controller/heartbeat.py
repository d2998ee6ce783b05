"""Broker liveness as one controller sees it (Java's ``DefaultBrokerHeartbeatManager``).

Every controller keeps its own table: brokers send BROKER_HEARTBEAT (904) to all controllers, and
liveness is not replicated through Raft (DLedger mode's design).  A broker is alive while
``lastUpdate + heartbeatTimeoutMills >= now``; an expired entry is removed by the periodic scan
(``scanNotActiveBrokerInterval``), and a closed channel removes its entries at once.  Either way the
listeners hear ``(clusterName, brokerName, brokerId)``.

Heartbeats on one TCP connection arrive in order, so within one channel the newest values are kept as
they are (a slave that truncated its log reports a lower offset, and the election must see it).  Java
only lets epoch/offset grow, which keeps values from before a truncation.  A heartbeat on a new channel
(a restarted broker) replaces the entry.

All methods run on the event loop; the clock is injectable for tests (milliseconds, monotonic).
"""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Callable, Optional, Protocol

log = logging.getLogger(__name__)

DEFAULT_BROKER_CHANNEL_EXPIRED_TIME = 10_000     # ms, when a heartbeat carries no heartbeatTimeoutMills
INT_MAX = 2**31 - 1

BrokerKey = tuple[str, str, int]                 # (clusterName, brokerName, brokerId)
InactiveListener = Callable[[str, str, Optional[int]], None]


class BrokerChannel(Protocol):
    """What the table needs of a broker's connection: its identity (compared with ``is``) and ``close``."""

    def close(self) -> None: ...


def monotonic_ms() -> int:
    return int(time.monotonic() * 1000)


@dataclass
class BrokerLiveInfo:
    """What the last heartbeat of one broker said (Java's ``BrokerLiveInfo``)."""

    brokerName: str
    brokerAddr: str
    brokerId: int
    lastUpdateTimestamp: int
    heartbeatTimeoutMillis: int
    channel: Optional[BrokerChannel]
    epoch: int = -1
    maxOffset: int = -1
    confirmOffset: int = -1
    electionPriority: int = INT_MAX


class BrokerHeartbeatManager:
    """The live-broker table of this controller node."""

    def __init__(self, clock: Callable[[], int] = monotonic_ms) -> None:
        self._clock = clock
        self._table: dict[BrokerKey, BrokerLiveInfo] = {}
        self._listeners: list[InactiveListener] = []

    def add_inactive_listener(self, listener: InactiveListener) -> None:
        self._listeners.append(listener)

    def on_heartbeat(self, cluster: str, broker_name: str, broker_addr: str, broker_id: int,
                     timeout_ms: Optional[int] = None, channel: Optional[BrokerChannel] = None,
                     epoch: Optional[int] = None, max_offset: Optional[int] = None,
                     confirm_offset: Optional[int] = None, election_priority: Optional[int] = None) -> None:
        key = (cluster, broker_name, int(broker_id))
        now = self._clock()
        info = BrokerLiveInfo(
            brokerName=broker_name, brokerAddr=broker_addr, brokerId=int(broker_id), lastUpdateTimestamp=now,
            heartbeatTimeoutMillis=DEFAULT_BROKER_CHANNEL_EXPIRED_TIME if timeout_ms is None else int(timeout_ms),
            channel=channel, epoch=-1 if epoch is None else int(epoch),
            maxOffset=-1 if max_offset is None else int(max_offset),
            confirmOffset=-1 if confirm_offset is None else int(confirm_offset),
            electionPriority=INT_MAX if election_priority is None else int(election_priority))
        prev = self._table.get(key)
        if prev is None:
            log.info("new broker heartbeat: %s addr %s", key, broker_addr)
        elif prev.channel is not channel and prev.channel is not None:
            log.info("broker %s heartbeats on a new channel (%s, was %s)", key, broker_addr, prev.brokerAddr)
        self._table[key] = info

    def on_channel_close(self, channel: BrokerChannel) -> None:
        """A broker connection closed: its entries are gone and it is inactive at once."""
        gone = [key for key, info in self._table.items() if info.channel is channel]
        for key in gone:
            info = self._table.pop(key)
            log.info("channel %s closed: broker %s (%s) inactive", channel, key, info.brokerAddr)
            self._notify(key)

    def scan_not_active(self) -> list[BrokerKey]:
        """Remove expired entries (closing their channels) and tell the listeners; returns the expired keys."""
        now = self._clock()
        expired = [key for key, info in self._table.items()
                   if now - info.lastUpdateTimestamp > info.heartbeatTimeoutMillis]
        for key in expired:
            info = self._table.pop(key)
            log.warning("broker %s (%s) heartbeat expired after %d ms", key, info.brokerAddr,
                        info.heartbeatTimeoutMillis)
            if info.channel is not None:
                info.channel.close()
            self._notify(key)
        return expired

    def _notify(self, key: BrokerKey) -> None:
        for listener in self._listeners:
            try:
                listener(*key)
            except Exception:
                log.exception("inactive-broker listener failed for %s", key)

    def is_active(self, cluster: str, broker_name: str, broker_id: int) -> bool:
        info = self._table.get((cluster, broker_name, int(broker_id)))
        return info is not None and info.lastUpdateTimestamp + info.heartbeatTimeoutMillis >= self._clock()

    def is_fresh(self, cluster: str, broker_name: str, broker_id: int) -> bool:
        """Alive, with a heartbeat at most half its time-out old. A member whose heartbeats stopped when the
        master's did (cut off on the master's side of a partition) is still alive for a while but not fresh."""
        info = self._table.get((cluster, broker_name, int(broker_id)))
        return info is not None and self._clock() - info.lastUpdateTimestamp <= info.heartbeatTimeoutMillis // 2

    def live_info(self, cluster: str, broker_name: str, broker_id: int) -> Optional[BrokerLiveInfo]:
        return self._table.get((cluster, broker_name, int(broker_id)))

    def active_brokers_num(self) -> dict[str, dict[str, int]]:
        """cluster -> brokerName -> number of alive brokers (Java's getActiveBrokersNum)."""
        out: dict[str, dict[str, int]] = {}
        for cluster, name, bid in list(self._table):
            if self.is_active(cluster, name, bid):
                out.setdefault(cluster, {}).setdefault(name, 0)
                out[cluster][name] += 1
        return out
