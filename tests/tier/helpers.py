"""Helpers shared by the tier tests: backends by kind, a store with the tier, messages."""
from __future__ import annotations

from typing import Optional

from rmqd.store.layers import build_store
from rmqd.store.message import MessageToStore
from rmqd.store.message_store import MessageStore, StoreConfig
from rmqd.store.tier.backend import TierBackend, make_backend
from rmqd.config import broker_config_from, tier_config_from

SEG = 64 * 1024


def make_backend_of(kind: str, path: str, endpoint: str = "", bucket: str = "") -> TierBackend:
    if kind == "s3":
        return make_backend("s3", "", endpoint, bucket, "testing", "testing")
    return make_backend(kind, path)


def tier_props(kind: str, tier_dir: str, endpoint: str = "", bucket: str = "", **extra) -> dict:
    props = {"messageStorePlugIn": "org.apache.rocketmq.tieredstore.TieredMessageStore",
             "tieredBackendServiceProvider": {"posix": "org.apache.rocketmq.tieredstore.provider.PosixFileSegment",
                                              "memory": "org.apache.rocketmq.tieredstore.provider.MemoryFileSegment",
                                              "s3": "s3"}[kind],
             "tieredStoreFilePath": tier_dir, "objectStoreEndpoint": endpoint, "objectStoreBucket": bucket,
             "objectStoreAccessKey": "testing", "objectStoreSecretKey": "testing",
             "tieredStoreIndexFileMaxHashSlotNum": "64", "tieredStoreIndexFileMaxIndexNum": "120",
             "tieredStoreGroupCommitTimeout": "0", "tieredStoreGroupCommitCount": "50",
             "tieredStoreDispatchInterval": "3600000"}
    props.update({k: str(v) for k, v in extra.items()})
    return props


def make_store(root: str, props: dict, backend: Optional[TierBackend] = None, **store_kw) -> MessageStore:
    """A local store (64 KiB CommitLog files, retention whenever asked; ``store_kw`` overrides
    StoreConfig fields) with the tier of ``props``; the copier's thread sleeps (tests drive
    ``tier.dispatcher``/``commit_now`` themselves)."""
    kw = dict(mapped_file_size_commitlog=SEG, mapped_file_size_consume_queue=100 * 20, file_reserved_time_hours=0,
              clean_resource_interval_ms=3_600_000, warm_mapped_pages=False)
    cfg = StoreConfig(store_root_dir=root, **{**kw, **store_kw})
    store = build_store(cfg, None, tier_config_from(broker_config_from(props)))
    if backend is not None:
        store.tier.backend = backend
    store.tier.tier_config.index_service_interval_ms = 3_600_000
    return store


def put(store: MessageStore, topic: str, n: int, queues: int = 2, start: int = 0, body: int = 300,
        shared_key: str = "shared") -> list:
    out = []
    for i in range(start, start + n):
        m = MessageToStore.create(topic, i % queues, b"%06d" % i + b"x" * body,
                                  {"KEYS": f"key-{i} {shared_key}", "UNIQ_KEY": f"UNIQ{i:08d}", "TAGS": f"tag{i % 3}"},
                                  born_host=("127.0.0.1", 5000), store_host=("127.0.0.1", 10911))
        r = store.put_message(m)
        assert r.ok, r
        out.append(r)
    return out
