"""SendMessage: a 5.x client's messages as the SEND_MESSAGE requests a 4.x client would send (the proxy's
``SendMessageActivity``: its checks in its order, the topic message-type check), and the broker's answers as
send results."""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Optional

from rmqd.acl.permission import PUB
from rmqd.grpc import message_types, validate
from rmqd.grpc.broker_codes import FLUSH_CODES, SEND_CODES
from rmqd.grpc.clients import producer_group_of, transaction_id_of
from rmqd.grpc.convert import to_properties
from rmqd.grpc.errors import RpcError, proxy_error, status
from rmqd.grpc.lookups import topic_not_found
from rmqd.grpc.pb import definition_pb2 as d
from rmqd.grpc.pb import service_pb2 as s
from rmqd.remoting.codes import RequestCode, ResponseCode
from rmqd.remoting.command import new_request
from rmqd.store.message import encode_properties

if TYPE_CHECKING:
    from rmqd.config import BrokerConfig
    from rmqd.grpc.backend import Metadata, Producing, RpcContext
    from rmqd.grpc.call_checks import CallChecks
    from rmqd.remoting.command import RemotingCommand
    from rmqd.store.metadata import TopicConfig

C = d.Code


def send_request(tc: TopicConfig, m: d.Message) -> tuple[RemotingCommand, bool]:
    """The SEND_MESSAGE request a 4.x client would send for ``m`` (and whether it is transactional), queue -1:
    the backend picks the queue (a message group's or lite topic's as the proxy does)."""
    sp = m.system_properties
    transactional = sp.message_type == d.TRANSACTION
    props = to_properties(m, producer_group_of(tc.topic_name) if transactional else None)
    queue_id = -1
    born = sp.born_timestamp.seconds * 1000 + sp.born_timestamp.nanos // 1_000_000 if sp.HasField(
        "born_timestamp") else int(time.time() * 1000)
    ext = {"producerGroup": props.get("PGROUP", "CID_RMQ_SYS_GRPC"), "topic": tc.topic_name,
           "defaultTopic": "TBW102", "defaultTopicQueueNums": "4", "queueId": str(queue_id),
           "sysFlag": "4" if transactional else "0", "bornTimestamp": str(born), "flag": "0",
           "properties": encode_properties(props), "reconsumeTimes": "0", "unitMode": "false",
           "batch": "false"}
    return new_request(RequestCode.SEND_MESSAGE, ext, m.body), transactional


def send_result(resp: RemotingCommand, sp: d.SystemProperties, transactional: bool,
                broker: Optional[str] = None) -> s.SendResultEntry:
    """The broker's answer to one message as its send result (a refusal ends the RPC: RpcError)."""
    if resp.code in FLUSH_CODES:
        code, name = FLUSH_CODES[resp.code]
        return s.SendResultEntry(status=status(code, f"send message failed, sendStatus={name}"))
    if resp.code != ResponseCode.SUCCESS:
        if resp.code in SEND_CODES:
            raise RpcError(SEND_CODES[resp.code], resp.remark or "")
        raise proxy_error(C.INTERNAL_SERVER_ERROR, resp.remark or str(resp.code))
    re = resp.ext_fields or {}
    entry = s.SendResultEntry(status=status(C.OK), message_id=sp.message_id,
                              offset=int(re.get("queueOffset", 0)), transaction_id=sp.message_id,
                              recall_handle=re.get("recallHandle") or "")
    if transactional:
        cl = int(re["msgId"][-16:], 16)
        entry.transaction_id = transaction_id_of(cl, int(re.get("queueOffset", 0)), sp.message_id, broker)
    return entry


@dataclass
class SendRpcs:
    checks: CallChecks
    metadata: Metadata
    producing: Producing
    config: BrokerConfig
    max_lite_topic_size: int

    async def send_message(self, request: s.SendMessageRequest, context: RpcContext) -> s.SendMessageResponse:
        md, peer = self.checks.begin(context, request=request)
        if not request.messages:
            raise RpcError(C.MESSAGE_CORRUPTED, "no message to send")
        first = request.messages[0]
        topic = first.topic.name
        validate.check_topic(topic)
        self.checks.authorize(md, peer, {topic: PUB})
        config = self.config
        for m in request.messages:                  # SendMessageActivity.buildMessage, in its order
            if m.topic != first.topic:
                raise RpcError(C.MESSAGE_CORRUPTED, "topic in message is not same")
            validate.check_message(m, config, self.max_lite_topic_size)
        tc = await self.metadata.topic(topic)
        message_types.check_send(config, tc, first)
        if tc is None:
            raise topic_not_found(topic)
        entries = []
        single = len(request.messages) == 1
        for m in request.messages:
            request_, transactional = send_request(tc, m)
            sp = m.system_properties
            key = (sp.message_group or sp.lite_topic) if single else ""
            resp, broker = await self.producing.send(tc, request_, key, peer)
            entries.append(send_result(resp, sp, transactional, broker))
        codes = {e.status.code for e in entries}
        top = status(C.MULTIPLE_RESULTS) if len(codes) > 1 else status(entries[0].status.code)
        return s.SendMessageResponse(status=top, entries=entries)
