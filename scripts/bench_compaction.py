"""Compaction throughput: records/s and MB/s of one compaction run, beside a plain copy of the same
files measured in the same run, and the run's peak RSS.

Setup (not timed): N records of SIZE bytes over K keys (key = i % K, so each key has N/K versions
and the newest are the last K records) are put into a local store and copied into a compaction
log with COMPACTION_FILE-byte files. Then, each in a fresh child process (so peak RSS is the
run's own): a plain copy of the sealed log + CQ files (read, write, fsync), and one compaction run
with ``maxOffsetMapSize`` = MAP bytes.

    python scripts/bench_compaction.py [--records 1000000] [--keys 100000] [--size 1024]
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

TOPIC = "BenchTable"


def setup(root: str, records: int, keys: int, size: int, file_size: int) -> None:
    from rmqd.store.compaction.store import CompactionConfig
    from rmqd.store.layers import build_store
    from rmqd.store.message import MessageToStore
    from rmqd.store.message_store import StoreConfig

    store = build_store(StoreConfig(root, message_index_enable=False, warm_mapped_pages=False),
                        CompactionConfig(log_file_size=file_size, schedule_interval_ms=3_600_000,
                                         copy_interval_ms=3_600_000))
    store.start()
    store.compaction.on_topic_config(TOPIC, True)
    pad = b"v" * (size - 40)
    batch = []
    for i in range(records):
        batch.append(MessageToStore.create(TOPIC, 0, b"%010d" % i + pad, {"KEYS": "key-%08d" % (i % keys)}))
        if len(batch) == 1000:
            store.put_messages(batch)
            batch = []
    if batch:
        store.put_messages(batch)
    store.compaction.catch_up(TOPIC, 0)
    store.shutdown()


def vm_hwm_kb() -> int:
    """Peak RSS of this process (VmHWM: per address space, so the parent's does not leak in)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def child_copy(root: str) -> dict:
    from rmqd.store.compaction.queue_log import QueueCompactionLog
    qlog = QueueCompactionLog(os.path.join(root, "compaction"), TOPIC, 0, 1 << 40, 1 << 40)
    qlog.load()
    sealed = [s for s in qlog.segments if s.sealed]
    out = tempfile.mkdtemp(dir=root)
    t0 = time.perf_counter()
    nbytes = 0
    for seg in sealed:
        for src in (seg.log_path, seg.cq_path):
            dst = os.path.join(out, os.path.basename(os.path.dirname(os.path.dirname(src))) + seg.name)
            with open(src, "rb") as fi, open(dst, "wb") as fo:
                while True:
                    chunk = fi.read(8 << 20)
                    if not chunk:
                        break
                    fo.write(chunk)
                    nbytes += len(chunk)
                fo.flush()
                os.fsync(fo.fileno())
    elapsed = time.perf_counter() - t0
    shutil.rmtree(out)
    qlog.close()
    return {"seconds": elapsed, "bytes": nbytes, "records": sum(len(s.qoffs) for s in sealed)}


def child_compact(root: str, map_bytes: int) -> dict:
    from rmqd.store.compaction.compactor import compact_queue
    from rmqd.store.compaction.queue_log import QueueCompactionLog
    rss0 = vm_hwm_kb()
    qlog = QueueCompactionLog(os.path.join(root, "compaction"), TOPIC, 0, 100 * 1024 * 1024, 10 * 1024 * 1024)
    qlog.load()
    sealed = [s for s in qlog.segments if s.sealed]
    bytes_in = sum(s.log_size + len(s.qoffs) * 46 for s in sealed)
    t0 = time.perf_counter()
    res = compact_queue(qlog, map_bytes, -1, lambda _off: None)
    elapsed = time.perf_counter() - t0
    qlog.close()
    return {"seconds": elapsed, "bytes_in": bytes_in, "records_in": res.records_in, "records_out": res.records_out,
            "bytes_out": res.bytes_out, "rounds": res.rounds, "rss_before_kb": rss0,
            "peak_rss_kb": vm_hwm_kb()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--keys", type=int, default=100_000)
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--file-size", type=int, default=100 * 1024 * 1024, help="compactionMappedFileSize")
    ap.add_argument("--map", type=int, default=100 * 1024 * 1024 // 2,
                    help="OffsetMap bytes of one run (maxOffsetMapSize / compactionThreadNum; default 100 MiB / 2)")
    ap.add_argument("--dir", default=None)
    ap.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        kind, root = a.child[0], a.child[1]
        print(json.dumps(child_copy(root) if kind == "copy" else child_compact(root, int(a.child[2]))))
        return
    from benchenv import machine_line
    root = a.dir or tempfile.mkdtemp(prefix="rmqd-bench-compaction-")
    try:
        t0 = time.perf_counter()
        setup(root, a.records, a.keys, a.size, a.file_size)
        print(f"# {machine_line()}")
        print(f"# setup: {a.records} records x {a.size} B over {a.keys} keys in {time.perf_counter() - t0:.1f}s")

        def child(*args: str) -> dict:
            out = subprocess.run([sys.executable, __file__, "--child", *args], capture_output=True, text=True,
                                 timeout=1800)
            if out.returncode:
                raise SystemExit(out.stderr)
            return json.loads(out.stdout.strip().splitlines()[-1])
        cp = child("copy", root)
        cm = child("compact", root, str(a.map))
        mb = 1024 * 1024
        copy_mbs = cp["bytes"] / mb / cp["seconds"]
        comp_mbs = cm["bytes_in"] / mb / cm["seconds"]
        print(f"plain copy : {cp['bytes'] / mb:8.1f} MB in {cp['seconds']:.2f}s = {copy_mbs:8.1f} MB/s "
              f"({cp['records'] / cp['seconds']:,.0f} records/s)")
        print(f"compaction : {cm['bytes_in'] / mb:8.1f} MB in {cm['seconds']:.2f}s = {comp_mbs:8.1f} MB/s "
              f"({cm['records_in'] / cm['seconds']:,.0f} records/s), {cm['records_in']} -> {cm['records_out']} "
              f"records, {cm['rounds']} round(s)")
        print(f"ratio      : compaction at {100 * comp_mbs / copy_mbs:.0f}% of the copy's MB/s (goal >= 30%)")
        limit = 2 * a.map / mb + 64
        print(f"peak RSS   : {cm['peak_rss_kb'] / 1024:.0f} MB (interpreter + imports before the run "
              f"{cm['rss_before_kb'] / 1024:.0f} MB; this run's OffsetMap {a.map / mb:.0f} MB; goal <= "
              f"maxOffsetMapSize + 64 = {limit:.0f} MB)")
    finally:
        if a.dir is None:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
