"""One pop's checkpoint and the revive-log records that make it durable.

A checkpoint (Java ``PopCheckPoint``) says: at ``pop_time`` the queue ``topic``/``queue_id`` gave
``group`` the messages at ``offsets`` (from ``start_offset``), invisible for ``invisible_time`` ms.
Acks set bits; once every bit is set the checkpoint is done.  If its deadline passes first, the
revive service puts the un-acked messages back (retry topic, or DLQ after the max attempts).

Records in the revive topic (JSON bodies, tagged like Java's): ``ck`` (Java's field names
``so pt it n q t c d bn``, plus ``rq`` and, for orderly pops, ``o``/``at``), ``ack`` (``so pt q t c bn ao``) and ``bAck`` (the same with
``aol``, a list of acked offsets; also written after a revive, so a replay does not revive twice).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import orjson

from rmqd.store.config import wall_clock_ms

CK_TAG, ACK_TAG, BATCH_ACK_TAG = "ck", "ack", "bAck"

CkKey = tuple[str, str, int, int, int]  # (topic, group, queue_id, start_offset, pop_time)
OrderKey = tuple[str, str, int]         # (topic, group, queue_id): an orderly queue of a group
now_ms = wall_clock_ms                  # the POP clock: wall time in ms


@dataclass
class PopCheckPoint:
    topic: str
    group: str
    queue_id: int
    start_offset: int
    pop_time: int
    invisible_time: int
    revive_qid: int
    broker_name: str
    offsets: list[int]
    acked: set[int] = field(default_factory=set)
    revive_offset: int = -1          # queue offset of its ``ck`` record in the revive queue
    order: bool = False              # an orderly pop: the queue stays locked until it is acked, no revive
    attempt: int = 0                 # orderly redeliveries so far (delivery attempt = attempt + 1)
    ck_records: int = 1              # its ``ck`` records in the revive log (renewals add one each)
    ack_records: int = 0             # the ``ack``/``bAck`` records written for it
    memory: bool = False             # 5.5 lite: kept in memory only (no revive records); acks commit the offset
    next_offset: int = -1            # memory checkpoints: the queue offset after the batch's read

    @property
    def key(self) -> CkKey:
        return (self.topic, self.group, self.queue_id, self.start_offset, self.pop_time)

    @property
    def deadline(self) -> int:
        return self.pop_time + self.invisible_time

    def unacked(self) -> list[int]:
        return [o for o in self.offsets if o not in self.acked]

    def done(self) -> bool:
        return len(self.acked) >= len(self.offsets) and all(o in self.acked for o in self.offsets)

    def ck_record(self) -> bytes:
        d = {"so": self.start_offset, "pt": self.pop_time, "it": self.invisible_time, "n": len(self.offsets),
             "q": self.queue_id, "t": self.topic, "c": self.group, "d": [o - self.start_offset for o in self.offsets],
             "bn": self.broker_name, "rq": self.revive_qid}
        if self.order:
            d["o"], d["at"] = 1, self.attempt
        return orjson.dumps(d)

    @classmethod
    def from_ck_record(cls, body: bytes, revive_offset: int) -> "PopCheckPoint":
        d = orjson.loads(body)
        so = int(d["so"])
        return cls(d["t"], d["c"], int(d["q"]), so, int(d["pt"]), int(d["it"]), int(d.get("rq", 0)),
                   d.get("bn", ""), [so + int(x) for x in d["d"]], revive_offset=revive_offset,
                   order=bool(d.get("o")), attempt=int(d.get("at", 0)))


def ack_record(key: CkKey, broker_name: str, offsets: list[int]) -> tuple[str, bytes]:
    """(tag, body) of an ``ack`` (one offset) or ``bAck`` record."""
    topic, group, queue_id, so, pt = key
    d = {"so": so, "pt": pt, "q": queue_id, "t": topic, "c": group, "bn": broker_name}
    if len(offsets) == 1:
        d["ao"] = offsets[0]
        return ACK_TAG, orjson.dumps(d)
    d["aol"] = list(offsets)
    return BATCH_ACK_TAG, orjson.dumps(d)


def parse_ack_record(body: bytes) -> tuple[CkKey, list[int]]:
    d = orjson.loads(body)          # the record's JSON object; a malformed one raises (KeyError, TypeError, ...)
    key: CkKey = (d["t"], d["c"], int(d["q"]), int(d["so"]), int(d["pt"]))
    offsets = d.get("aol")
    return key, [int(o) for o in offsets] if offsets is not None else [int(d["ao"])]
