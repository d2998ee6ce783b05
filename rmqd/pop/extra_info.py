"""The text formats POP puts on the wire (Java ``ExtraInfoUtil``, ``ReceiptHandle``).

``extraInfo`` (the client's ``POP_CK`` property, sent back with ACK / CHANGE_INVISIBLETIME):
``ckQueueOffset popTime invisibleTime reviveQid retryFlag brokerName queueId msgQueueOffset``.
The pop response does not carry it; it carries ``startOffsetInfo`` (``flag qid start``) and
``msgOffsetInfo`` (``flag qid o1,o2``), ``;``-joined per queue, from which the client builds it.
A gRPC receipt handle is the extraInfo plus `` commitLogOffset``.
"""
from __future__ import annotations

from dataclasses import dataclass

from rmqd.common.constants import RETRY_GROUP_TOPIC_PREFIX
NORMAL_TOPIC, RETRY_TOPIC_V1, RETRY_TOPIC_V2 = "0", "1", "2"


def pop_retry_topic(group: str, topic: str) -> str:
    """The POP retry topic of ``topic`` for ``group`` (Java ``KeyBuilder.buildPopRetryTopicV1``)."""
    return f"{RETRY_GROUP_TOPIC_PREFIX}{group}_{topic}"


def original_topic_of_pop_retry(retry_topic: str, group: str) -> str:
    """The topic a POP retry topic of ``group`` (V1 ``%RETRY%group_topic`` or V2 ``%RETRY%group+topic``) retries;
    ``retry_topic`` itself when it is not one of them."""
    for sep in ("_", "+"):
        prefix = f"{RETRY_GROUP_TOPIC_PREFIX}{group}{sep}"
        if retry_topic.startswith(prefix):
            return retry_topic[len(prefix):]
    return retry_topic


def retry_flag(topic: str) -> str:
    """``retryFlag`` of a topic: 0 normal, 1 ``%RETRY%group_topic``, 2 ``%RETRY%group+topic``."""
    if not topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
        return NORMAL_TOPIC
    return RETRY_TOPIC_V2 if "+" in topic else RETRY_TOPIC_V1


def real_topic(topic: str, group: str, flag: str) -> str:
    """The topic a checkpoint lives in, from the request's topic and the retry flag (Java ``getRealTopic``)."""
    if flag == RETRY_TOPIC_V1:
        return f"{RETRY_GROUP_TOPIC_PREFIX}{group}_{topic}"
    if flag == RETRY_TOPIC_V2:
        return f"{RETRY_GROUP_TOPIC_PREFIX}{group}+{topic}"
    return topic


@dataclass(frozen=True)
class ExtraInfo:
    """One parsed ``extraInfo``."""

    ck_queue_offset: int
    pop_time: int
    invisible_time: int
    revive_qid: int
    retry: str
    broker_name: str
    queue_id: int
    queue_offset: int = -1

    def encode(self) -> str:
        return (f"{self.ck_queue_offset} {self.pop_time} {self.invisible_time} {self.revive_qid} {self.retry} "
                f"{self.broker_name} {self.queue_id} {self.queue_offset}")

    @classmethod
    def parse(cls, text: str) -> "ExtraInfo":
        """Raises ValueError when ``text`` is not an extraInfo (fewer than 7 fields, bad numbers)."""
        f = (text or "").split(" ")
        if len(f) < 7:
            raise ValueError(f"bad extraInfo: {text!r}")
        return cls(int(f[0]), int(f[1]), int(f[2]), int(f[3]), f[4], f[5], int(f[6]),
                   int(f[7]) if len(f) > 7 and f[7] else -1)


@dataclass(frozen=True)
class ReceiptHandle:
    """A gRPC receipt handle: the message's extraInfo and its commit-log offset."""

    extra: ExtraInfo
    commit_log_offset: int

    def encode(self) -> str:
        return f"{self.extra.encode()} {self.commit_log_offset}"

    @classmethod
    def parse(cls, text: str) -> "ReceiptHandle":
        """Raises ValueError for anything but the 9 fields rmqd hands out."""
        head, sep, tail = (text or "").rpartition(" ")
        if not sep:
            raise ValueError(f"bad receipt handle: {text!r}")
        extra = ExtraInfo.parse(head)
        if extra.queue_offset < 0:
            raise ValueError(f"bad receipt handle: {text!r}")
        return cls(extra, int(tail))


def start_offset_info(entries: list[tuple[str, int, int]]) -> str:
    """``flag qid start;…`` for the pop response header."""
    return ";".join(f"{flag} {qid} {start}" for flag, qid, start in entries)


def msg_offset_info(entries: list[tuple[str, int, list[int]]]) -> str:
    """``flag qid o1,o2;…`` for the pop response header."""
    return ";".join(f"{flag} {qid} {','.join(str(o) for o in offs)}" for flag, qid, offs in entries)
