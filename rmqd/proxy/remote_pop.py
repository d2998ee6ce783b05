"""POP consumption on brokers over remoting, each call addressed by broker *name*: :class:`RemotePop`.

What the 5.x proxy does for a receive, an ack, a change of invisible time and a DLQ forward when the broker that
holds the messages is not in its process: POP_MESSAGE (queue -1, long polling on the broker), ACK_MESSAGE,
CHANGE_MESSAGE_INVISIBLETIME, CONSUMER_SEND_MSG_BACK. The receipt handles are the broker's own
(:mod:`rmqd.proxy.popped`), so an ack may come back through any endpoint that reaches that broker. A push consumer's
messages are renewed with CHANGE_MESSAGE_INVISIBLETIME and acked with the newest handle (Java's
``ReceiptHandleProcessor``).

Used by ``rmqd proxy`` (:class:`rmqd.proxy.backend.RemoteBackend`, names resolved by the name servers) and by a
replica's gRPC endpoint, which has its group's master do this work (:mod:`rmqd.grpc.master_link`).
"""
from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING, Hashable, Protocol

from rmqd.grpc.backend import Received, ReceiveRequest
from rmqd.grpc.convert import to_grpc_message
from rmqd.pop.codes import POLLING_FULL, POLLING_TIMEOUT, PopError
from rmqd.pop.extra_info import ExtraInfo, ReceiptHandle
from rmqd.pop.frontend import Busy, PopExecutor
from rmqd.processors.pop_ack import ACK_MESSAGE, CHANGE_MESSAGE_INVISIBLETIME
from rmqd.processors.pop_message import POP_MESSAGE
from rmqd.proxy.brokers import CALL_TIMEOUT_S, BrokerUnavailable
from rmqd.proxy.popped import popped_records
from rmqd.remoting.codes import RequestCode, ResponseCode
from rmqd.remoting.command import RemotingCommand, error_response, new_request
from rmqd.store.lite.names import parse_lmq

if TYPE_CHECKING:
    from rmqd.grpc.pb import definition_pb2 as d

log = logging.getLogger(__name__)

POLL_MARGIN_S = 3.0           # a long-polling POP waits on the broker up to its poll time; the call this longer
INIT_MODE_MAX = 1             # ConsumeInitMode.MAX, as the proxy's receive


class BrokerCalls(Protocol):
    """Requests to a broker by its name (to that group's master). Raises BrokerUnavailable, asyncio.TimeoutError."""

    async def invoke(self, name: str, request: RemotingCommand, timeout: float) -> RemotingCommand: ...


async def long_poll(directory: BrokerCalls, broker: str, request: RemotingCommand,
                    poll_ms: int) -> RemotingCommand | None:
    """A long-polling pop (POP_MESSAGE, POP_LITE_MESSAGE) on broker ``broker``, waited on up to its poll time and
    a margin: the broker's answer, or None when the call timed out (nothing found). A broker that cannot be
    reached is SERVICE_NOT_AVAILABLE (PopError)."""
    try:
        return await directory.invoke(broker, request, poll_ms / 1000.0 + POLL_MARGIN_S)
    except BrokerUnavailable as exc:
        raise PopError(ResponseCode.SERVICE_NOT_AVAILABLE, str(exc)) from None
    except asyncio.TimeoutError:
        return None


class RemotePop:
    """Receive, ack, invisible time, DLQ on brokers reached through ``directory``; blocking work on ``executor``."""

    def __init__(self, directory: BrokerCalls, executor: PopExecutor) -> None:
        self.directory = directory
        self.executor = executor
        # auto-renew: (group, broker, queue id, ck offset, pop time) of the handle a client holds
        # -> (group, topic, newest)
        self._held: dict[Hashable, tuple[str, str, ReceiptHandle]] = {}

    async def pop(self, broker: str, rr: ReceiveRequest) -> Received:
        """POP_MESSAGE (every queue) on broker ``broker`` for ``rr``."""
        ext = {"consumerGroup": rr.group.group_name, "topic": rr.topic.topic_name, "queueId": "-1",
               "maxMsgNums": str(rr.batch), "invisibleTime": str(rr.invisible_ms), "pollTime": str(rr.poll_ms),
               "bornTime": str(int(time.time() * 1000)), "initMode": str(INIT_MODE_MAX),
               "expType": rr.filter_type, "exp": rr.expression,
               "order": "true" if rr.group.consume_message_orderly else "false"}
        resp = await long_poll(self.directory, broker, new_request(POP_MESSAGE, ext), rr.poll_ms)
        if resp is None:
            return Received([], "timeout")
        return await self.received(resp, broker, rr)

    async def received(self, resp: RemotingCommand, broker: str, rr: ReceiveRequest) -> Received:
        """A POP answer as 5.x messages (decoded in the executor: CPU work)."""
        if resp.code in (POLLING_TIMEOUT, ResponseCode.NO_MESSAGE, ResponseCode.PULL_NOT_FOUND):
            return Received([], "timeout")
        if resp.code == POLLING_FULL:
            return Received([], "full")
        if resp.code == ResponseCode.SYSTEM_BUSY:
            raise Busy(resp.remark or "broker busy")
        if resp.code != ResponseCode.SUCCESS:
            raise PopError(resp.code, resp.remark or str(resp.code))
        converted = await self.executor.run(_to_messages, dict(resp.ext_fields or {}), bytes(resp.body or b""),
                                            broker, rr.topic.topic_name, rr.namespace)
        out: list[d.Message] = []
        holds: list[tuple[Hashable, Hashable]] = []
        group = rr.group.group_name
        max_attempts = int(rr.group.retry_max_times) + 1
        for msg, handle in converted:
            if msg.system_properties.delivery_attempt > max_attempts:
                await self._to_dlq(rr, msg, handle)     # the proxy's PopMessageResultFilter: TO_DLQ
                continue
            out.append(msg)
            key = self.handle_key(group, handle)
            holds.append((key, key))
            if rr.auto_renew:
                self._held[key] = (group, rr.topic.topic_name, handle)
        return Received(out, "found", holds)

    async def _to_dlq(self, rr: ReceiveRequest, msg: d.Message, h: ReceiptHandle) -> None:
        """A popped message past its group's max attempts (a Java broker hands it out again; the 5.x proxy
        filters it): to the DLQ (CONSUMER_SEND_MSG_BACK, delay level -1), then acked. On failure it is logged and
        left invisible: it comes back after its time and is tried again."""
        group, topic = rr.group.group_name, rr.topic.topic_name
        ext = {"offset": str(h.commit_log_offset), "group": group, "delayLevel": "-1",
               "originMsgId": msg.system_properties.message_id, "originTopic": topic,
               "maxReconsumeTimes": str(rr.group.retry_max_times)}
        resp = await self.send_back(ext, h, ("", 0))
        if resp.code != ResponseCode.SUCCESS:
            log.warning("proxy: %s of %s past %d attempts: DLQ forward to %s refused: %s %s",
                        msg.system_properties.message_id, group, rr.group.retry_max_times + 1,
                        h.extra.broker_name, resp.code, resp.remark)
            return
        try:
            await self.ack(group, topic, h)
        except PopError as exc:
            log.warning("proxy: ack of %s after its DLQ forward failed: %s", msg.system_properties.message_id,
                        exc.remark)

    def handle_key(self, group: str, h: ReceiptHandle) -> Hashable:
        e = h.extra
        return (group, e.broker_name, e.queue_id, e.ck_queue_offset, e.pop_time)

    def _newest(self, group: str, h: ReceiptHandle) -> ReceiptHandle:
        held = self._held.get(self.handle_key(group, h))
        return held[2] if held is not None else h

    async def renew(self, keys: list[Hashable], invisible_ms: int, within_ms: int) -> list[Hashable]:
        """Push consumers' messages due within ``within_ms``: CHANGE_MESSAGE_INVISIBLETIME, newest handle kept
        (acks and changes use it). Messages no one renews any more are forgotten once past their time."""
        now = int(time.time() * 1000)
        still: list[Hashable] = []
        for key in keys:
            held = self._held.get(key)
            if held is None:            # acked, changed, or its renewal failed
                continue
            group, queue, h = held
            if h.extra.pop_time + h.extra.invisible_time - now >= within_ms:
                still.append(key)
                continue
            try:
                extra = await self.change_invisible(group, queue, h, invisible_ms, False, keep=False)
            except PopError as exc:
                log.info("proxy: renewing a message of %s on %s failed (%s): it is visible again after its time",
                         group, h.extra.broker_name, exc.remark)
                self._held.pop(key, None)
                continue
            self._held[key] = (group, queue, ReceiptHandle(extra, h.commit_log_offset))
            still.append(key)
        for key, (_, _, h) in list(self._held.items()):
            if h.extra.pop_time + h.extra.invisible_time < now - 10_000:
                del self._held[key]
        return still

    async def _pop_call(self, h: ReceiptHandle, code: int, ext: dict[str, str]) -> RemotingCommand:
        try:
            resp = await self.directory.invoke(h.extra.broker_name, new_request(code, ext), CALL_TIMEOUT_S)
        except BrokerUnavailable as exc:
            raise PopError(ResponseCode.SERVICE_NOT_AVAILABLE, str(exc)) from None
        except asyncio.TimeoutError:
            raise PopError(ResponseCode.SYSTEM_ERROR, f"broker {h.extra.broker_name} timed out") from None
        if resp.code != ResponseCode.SUCCESS:
            raise PopError(resp.code, resp.remark or str(resp.code))
        return resp

    @staticmethod
    def _pop_ext(group: str, queue: str, h: ReceiptHandle) -> dict[str, str]:
        """ACK_MESSAGE / CHANGE_MESSAGE_INVISIBLETIME's header; a lite message's (``queue`` its LMQ) names the
        parent topic and the lite topic, as the 5.5 proxy sends it."""
        lite = parse_lmq(queue)
        ext = {"consumerGroup": group, "topic": lite[0] if lite else queue, "queueId": str(h.extra.queue_id),
               "extraInfo": h.extra.encode(), "offset": str(h.extra.queue_offset)}
        if lite:
            ext["liteTopic"] = lite[1]
        return ext

    async def ack(self, group: str, queue: str, h: ReceiptHandle, inline: bool = False) -> None:
        newest = self._newest(group, h)
        await self._pop_call(newest, ACK_MESSAGE, self._pop_ext(group, queue, newest))
        self._held.pop(self.handle_key(group, h), None)

    async def change_invisible(self, group: str, queue: str, h: ReceiptHandle, invisible_ms: int,
                               suspend: bool, keep: bool = True) -> ExtraInfo:
        newest = self._newest(group, h) if keep else h
        ext = self._pop_ext(group, queue, newest)
        ext["invisibleTime"] = str(invisible_ms)
        resp = await self._pop_call(newest, CHANGE_MESSAGE_INVISIBLETIME, ext)
        r = resp.ext_fields or {}
        e = newest.extra
        extra = ExtraInfo(e.queue_offset, int(r.get("popTime", 0)), int(r.get("invisibleTime", invisible_ms)),
                          int(r.get("reviveQid", e.revive_qid)), e.retry, e.broker_name, e.queue_id, e.queue_offset)
        if keep:
            self._held.pop(self.handle_key(group, h), None)
        return extra

    async def send_back(self, ext: dict[str, str], h: ReceiptHandle, peer: tuple[str, int]) -> RemotingCommand:
        try:
            return await self.directory.invoke(h.extra.broker_name,
                                               new_request(RequestCode.CONSUMER_SEND_MSG_BACK, ext), CALL_TIMEOUT_S)
        except (BrokerUnavailable, asyncio.TimeoutError) as exc:
            return error_response(ResponseCode.SYSTEM_ERROR, f"broker {h.extra.broker_name}: {exc!r}")


def _to_messages(ext: dict[str, str], body: bytes, broker: str, topic: str,
                 namespace: str) -> list[tuple[d.Message, ReceiptHandle]]:
    """A POP answer's records as 5.x messages of ``topic`` with their handles (in the executor: CPU work)."""
    out: list[tuple[d.Message, ReceiptHandle]] = []
    for rec in popped_records(ext, body, broker):
        msg = to_grpc_message(rec.message, topic, rec.handle, namespace=namespace)
        if rec.attempt:
            msg.system_properties.delivery_attempt = rec.attempt
        out.append((msg, rec.handle))
    return out
