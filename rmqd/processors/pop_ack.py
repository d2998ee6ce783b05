"""POP acknowledgements over remoting: ACK_MESSAGE 200051, CHANGE_MESSAGE_INVISIBLETIME 200053,
BATCH_ACK_MESSAGE 200151.

Java: ``AckMessageProcessor`` and ``ChangeInvisibleTimeProcessor``.  ACK and CHANGE carry the
client's ``extraInfo`` (its ``POP_CK`` property) and the message's queue ``offset``; BATCH_ACK has
no header and a JSON body ``{brokerName, acks:[{c,t,r,so,q,rq,pt,it,b}]}`` where ``b`` is a Java
BitSet (Base64 of ``toByteArray()``) of ``offset - so``.
"""
from __future__ import annotations

import base64
import logging
from typing import Any

import orjson

from rmqd.pop.extra_info import ExtraInfo
from rmqd.pop.frontend import Busy, PopExecutor
from rmqd.pop.codes import PopError
from rmqd.processors.lite_remoting import lite_queue_of
from rmqd.pop.service import PopService
from rmqd.processors.pop_message import busy_response, pop_error_response
from rmqd.remoting.codes import ResponseCode
from rmqd.remoting.command import RemotingCommand, error_response, new_response, require
from rmqd.remoting.dispatch import Dispatcher

log = logging.getLogger(__name__)

ACK_MESSAGE = 200051
CHANGE_MESSAGE_INVISIBLETIME = 200053
BATCH_ACK_MESSAGE = 200151


def bitset_offsets(encoded: str, start_offset: int) -> list[int]:
    """Offsets of a Java BitSet serialized by fastjson (Base64 of little-endian ``toByteArray()``)."""
    raw = base64.b64decode(encoded) if encoded else b""
    return [start_offset + i * 8 + b for i, byte in enumerate(raw) for b in range(8) if byte >> b & 1]


def encode_bitset(indexes: list[int]) -> str:
    """Inverse of :func:`bitset_offsets` for indexes relative to the start offset."""
    if not indexes:
        return ""
    raw = bytearray(max(indexes) // 8 + 1)
    for i in indexes:
        raw[i // 8] |= 1 << (i % 8)
    return base64.b64encode(bytes(raw)).decode()


class AckMessageProcessor:
    def __init__(self, pop: PopService, executor: PopExecutor) -> None:
        self.pop = pop
        self.executor = executor

    def register(self, dispatcher: Dispatcher) -> None:
        """The ack codes, on the loop (they await the POP executor)."""
        dispatcher.register(ACK_MESSAGE, self.ack_message)
        dispatcher.register(CHANGE_MESSAGE_INVISIBLETIME, self.change_invisible_time)
        dispatcher.register(BATCH_ACK_MESSAGE, self.batch_ack)

    @staticmethod
    def _extra(text: str) -> ExtraInfo:
        return ExtraInfo.parse(text)

    async def ack_message(self, conn: Any, request: RemotingCommand) -> RemotingCommand:
        group, topic, _qid, extra_s, offset = require(request, "consumerGroup", "topic", "queueId", "extraInfo",
                                                      "offset")
        topic = lite_queue_of(topic, request.ext_fields)       # 5.5: a lite topic's queue (header liteTopic)
        try:
            extra = self._extra(extra_s)
        except ValueError:
            return error_response(ResponseCode.MESSAGE_ILLEGAL, f"extraInfo is illegal: {extra_s}")
        try:
            await self.executor.run(self.pop.ack, group, topic, extra, int(offset))
        except PopError as exc:
            return pop_error_response(exc)
        except Busy as exc:
            return busy_response(exc)
        return new_response(ResponseCode.SUCCESS)

    async def change_invisible_time(self, conn: Any, request: RemotingCommand) -> RemotingCommand:
        group, topic, _qid, extra_s, offset, invisible = require(
            request, "consumerGroup", "topic", "queueId", "extraInfo", "offset", "invisibleTime")
        topic = lite_queue_of(topic, request.ext_fields)
        try:
            extra = self._extra(extra_s)
        except ValueError:
            return error_response(ResponseCode.MESSAGE_ILLEGAL, f"extraInfo is illegal: {extra_s}")
        try:
            new = await self.executor.run(self.pop.change_invisible_time, group, topic, extra, int(offset),
                                          int(invisible))
        except PopError as exc:
            return pop_error_response(exc)
        except Busy as exc:
            return busy_response(exc)
        return new_response(ResponseCode.SUCCESS, None, {"popTime": str(new.pop_time),
                                                         "invisibleTime": str(new.invisible_time),
                                                         "reviveQid": str(new.revive_qid)})

    async def batch_ack(self, conn: Any, request: RemotingCommand) -> RemotingCommand:
        try:
            body = orjson.loads(bytes(request.body or b"{}"))
            acks = body.get("acks") or []
            items = []
            for a in acks:
                so = int(a.get("so", a.get("startOffset")))
                extra = ExtraInfo(so, int(a.get("pt", a.get("popTime"))), int(a.get("it", a.get("invisibleTime", 0))),
                                  int(a.get("rq", a.get("reviveQueueId", 0))), str(a.get("r", a.get("retry", "0"))),
                                  body.get("brokerName") or self.pop.broker_name, int(a.get("q", a.get("queueId"))))
                offsets = bitset_offsets(a.get("b", a.get("bitSet")) or "", so)
                items.append((a.get("c", a.get("consumerGroup")), a.get("t", a.get("topic")), extra, offsets))
        except (orjson.JSONDecodeError, TypeError, ValueError, AttributeError) as exc:
            return error_response(ResponseCode.MESSAGE_ILLEGAL, f"bad BATCH_ACK body: {exc}")

        def run() -> None:
            for group, topic, extra, offsets in items:
                if offsets:
                    self.pop.batch_ack(group, topic, extra, offsets)

        try:
            await self.executor.run(run)
        except PopError as exc:
            return pop_error_response(exc)
        except Busy as exc:
            return busy_response(exc)
        return new_response(ResponseCode.SUCCESS)

