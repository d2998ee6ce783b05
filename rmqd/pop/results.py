"""What a pop hands out: :class:`PoppedMessage` (one message and the extraInfo to ack it by) and
:class:`PopResult` (a batch, with the offset infos of the response header)."""
from __future__ import annotations

from dataclasses import dataclass, field

from rmqd.pop.extra_info import ExtraInfo, msg_offset_info, start_offset_info


@dataclass
class PoppedMessage:
    record: bytes            # the stored record (CommitLog bytes)
    topic: str               # the topic it was read from (a POP retry topic for redeliveries)
    queue_id: int
    queue_offset: int
    extra: ExtraInfo         # what the client sends back to ack it
    attempt: int = 0         # orderly redelivery: the delivery attempt (the record's reconsumeTimes + 1 otherwise)


@dataclass
class PopResult:
    pop_time: int
    invisible_time: int
    revive_qid: int
    rest_num: int = 0
    messages: list[PoppedMessage] = field(default_factory=list)
    start_infos: list[tuple[str, int, int]] = field(default_factory=list)         # (flag, qid, start offset)
    msg_infos: list[tuple[str, int, list[int]]] = field(default_factory=list)     # (flag, qid, offsets)
    order_infos: list[tuple[str, int, int]] = field(default_factory=list)     # orderly pops: (flag, qid, redeliveries)
    visited: int = 0         # pop_queues: how many of the given queues it read before the batch was full

    @property
    def start_offset_info(self) -> str:
        return start_offset_info(self.start_infos)

    @property
    def msg_offset_info(self) -> str:
        return msg_offset_info(self.msg_infos)

    @property
    def order_count_info(self) -> str:
        """``flag qid count;…`` (Java ``orderCountInfo``): how often each queue's batch was handed out before."""
        return ";".join(f"{flag} {qid} {n}" for flag, qid, n in self.order_infos)

    def body(self) -> bytes:
        return b"".join(m.record for m in self.messages)
