"""Typed interface of store_get.pyx (the pull fast path); see the .pyx for the behaviour."""
import enum
from collections.abc import Sequence
from typing import Optional

from rmqd.store.commitlog import CommitLog
from rmqd.store.consume_queue import ConsumeQueue


class GetMessageStatus(enum.IntEnum):
    FOUND = 0
    NO_MATCHED_MESSAGE = 1
    MESSAGE_WAS_REMOVING = 2
    OFFSET_FOUND_NULL = 3
    OFFSET_OVERFLOW_BADLY = 4
    OFFSET_OVERFLOW_ONE = 5
    OFFSET_TOO_SMALL = 6
    NO_MATCHED_LOGIC_QUEUE = 7
    NO_MESSAGE_IN_QUEUE = 8


def read_resident(cq: ConsumeQueue, commitlog: CommitLog, offset: int, max_count: int, max_bytes: int,
                  codes: Optional[Sequence[int]], hot_limit: int,
                  scan_bytes: int = 16000) -> Optional[tuple[GetMessageStatus, int, int, bytes]]:
    """``(status, next_begin_offset, count, body)`` or None when the fast path cannot serve the pull."""
