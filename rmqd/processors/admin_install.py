"""Installs every admin processor family and the broker stats on a BrokerController."""
from __future__ import annotations

from typing import TYPE_CHECKING

from rmqd.broker import stats as broker_stats
from rmqd.processors import admin_broker, admin_compaction, admin_group, admin_store, admin_tier, admin_topic

if TYPE_CHECKING:
    from rmqd.broker_controller import BrokerController


def install(broker: "BrokerController") -> None:
    broker_stats.install(broker)
    broker.admin_topic_processor = admin_topic.install(broker)
    broker.admin_group_processor = admin_group.install(broker)
    broker.admin_broker_processor = admin_broker.install(broker)
    broker.admin_store_processor = admin_store.install(broker)
    broker.admin_compaction_processor = admin_compaction.install(broker)
    broker.admin_tier_processor = admin_tier.install(broker)
