"""Broker statistics: per-topic / per-group counters and store TPS, sampled periodically.

Java: ``BrokerStatsManager`` + ``StatsItemSet`` (sum/times per key with minute/hour/day
snapshots), ``StoreStatsService`` (put/get TPS over 10 s / 1 min / 10 min) and ``BrokerStats``
(message totals at this morning's and yesterday morning's midnight).

Hot paths only do dict increments under a lock:

* puts: the store's put engine counts messages and bytes per topic in C; ``TOPIC_PUT_NUMS`` /
  ``TOPIC_PUT_SIZE`` are synced from it when sampled or read (no per-message Python call);
* gets: the pull processor calls :meth:`BrokerStatsManager.inc_group_get` for found messages.

A sampler ServiceThread (1 Hz, started and stopped with the broker's services) records store-level
counters for the TPS triplets and takes the stats items' minute (every 10 s), hour (every 10 min) and
day (every hour) snapshots.
"""
from __future__ import annotations

import collections
import logging
import threading
import time
from typing import TYPE_CHECKING, Optional

from rmqd.common.service_thread import ServiceThread
from rmqd.store.config import wall_clock_ms as _now_ms

if TYPE_CHECKING:
    from rmqd.store.api import MessageStoreAPI

log = logging.getLogger(__name__)

TOPIC_PUT_NUMS = "TOPIC_PUT_NUMS"
TOPIC_PUT_SIZE = "TOPIC_PUT_SIZE"
GROUP_GET_NUMS = "GROUP_GET_NUMS"
GROUP_GET_SIZE = "GROUP_GET_SIZE"
SNDBCK_PUT_NUMS = "SNDBCK_PUT_NUMS"
BROKER_PUT_NUMS = "BROKER_PUT_NUMS"
BROKER_GET_NUMS = "BROKER_GET_NUMS"
GROUP_GET_FROM_DISK_NUMS = "GROUP_GET_FROM_DISK_NUMS"
GROUP_GET_FROM_DISK_SIZE = "GROUP_GET_FROM_DISK_SIZE"
BROKER_GET_FROM_DISK_NUMS = "BROKER_GET_FROM_DISK_NUMS"
BROKER_GET_FROM_DISK_SIZE = "BROKER_GET_FROM_DISK_SIZE"
GROUP_GET_LATENCY = "GROUP_GET_LATENCY"
ALL_STATS = (TOPIC_PUT_NUMS, TOPIC_PUT_SIZE, GROUP_GET_NUMS, GROUP_GET_SIZE, SNDBCK_PUT_NUMS,
             BROKER_PUT_NUMS, BROKER_GET_NUMS, GROUP_GET_FROM_DISK_NUMS, GROUP_GET_FROM_DISK_SIZE,
             BROKER_GET_FROM_DISK_NUMS, BROKER_GET_FROM_DISK_SIZE, GROUP_GET_LATENCY)

SAMPLE_RECORDS = 601          # StoreStatsService keeps 10 min of 1 s samples


# (ms, sum, times): one snapshot of a StatsItem
Snapshot = tuple[int, int, int]
# (ms, put times, get found, get total, get transferred, get miss): one store sample
StoreSample = tuple[int, int, int, int, int, int]


class StatsItem:
    """A cumulative (sum, times) counter with minute/hour/day snapshot windows."""

    __slots__ = ("value", "times", "minute", "hour", "day")

    def __init__(self) -> None:
        self.value = 0
        self.times = 0
        now = _now_ms()
        self.minute: collections.deque[Snapshot] = collections.deque([(now, 0, 0)], maxlen=7)
        self.hour: collections.deque[Snapshot] = collections.deque([(now, 0, 0)], maxlen=7)
        self.day: collections.deque[Snapshot] = collections.deque([(now, 0, 0)], maxlen=25)

    @staticmethod
    def _window(snaps: collections.deque[Snapshot], now: Snapshot) -> dict[str, float]:
        """``{"avgpt", "sum", "tps"}`` of the window from the oldest snapshot to ``now`` (sum is an int)."""
        first = snaps[0]
        sum_ = now[1] - first[1]
        times = now[2] - first[2]
        elapsed = now[0] - first[0]
        tps = (sum_ * 1000.0 / elapsed) if elapsed > 0 else 0.0
        avgpt = (sum_ / times) if times > 0 else 0.0
        return {"avgpt": float(avgpt), "sum": int(sum_), "tps": float(tps)}

    def snapshot(self) -> Snapshot:
        return (_now_ms(), self.value, self.times)

    def stats_data(self) -> dict[str, dict[str, float]]:
        """BrokerStatsData JSON (statsMinute/statsHour/statsDay of BrokerStatsItem)."""
        cur = self.snapshot()
        return {"statsDay": self._window(self.day, cur), "statsHour": self._window(self.hour, cur),
                "statsMinute": self._window(self.minute, cur)}

    def minute_tps(self) -> float:
        return self._window(self.minute, self.snapshot())["tps"]


class BrokerStatsManager(ServiceThread):
    """Stats items by name and key (``topic``, ``topic@group``, cluster name...) of the broker's ``store``."""

    def __init__(self, store: "MessageStoreAPI") -> None:
        super().__init__("rmqd-broker-stats", 1.0)
        self.store = store
        self._lock = threading.Lock()
        self.items: dict[str, dict[str, StatsItem]] = {name: {} for name in ALL_STATS}
        self.store_samples: collections.deque[StoreSample] = collections.deque(maxlen=SAMPLE_RECORDS)
        self.morning = {"put_yesterday": 0, "put_today": 0, "get_yesterday": 0, "get_today": 0}
        self._day = time.localtime().tm_yday
        self._last_minute = self._last_hour = self._last_day = time.monotonic()
        self.start_accept_send_ts = _now_ms()

    # ------------------------------------------------------------------ counting (hot paths)
    def _inc(self, name: str, key: str, value: int, times: int = 1) -> None:
        table = self.items[name]
        with self._lock:
            item = table.get(key)
            if item is None:
                item = table[key] = StatsItem()
            item.value += value
            item.times += times

    def sync_topic_puts(self) -> None:
        """Copy the store's per-topic put totals (counted in C by the put engine) into the tables."""
        totals = self.store.topic_put_totals()
        table_n = self.items[TOPIC_PUT_NUMS]
        table_s = self.items[TOPIC_PUT_SIZE]
        with self._lock:
            for topic, (nums, size) in totals.items():
                n = table_n.get(topic)
                if n is None:
                    n = table_n[topic] = StatsItem()
                s = table_s.get(topic)
                if s is None:
                    s = table_s[topic] = StatsItem()
                n.value = n.times = nums
                s.value = size
                s.times = nums

    def inc_group_get(self, group: str, topic: str, nums: int, size: int) -> None:
        key = f"{topic}@{group}"
        self._inc(GROUP_GET_NUMS, key, nums)
        self._inc(GROUP_GET_SIZE, key, size)

    def inc_send_back(self, group: str, topic: str) -> None:
        self._inc(SNDBCK_PUT_NUMS, f"{topic}@{group}", 1)

    # ------------------------------------------------------------------ reading
    def get(self, name: str, key: str) -> Optional[StatsItem]:
        if name in (TOPIC_PUT_NUMS, TOPIC_PUT_SIZE):
            self.sync_topic_puts()
        table = self.items.get(name)
        return table.get(key) if table is not None else None

    def tps_group_get_nums(self, group: str, topic: str) -> float:
        item = self.get(GROUP_GET_NUMS, f"{topic}@{group}")
        return item.minute_tps() if item is not None else 0.0

    def on_topic_deleted(self, topic: str) -> None:
        with self._lock:
            for name, table in self.items.items():
                for key in [k for k in table if k == topic or k.startswith(topic + "@")]:
                    del table[key]

    def on_group_deleted(self, group: str) -> None:
        with self._lock:
            for table in self.items.values():
                for key in [k for k in table if k.endswith("@" + group)]:
                    del table[key]

    # ------------------------------------------------------------------ store TPS
    def store_tps(self, field: int, seconds: int) -> float:
        """TPS of store sample column ``field`` over the last ``seconds`` (Java getPutTps(10)...)."""
        samples = self.store_samples
        if len(samples) < 2:
            return 0.0
        last = samples[-1]
        idx = max(0, len(samples) - 1 - seconds)
        first = samples[idx]
        elapsed = last[0] - first[0]
        if elapsed <= 0:
            return 0.0
        return (last[field] - first[field]) * 1000.0 / elapsed

    def tps_triplet(self, field: int) -> str:
        return " ".join("%.2f" % self.store_tps(field, s) for s in (10, 60, 600))

    # ------------------------------------------------------------------ sampling
    def sample_store(self, store: "MessageStoreAPI") -> None:
        """Record (ts, put times, get found, get total, get transferred, get miss)."""
        st = store.stats
        miss = st.get_message_times_total - st.get_message_found_total
        self.store_samples.append((_now_ms(), st.put_message_times_total, st.get_message_found_total,
                                   st.get_message_times_total, st.get_message_transferred_total, miss))
        day = time.localtime().tm_yday
        if day != self._day:
            self._day = day
            m = self.morning
            m["put_yesterday"], m["put_today"] = m["put_today"], st.put_message_times_total
            m["get_yesterday"], m["get_today"] = m["get_today"], st.get_message_transferred_total

    def sample_items(self, force: bool = False) -> None:
        """Take the minute/hour/day snapshots that are due (all of them with ``force``)."""
        now = time.monotonic()
        windows = []
        if force or now - self._last_minute >= 10:
            windows.append("minute")
            self._last_minute = now
        if force or now - self._last_hour >= 600:
            windows.append("hour")
            self._last_hour = now
        if force or now - self._last_day >= 3600:
            windows.append("day")
            self._last_day = now
        if not windows:
            return
        with self._lock:
            for table in self.items.values():
                for item in table.values():
                    snap = item.snapshot()
                    for w in windows:
                        getattr(item, w).append(snap)

    def run_once(self) -> None:
        """One sample (1 Hz): store counters, the per-topic put totals, the due snapshots."""
        self.sample_store(self.store)
        self.sync_topic_puts()
        self.sample_items()
