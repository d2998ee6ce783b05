"""A broker's POP_MESSAGE answer read as the 5.x proxy reads it (its remoting client's ``processPopResponse``).

The answer's body is the popped records; its header says when they were popped (``popTime``), for how long they
are invisible, the revive queue, and per queue (``retryFlag queueId …``, ``;``-joined) the checkpoint's start
offset (``startOffsetInfo``), the offsets popped (``msgOffsetInfo``) and, for an orderly pop, how often each queue's
or message's batch was handed out before (``orderCountInfo``: ``flag qid count`` or ``flag qid offset count``).
From these each message's ``extraInfo`` is built; a record that already carries ``POP_CK`` (a Java broker puts it
on retry messages it hands out under their original topic) keeps its own. The receipt handle a 5.x client gets is
the extraInfo and the record's commit-log offset (:class:`rmqd.pop.extra_info.ReceiptHandle`).
"""
from __future__ import annotations

import dataclasses
from typing import Optional

from rmqd.pop.extra_info import ExtraInfo, ReceiptHandle, retry_flag
from rmqd.store.message import StoredMessage, decode_messages

POP_CK = "POP_CK"


@dataclasses.dataclass
class PoppedRecord:
    message: StoredMessage
    handle: ReceiptHandle
    attempt: int                    # an orderly pop's delivery attempt (its consume count + 1); 0 otherwise


def _infos(text: Optional[str]) -> list[list[str]]:
    return [part.split(" ") for part in (text or "").split(";") if part.strip()]


def parse_start_offsets(text: Optional[str]) -> dict[tuple[str, int], int]:
    """``startOffsetInfo``: (retry flag, queue id) -> the checkpoint's start offset."""
    out: dict[tuple[str, int], int] = {}
    for f in _infos(text):
        if len(f) != 3:
            raise ValueError(f"bad startOffsetInfo: {text!r}")
        out[(f[0], int(f[1]))] = int(f[2])
    return out


#: an ``orderCountInfo`` key: (flag, qid) for a queue, (flag, qid, offset) for one message
OrderKey = tuple[str, int] | tuple[str, int, int]


def parse_order_counts(text: Optional[str]) -> dict[OrderKey, int]:
    """``orderCountInfo``: (flag, qid) -> count for a queue, (flag, qid, offset) -> count for one message."""
    out: dict[OrderKey, int] = {}
    for f in _infos(text):
        if len(f) == 3:
            out[(f[0], int(f[1]))] = int(f[2])
        elif len(f) == 4:
            out[(f[0], int(f[1]), int(f[2]))] = int(f[3])
        else:
            raise ValueError(f"bad orderCountInfo: {text!r}")
    return out


def popped_records(ext: dict[str, str], body: bytes, broker_name: str) -> list[PoppedRecord]:
    """The messages of a POP_MESSAGE answer (``ext``: its header) with their receipt handles. Raises ValueError
    for an answer that does not hold together (a record whose queue has no start offset)."""
    starts = parse_start_offsets(ext.get("startOffsetInfo"))
    orders = parse_order_counts(ext.get("orderCountInfo"))
    pop_time, invisible, revive = int(ext.get("popTime", 0)), int(ext.get("invisibleTime", 0)), \
        int(ext.get("reviveQid", 0))
    out: list[PoppedRecord] = []
    for m in decode_messages(body) if body else ():
        ck = m.properties.get(POP_CK)
        if ck:
            extra = ExtraInfo.parse(ck)
            if extra.queue_offset < 0:
                extra = dataclasses.replace(extra, queue_offset=m.queue_offset)
            flag = extra.retry
        else:
            flag = retry_flag(m.topic)
            start = starts.get((flag, m.queue_id))
            if start is None:
                raise ValueError(f"popped {m.topic}@{m.queue_id}:{m.queue_offset} has no startOffsetInfo")
            extra = ExtraInfo(start, pop_time, invisible, revive, flag, broker_name, m.queue_id, m.queue_offset)
        count = orders.get((flag, m.queue_id, m.queue_offset), orders.get((flag, m.queue_id)))
        attempt = count + 1 if count is not None else 0
        out.append(PoppedRecord(m, ReceiptHandle(extra, m.commit_log_offset), attempt))
    return out
