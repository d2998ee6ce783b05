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
from typing import Any, Optional

from rmqd.filter.message_filter import ExpressionMessageFilter
from rmqd.filter.errors import SQLParseError
from rmqd.pop.frontend import Busy, PopExecutor, pop_with_polling
from rmqd.pop.codes import INVALID_PARAMETER, POLLING_FULL, POLLING_TIMEOUT, PopError
from rmqd.pop.service import PopService
from rmqd.remoting.codes import ResponseCode
from rmqd.remoting.command import RemotingCommand, error_response, ext_bool, ext_int, new_response, require
from rmqd.remoting.dispatch import Dispatcher

log = logging.getLogger(__name__)

POP_MESSAGE = 200050
PEEK_MESSAGE = 200052
NOTIFICATION = 200054
POLLING_INFO = 200055


def pop_error_response(exc: PopError) -> RemotingCommand:
    return error_response(exc.code, exc.remark)


def busy_response(exc: Busy) -> RemotingCommand:
    return error_response(ResponseCode.SYSTEM_BUSY, f"[TOO_MANY_REQUESTS] {exc}")


class PopMessageProcessor:
    """POP_MESSAGE, PEEK_MESSAGE, NOTIFICATION and POLLING_INFO."""

    def __init__(self, pop: PopService, executor: PopExecutor, broker_ip: str, readable: Any) -> None:
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

    async def pop_message(self, conn: Any, request: RemotingCommand) -> RemotingCommand:
        group, topic, qid, nums, invisible, poll, _born = require(
            request, "consumerGroup", "topic", "queueId", "maxMsgNums", "invisibleTime", "pollTime", "bornTime")
        if not self.readable():
            return error_response(ResponseCode.NO_PERMISSION, f"the broker[{self.broker_ip}] pop message is forbidden")
        if int(nums) > 32:
            return error_response(INVALID_PARAMETER, f"the broker[{self.broker_ip}] pop message's num is greater than 32")
        try:
            msg_filter = self._filter(request)
        except SQLParseError:
            return error_response(ResponseCode.SUBSCRIPTION_PARSE_FAILED, "parse the consumer's subscription failed")
        except ValueError as exc:
            return error_response(ResponseCode.SUBSCRIPTION_PARSE_FAILED, f"parse the consumer's subscription failed: {exc}")
        try:
            order = ext_bool(request, "order")
            result, state = await pop_with_polling(self.pop, self.executor, group, topic, int(qid), int(nums),
                                                   int(invisible), msg_filter, ext_int(request, "initMode", 0),
                                                   int(poll), conn.remote_address, order=order)
        except PopError as exc:
            return pop_error_response(exc)
        except Busy as exc:
            return busy_response(exc)
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

    async def peek_message(self, conn: Any, request: RemotingCommand) -> RemotingCommand:
        topic, qid, nums, group = require(request, "topic", "queueId", "maxMsgNums", "consumerGroup")
        try:
            records = await self.executor.run(self.pop.peek, group, topic, int(qid), int(nums))
        except PopError as exc:
            return pop_error_response(exc)
        except Busy as exc:
            return busy_response(exc)
        if not records:
            return new_response(POLLING_TIMEOUT, "NO_MESSAGE_IN_QUEUE")
        return new_response(ResponseCode.SUCCESS, "FOUND", None, b"".join(records))

    async def notification(self, conn: Any, request: RemotingCommand) -> RemotingCommand:
        group, topic, qid, poll, _born = require(request, "consumerGroup", "topic", "queueId", "pollTime", "bornTime")
        qid = int(qid)
        if self.pop.topics.get(topic) is None:
            return error_response(ResponseCode.TOPIC_NOT_EXIST, f"topic[{topic}] not exist, apply first please!")
        try:
            if await self.executor.run(self.pop.groups.find, group) is None:   # may create it: a file write
                return error_response(ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
                                      f"subscription group [{group}] does not exist")
        except Busy as exc:
            return busy_response(exc)
        has = self.pop.has_message(group, topic, qid)
        full = False
        if not has:
            state = await self.pop.polling.wait(self.pop.wait_topics(group, topic), group, qid, int(poll) / 1000.0,
                                                lambda: self.pop.has_message(group, topic, qid))
            full = state == "full"
            has = self.pop.has_message(group, topic, qid)
        return new_response(ResponseCode.SUCCESS, None, {"hasMsg": "true" if has else "false",
                                                         "pollingFull": "true" if full else "false"})

    def polling_info(self, conn: Any, request: RemotingCommand) -> RemotingCommand:
        group, topic, qid = require(request, "consumerGroup", "topic", "queueId")
        tc = self.pop.topics.get(topic)
        if tc is None:
            return error_response(ResponseCode.TOPIC_NOT_EXIST, f"topic[{topic}] not exist, apply first please!")
        if int(qid) >= tc.read_queue_nums:
            return error_response(INVALID_PARAMETER, f"queueId[{qid}] is illegal, topic:[{topic}] "
                                                     f"topicConfig.readQueueNums:[{tc.read_queue_nums}] consumer:"
                                                     f"[{conn.remote_address}]")
        groups = self.pop.groups
        if group not in groups.table and not groups.auto_create:
            return error_response(ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
                                  f"subscription group [{group}] does not exist")
        return new_response(ResponseCode.SUCCESS, None,
                            {"pollingNum": str(self.pop.polling.polling_count(topic, group, int(qid)))})

