"""Typed interface of tier_index.pyx (the tier's index files); see the .pyx for the behaviour."""
from collections.abc import Callable, Sequence
from typing import Optional

from _typeshed import ReadableBuffer, WriteableBuffer

# (hashes, topicId, queueId, offset, size, storeTime) of one message put into an index file
_IndexMessage = tuple[Sequence[int], int, int, int, int, int]
# (topicId, queueId, offset, size, timeDiff) of one index item found
_IndexItem = tuple[int, int, int, int, int]
_HashsetOrder = Callable[[list[str]], list[str]]


def put_batch(buf: WriteableBuffer, slots: int, max_items: int, begin_ts: int,
              messages: list[_IndexMessage]) -> int: ...
def init_header(buf: WriteableBuffer, begin_ts: int, max_items: int) -> None: ...
def compact(src: ReadableBuffer, dst: WriteableBuffer, slots: int, slot_lo: int = 0, slot_hi: int = -1,
            wpos: int = -1) -> int: ...
def query_chain(buf: ReadableBuffer, slots: int, h: int, t_lo: int, t_hi: int, max_count: int,
                max_hops: int = -1) -> tuple[list[_IndexItem], int]: ...
def filter_run(run: ReadableBuffer, h: int, begin_ts: int, t_lo: int, t_hi: int,
               max_count: int) -> list[_IndexItem]: ...
def undo_after(buf: WriteableBuffer, slots: int, max_items: int, keep: int, end_ts: int, used: int) -> int: ...
def record_index_fields(rec: ReadableBuffer) -> tuple[int, Optional[str], Optional[str]]: ...
def message_key_hashes(topic: str, keys: Optional[str], uniq: Optional[str],
                       hashset_order: _HashsetOrder) -> tuple[int, ...]: ...
def cq_units(entries: list[tuple[int, int, int]], count: int, base: int) -> bytes: ...
def index_batch(body: bytes, topic: str, topic_id: int, queue_id: int, base: int, hashset_order: _HashsetOrder,
                with_keys: bool = True) -> tuple[list[_IndexMessage], int, int, int, int]:
    """``(index messages for put_batch, min store time, max store time, first and last CommitLog offset)``."""
