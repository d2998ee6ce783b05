"""PULL_MESSAGE (11) and 5.x's LITE_PULL_MESSAGE (361, what a 5.x DefaultLitePullConsumer sends): every check
of Java ``PullMessageProcessor`` in order (README §3.3).  361 is answered as 5.x answers it (INVALID_PARAMETER for a
queue id out of range, ``litePullMessageEnable``); 11 as 4.9.8 does.

The response body is the list of zero-copy record views from the store; the remoting layer writes
it with ``transport.writelines`` without joining.
"""
from __future__ import annotations

import functools
import logging
import time
from typing import TYPE_CHECKING, Callable, Optional, Union

from rmqd.broker.consume_checks import check_consume_group
from rmqd.broker.context import BrokerContext
from rmqd.broker.long_polling import PullRequest
from rmqd.config import BrokerRole
from rmqd.common.constants import PERM_READ
from rmqd.filter import ExpressionMessageFilter, SQLParseError, is_tag_type
from rmqd.remoting.codes import FAQ_SUGGEST, RequestCode, ResponseCode
from rmqd.remoting.command import RemotingCommand, error_response, new_response, require
from rmqd.remoting.dispatch import TO_POOL, Dispatcher, Handler, HandlerResult, ProcessorPool, run_handler
from rmqd.store.message_store import GetMessageResult
from rmqd.store.message_store import GetMessageStatus as S

if TYPE_CHECKING:
    from rmqd.broker.long_polling import PullRequestHoldService
    from rmqd.config import BrokerConfig
    from rmqd.remoting.connection import Connection
    from rmqd.store.api import MessageStoreAPI
    from rmqd.store.metadata import SubscriptionGroupConfig

log = logging.getLogger(__name__)

FLAG_COMMIT_OFFSET = 0x1
FLAG_SUSPEND = 0x2
FLAG_SUBSCRIPTION = 0x4
FLAG_CLASS_FILTER = 0x8

FAQ = FAQ_SUGGEST
FAQ_5X = "\nSee https://rocketmq.apache.org/docs/bestPractice/06FAQ for further details."   # 5.x FAQUrl
LITE_PULL_MESSAGE = 361
# 5.x ForbiddenType: why a LITE_PULL_MESSAGE got NO_PERMISSION (header forbiddenType)
BROKER_FORBIDDEN, GROUP_FORBIDDEN, TOPIC_FORBIDDEN, BROADCASTING_DISABLE_FORBIDDEN, SUBSCRIPTION_FORBIDDEN = 1, 2, 3, 4, 5
INVALID_PARAMETER = 29
INDEX_PERM_READ = 2


def _moved_if_nonzero(offset: int) -> int:
    return ResponseCode.PULL_OFFSET_MOVED if offset != 0 else ResponseCode.PULL_NOT_FOUND


_STATUS_CODES: dict[S, Callable[[int], int]] = {
    S.FOUND: lambda o: ResponseCode.SUCCESS,
    S.MESSAGE_WAS_REMOVING: lambda o: ResponseCode.PULL_RETRY_IMMEDIATELY,
    S.NO_MATCHED_MESSAGE: lambda o: ResponseCode.PULL_RETRY_IMMEDIATELY,
    S.NO_MATCHED_LOGIC_QUEUE: _moved_if_nonzero,
    S.NO_MESSAGE_IN_QUEUE: _moved_if_nonzero,
    S.OFFSET_FOUND_NULL: lambda o: ResponseCode.PULL_NOT_FOUND,
    S.OFFSET_OVERFLOW_BADLY: lambda o: ResponseCode.PULL_OFFSET_MOVED,
    S.OFFSET_OVERFLOW_ONE: lambda o: ResponseCode.PULL_NOT_FOUND,
    S.OFFSET_TOO_SMALL: lambda o: ResponseCode.PULL_OFFSET_MOVED,
}


def _is_match_all(f: ExpressionMessageFilter) -> bool:
    sub = f.tag_subscription
    return f.compiled is None and (f.class_filter_mode or (sub is not None and sub.sub_all))


def _needs_message(f: ExpressionMessageFilter) -> bool:
    """Whether the filter needs the message itself (SQL92): the resident fast path cannot serve the pull."""
    return not _is_match_all(f) and (f.compiled is not None or f.tag_subscription is None)


def _tag_codes(f: ExpressionMessageFilter) -> Optional[frozenset[int]]:
    """What the resident fast path filters by (a filter that does not :func:`_needs_message`): None (every tag)
    or the tag hash codes."""
    if _is_match_all(f) or f.tag_subscription is None:
        return None
    return f.tag_subscription.code_set


# GetMessageStatus whose nextBeginOffset Java's store corrects (nextOffsetCorrection): on a slave with
# offsetCheckInSlave off it keeps the requested offset instead
_CORRECTED = frozenset({S.NO_MESSAGE_IN_QUEUE, S.OFFSET_TOO_SMALL, S.OFFSET_OVERFLOW_ONE, S.OFFSET_OVERFLOW_BADLY,
                        S.OFFSET_FOUND_NULL, S.NO_MATCHED_LOGIC_QUEUE})


def suggest_broker(cfg: BrokerConfig, sg: SubscriptionGroupConfig, store: MessageStoreAPI, slave: bool, topic: str,
                   qid: int, offset: int, result: GetMessageResult, code: int) -> tuple[str, int, int]:
    """Java's PullMessageProcessor on ``suggestWhichBrokerId`` (and a slave's offset rules): with slaveReadEnable, a
    consumer more than accessMessageInMemoryMaxRatio of RAM behind goes to the group's whichBrokerWhenConsumeSlowly,
    else to the group's brokerId; without it, always to the master (0). A slave with offsetCheckInSlave off answers
    a moved offset with PULL_RETRY_IMMEDIATELY and the group's brokerId, and never corrects the offset.
    Returns (suggestWhichBrokerId, response code, nextBeginOffset)."""
    suggest = 0
    if cfg.slaveReadEnable:
        if result.status is S.FOUND and result.next_begin_offset > 0 and \
                store.check_in_disk_by_consume_offset(topic, qid, result.next_begin_offset - 1):
            suggest = sg.which_broker_when_consume_slowly
        else:
            suggest = sg.broker_id
    next_begin = result.next_begin_offset
    if slave and not cfg.offsetCheckInSlave:
        if result.status in _CORRECTED:
            next_begin = offset
        if code == ResponseCode.PULL_OFFSET_MOVED:
            code = ResponseCode.PULL_RETRY_IMMEDIATELY
            suggest = sg.broker_id
    return str(suggest), code, next_begin


def _expression_type(value: object) -> Optional[str]:
    """A registered subscription's expressionType (any JSON value) as the text a pull compares and reports."""
    if value is None or isinstance(value, str):
        return value
    return str(value) if value else None


def _refuse(code: int, remark: str, forbidden_type: Optional[int]) -> RemotingCommand:
    """A refusal; with ``forbidden_type``, 5.x's ``forbiddenType`` header saying why."""
    return new_response(code, remark, {"forbiddenType": str(forbidden_type)} if forbidden_type else None)


_FILTER_FORBIDDEN = (("can not consume by broadcast way", BROADCASTING_DISABLE_FORBIDDEN),
                     ("is forbidden for topic", SUBSCRIPTION_FORBIDDEN))


def _lite_refusal(response: RemotingCommand) -> RemotingCommand:
    """A LITE_PULL_MESSAGE's refusal from the subscription checks, in 5.x's words (FAQ link, forbiddenType)."""
    remark = (response.remark or "").replace(FAQ, FAQ_5X)
    ftype = next((t for text, t in _FILTER_FORBIDDEN if text in remark), None) \
        if response.code == ResponseCode.NO_PERMISSION else None
    return _refuse(response.code, remark, ftype)


class PullMessageProcessor:
    """PULL_MESSAGE. On the event loop first (:meth:`process_inline`): the checks and, when every
    page it needs is resident, the read itself (one C call, no hand-off to a pool thread, whose GIL
    wait under load costs milliseconds); otherwise the pull pool runs :meth:`process`.

    ``submit(fn, conn, request)`` hands a re-run of a held pull to the pull pool; the hold service
    (``hold``, set by the broker once its loop runs) parks pulls that found nothing."""

    def __init__(self, ctx: BrokerContext, submit: Callable[[Handler, Connection, RemotingCommand], None]) -> None:
        self.ctx = ctx
        self.config = ctx.config
        self.submit = submit
        self.hold: Optional[PullRequestHoldService] = None
        self._rerun_handler = functools.partial(self.process, allow_suspend=False)
        self._rerun_inline = functools.partial(self.process, allow_suspend=False, inline=True)

    def register(self, dispatcher: Dispatcher, pool: ProcessorPool) -> None:
        """PULL_MESSAGE: on the loop first (:meth:`process_inline`), else in the pull pool."""
        dispatcher.register([RequestCode.PULL_MESSAGE, LITE_PULL_MESSAGE], self.process, pool,
                            inline_first=self.process_inline)

    def rerun(self, conn: Connection, request: RemotingCommand) -> None:
        """Re-execute a held pull (no suspension, no offset commit): on the loop when it can be
        served there (the caller is on the loop), else in the pull pool."""
        if run_handler(self._rerun_inline, conn, request) is TO_POOL:
            self.submit(self._rerun_handler, conn, request)

    def process_inline(self, conn: Connection, request: RemotingCommand) -> HandlerResult:
        """The dispatcher's inline-first handler: answers on the loop or returns TO_POOL."""
        return self.process(conn, request, True, True)

    def process(self, conn: Connection, request: RemotingCommand, allow_suspend: bool = True,
                inline: bool = False) -> HandlerResult:
        (group, topic, queue_id, queue_offset, max_nums, sys_flag_text, commit_offset, suspend_ms,
         sub_version) = require(request, "consumerGroup", "topic", "queueId", "queueOffset", "maxMsgNums",
                                "sysFlag", "commitOffset", "suspendTimeoutMillis", "subVersion")
        qid = int(queue_id)
        offset = int(queue_offset)
        sys_flag = int(sys_flag_text)
        lite = request.code == LITE_PULL_MESSAGE
        sg, err = self._check_queue(conn, group, topic, qid, lite)
        if err is not None:
            return err
        assert sg is not None       # _check_queue answers an error or the group's config
        message_filter = self._message_filter(request, group, sg, topic, sys_flag, int(sub_version))
        if isinstance(message_filter, RemotingCommand):
            if lite:
                message_filter = _lite_refusal(message_filter)
            return message_filter
        if self.ctx.offsets.reset_table:             # 5.x server-side reset pending: the consumer moves there
            reset = self.ctx.offsets.query_then_erase_reset_offset(topic, group, qid)
            if reset is not None:
                return self._offset_reset(request, topic, qid, reset)
        result = self._read(topic, qid, offset, int(max_nums), message_filter, inline)
        if result is None:
            return TO_POOL
        response = self._respond(conn, request, sg, group, topic, qid, offset, result, message_filter,
                                 allow_suspend and bool(sys_flag & FLAG_SUSPEND), int(suspend_ms))
        if allow_suspend and sys_flag & FLAG_COMMIT_OFFSET and self.ctx.role is not BrokerRole.SLAVE:
            self.ctx.offsets.commit_offset(conn.remote_address, group, topic, qid, int(commit_offset))
        return response

    def _check_queue(self, conn: Connection, group: str, topic: str, qid: int,
                     lite: bool = False) -> tuple[Optional[SubscriptionGroupConfig], Optional[RemotingCommand]]:
        """Broker and topic read permission, the group, the queue id (Java's order): (group config, None)
        or (None, error response). ``lite``: a LITE_PULL_MESSAGE (5.x's checks, codes and remarks)."""
        cfg = self.config
        faq = FAQ_5X if lite else FAQ
        if not (cfg.brokerPermission & PERM_READ):
            return None, _refuse(ResponseCode.NO_PERMISSION, f"the broker[{cfg.brokerIP1}] pulling message is forbidden",
                                 BROKER_FORBIDDEN if lite else None)
        if lite and not cfg.litePullMessageEnable:
            return None, _refuse(ResponseCode.NO_PERMISSION,
                                 f"the broker[{cfg.brokerIP1}] for lite pull consumer is forbidden", BROKER_FORBIDDEN)
        sg, err = check_consume_group(self.ctx.groups, group, faq)
        if err is not None:
            return None, _refuse(*err, GROUP_FORBIDDEN if lite and err[0] == ResponseCode.NO_PERMISSION else None)
        tc = self.ctx.topics.get(topic)
        if tc is None:      # a slave may hold a topic its master's config has not reached yet (rmqd.replicas)
            tc = self.ctx.replication.topic_from_store(self.ctx.topics, topic)
        if tc is None:
            log.error("pull: topic %s of group %s (%s) does not exist", topic, group, conn.remote_address)
            return None, error_response(ResponseCode.TOPIC_NOT_EXIST,
                                        f"topic[{topic}] not exist, apply first please! {faq}")
        if not (tc.perm & PERM_READ):
            return None, _refuse(ResponseCode.NO_PERMISSION, f"the topic[{topic}] pulling message is forbidden",
                                 TOPIC_FORBIDDEN if lite else None)
        if qid < 0 or qid >= tc.read_queue_nums:
            return None, error_response(INVALID_PARAMETER if lite else ResponseCode.SYSTEM_ERROR,
                                        f"queueId[{qid}] is illegal, topic:[{topic}] topicConfig.readQueueNums:"
                                        f"[{tc.read_queue_nums}] consumer:[/{conn.remote_address}]")
        return sg, None

    def _message_filter(self, request: RemotingCommand, group: str, sg: SubscriptionGroupConfig, topic: str,
                        sys_flag: int, sub_version: int) -> Union[ExpressionMessageFilter, RemotingCommand]:
        """The filter of the pull: from the request's subscription, else the group's registered one."""
        ext = request.ext_fields or {}      # present: the pull's header fields were required
        if sys_flag & FLAG_SUBSCRIPTION:
            etype = ext.get("expressionType")
            try:
                message_filter = ExpressionMessageFilter(etype, ext.get("subscription"),
                                                         bool(sys_flag & FLAG_CLASS_FILTER))
            except SQLParseError as exc:
                log.warning("pull: bad subscription %r (%s) of group %s: %s", ext.get("subscription"), etype,
                            group, exc)
                return error_response(ResponseCode.SUBSCRIPTION_PARSE_FAILED,
                                      "parse the consumer's subscription failed")
            self._compensate(group, topic, message_filter)
        else:
            info = self.ctx.consumers.get(group)
            if info is None:
                return error_response(ResponseCode.SUBSCRIPTION_NOT_EXIST,
                                      f"the consumer's group info not exist{FAQ}")
            if info.message_model == "BROADCASTING" and not sg.consume_broadcast_enable:
                return error_response(ResponseCode.NO_PERMISSION,
                                      f"the consumer group[{group}] can not consume by broadcast way")
            if self.ctx.groups.forbidden and self.ctx.groups.get_forbidden(group, topic, INDEX_PERM_READ):
                return error_response(ResponseCode.NO_PERMISSION,      # 5.x UPDATE_AND_GET_GROUP_FORBIDDEN
                                      f"the consumer group[{group}] is forbidden for topic[{topic}]")
            entry = info.subscriptions.get(topic)
            if entry is None:
                return error_response(ResponseCode.SUBSCRIPTION_NOT_EXIST,
                                      f"the consumer's subscription not exist{FAQ}")
            if entry.sub_version < sub_version:
                info.subscription_behind = True     # its next heartbeat v2 asks for the subscriptions
                return error_response(ResponseCode.SUBSCRIPTION_NOT_LATEST,
                                      "the consumer's subscription not latest")
            etype = _expression_type(entry.data.get("expressionType"))
            if entry.filter is None:
                return error_response(ResponseCode.FILTER_DATA_NOT_EXIST,
                                      "The broker's consumer filter data is not exist!Your expression may be wrong!")
            message_filter = entry.filter
        if not is_tag_type(etype) and not self.config.enablePropertyFilter:
            return error_response(ResponseCode.SYSTEM_ERROR,
                                  f"The broker does not support consumer to filter message by {etype}")
        return message_filter

    def _offset_reset(self, request: RemotingCommand, topic: str, qid: int, reset: int) -> RemotingCommand:
        """The answer of a pull that meets a server-side reset (Java's OFFSET_RESET status): PULL_OFFSET_MOVED to
        the reset offset; the client's commit of its old position is not taken."""
        store = self.ctx.store
        ext = {"suggestWhichBrokerId": "0", "nextBeginOffset": str(reset),
               "minOffset": str(store.get_min_offset(topic, qid)), "maxOffset": str(store.get_max_offset(topic, qid))}
        if request.code == LITE_PULL_MESSAGE:
            tc = self.ctx.topics.get(topic)
            ext["topicSysFlag"] = str(tc.topic_sys_flag if tc is not None else 0)
            ext["groupSysFlag"] = "0"
        log.info("The queue under pulling was previously reset to start from %d (%s q%d)", reset, topic, qid)
        return new_response(ResponseCode.PULL_OFFSET_MOVED, "OFFSET_RESET", ext)

    def _compensate(self, group: str, topic: str, f: ExpressionMessageFilter) -> None:
        """5.x: the subscription a pull names is kept as the group's (QUERY_SUBSCRIPTION_BY_CONSUMER reads it)."""
        consumers = self.ctx.consumers
        known = consumers.compensated_subscription(group, topic)
        if known is not None and known.get("subString") == f.expression and \
                known.get("expressionType") == f.subscription_type:
            return
        sub = f.tag_subscription
        consumers.compensate(group, "CONSUME_ACTIVELY", topic, {
            "classFilterMode": f.class_filter_mode, "codeSet": list(sub.codes) if sub else [],
            "expressionType": f.subscription_type, "subString": f.expression if f.expression is not None else "*",
            "subVersion": int(time.time() * 1000), "tagsSet": list(sub.tags) if sub else [], "topic": topic})

    def _read(self, topic: str, qid: int, offset: int, max_nums: int, message_filter: ExpressionMessageFilter,
              inline: bool) -> Optional[GetMessageResult]:
        """The store read; on the loop only when every page is resident (else None: the pull pool reads)."""
        store = self.ctx.store
        if not inline:
            return store.get_messages(topic, qid, offset, max_nums, None,
                                      None if _is_match_all(message_filter) else message_filter)
        if _needs_message(message_filter):
            return None
        # the store API says Sequence[int]; the C read takes any sized iterable of codes (len + iteration)
        result = store.get_messages_resident(topic, qid, offset, max_nums,
                                             _tag_codes(message_filter))  # type: ignore[arg-type]
        if result is None:
            if offset != store.get_max_offset(topic, qid) or offset <= store.get_min_offset(topic, qid):
                return None
            result = GetMessageResult(S.OFFSET_OVERFLOW_ONE, offset, store.get_min_offset(topic, qid), offset)
        return result

    def _respond(self, conn: Connection, request: RemotingCommand, sg: SubscriptionGroupConfig, group: str,
                 topic: str, qid: int, offset: int, result: GetMessageResult, message_filter: ExpressionMessageFilter,
                 suspend: bool, suspend_ms: int) -> Optional[RemotingCommand]:
        """The response of a read, or None when the pull is parked (long polling)."""
        code = _STATUS_CODES[result.status](offset)
        suggest, code, next_begin = suggest_broker(self.config, sg, self.ctx.store, self.ctx.role_manager.is_slave,
                                                   topic, qid, offset, result, code)
        ext_out = {"suggestWhichBrokerId": suggest, "nextBeginOffset": str(next_begin),
                   "minOffset": str(result.min_offset), "maxOffset": str(result.max_offset)}
        if request.code == LITE_PULL_MESSAGE:       # 5.x's response header has them (4.9.8's had not)
            tc = self.ctx.topics.get(topic)
            ext_out["topicSysFlag"] = str(tc.topic_sys_flag if tc is not None else 0)
            ext_out["groupSysFlag"] = "0"
        if code == ResponseCode.SUCCESS:
            self.ctx.stats.inc_group_get(group, topic, result.message_count, result.buffer_total_size)
            return new_response(code, result.status.name, ext_out, result.buffers)
        if code == ResponseCode.PULL_NOT_FOUND and suspend:
            cfg = self.config
            if cfg.longPollingEnable:
                pr = PullRequest(conn, request, topic, qid, offset, message_filter, suspend_ms)
            else:
                pr = PullRequest(conn, request, topic, qid, offset, message_filter, cfg.shortPollingTimeMills,
                                 wakeable=False)
            assert self.hold is not None    # set by the broker once its loop runs, before it serves pulls
            self.hold.suspend(pr)
            return None
        return new_response(code, result.status.name, ext_out)
