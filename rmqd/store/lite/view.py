"""The store and topic interfaces with lite topics in them, for :class:`rmqd.pop.PopService`.

:class:`LiteStoreView` answers the queue calls POP makes (``get_max_offset``, ``get_min_offset``,
``get_messages``, ``get_message_store_timestamp``) for an LMQ name ``%LMQ%$parent$lite`` (queue 0) from the
lite index, reading each record by its CommitLog offset through the store's ``read_message``; every
other call goes to the store unchanged. :class:`LiteTopicsView` gives an LMQ of a LITE parent a one-queue
topic config (the parent's permission), so POP's checks and checkpoints treat it as a queue like any
other — its consumer offsets, checkpoints and revive records are the ordinary ones, keyed by the LMQ name.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Optional

from rmqd.store.layer import StoreLayer
from rmqd.store.lite.index import LiteIndex
from rmqd.store.lite.names import parse_lmq
from rmqd.store.message_store import GetMessageResult, GetMessageStatus
from rmqd.store.results import out_of_range
from rmqd.store.metadata import PERM_READ, PERM_WRITE, TopicConfig
from rmqd.store.topic_attributes import is_lite_topic

if TYPE_CHECKING:
    from collections.abc import Mapping

    from rmqd.store.api import MessageFilter
    from rmqd.store.layer import StoreChain
    from rmqd.store.lite.topic_table import TopicTable

_S = GetMessageStatus


def record_store_time(record: bytes) -> int:
    """A stored record's storeTimestamp."""
    sys_flag = int.from_bytes(record[36:40], "big")
    at = 48 + (20 if sys_flag & 0x10 else 8)
    return int.from_bytes(record[at:at + 8], "big", signed=True)


class LiteStoreView(StoreLayer):
    """The message store, with lite topics readable as LMQs (see the module docstring): a layer over
    ``store`` that answers the four queue calls for LMQ names and passes everything else down."""

    def __init__(self, store: "StoreChain", index: LiteIndex) -> None:
        super().__init__(store)
        self.index = index

    def _lite(self, topic: str) -> Optional[tuple[str, str]]:
        return parse_lmq(topic) if topic[:1] == "%" else None

    def _lite_bounds(self, parent_lite: tuple[str, str], queue_id: int) -> tuple[int, int]:
        """(min, max) offset of a lite queue: (0, 0) when the index has none, or for a queue id other than 0."""
        q = self.index.queue(*parent_lite)
        return (q.min_offset, q.max_offset) if q is not None and queue_id == 0 else (0, 0)

    def get_max_offset(self, topic: str, queue_id: int) -> int:
        pl = self._lite(topic)
        if pl is None:
            return self.inner.get_max_offset(topic, queue_id)
        return self._lite_bounds(pl, queue_id)[1]

    def get_min_offset(self, topic: str, queue_id: int) -> int:
        pl = self._lite(topic)
        if pl is None:
            return self.inner.get_min_offset(topic, queue_id)
        return self._lite_bounds(pl, queue_id)[0]

    def get_message_store_timestamp(self, topic: str, queue_id: int, queue_offset: int) -> int:
        pl = self._lite(topic)
        if pl is None:
            return self.inner.get_message_store_timestamp(topic, queue_id, queue_offset)
        q = self.index.queue(*pl)
        if q is None or queue_id != 0 or not q.min_offset <= queue_offset < q.max_offset:
            return -1
        if queue_offset == q.max_offset - 1 and q.last_store_ts:
            return q.last_store_ts
        rec = self.inner.read_message(q.phys[queue_offset - q.base])
        return record_store_time(rec) if rec is not None else -1

    def get_messages(self, topic: str, queue_id: int, offset: int, max_nums: int,
                     max_total_bytes: Optional[int] = None,
                     message_filter: Optional["MessageFilter"] = None) -> GetMessageResult:
        pl = self._lite(topic)
        if pl is None:
            return self.inner.get_messages(topic, queue_id, offset, max_nums, max_total_bytes, message_filter)
        q = self.index.queue(*pl)
        if q is None or queue_id != 0:
            return GetMessageResult(_S.NO_MATCHED_LOGIC_QUEUE, 0, 0, 0)
        mn, mx = q.min_offset, q.max_offset
        outside = out_of_range(offset, mn, mx)
        if outside is not None:
            return outside
        res = GetMessageResult(_S.NO_MATCHED_MESSAGE, offset, mn, mx)
        limit = max_total_bytes if max_total_bytes is not None else 1 << 62
        total, off = 0, offset
        while off < mx and len(res.buffers) < max_nums:
            try:
                phys = q.phys[off - q.base]
            except IndexError:          # trimmed meanwhile
                break
            rec = self.inner.read_message(phys)
            if rec is None:                          # its CommitLog file is gone
                if not res.buffers:
                    res.status = _S.MESSAGE_WAS_REMOVING
                off += 1
                continue
            if res.buffers and total + len(rec) > limit:
                break
            off += 1
            res.buffers.append(rec)
            res.queue_offsets.append(off - 1)
            total += len(rec)
            res.status = _S.FOUND
        res.next_begin_offset = off
        res.buffer_total_size = total
        return res


class LiteTopicsView:
    """The topic config manager, with each LMQ of a LITE parent as a one-queue topic."""

    def __init__(self, topics: "TopicTable") -> None:
        self._topics = topics

    def get(self, name: str) -> Optional[TopicConfig]:
        tc = self._topics.get(name)
        if tc is not None or name[:1] != "%":
            return tc
        pl = parse_lmq(name)
        if pl is None:
            return None
        parent = self._topics.get(pl[0])
        if parent is None or not is_lite_topic(parent):
            return None
        return TopicConfig(name, 1, 1, parent.perm)

    # ---- the other calls POP makes: to the topic table unchanged
    @property
    def table(self) -> "Mapping[str, TopicConfig]":
        return self._topics.table

    def add_system_topic(self, tc: TopicConfig) -> None:
        self._topics.add_system_topic(tc)

    def update(self, tc: TopicConfig) -> None:
        self._topics.update(tc)

    def create_topic_in_send_message_back_method(self, topic: str, client_queue_nums: int,
                                                 perm: int = PERM_READ | PERM_WRITE,
                                                 topic_sys_flag: int = 0) -> TopicConfig:
        return self._topics.create_topic_in_send_message_back_method(topic, client_queue_nums, perm, topic_sys_flag)
