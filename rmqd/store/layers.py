"""The broker's store, built in one place (Java ``MessageStoreFactory.build``): the local store and the
layers that wrap it.

    TieredStore          (when messageStorePlugIn asks for the tier)
      └ CompactionStore  (always; serves COMPACTION topics)
          └ MessageStore (the local CommitLog, consume queues and index)

Each layer is a :class:`~rmqd.store.layer.StoreLayer` over the next and offers the whole
:class:`~rmqd.store.api.MessageStoreAPI`, so processors keep talking to one narrow store interface: the
outermost layer, which this returns. The chain fixes the read fall-through: a compaction topic's reads
end in the compaction layer (its history is the compaction log), every other read goes to the local
store unless the tier's rules (:mod:`rmqd.store.tier.fallthrough`) send it to the tier.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Optional

from rmqd.store.compaction.store import CompactionConfig, CompactionStore
from rmqd.store.message_store import MessageStore, StoreConfig
from rmqd.store.tier.config import TierConfig

if TYPE_CHECKING:
    from rmqd.store.layer import StoreChain


def build_store(store_config: StoreConfig,
                compaction_config: Optional[CompactionConfig] = None,
                tier_config: Optional[TierConfig] = None) -> "StoreChain":
    """The local store wrapped by the layers that are switched on; returns the outermost. Each layer that
    works on the local store's queues and CommitLog gets it here, as a LocalStoreAPI."""
    local = MessageStore(store_config)
    store: StoreChain = CompactionStore(local, local, compaction_config or CompactionConfig())
    if tier_config is not None and tier_config.enabled:
        from rmqd.store.tier.store import TieredStore
        store = TieredStore(store, local, tier_config)
    return store
