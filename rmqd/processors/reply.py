"""SEND_REPLY_MESSAGE (324) / SEND_REPLY_MESSAGE_V2 (325): request/reply (README §4.3).

Java: ``broker/processor/ReplyMessageProcessor``.  The replier sends the reply (topic normally
``<cluster>_REPLY_TOPIC``) like a normal send; the broker

1. checks the topic exactly like SEND_MESSAGE (msgCheck: validity, auto-create, queue id);
2. pushes it to the requester: the channel of the client id in property ``REPLY_TO_CLIENT`` gets
   PUSH_REPLY_MESSAGE_TO_CLIENT (326, sync, 10 s) with a ReplyMessageRequestHeader and the body,
   properties + ``PUSH_REPLY_TIME``;
3. answers SUCCESS (msgId "0", queueOffset 0) when the push succeeded, else SYSTEM_ERROR with the
   push failure as remark;
4. stores the reply (``storeReplyMessageEnable``, default true) and, when stored, fills msgId /
   queueId / queueOffset from the put – the response code stays the push outcome.

Runs in the send pool; the push waits for the requester on the loop.
"""
from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import random
import time
from typing import TYPE_CHECKING, Mapping, Optional

from rmqd.broker.context import BrokerContext
from rmqd.processors.send import REQUIRED_SEND_FIELDS, SendMessageProcessor, full_header, truthy
from rmqd.remoting.codes import RequestCode, ResponseCode
from rmqd.remoting.command import RemotingCommand, error_response, new_request, new_response
from rmqd.remoting.dispatch import Dispatcher, ProcessorPool
from rmqd.store.message import MessageToStore, find_property, java_string_hash

if TYPE_CHECKING:
    from rmqd.processors.handles import ClientChannel, RequestPeer

log = logging.getLogger(__name__)

PROPERTY_MESSAGE_REPLY_TO_CLIENT = "REPLY_TO_CLIENT"
PROPERTY_PUSH_REPLY_TIME = "PUSH_REPLY_TIME"
PUSH_TIMEOUT_S = 10.0
_PUT_OK = {"PUT_OK", "FLUSH_DISK_TIMEOUT", "FLUSH_SLAVE_TIMEOUT", "SLAVE_NOT_AVAILABLE"}


def java_socket_address(host: str, port: int) -> str:
    """``InetSocketAddress.toString()`` of a literal address: ``/ip:port``."""
    return f"/{host}:{port}"


def add_property(props: str, name: str, value: str) -> str:
    if not props:
        return f"{name}\x01{value}"
    sep = "" if props.endswith("\x02") else "\x02"
    return f"{props}{sep}{name}\x01{value}"


class ReplyMessageProcessor:
    """Codes 324/325; ``sender``: the send processor, whose topic checks (msgCheck) a reply passes too."""

    def __init__(self, ctx: BrokerContext, sender: SendMessageProcessor) -> None:
        self.ctx = ctx
        self.sender = sender

    def register(self, dispatcher: Dispatcher, pool: ProcessorPool) -> None:
        dispatcher.register([RequestCode.SEND_REPLY_MESSAGE, RequestCode.SEND_REPLY_MESSAGE_V2], self.process, pool)

    def find_client_channel(self, client_id: str) -> Optional[ClientChannel]:
        """A live channel registered (producer first, then consumer) under ``client_id``."""
        channel: Optional[ClientChannel] = None
        for infos in self.ctx.producers.groups().values():
            for info in infos:
                if info.client_id == client_id and not info.conn.closed:
                    channel = info.conn
                    return channel
        for group_info in self.ctx.consumers.groups().values():
            found = group_info.find_channel(client_id)
            if found is not None and not found.conn.closed:
                channel = found.conn
                return channel
        return channel

    def process(self, conn: RequestPeer, request: RemotingCommand) -> RemotingCommand:
        ext = request.ext_fields or {}
        h = full_header(request) if request.code == RequestCode.SEND_REPLY_MESSAGE_V2 else ext
        for name in REQUIRED_SEND_FIELDS:
            if h.get(name) is None:
                return error_response(ResponseCode.SYSTEM_ERROR, f"the custom field <{name}> is null")
        ctx = self.ctx
        cfg = ctx.config
        err, tc = self.sender.check_topic(conn, h)
        if err is not None:
            return err
        assert tc is not None       # check_topic answers an error or the topic's config
        queue_id = int(h["queueId"])
        if queue_id < 0:
            queue_id = random.randrange(max(1, tc.write_queue_nums))
        props = h.get("properties") or ""
        body = request.body_bytes() if request.body is not None else b""

        push_ok, push_remark = self.push_reply_message(conn, h, props, body)
        resp_ext = {"MSG_REGION": cfg.regionId, "TRACE_ON": "true" if cfg.traceOn else "false"}
        if push_ok:
            code, remark = ResponseCode.SUCCESS, None
            resp_ext.update(msgId="0", queueId=str(queue_id), queueOffset="0")
        else:
            code, remark = ResponseCode.SYSTEM_ERROR, push_remark

        if cfg.storeReplyMessageEnable:
            tags = find_property(props, "TAGS") if props else None
            msg = MessageToStore(tc.topic_name, queue_id, body, props, int(h["flag"]), int(h["sysFlag"]),
                                 int(h["bornTimestamp"]), (conn.peer_host, conn.peer_port), ctx.store_host,
                                 int(h.get("reconsumeTimes") or 0), 0, java_string_hash(tags) if tags else 0,
                                 find_property(props, "KEYS") if props else None,
                                 find_property(props, "UNIQ_KEY") if props else None)
            result = ctx.store.put_message(msg)
            if result.status.name in _PUT_OK:
                resp_ext.update(msgId="%s%016X" % (ctx.identity.msg_id_prefix, result.wrote_offsets[0]),
                                queueId=str(queue_id), queueOffset=str(result.queue_offset))
            else:
                log.warning("storing reply message to %s failed: %s %s", tc.topic_name, result.status.name,
                            result.remark)
        return new_response(code, remark, resp_ext)

    def push_reply_message(self, conn: RequestPeer, h: Mapping[str, str], props: str,
                           body: bytes) -> tuple[bool, Optional[str]]:
        """PUSH_REPLY_MESSAGE_TO_CLIENT to the requester; (ok, failure remark)."""
        sender = find_property(props, PROPERTY_MESSAGE_REPLY_TO_CLIENT) if props else None
        if sender is None:
            remark = f"reply message properties[{PROPERTY_MESSAGE_REPLY_TO_CLIENT}] is null"
            log.warning("%s is null, can not reply message (from %s)", PROPERTY_MESSAGE_REPLY_TO_CLIENT,
                        conn.remote_address)
            return False, remark
        channel = self.find_client_channel(sender)
        if channel is None:
            remark = f"push reply message fail, channel of <{sender}> not found."
            log.warning(remark)
            return False, remark
        store_host = self.ctx.store_host
        header = {
            "producerGroup": h.get("producerGroup"), "topic": h.get("topic"),
            "defaultTopic": h.get("defaultTopic"), "defaultTopicQueueNums": h.get("defaultTopicQueueNums"),
            "queueId": h.get("queueId"), "sysFlag": h.get("sysFlag"), "bornTimestamp": h.get("bornTimestamp"),
            "flag": h.get("flag"),
            "properties": add_property(props, PROPERTY_PUSH_REPLY_TIME, str(int(time.time() * 1000))),
            "reconsumeTimes": h.get("reconsumeTimes"),
            "unitMode": "true" if truthy(h.get("unitMode")) else "false",
            "bornHost": java_socket_address(conn.peer_host, conn.peer_port),
            "storeHost": java_socket_address(store_host[0], store_host[1]),
            "storeTimestamp": str(int(time.time() * 1000)),
        }
        header = {k: str(v) for k, v in header.items() if v is not None}
        request = new_request(RequestCode.PUSH_REPLY_MESSAGE_TO_CLIENT, header, body)
        fail = f"push reply message to {sender}fail."     # sic: the Java broker's wording
        loop = self.ctx.identity.loop
        assert loop is not None     # known once the broker has bound its port, before it serves requests
        try:
            fut = asyncio.run_coroutine_threadsafe(channel.invoke(request, PUSH_TIMEOUT_S), loop)
            resp = fut.result(PUSH_TIMEOUT_S + 1)
        except (asyncio.TimeoutError, concurrent.futures.TimeoutError, ConnectionError, OSError) as exc:
            log.warning("push reply message to <%s> (%s) failed: %r", sender, channel.remote_address, exc)
            return False, fail
        if resp.code != ResponseCode.SUCCESS:
            log.warning("push reply message to <%s> returned %d: %s", sender, resp.code, resp.remark)
            return False, fail
        return True, None

