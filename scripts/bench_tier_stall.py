"""How long the tier's background work keeps another Python thread waiting: the stalls an event
loop would see while the copier copies a backlog and while the index service compacts and
uploads (in process, Posix backend, Java's index sizes).

A thread sleeps 0.5 ms in a loop and records how late it wakes: beyond the timer's own slack, that
is its wait for the GIL. Figures: p50 / p99 / p99.9 / max lateness during each phase, with the
phase's duration. Idle lateness (the machine's noise floor) is printed first.

    python scripts/bench_tier_stall.py [--messages 100000] [--runs 3] [--dir /tmp]
"""
from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from benchenv import machine_line  # noqa: E402

from rmqd.store.layers import build_store  # noqa: E402
from rmqd.store.message import MessageToStore  # noqa: E402
from rmqd.store.message_store import StoreConfig  # noqa: E402
from rmqd.config import broker_config_from, tier_config_from  # noqa: E402

SLEEP_S = 0.0005


class Sleeper(threading.Thread):
    """Sleeps SLEEP_S again and again and records how late each wake-up is."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.late: list[float] = []
        self.halt = threading.Event()

    def run(self) -> None:
        while not self.halt.is_set():
            t0 = time.perf_counter()
            time.sleep(SLEEP_S)
            self.late.append(time.perf_counter() - t0 - SLEEP_S)

    def take(self) -> list[float]:
        out, self.late = self.late, []
        return sorted(out)


def line(label: str, seconds: float, late: list[float]) -> str:
    def q(x: float) -> float:
        return late[min(len(late) - 1, int(x * len(late)))] * 1e3 if late else float("nan")
    return (f"{label:<16} {seconds:6.2f} s   late p50 {q(.5):6.3f}  p99 {q(.99):6.3f}  p99.9 {q(.999):7.3f}  "
            f"max {late[-1] * 1e3 if late else float('nan'):7.2f} ms  ({len(late)} wake-ups)")


def run_once(work: str, messages: int) -> None:
    props = {"messageStorePlugIn": "tiered", "tieredBackendServiceProvider": "posix",
             "tieredStoreFilePath": os.path.join(work, "tier"), "tieredStoreGroupCommitTimeout": "0",
             "tieredStoreDispatchInterval": "3600000"}
    cfg = StoreConfig(store_root_dir=os.path.join(work, "store"), mapped_file_size_commitlog=256 << 20,
                      clean_resource_interval_ms=3_600_000, warm_mapped_pages=False)
    store = build_store(cfg, None, tier_config_from(broker_config_from(props)))
    store.tier.tier_config.index_service_interval_ms = 3_600_000      # this script drives the tier itself
    store.start()
    try:
        for i in range(messages):
            store.put_message(MessageToStore.create(
                "BenchTopic", i % 4, b"x" * 1024, {"UNIQ_KEY": f"7F000001AAAA18B4AAC2AD{i:010d}", "KEYS": f"k{i % 1000}"},
                born_host=("127.0.0.1", 5000), store_host=("127.0.0.1", 10911)))
        sleeper = Sleeper()
        sleeper.start()
        time.sleep(0.5)
        print(line("idle", 0.5, sleeper.take()))
        t0 = time.perf_counter()
        while store.tier.dispatcher.run_once(force=True):
            pass
        print(line(f"copy {messages:,}", time.perf_counter() - t0, sleeper.take()))
        store.tier.index.seal_requested = True
        store.tier.dispatcher.run_once(force=True)
        t0 = time.perf_counter()
        while store.tier.index.run_once():
            pass
        print(line("compact+upload", time.perf_counter() - t0, sleeper.take()))
        sleeper.halt.set()
        sleeper.join()
    finally:
        store.shutdown()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--messages", type=int, default=100_000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--dir", default=tempfile.gettempdir())
    a = ap.parse_args()
    print(machine_line())
    print(f"{a.messages:,} messages of 1 KiB (a unique and a shared key each) over 4 queues; a {SLEEP_S * 1e3:.1f} ms "
          f"sleeper's lateness")
    for r in range(a.runs):
        work = tempfile.mkdtemp(prefix="rmqd-bench-tier-stall-", dir=a.dir)
        try:
            print(f"run {r + 1}")
            run_once(work, a.messages)
        finally:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
