"""POP acknowledgements over remoting: ACK_MESSAGE 200051, CHANGE_MESSAGE_INVISIBLETIME 200053,
BATCH_ACK_MESSAGE 200151.

Java: ``AckMessageProcessor`` and ``ChangeInvisibleTimeProcessor``.  ACK and CHANGE carry the
client's ``extraInfo`` (its ``POP_CK`` property) and the message's queue ``offset``; BATCH_ACK has
no header and a JSON body ``{brokerName, acks:[{c,t,r,so,q,rq,pt,it,b}]}`` where ``b`` is a Java
BitSet (Base64 of ``toByteArray()``) of ``offset - so``.
"""
from __future__ import annotations

import base64
import binascii
import logging
from typing import TYPE_CHECKING, Mapping

from rmqd.pop.extra_info import ExtraInfo
from rmqd.pop.frontend import Busy, PopExecutor
from rmqd.pop.codes import PopError
from rmqd.processors.client_manage import parse_json_body
from rmqd.pop.service import PopService
from rmqd.processors.pop_message import NOT_SET_REMARK, busy_response, pop_error_response
from rmqd.remoting.codes import ResponseCode
from rmqd.remoting.command import RemotingCommand, new_response, require
from rmqd.remoting.dispatch import Dispatcher
from rmqd.remoting.java_errors import BadBodyError
from rmqd.store.lite.names import lmq_name, parse_lmq

if TYPE_CHECKING:
    from rmqd.processors.handles import RequestPeer

log = logging.getLogger(__name__)

ACK_MESSAGE = 200051
CHANGE_MESSAGE_INVISIBLETIME = 200053
BATCH_ACK_MESSAGE = 200151


def lite_queue_of(topic: str, ext: Mapping[str, str]) -> str:
    """The queue an ACK_MESSAGE / CHANGE_MESSAGE_INVISIBLETIME applies to: the lite topic's LMQ when the
    header names one (5.5 ``liteTopic``), else the topic."""
    lite = ext.get("liteTopic")
    return lmq_name(topic, lite) if lite and parse_lmq(lmq_name(topic, lite)) else topic


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
        """The client's extraInfo; a malformed one is refused as Java's ExtraInfoUtil refuses it (the
        IllegalArgumentException text, SYSTEM_ERROR)."""
        try:
            return ExtraInfo.parse(text)
        except ValueError:
            n = len(text.split(" ")) if text else 0
            raise PopError(ResponseCode.SYSTEM_ERROR, f"java.lang.IllegalArgumentException: getBrokerName fail, "
                                                      f"extraInfoStrs length {n}") from None

    async def ack_message(self, conn: RequestPeer, request: RemotingCommand) -> RemotingCommand:
        group, topic, _qid, extra_s, offset = require(request, "consumerGroup", "topic", "queueId", "extraInfo",
                                                      "offset")
        topic = lite_queue_of(topic, request.ext_fields or {})       # 5.5: a lite topic's queue (header liteTopic)
        try:
            extra = self._extra(extra_s)
            await self.executor.run(self.pop.ack, group, topic, extra, int(offset))
        except PopError as exc:
            return pop_error_response(exc)
        except Busy as exc:
            return busy_response(exc)
        return new_response(ResponseCode.SUCCESS)

    async def change_invisible_time(self, conn: RequestPeer, request: RemotingCommand) -> RemotingCommand:
        group, topic, _qid, extra_s, offset, invisible = require(
            request, "consumerGroup", "topic", "queueId", "extraInfo", "offset", "invisibleTime")
        topic = lite_queue_of(topic, request.ext_fields or {})
        zeros = {"popTime": "0", "invisibleTime": "0", "reviveQid": "0"}   # Java's primitive header fields
        try:
            extra = self._extra(extra_s)
            new = await self.executor.run(self.pop.change_invisible_time, group, topic, extra, int(offset),
                                          int(invisible))
        except PopError as exc:
            if exc.code == ResponseCode.NO_MESSAGE:           # Java sets only the code here
                return new_response(exc.code, NOT_SET_REMARK, zeros)
            if exc.code == ResponseCode.SYSTEM_ERROR:         # Java's ExtraInfoUtil threw: no response header
                return pop_error_response(exc)
            return pop_error_response(exc, zeros)
        except Busy as exc:
            return busy_response(exc)
        return new_response(ResponseCode.SUCCESS, None, {"popTime": str(new.pop_time),
                                                         "invisibleTime": str(new.invisible_time),
                                                         "reviveQid": str(new.revive_qid)})

    async def batch_ack(self, conn: RequestPeer, request: RemotingCommand) -> RemotingCommand:
        """BATCH_ACK_MESSAGE as Java's AckMessageProcessor: no body or no acks is NO_MESSAGE; each ack names a
        checkpoint (``c t r so q rq pt it`` and the BitSet ``b`` of acked offsets - ``so``); an unknown topic or
        queue and offsets outside the queue are skipped silently; the answer is SUCCESS."""
        if request.body is None or not request.body_bytes():
            return new_response(ResponseCode.NO_MESSAGE)
        body = parse_json_body(request)
        acks = body.get("acks") if isinstance(body, dict) else None
        if not acks:
            return new_response(ResponseCode.NO_MESSAGE)
        try:
            items = []
            for a in acks:
                so = int(a.get("so", a.get("startOffset")))
                extra = ExtraInfo(so, int(a.get("pt", a.get("popTime"))), int(a.get("it", a.get("invisibleTime", 0))),
                                  int(a.get("rq", a.get("reviveQueueId", 0))), str(a.get("r", a.get("retry", "0"))),
                                  (body.get("brokerName") if isinstance(body, dict) else None) or self.pop.broker_name,
                                  int(a.get("q", a.get("queueId"))))
                offsets = bitset_offsets(a.get("b", a.get("bitSet")) or "", so)
                items.append((a.get("c", a.get("consumerGroup")), a.get("t", a.get("topic")), extra, offsets))
        except (TypeError, ValueError, AttributeError, binascii.Error) as exc:
            raise BadBodyError(f"bad BATCH_ACK_MESSAGE body: {type(exc).__name__}: {exc}") from None

        def run() -> None:
            for group, topic, extra, offsets in items:
                if offsets and group and topic:
                    self.pop.batch_ack_in_range(group, topic, extra, offsets)

        try:
            await self.executor.run(run)
        except PopError as exc:
            return pop_error_response(exc)
        except Busy as exc:
            return busy_response(exc)
        return new_response(ResponseCode.SUCCESS)
