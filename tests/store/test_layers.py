"""The store layer chain: build_store returns the outermost layer, every layer offers the whole
MessageStoreAPI, and calls reach the local store through the chain."""
import typing

from rmqd.store.api import MessageStoreAPI
from rmqd.store.compaction.store import CompactionStore
from rmqd.store.layer import StoreLayer
from rmqd.store.layers import build_store
from rmqd.store.message import MessageToStore
from rmqd.store.message_store import MessageStore, StoreConfig
from rmqd.config import broker_config_from, tier_config_from
from rmqd.store.tier.store import TieredStore


def _api_members() -> set[str]:
    names = {n for n in vars(MessageStoreAPI) if not n.startswith("_")}
    return names | set(typing.get_type_hints(MessageStoreAPI, localns={"StoreConfig": StoreConfig}))


def test_every_store_in_the_chain_offers_the_api():
    members = _api_members()
    assert {"get_messages", "put_message", "local_queue", "compaction", "tier", "config"} <= members
    for cls in (MessageStore, StoreLayer, CompactionStore, TieredStore):
        missing = {m for m in members - {"config"} if not hasattr(cls, m)}
        assert not missing, (cls.__name__, missing)


def test_build_store_returns_the_outermost_layer(tmp_path):
    props = {"messageStorePlugIn": "org.apache.rocketmq.tieredstore.TieredMessageStore",
             "tieredBackendServiceProvider": "org.apache.rocketmq.tieredstore.provider.MemoryFileSegment",
             "tieredStoreDispatchInterval": "3600000"}
    store = build_store(StoreConfig(str(tmp_path / "s"), mapped_file_size_commitlog=1 << 20,
                                    warm_mapped_pages=False), None, tier_config_from(broker_config_from(props)))
    assert isinstance(store, TieredStore) and isinstance(store.inner, CompactionStore)
    assert isinstance(store.inner.inner, MessageStore)
    assert store.tier is store and store.compaction is store.inner and store.message_store is store.inner.inner
    # the layers that work on the local store's queues got it from the builder
    assert store.local_store is store.message_store and store.inner.local_store is store.message_store
    assert store.config is store.message_store.config
    store.start()
    try:
        assert store.tier.started
        r = store.put_message(MessageToStore.create("T", 0, b"x", {"KEYS": "k"}))
        assert r.ok and store.get_max_offset("T", 0) == 1 and store.message_store.get_max_offset("T", 0) == 1
        assert store.local_queue("T", 0).max_offset == 1 and store.queue_keys() == [("T", 0)]
        assert len(store.query_message("T", "k", 4).messages) == 1
        g = store.get_messages("T", 0, 0, 4)
        assert g.message_count == 1 and store.stats.get_message_times_total == 1   # one read, counted once
    finally:
        store.shutdown()
    assert not store.tier.started and not store.message_store.put_engine.running


def test_local_store_alone_is_the_chain_end(tmp_path):
    s = MessageStore(StoreConfig(str(tmp_path / "s"), mapped_file_size_commitlog=1 << 20, warm_mapped_pages=False))
    assert s.message_store is s and s.compaction is None and s.tier is None
