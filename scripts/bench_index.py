"""The tier's random index: build rate, compaction time, key-query latency and range reads per query
(writable vs compacted vs uploaded), and the tier upload rate beside a plain file copy.

One index file of ENTRIES items over SLOTS hash slots (Java's defaults are 5M slots, 20M items;
the file is sparse and mapped, as the broker's is). Messages carry one unique key (UNIQ_KEY) and
one key shared by ``--per-key`` messages, so chains mix unique and repeated keys.

* build: hashing with the indexing rule (:func:`entries_of_message`, what the copier runs per
  message) on a sample, then the C put of all entries (pre-hashed, as the copier hands them over);
* compaction: the C compaction into the slot-grouped file (mapped scratch file, fsync'ed);
* queries: QUERIES random existing keys (half unique, half shared), maxNum 32, on the writable
  file (chain walk in the mapping), the compacted file (local preads) and the uploaded copy
  (Posix backend: two range reads); p50/p99 latency and range reads per query;
* upload: the compacted file into the Posix backend (fsync'ed) vs ``shutil.copyfile`` + fsync.

    python scripts/bench_index.py [--entries 10000000] [--slots 5000000] [--dir /tmp]
"""
from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from benchenv import machine_line  # noqa: E402

from rmqd.cython_ext import tier_index as X  # noqa: E402
from rmqd.store.tier.backend import PosixBackend  # noqa: E402
from rmqd.store.tier.index import layout as L  # noqa: E402
from rmqd.store.tier.index.store_file import IndexStoreFile  # noqa: E402

TOPIC = "BenchTopic"
BEGIN = 1_700_000_000_000


def pct(values: list, q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(q * len(s)))]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--entries", type=int, default=10_000_000)
    ap.add_argument("--slots", type=int, default=5_000_000)
    ap.add_argument("--per-key", type=int, default=8, help="messages sharing each non-unique key")
    ap.add_argument("--queries", type=int, default=20_000)
    ap.add_argument("--dir", default=tempfile.gettempdir())
    a = ap.parse_args()
    messages = a.entries // 2                        # two keys per message
    work = tempfile.mkdtemp(prefix="rmqd-bench-index-", dir=a.dir)
    print(machine_line())
    print(f"{a.entries:,} entries ({messages:,} messages x 2 keys), {a.slots:,} slots, work dir {work}")
    try:
        # ---- build -------------------------------------------------------------------------------
        sample = min(messages, 200_000)
        t0 = time.perf_counter()
        for i in range(sample):
            L.entries_of_message(TOPIC, 1, i & 7, f"order-{i // a.per_key}", f"UNIQ{i:012d}", i * 300, 300,
                                 BEGIN + i // 50)
        rule_rate = sample * 2 / (time.perf_counter() - t0)
        batch = []
        t0 = time.perf_counter()
        for i in range(messages):
            batch.append(((L.key_hash(TOPIC, f"UNIQ{i:012d}"), L.key_hash(TOPIC, f"order-{i // a.per_key}")),
                          1, i & 7, i * 300, 300, BEGIN + i // 50))
        hash_s = time.perf_counter() - t0
        f = IndexStoreFile(work, BEGIN, a.slots, a.entries + 1)
        f.open_writable(create=True)
        t0 = time.perf_counter()
        step = 100_000
        for j in range(0, messages, step):
            assert f.put(batch[j:j + step]) == len(batch[j:j + step])
        put_s = time.perf_counter() - t0
        f.flush()
        print(f"build: indexing rule {rule_rate:,.0f} entries/s (Python, per message); key hashing "
              f"{a.entries / hash_s:,.0f} entries/s; C put {a.entries / put_s:,.0f} entries/s "
              f"({put_s:.2f} s for {a.entries:,})")

        # ---- compaction --------------------------------------------------------------------------
        f.sealed = True
        t0 = time.perf_counter()
        path = f.compact()
        compact_s = time.perf_counter() - t0
        size = os.path.getsize(path)
        print(f"compaction: {compact_s:.2f} s -> {size / 2**20:,.0f} MiB compacted file "
              f"({a.entries / compact_s:,.0f} entries/s)")

        # ---- upload vs plain copy ------------------------------------------------------------------
        backend = PosixBackend(os.path.join(work, "tier"))
        copy_to = os.path.join(work, "plain-copy")
        up, cp = [], []
        for rnd_ in range(3):                 # alternate, so neither profits from the other's cache
            t0 = time.perf_counter()
            shutil.copyfile(path, copy_to)
            with open(copy_to, "rb+") as fh:
                os.fsync(fh.fileno())
            cp.append(time.perf_counter() - t0)
            os.unlink(copy_to)
            backend.delete("idx/seg0")
            t0 = time.perf_counter()
            backend.upload("idx/seg0", path)
            up.append(time.perf_counter() - t0)
        print(f"upload (Posix backend, fsync'ed): {size / 2**20 / statistics.median(up):,.0f} MB/s; plain copy "
              f"(shutil.copyfile + fsync): {size / 2**20 / statistics.median(cp):,.0f} MB/s (median of 3 each)")

        # ---- queries -----------------------------------------------------------------------------
        rnd = random.Random(7)
        keys = []
        for _ in range(a.queries):
            i = rnd.randrange(messages)
            keys.append(f"UNIQ{i:012d}" if rnd.random() < 0.5 else f"order-{i // a.per_key}")
        hashes = [L.key_hash(TOPIC, k) for k in keys]

        def run(label: str, query) -> None:
            lat, reads, hits = [], [], 0
            for h in hashes:
                t = time.perf_counter()
                items, r = query(h)
                lat.append((time.perf_counter() - t) * 1e6)
                reads.append(r)
                hits += bool(items)
            assert hits == len(hashes), f"{label}: {len(hashes) - hits} keys not found"
            print(f"query {label:<10} p50 {pct(lat, .5):7.1f} us  p99 {pct(lat, .99):7.1f} us  "
                  f"range reads/query mean {statistics.mean(reads):.2f} max {max(reads)}")

        hi = 2 ** 62
        run("writable", lambda h: (X.query_chain(f._mm, a.slots, h, 0, hi, 32)[0], 0))
        f.became_compacted()
        run("compacted", lambda h: f.query(h, 0, hi, 32))
        f.became_uploaded(0, size)
        run("uploaded", lambda h: f.query(h, 0, hi, 32, backend, "idx/seg0"))
        f.close()
        backend.close()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
