"""Lite topics in the store (5.5 Lite Mode, RIP-83): a layer over the local store.

- ``names``: LMQ names (``%LMQ%$parent$lite``) and the lite-name rules;
- ``index``: :class:`LiteIndex`, per (parent, lite topic) the CommitLog offsets of its messages, fed by a
  dispatch listener on each LITE parent, kept in CommitLog order, rebuilt at start-up;
- ``view``: the store and topic interfaces POP reads lite topics through.

:class:`LiteStore` holds the three and feeds the index: at start for every LITE topic, later for a parent
that becomes LITE (the lite send hook calls :meth:`LiteStore.feed` before a parent's first lite message).
"""
from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING

from rmqd.store.lite.index import LiteIndex, LiteQueue  # noqa: F401 (the package's API)
from rmqd.store.lite.names import lmq_name, parse_lmq  # noqa: F401
from rmqd.store.lite.view import LiteStoreView, LiteTopicsView
from rmqd.store.topic_attributes import is_lite_topic

if TYPE_CHECKING:
    from rmqd.store.layer import StoreChain
    from rmqd.store.lite.topic_table import TopicTable

log = logging.getLogger(__name__)


class LiteStore:
    """The lite index over ``store``, its feed, and the views POP reads through."""

    def __init__(self, store: "StoreChain", topics: "TopicTable") -> None:
        self.store = store
        self.topics = topics
        self.index = LiteIndex(store, self._queue_count)
        self.store_view = LiteStoreView(store, self.index)
        self.topics_view = LiteTopicsView(topics)
        self._fed: set[str] = set()
        self._lock = threading.Lock()

    def _queue_count(self, parent: str) -> int:
        tc = self.topics.get(parent)
        return max(tc.read_queue_nums, tc.write_queue_nums) if tc is not None else 1

    def feed(self, parent: str) -> None:
        """Index ``parent``'s lite messages from now on (listener first, then a rebuild of what is stored)."""
        if parent in self._fed:
            return
        with self._lock:
            if parent in self._fed:
                return
            self.store.add_dispatch_listener(self.index.on_dispatch, topic=parent)
            self._fed.add(parent)
        self.index.rebuild(parent)

    def start(self) -> None:
        """Rebuild the index of every LITE topic (blocking; the broker's load runs it in an executor)."""
        for tc in list(self.topics.table.values()):
            if is_lite_topic(tc):
                self.feed(tc.topic_name)

    def shutdown(self) -> None:
        """Nothing to persist: the index is rebuilt from the parents' consume queues."""

    def trim(self) -> int:
        """Forget lite entries whose CommitLog file retention deleted; returns how many."""
        dropped = self.index.trim(self.store.commitlog_min_offset())
        if dropped:
            log.info("lite index: %d entries below the CommitLog's min offset dropped", dropped)
        return dropped
