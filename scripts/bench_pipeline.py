"""rmqd pipeline in Spark local[2]: archive MB/s next to plain df.write.parquet of the same rows in the same
run, compaction records/s next to the broker's own compaction of the same store, and peak RSS.

1. Setup (not timed): MESSAGES messages of SIZE bytes (key ``k<i>``, 4 queues) in a store with
   SEGMENT-MB CommitLog files (all but the last sealed).
2. Timed, MB/s over the sealed segments' bytes:
   - ``rmqd pipeline archive`` of the store (zstd Parquet by topic/queueId/day + the key index);
   - reference A: the same rows (read back from the archive and cached in Spark first, not timed) written
     with ``df.write.parquet`` (zstd), i.e. Spark's own Parquet writer alone;
   - reference B: ``spark.read.format("rocketmq").option("path", store)`` -> ``df.write.parquet`` (zstd), the
     same job with plain Spark and the connector (no key index, no partitioning, no commit protocol).
3. Compaction: RECORDS records of 1 KB over KEYS keys in 2 queues, copied into compaction logs of 16 MB
   files (not timed); then, on two copies, the broker's own compaction (``CompactionStore.compact``, one
   thread, timed without the store's start) and ``rmqd pipeline compact`` (its output adopted at the next
   start, not timed); records/s and the check that both keep the same (queue, offset) set.
4. Index: INDEX-MESSAGES messages of SIZE bytes (KEYS ``k<i>`` and a UNIQ_KEY: two keys each, 4 queues)
   copied into a Posix tier by the broker with ``messageIndexEnable=false`` (not timed); then ``rmqd pipeline
   index`` (timed): messages/s, keys/s and MB/s of flat CommitLog, and the index files it wrote.
5. Peak RSS: the Python driver (VmHWM; setup and checks run in child processes, so it is the driver's
   own), the JVM (driver + executors in local mode, VmHWM) and the sum of the Python workers (sampled every
   0.2 s; total and anonymous: the rest is page cache of the segments they map).

    python scripts/bench_pipeline.py [--messages 1100000] [--size 1024] [--segment-mb 128]
                                     [--records 1000000] [--keys 100000] [--index-messages 1000000]
                                     [--only archive|compact|index] [--quick]

``--quick``: a smoke run at a few MB (20,000 messages, 40,000 records, 8 MB segments); its figures mean nothing.
"""
from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import threading
import time
from rmqd.common.fileutil import copy_sparse

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

TOPIC, CTOPIC = "BenchArchive", "BenchCompact"


def fill_store(root: str, n: int, size: int, segment: int) -> None:
    from rmqd.store.message import MessageToStore
    from rmqd.store.message_store import MessageStore, StoreConfig
    store = MessageStore(StoreConfig(root, mapped_file_size_commitlog=segment, message_index_enable=False,
                                     warm_mapped_pages=False))
    store.start()
    for start in range(0, n, 1024):
        bodies = os.urandom(size * 1024)                  # every body different (incompressible)
        for q in range(4):
            batch = [MessageToStore.create(TOPIC, q, bodies[(i - start) * size:(i - start + 1) * size],
                                           {"KEYS": f"k{i}", "TAGS": "T"})
                     for i in range(start + q, min(start + 1024, n), 4)]
            if batch:
                store.put_messages(batch)
    store.shutdown()


def fill_compaction(root: str, records: int, keys: int) -> None:
    from rmqd.store.layers import build_store
    from rmqd.store.message import MessageToStore
    from rmqd.store.message_store import StoreConfig
    store = build_store(StoreConfig(root, message_index_enable=False, warm_mapped_pages=False),
                        _cconf())
    store.start()
    store.compaction.on_topic_config(CTOPIC, True)
    pad = b"v" * 984
    for start in range(0, records, 1000):
        for q in range(2):
            batch = [MessageToStore.create(CTOPIC, q, b"%010d" % i + pad, {"KEYS": "key-%08d" % (i % keys)})
                     for i in range(start + q, min(start + 1000, records), 2)]
            store.put_messages(batch)
    for q in range(2):
        store.compaction.catch_up(CTOPIC, q)
        copied = store.compaction.logs[(CTOPIC, q)].record_count()
        if copied != records // 2:       # both compactions must start from the whole topic
            raise RuntimeError(f"setup: queue {q}'s compaction log holds {copied} of {records // 2} records")
    store.shutdown()


def fill_tier(root: str, n: int, size: int) -> None:
    """A store whose Posix tier (``<root>-tier``) holds ``n`` messages copied without the index."""
    from rmqd.store.layers import build_store
    from rmqd.store.message import MessageToStore
    from rmqd.store.message_store import StoreConfig
    from rmqd.config import broker_config_from, tier_config_from
    props = {"messageStorePlugIn": "tiered", "tieredBackendServiceProvider": "posix",
             "tieredStoreFilePath": root + "-tier", "messageIndexEnable": "false",
             "tieredStoreGroupCommitTimeout": "0", "tieredStoreDispatchInterval": "3600000"}
    store = build_store(StoreConfig(root, mapped_file_size_commitlog=128 << 20, message_index_enable=False,
                                    warm_mapped_pages=False, file_reserved_time_hours=10_000),
                        None, tier_config_from(broker_config_from(props)))
    store.start()
    for start in range(0, n, 1024):
        bodies = os.urandom(size * 1024)
        for q in range(4):
            batch = [MessageToStore.create(TOPIC, q, bodies[(i - start) * size:(i - start + 1) * size],
                                           {"KEYS": f"k{i}", "UNIQ_KEY": f"{0xC0A80001:08X}{i:024X}", "TAGS": "T"})
                     for i in range(start + q, min(start + 1024, n), 4)]
            if batch:
                store.put_messages(batch)
        if start % (64 * 1024) == 0:
            store.tier.commit_now(upload=False)
    store.tier.commit_now(upload=False)
    copied = sum(tq.max_offset - tq.min_offset for tq in store.tier.queues.values())
    store.shutdown()
    if copied != n:
        raise RuntimeError(f"setup: the tier holds {copied} of {n} messages")


def _cconf():
    from rmqd.store.compaction.store import CompactionConfig
    return CompactionConfig(log_file_size=16 << 20, schedule_interval_ms=3_600_000, copy_interval_ms=3_600_000,
                            thread_num=1)


def _open_compaction(root: str):
    from rmqd.store.layers import build_store
    from rmqd.store.message_store import StoreConfig
    store = build_store(StoreConfig(root, message_index_enable=False, warm_mapped_pages=False), _cconf())
    store.start()
    store.compaction.on_topic_config(CTOPIC, True)
    return store


def broker_compact(root: str) -> float:
    """The broker's compaction of every queue, in one thread; returns its seconds (not the store's start)."""
    st = _open_compaction(root)
    t = time.perf_counter()
    st.compaction.compact(CTOPIC)
    s = time.perf_counter() - t
    st.shutdown()
    return s


def surviving(root: str) -> set:
    from rmqd.store.compaction.queue_log import iter_units
    store = _open_compaction(root)
    try:
        out = set()
        for (t, q), qlog in store.compaction.logs.items():
            for seg in qlog.segments:
                for unit in iter_units(seg.read_cq()):
                    out.add((q, unit[4]))
        return out
    finally:
        store.shutdown()


def in_child(fn, *args):
    """Run ``fn(*args)`` in a forked child (before the JVM starts, or for work that maps store files), so
    the driver's peak RSS stays its own; returns what it returns."""
    import multiprocessing as mp
    ctx = mp.get_context("fork")
    with ctx.Pool(1) as pool:
        return pool.apply(fn, args)


def hwm_kb(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


class WorkerRss(threading.Thread):
    """Peak of the summed RSS of the JVM's Python workers (its descendants named python*)."""

    def __init__(self, jvm_pid: int) -> None:
        super().__init__(daemon=True)
        self.jvm, self.peak_kb, self.peak_anon_kb, self.stop = jvm_pid, 0, 0, threading.Event()

    def _children(self) -> dict[int, int]:
        parents = {}
        for p in os.listdir("/proc"):
            if p.isdigit():
                try:
                    with open(f"/proc/{p}/stat") as f:
                        parents[int(p)] = int(f.read().rsplit(")", 1)[1].split()[1])
                except OSError:
                    continue
        return parents

    def run(self) -> None:
        while not self.stop.wait(0.2):
            parents = self._children()
            mine, frontier = set(), {self.jvm}
            while frontier:
                nxt = {c for c, pp in parents.items() if pp in frontier} - mine
                mine |= nxt
                frontier = nxt
            total = anon = 0
            for pid in mine:
                try:
                    with open(f"/proc/{pid}/status") as f:
                        for line in f:
                            if line.startswith("VmRSS:"):
                                total += int(line.split()[1])
                            elif line.startswith("RssAnon:"):
                                anon += int(line.split()[1])
                except OSError:
                    continue
            self.peak_kb, self.peak_anon_kb = max(self.peak_kb, total), max(self.peak_anon_kb, anon)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--messages", type=int, default=1_100_000)
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--segment-mb", type=int, default=128)
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--keys", type=int, default=100_000)
    ap.add_argument("--index-messages", type=int, default=1_000_000)
    ap.add_argument("--driver-memory", default="4g")
    ap.add_argument("--only", choices=["archive", "compact", "index"])
    ap.add_argument("--quick", action="store_true", help="a smoke run of a few MB (figures mean nothing)")
    ap.add_argument("--keep", action="store_true", help="keep the work directory (printed)")
    a = ap.parse_args()
    if a.quick:
        a.messages = a.index_messages = 20_000
        a.records, a.keys, a.segment_mb = 40_000, 2_000, 8       # compaction logs roll at 16 MB: some sealed
    todo = {a.only} if a.only else {"archive", "compact", "index"}
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from benchenv import machine_line
    from rmqd.pipeline.archive import MESSAGES_DDL, Archive
    from rmqd.pipeline.compact import Compact
    from rmqd.pipeline.runner import spark_session

    work = tempfile.mkdtemp(prefix="rmqd-bench-pipeline-")
    try:
        print(f"# {machine_line()}")
        store, croot = os.path.join(work, "store"), os.path.join(work, "cstore")
        if "archive" in todo:
            t0 = time.perf_counter()
            in_child(fill_store, store, a.messages, a.size, a.segment_mb << 20)
            from rmqd.pipeline.segments import LocalCommitLog
            segs = LocalCommitLog(store).sealed_segments()
            mb = sum(s.size for s in segs) / 1e6
            print(f"# {a.messages:,} messages x {a.size} B in {len(segs)} sealed segments of {a.segment_mb} MB "
                  f"({mb:,.0f} MB) stored in {time.perf_counter() - t0:.1f} s")
        if "compact" in todo:
            t0 = time.perf_counter()
            in_child(fill_compaction, croot, a.records, a.keys)
            cmb = sum(os.path.getsize(os.path.join(dp, f)) for dp, _d, fs in
                      os.walk(os.path.join(croot, "compaction", "compactionLog")) for f in fs) / 1e6
            print(f"# compaction: {a.records:,} records of 1 KB over {a.keys:,} keys, 2 queues, {cmb:,.0f} MB of "
                  f"compaction log (16 MB files), set up in {time.perf_counter() - t0:.1f} s")
        iroot = os.path.join(work, "istore")
        if "index" in todo:
            t0 = time.perf_counter()
            in_child(fill_tier, iroot, a.index_messages, a.size)
            imb = sum(os.path.getsize(os.path.join(dp, f)) for dp, _d, fs in os.walk(iroot + "-tier") for f in fs
                      if "COMMIT_LOG" in dp) / 1e6
            print(f"# index: {a.index_messages:,} messages x {a.size} B (2 keys each) in a Posix tier, {imb:,.0f} MB "
                  f"of flat CommitLog, copied without the index in {time.perf_counter() - t0:.1f} s")
        spark = spark_session("local[2]", [("spark.driver.memory", a.driver_memory),
                                           ("spark.sql.shuffle.partitions", "4")], app="bench_pipeline")
        print(f"# Spark {spark.version} {spark.sparkContext.master}, driver memory {a.driver_memory}")
        spark.sparkContext.parallelize(range(8), 8).map(lambda x: x).count()       # start the Python workers
        jvm = spark.sparkContext._gateway.proc.pid
        workers = WorkerRss(jvm)
        workers.start()

        def timed(label: str, fn, rows: int) -> float:
            t = time.perf_counter()
            fn()
            s = time.perf_counter() - t
            print(f"{label:<52} {mb / s:>8.1f} MB/s {rows / s:>12,.0f} rows/s  ({s:.1f} s)")
            return mb / s

        if "archive" in todo:
            out = os.path.join(work, "archive")
            summary = {}

            def archive() -> None:
                summary["s"] = Archive(store, out).run(spark)
            r_arch = timed("rmqd pipeline archive (zstd, partitioned, key index)", archive, a.messages)
            print(f"#   Python workers' peak during the archive: {workers.peak_kb / 1024:,.0f} MB "
                  f"({workers.peak_anon_kb / 1024:,.0f} MB anonymous)")
            s = summary["s"]
            rows = s.rows
            print(f"#   {rows:,} rows, {s.details['files']} files, {s.details['parquetBytes'] / 1e6:,.0f} MB of "
                  "Parquet")
            df = spark.read.schema(MESSAGES_DDL).parquet(os.path.join(out, "messages")).cache()
            assert df.count() == rows
            r_a = timed("reference A: cached rows -> df.write.parquet (zstd)",
                        lambda: df.write.mode("overwrite").option("compression", "zstd").parquet(
                            os.path.join(work, "ref-a")), rows)
            df.unpersist()
            shutil.rmtree(os.path.join(work, "ref-a"), ignore_errors=True)
            r_b = timed("reference B: format('rocketmq') path -> df.write.parquet",
                        lambda: spark.read.format("rocketmq").option("path", store).option("topic", TOPIC).load()
                        .write.mode("overwrite").option("compression", "zstd").parquet(os.path.join(work, "ref-b")),
                        rows)
            shutil.rmtree(os.path.join(work, "ref-b"), ignore_errors=True)
            shutil.rmtree(out, ignore_errors=True)
            print(f"archive at {100 * r_arch / r_a:.0f}% of reference A (goal >= 50%), {100 * r_arch / r_b:.0f}% "
                  "of reference B")
            print(f"#   Python workers' peak so far: {workers.peak_kb / 1024:,.0f} MB "
                  f"({workers.peak_anon_kb / 1024:,.0f} MB anonymous)")

        if "compact" in todo:
            broker_root, job_root = os.path.join(work, "c-broker"), os.path.join(work, "c-job")
            shutil.copytree(croot, broker_root, copy_function=copy_sparse)
            shutil.copytree(croot, job_root, copy_function=copy_sparse)
            if not a.keep:
                shutil.rmtree(croot)

            s_broker = in_child(broker_compact, broker_root)
            t = time.perf_counter()
            cs = Compact(job_root, CTOPIC).run(spark)
            s_job = time.perf_counter() - t
            print(f"#   Python workers' peak so far: {workers.peak_kb / 1024:,.0f} MB "
                  f"({workers.peak_anon_kb / 1024:,.0f} MB anonymous)")
            t = time.perf_counter()
            same = in_child(surviving, job_root) == in_child(surviving, broker_root)    # opening job_root adopts
            s_adopt = time.perf_counter() - t
            print(f"{'broker compaction (1 thread)':<52} {a.records / s_broker:>12,.0f} records/s  ({s_broker:.1f} s)")
            print(f"{'rmqd pipeline compact (local[2])':<52} {a.records / s_job:>12,.0f} records/s  ({s_job:.1f} s; "
                  f"{cs.rows:,} sealed records in, {cs.details.get('recordsAfter', 0):,} out)")
            print(f"#   adoption at start + reading back both sets: {s_adopt:.1f} s; same (queue, offset) set: {same}")
        if "index" in todo:
            from rmqd.pipeline.index import Index
            t = time.perf_counter()
            ix = Index(iroot).run(spark)
            s_ix = time.perf_counter() - t
            keys = ix.details["items"]
            print(f"{'rmqd pipeline index (local[2])':<52} {ix.rows / s_ix:>12,.0f} messages/s {keys / s_ix:>12,.0f} "
                  f"keys/s {ix.bytes / 1e6 / s_ix:>8.1f} MB/s  ({s_ix:.1f} s; {ix.details['files']} index file(s), "
                  f"{ix.details['indexFileBytes'] / 1e6:,.0f} MB)")
            if keys != 2 * a.index_messages:
                raise RuntimeError(f"index: {keys} items, expected {2 * a.index_messages}")
            print(f"#   Python workers' peak so far: {workers.peak_kb / 1024:,.0f} MB "
                  f"({workers.peak_anon_kb / 1024:,.0f} MB anonymous)")
        workers.stop.set()
        print(f"peak RSS: Python driver {hwm_kb(os.getpid()) / 1024:,.0f} MB, JVM (driver + executors) "
              f"{hwm_kb(jvm) / 1024:,.0f} MB, Python workers (sum) {workers.peak_kb / 1024:,.0f} MB "
              f"({workers.peak_anon_kb / 1024:,.0f} MB anonymous)")
        spark.stop()
    finally:
        if a.keep:
            print(f"# kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
