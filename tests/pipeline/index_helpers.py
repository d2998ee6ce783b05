"""Stores of the bulk-index tests: one local store filled once, and copies of it opened with a Posix
tier whose clock is frozen (the index files' names and time diffs come from the broker's clock)."""
from __future__ import annotations

import os
import random
import shutil

from rmqd.store.message import MessageToStore
from rmqd.store.message_store import MessageStore, StoreConfig
from tests.tier.helpers import make_store, tier_props
from rmqd.common.fileutil import copy_sparse

T_PUT = 1_709_337_540_000           # store times of the messages (37 ms apart)
T_INDEX = 1_709_400_000_000         # the frozen clock of the copier round and of the job
TOPICS = ["IdxA", "IdxB"]
SLOTS, MAX_ITEMS = 64, 120


def fill_base(root: str, n: int = 420, seed: int = 5) -> None:
    """Messages over two topics and three queues each: no keys, one key, several KEYS tokens, UNIQ_KEYs,
    more than 8 keys (HashSet resize order), and one message with more keys than a file takes."""
    clock = {"t": T_PUT}

    def now() -> int:
        clock["t"] += 37
        return clock["t"]
    store = MessageStore(StoreConfig(root, mapped_file_size_commitlog=64 * 1024, mapped_file_size_consume_queue=100 * 20,
                                     message_index_enable=False, clean_resource_interval_ms=3_600_000,
                                     warm_mapped_pages=False, clock=now))
    store.start()
    rnd = random.Random(seed)
    for i in range(n):
        props = {"TAGS": f"t{i % 3}"}
        if i % 5:
            props["KEYS"] = (f"k{i}" if i % 3 else f"k{i} shared g{i % 7}") if i % 41 else \
                " ".join(f"m{i}x{j}" for j in range(12))
        if i % 4 == 0:
            props["UNIQ_KEY"] = f"AC11000100002A9F{i:016X}"
        if i == 200:
            props["KEYS"] = " ".join(f"huge{j}" for j in range(MAX_ITEMS + 5))
        m = MessageToStore.create(TOPICS[i % 2], (i // 2) % 3, rnd.randbytes(rnd.randint(10, 200)), props,
                                  born_host=("127.0.0.1", 5000), store_host=("127.0.0.1", 10911))
        assert store.put_message(m).ok
    store.shutdown()


def copy_store(base: str, root: str) -> str:
    shutil.copytree(base, root, ignore=shutil.ignore_patterns("lock"), copy_function=copy_sparse)
    return root


def tier_store(root: str, tier_dir: str, index: bool) -> MessageStore:
    """The store at ``root`` with a Posix tier in ``tier_dir``; its copier takes every queue in one round
    (group commits of 1024, unforced waits off) and its clock stays at T_INDEX."""
    props = tier_props("posix", tier_dir, tieredStoreIndexFileMaxHashSlotNum=SLOTS,
                       tieredStoreIndexFileMaxIndexNum=MAX_ITEMS, tieredStoreGroupCommitCount=1024,
                       messageIndexEnable="true" if index else "false")
    return make_store(root, props, clock=lambda: T_INDEX)


def uploaded_files(store: MessageStore) -> dict[int, bytes]:
    """beginTs -> the bytes of each uploaded index file, read from the backend."""
    idx = store.tier.index
    return {f.begin_ts: store.tier.backend.read(idx.segment_path(f.seg_base), 0, f.seg_size)
            for f in idx.files if f.state == "uploaded"}


def upload_all(store: MessageStore) -> None:
    for _ in range(1000):
        if not store.tier.index.run_once():
            return
    raise AssertionError("the index service did not settle")


def local_copy_paths(root: str) -> list[str]:
    return sorted(os.listdir(os.path.join(root, "tiered_index_file", "compacted")))


def unindexed_tier(base: str, root: str) -> str:
    """A copy of the base store whose Posix tier (``<root>-tier``) holds every message, un-indexed."""
    copy_store(base, root)
    store = tier_store(root, root + "-tier", index=False)
    store.start()
    store.tier.dispatcher.run_once(force=True)
    store.shutdown()
    return root
