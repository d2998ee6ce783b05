"""The broker's store, built in one place: the local MessageStore and the layers over it.

RocketMQ's order: the tiered store wraps the default store, and the default store hands
compaction-topic reads to its compaction store. rmqd builds the same chain here, each layer
switched on by broker.conf, each offering the local store's read/write interface (and delegating
what it does not change), so processors keep talking to one narrow store interface.
"""
from __future__ import annotations

from typing import Optional

from rmqd.store.compaction.store import CompactionConfig, CompactionStore
from rmqd.store.message_store import MessageStore, StoreConfig
from rmqd.store.tier.config import TierConfig


def build_store(store_config: StoreConfig,
                compaction_config: Optional[CompactionConfig] = None,
                tier_config: Optional[TierConfig] = None) -> MessageStore:
    """The local store, wrapped by the layers that are switched on."""
    store = MessageStore(store_config)
    store.compaction = CompactionStore(store, compaction_config or CompactionConfig())
    if tier_config is not None and tier_config.enabled:
        from rmqd.store.tier.store import TieredStore
        store.tier = TieredStore(store, tier_config)
    return store
