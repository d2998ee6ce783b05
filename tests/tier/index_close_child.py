"""Child process of tests/tier/test_index_lifecycle.py: the tier index's compaction meets a close or a
second compaction, in a process of its own so that a use of an unmapped file (a SIGSEGV) fails the
test instead of killing pytest. argv: mode, work directory. Prints ``ok`` and exits 0 on success. Run as
``python -m tests.tier.index_close_child`` with tests.kit.processes.child_env().

Modes (each one crashed with SIGSEGV in ``IndexStoreFile.compact`` before the fix):

* ``close``: ``tier.index.close()`` (what ``TieredStore.shutdown`` does) from another thread while a
  compaction (``commit_now``) is between two of its pieces; then a restart must find every key.
* ``shutdown``: the whole ``store.shutdown()`` from another thread at the same point (an admin
  ``commitTier`` still running in a pool thread while the broker stops).
* ``race``: a second ``run_once`` (the index service's own thread) while ``commit_now``'s compaction
  is between pieces: both used to compact the same file, the first to finish closed it under the
  other.
* ``cython``: the tier index's C entry points given None or short buffers raise instead of reading
  through a NULL or past the end.
"""
from __future__ import annotations

import mmap
import os
import sys
import threading
import time

from tests.kit.waits import poll
from tests.tier.helpers import make_store, put, tier_props

TOPIC = "CloseTopic"
N = 60                       # 3 keys each: two index files of the helpers' 120 items


def keys_found(store) -> int:
    return len(store.tier.reads.tier_query(TOPIC, "shared", 10 * N, 0, 2 ** 62))


def run_interrupted(root: str, props: dict, mode: str) -> None:
    store = make_store(root, props)
    store.start()
    put(store, TOPIC, N)
    tier = store.tier
    other: list[threading.Thread] = []

    def hook(name: str) -> None:
        if name != "index.compacting.partial" or other:
            return
        if mode == "close":
            t = threading.Thread(target=tier.index.close, name="closer")
        elif mode == "shutdown":
            t = threading.Thread(target=store.shutdown, name="shutdown")
        else:
            t = threading.Thread(target=tier.index.run_once, name="rmqd-tier-index")
        other.append(t)
        t.start()
        if mode == "race":
            time.sleep(0.1)          # the other step is now waiting for (or, unfixed, inside) its compaction
        else:                        # the close has begun (fixed: it waits for this step; unfixed: done)
            poll(lambda: not t.is_alive() or getattr(tier.index, "closing", False), 5.0, interval=0.005)

    tier.step_hook = hook
    tier.commit_now()
    assert other, "the compaction never reached a partial step"
    other[0].join(30)
    assert not other[0].is_alive()
    if mode == "race":
        tier.step_hook = None
        tier.commit_now()
        assert all(f["state"] == "uploaded" for f in tier.index.status()), tier.index.status()
        assert keys_found(store) == N
    if mode != "shutdown":
        store.shutdown()
    # a restart redoes what the close interrupted, and loses no key
    store = make_store(root, props)
    store.start()
    try:
        store.tier.commit_now()
        assert all(f["state"] == "uploaded" for f in store.tier.index.status()), store.tier.index.status()
        assert keys_found(store) == N
        scratch = os.path.join(root, "tiered_index_file", "compacting")
        assert not os.path.isdir(scratch) or not os.listdir(scratch)
    finally:
        store.shutdown()


def run_cython() -> None:
    from rmqd.cython_ext import store_commitlog as cl
    from rmqd.cython_ext import tier_index as ix
    dst = mmap.mmap(-1, 4096)
    calls = [
        (TypeError, lambda: ix.compact(None, dst, 16)),
        (TypeError, lambda: ix.compact(bytearray(4096), None, 16)),
        (TypeError, lambda: ix.query_chain(None, 16, 1, 0, 1, 10)),
        (TypeError, lambda: ix.undo_after(None, 16, 8, 0, 0, 0)),
        (TypeError, lambda: ix.put_batch(None, 16, 8, 0, [((1,), 0, 0, 0, 1, 0)])),
        (TypeError, lambda: ix.init_header(None, 0, 8)),
        (TypeError, lambda: ix.filter_run(None, 1, 0, 0, 1, 10)),
        (TypeError, lambda: cl.msync_range(None, 0, 10)),
        (TypeError, lambda: cl.scan_records(None, 0, 10, False, 100)),
        (ValueError, lambda: ix.compact(b"", dst, 16)),
        (ValueError, lambda: ix.compact(b"\0" * 24 + b"\0\0\x10\0" + b"\0" * 200, dst, 16)),   # 4096 items
        (ValueError, lambda: ix.query_chain(b"\0" * 40, 16, 1, 0, 1, 10)),
        (ValueError, lambda: ix.undo_after(bytearray(100), 16, 8, 0, 0, 0)),
        (ValueError, lambda: ix.init_header(bytearray(10), 0, 8)),
    ]
    for i, (exc, call) in enumerate(calls):
        try:
            call()
        except exc:
            continue
        raise AssertionError(f"call {i} did not raise {exc.__name__}")
    # a chain link past the item count ends the chain (a damaged file reads nothing outside)
    src = bytearray(28 + 16 * 8 + 4 * 32)
    src[24:28] = (2).to_bytes(4, "big")                                # two items
    src[28:32] = (1).to_bytes(4, "big")                                # slot 0 -> item 1
    item1 = 28 + 16 * 8 + 32
    src[item1 + 28:item1 + 32] = (1_000_000).to_bytes(4, "big")        # item 1 -> item 1000000
    out = bytearray(28 + 16 * 8 + 2 * 28)
    assert ix.compact(bytes(src), out, 16) == 28 + 16 * 8 + 28
    items, hops = ix.query_chain(bytes(src), 16, 0, 0, 2 ** 62, 10)
    assert hops == 1


def main() -> int:
    mode, work = sys.argv[1], sys.argv[2]
    if mode == "cython":
        run_cython()
    else:
        run_interrupted(os.path.join(work, "store"), tier_props("posix", os.path.join(work, "tier")), mode)
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
