"""Priority messages on the send path (5.4, RIP-80; Java ``SendMessageProcessor``).

A message whose properties parse to PRIORITY (``_SYS_MSG_PRIORITY_`` set, and not a transaction, delay
or FIFO message) is stored in queue ``min(priority, writeQueueNums - 1)``: the queue id *is* the
priority, and POP reads the highest queues first (:mod:`rmqd.lite.priority_selector`). On a transaction,
delay or FIFO message the property is stripped, as Java does. A value that is not a decimal int ≥ 0 is
refused (MESSAGE_ILLEGAL). Installed as a ``before_store`` hook with the property as its marker, so
these sends leave the Cython fast lane and every other send keeps it.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Optional

from rmqd.remoting.codes import ResponseCode
from rmqd.remoting.command import RemotingCommand, error_response
from rmqd.store.message import find_property

if TYPE_CHECKING:
    from rmqd.cython_ext.store_put import MessageToStore
    from rmqd.processors.send import SendContext, SendMessageProcessor

PRIORITY_PROPERTY = "_SYS_MSG_PRIORITY_"
# properties that make a message TRANSACTION, DELAY or FIFO, which outrank PRIORITY (TopicMessageType)
_OUTRANKING = ("TRAN_MSG", "DELAY", "TIMER_DELIVER_MS", "TIMER_DELAY_SEC", "TIMER_DELAY_MS", "__SHARDINGKEY")
_NV, _SEP = "\x01", "\x02"


def strip_property(props: str, name: str) -> str:
    key = name + _NV
    return _SEP.join(p for p in props.split(_SEP) if p and not p.startswith(key))


def outranked(props: str, sys_flag: int = 0) -> bool:
    """Whether the message is a transaction, delay or FIFO message (the priority does not apply)."""
    if sys_flag & 0xC:
        return True
    return any(find_property(props, name) for name in _OUTRANKING)


def priority_of(props: str) -> Optional[int]:
    """The message's priority, None without one; ValueError when it is not an int ≥ 0."""
    value = find_property(props, PRIORITY_PROPERTY)
    if value is None:
        return None
    p = int(value)
    if p < 0:
        raise ValueError(f"priority must be greater than or equal to 0: {value}")
    return p


def before_store(ctx: SendContext, msgs: list[MessageToStore]) -> Optional[RemotingCommand]:
    """The ``before_store`` hook: pin each priority message to its queue (or strip the property)."""
    queues = max(1, int(ctx.topic_config.write_queue_nums))
    for m in msgs:
        props = m.properties or ""
        if PRIORITY_PROPERTY not in props:
            continue
        if outranked(props, m.sys_flag):
            m.properties = strip_property(props, PRIORITY_PROPERTY)
            continue
        try:
            p = priority_of(props)
        except ValueError as exc:
            return error_response(ResponseCode.MESSAGE_ILLEGAL, f"the message priority is illegal: {exc}")
        if p is not None:
            m.queue_id = min(p, queues - 1)
    return None


def install(send_processor: SendMessageProcessor) -> None:
    send_processor.add_before_store(before_store, (PRIORITY_PROPERTY,))
