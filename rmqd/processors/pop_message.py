"""POP consumption over remoting (5.x codes): POP_MESSAGE 200050, PEEK_MESSAGE 200052,
NOTIFICATION 200054, POLLING_INFO 200055.

Java: ``PopMessageProcessor``, ``PeekMessageProcessor``, ``NotificationProcessor``,
``PollingInfoProcessor``.  Headers and response fields are Java's (``popTime``, ``invisibleTime``,
``reviveQid``, ``restNum``, ``startOffsetInfo``, ``msgOffsetInfo``, and ``orderCountInfo`` for an orderly
pop); the body is the stored records, as a pull's.  The state lives in :class:`rmqd.pop.PopService`; these handlers run on the
loop and await the blocking parts in the POP executor, parking a request at most ``pollTime``.
"""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Callable, Mapping, Optional

from rmqd.filter.message_filter import ExpressionMessageFilter
from rmqd.filter.errors import SQLParseError
from rmqd.pop.frontend import Busy, PopExecutor, pop_with_polling
from rmqd.pop.codes import INVALID_PARAMETER, POLLING_FULL, POLLING_TIMEOUT, PopError
from rmqd.pop.service import PopService
from rmqd.remoting.codes import ResponseCode
from rmqd.remoting.command import RemotingCommand, error_response, ext_bool, new_response, require
from rmqd.remoting.dispatch import Dispatcher

if TYPE_CHECKING:
    from rmqd.processors.handles import RequestPeer

log = logging.getLogger(__name__)

POP_MESSAGE = 200050
PEEK_MESSAGE = 200052
NOTIFICATION = 200054
POLLING_INFO = 200055


# What Java's POP_MESSAGE / PEEK_MESSAGE answers carry even when refused: its response header is made up front and
# its fields are primitives (0 until set).
POP_HEADER_ZEROS = {"popTime": "0", "invisibleTime": "0", "reviveQid": "0", "restNum": "0"}
NOT_SET_REMARK = "not set any response code"     # Java's createResponseCommand(header class) remark, kept
FAQ_APPLY_TOPIC = "\nSee https://rocketmq.apache.org/docs/bestPractice/06FAQ for further details."


def pop_error_response(exc: PopError, ext: Optional[Mapping[str, str]] = None) -> RemotingCommand:
    return new_response(exc.code, exc.remark, ext)


def lenient_int(request: RemotingCommand, name: str) -> int:
    """A primitive header field as Java's decoder fills it: 0 when absent or not a number (it swallows the
    parse error and leaves the field at its default)."""
    try:
        return int((request.ext_fields or {}).get(name) or 0)
    except ValueError:
        return 0


def busy_response(exc: Busy) -> RemotingCommand:
    return error_response(ResponseCode.SYSTEM_BUSY, f"[TOO_MANY_REQUESTS] {exc}")


class PopMessageProcessor:
    """POP_MESSAGE, PEEK_MESSAGE, NOTIFICATION and POLLING_INFO."""

    def __init__(self, pop: PopService, executor: PopExecutor, broker_ip: str, readable: Callable[[], bool]) -> None:
        self.pop = pop
        self.executor = executor
        self.broker_ip = broker_ip
        self.readable = readable         # () -> bool: brokerPermission has READ

    def register(self, dispatcher: Dispatcher) -> None:
        """The pop-side codes, on the loop (they await the POP executor)."""
        dispatcher.register(POP_MESSAGE, self.pop_message)
        dispatcher.register(PEEK_MESSAGE, self.peek_message)
        dispatcher.register(NOTIFICATION, self.notification)
        dispatcher.register(POLLING_INFO, self.polling_info)

    def _filter(self, request: RemotingCommand) -> Optional[ExpressionMessageFilter]:
        ext = request.ext_fields or {}
        exp = ext.get("exp")
        if not exp:
            return None
        return ExpressionMessageFilter(ext.get("expType") or "TAG", exp)

    async def pop_message(self, conn: RequestPeer, request: RemotingCommand) -> RemotingCommand:
        group, topic = require(request, "consumerGroup", "topic")
        qid, nums, invisible, poll = (lenient_int(request, n) for n in ("queueId", "maxMsgNums", "invisibleTime",
                                                                         "pollTime"))
        zeros = POP_HEADER_ZEROS
        if not self.readable():
            return new_response(ResponseCode.NO_PERMISSION, f"the broker[{self.broker_ip}] pop message is forbidden",
                                zeros)
        if nums > 32:
            return new_response(INVALID_PARAMETER, f"the broker[{self.broker_ip}] pop message's num is greater than 32",
                                zeros)
        try:
            msg_filter = self._filter(request)
        except SQLParseError:
            return new_response(ResponseCode.SUBSCRIPTION_PARSE_FAILED, "parse the consumer's subscription failed",
                                zeros)
        except ValueError as exc:
            return new_response(ResponseCode.SUBSCRIPTION_PARSE_FAILED,
                                f"parse the consumer's subscription failed: {exc}", zeros)
        try:
            order = ext_bool(request, "order")
            result, state = await pop_with_polling(self.pop, self.executor, group, topic, qid, nums, invisible,
                                                   msg_filter, lenient_int(request, "initMode"), poll,
                                                   conn.remote_address, order=order)
        except PopError as exc:
            return pop_error_response(exc, zeros)
        except Busy as exc:
            return busy_response(exc)
        code: int
        if result.messages:
            code, remark = ResponseCode.SUCCESS, "FOUND"
        else:
            code, remark = (POLLING_FULL if state == "full" else POLLING_TIMEOUT), "NO_MESSAGE_IN_QUEUE"
        ext = {"popTime": str(result.pop_time), "invisibleTime": str(result.invisible_time),
               "reviveQid": str(result.revive_qid), "restNum": str(result.rest_num),
               "startOffsetInfo": result.start_offset_info, "msgOffsetInfo": result.msg_offset_info}
        if order:
            ext["orderCountInfo"] = result.order_count_info
        return new_response(code, remark, ext, result.body() if result.messages else None)

    async def peek_message(self, conn: RequestPeer, request: RemotingCommand) -> RemotingCommand:
        topic, group = require(request, "topic", "consumerGroup")
        qid, nums = lenient_int(request, "queueId"), lenient_int(request, "maxMsgNums")
        try:
            records = await self.executor.run(self.pop.peek, group, topic, qid, nums)
        except PopError as exc:
            return pop_error_response(exc, POP_HEADER_ZEROS)
        except Busy as exc:
            return busy_response(exc)
        if not records:
            return new_response(POLLING_TIMEOUT, "NO_MESSAGE_IN_QUEUE", POP_HEADER_ZEROS)
        return new_response(ResponseCode.SUCCESS, "FOUND", POP_HEADER_ZEROS, b"".join(records))

    def _pre_check(self, conn: RequestPeer, topic: str, qid: int,
                   ext: Mapping[str, str]) -> Optional[RemotingCommand]:
        """NOTIFICATION's and POLLING_INFO's checks in Java's order (broker, topic, queue id)."""
        if not self.readable():
            return new_response(ResponseCode.NO_PERMISSION, f"the broker[{self.broker_ip}] peeking message is forbidden",
                                ext)
        tc = self.pop.topics.get(topic)
        if tc is None:
            return new_response(ResponseCode.TOPIC_NOT_EXIST,
                                f"topic[{topic}] not exist, apply first please! {FAQ_APPLY_TOPIC}", ext)
        if not (tc.perm & 4):
            return new_response(ResponseCode.NO_PERMISSION, f"the topic[{topic}] peeking message is forbidden", ext)
        if qid >= tc.read_queue_nums:
            return new_response(INVALID_PARAMETER, f"queueId[{qid}] is illegal, topic:[{topic}] "
                                                   f"topicConfig.readQueueNums:[{tc.read_queue_nums}] consumer:"
                                                   f"[/{conn.remote_address}]", ext)
        return None

    async def notification(self, conn: RequestPeer, request: RemotingCommand) -> RemotingCommand:
        group, topic = require(request, "consumerGroup", "topic")
        qid, poll = lenient_int(request, "queueId"), lenient_int(request, "pollTime")
        refused = self._pre_check(conn, topic, qid, {"hasMsg": "false", "pollingFull": "false"})
        if refused is not None:
            return refused
        try:
            sg = await self.executor.run(self.pop.groups.find, group)   # may create it: a file write
        except Busy as exc:
            return busy_response(exc)
        if sg is None:
            return new_response(ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
                                f"subscription group [{group}] does not exist, {FAQ_APPLY_TOPIC}",
                                {"hasMsg": "false", "pollingFull": "false"})
        if not sg.consume_enable:
            return new_response(ResponseCode.NO_PERMISSION, f"subscription group no permission, {group}",
                                {"hasMsg": "false", "pollingFull": "false"})
        has = self.pop.has_message(group, topic, qid)
        full = False
        if not has:
            state = await self.pop.polling.wait(self.pop.wait_topics(group, topic), group, qid, poll / 1000.0,
                                                lambda: self.pop.has_message(group, topic, qid))
            full = state == "full"
            has = self.pop.has_message(group, topic, qid)
        return new_response(ResponseCode.SUCCESS, NOT_SET_REMARK, {"hasMsg": "true" if has else "false",
                                                                   "pollingFull": "true" if full else "false"})

    def polling_info(self, conn: RequestPeer, request: RemotingCommand) -> RemotingCommand:
        group, topic = require(request, "consumerGroup", "topic")
        qid = lenient_int(request, "queueId")
        refused = self._pre_check(conn, topic, qid, {"pollingNum": "0"})
        if refused is not None:
            return refused
        groups = self.pop.groups
        sg = groups.table.get(group)
        if sg is None and not groups.auto_create:
            return new_response(ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
                                f"subscription group [{group}] does not exist, {FAQ_APPLY_TOPIC}", {"pollingNum": "0"})
        if sg is not None and not sg.consume_enable:
            return new_response(ResponseCode.NO_PERMISSION, f"subscription group no permission, {group}",
                                {"pollingNum": "0"})
        return new_response(ResponseCode.SUCCESS, NOT_SET_REMARK,
                            {"pollingNum": str(self.pop.polling.polling_count(topic, group, qid))})
