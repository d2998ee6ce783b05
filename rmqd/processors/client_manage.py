"""HEART_BEAT (34), UNREGISTER_CLIENT (35), CHECK_CLIENT_CONFIG (46), GET_CONSUMER_RUNNING_INFO (307).

Java: ``ClientManageProcessor``, ``AdminBrokerProcessor.getConsumerRunningInfo`` /
``Broker2Client.callClient`` (README §3.4).
"""
from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Iterable, Optional


from rmqd.broker.context import BrokerContext
from rmqd.filter import SQLParseError, is_tag_type
from rmqd.broker.client_manager import (CONSUME_FROM_WHERE, CONSUME_TYPES, MESSAGE_MODELS,
                                            ClientChannelInfo, enum_name)
from rmqd.remoting import fastjson
from rmqd.remoting.codes import RequestCode, ResponseCode, Version
from rmqd.remoting.command import RemotingCommand, error_response, new_request, new_response, require
from rmqd.remoting.dispatch import Dispatcher, ProcessorPool
from rmqd.remoting.java_errors import BadBodyError, NullBodyError
from rmqd.store.metadata import retry_topic

if TYPE_CHECKING:
    from rmqd.processors.handles import ClientChannel, RequestPeer
    from rmqd.remoting.connection import Connection


log = logging.getLogger(__name__)


def _int(value: object) -> int:
    """A JSON number (or numeric text) as an int; anything else 0."""
    if not value or not isinstance(value, (int, float, str)):
        return 0
    try:
        return int(value)
    except ValueError:
        return 0


def parse_json_body(request: RemotingCommand) -> object:
    """Decode a JSON body in fastjson's dialect (:func:`~rmqd.remoting.fastjson.loads_lenient`: standard JSON
    first); a request without a body fails as Java's RemotingSerializable.decode does (NullBodyError). Callers
    narrow the value with isinstance."""
    raw = request.body_bytes() if request.body is not None else b""
    if not raw:
        raise NullBodyError()
    try:
        return fastjson.loads_lenient(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise BadBodyError(f"{type(exc).__name__}: {exc}") from None


class ClientManageProcessor:
    def __init__(self, ctx: BrokerContext) -> None:
        self.ctx = ctx
        # 5.x heartbeat v2: the fingerprint of each group's last heartbeat (Java's consumerGroupHeartbeatTable)
        self._fingerprints: dict[str, int] = {}

    def register(self, dispatcher: Dispatcher, pool: ProcessorPool) -> None:
        dispatcher.register(RequestCode.HEART_BEAT, self.heart_beat, pool)
        dispatcher.register(RequestCode.UNREGISTER_CLIENT, self.unregister_client, pool)
        dispatcher.register(RequestCode.CHECK_CLIENT_CONFIG, self.check_client_config, pool)
        dispatcher.register(RequestCode.GET_CONSUMER_RUNNING_INFO, self.get_consumer_running_info)  # awaits the client

    # ------------------------------------------------------------------ HEART_BEAT
    def heart_beat(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        """Registers the consumers and producers of a client. 5.x heartbeat v2: a body with a non-zero
        ``heartbeatFingerprint`` may leave its subscriptions out (``withoutSub``/``isWithoutSub``: the group's
        stay as they are); the answer tells whether the group's fingerprint changed since its last heartbeat
        (``IS_SUB_CHANGE``: the client then sends them again) and that v2 is understood. A heartbeat without
        subscriptions for a group rmqd holds none of (it restarted) is answered "changed" too, so the client
        sends them (Java would keep the group without subscriptions until the client's fingerprint changes); so
        is one for a group whose pulls named a newer subVersion than it holds: the 5.x client's rebalance
        heartbeat, which carries the new subVersion, is skipped when its periodic heartbeat holds the lock, and
        the fingerprint leaves subVersion out, so Java refuses its pulls SUBSCRIPTION_NOT_LATEST for good."""
        data = parse_json_body(request) or {}
        if not isinstance(data, dict):
            return error_response(ResponseCode.SYSTEM_ERROR, "the heartbeat body is invalid")
        ctx = self.ctx
        client_id = str(data.get("clientID") or "")
        language = request.language if isinstance(request.language, str) else str(request.language)
        fingerprint = _int(data.get("heartbeatFingerprint"))
        without_sub = fingerprint != 0 and bool(data.get("withoutSub", data.get("isWithoutSub", False)))
        sub_change = fingerprint == 0               # v1: Java always answers "changed"
        for cd in data.get("consumerDataSet") or []:
            group = cd.get("groupName")
            if not group:
                continue
            if fingerprint != 0 and self._fingerprints.get(group, fingerprint) != fingerprint:
                sub_change = True
            held = ctx.consumers.get(group)
            if without_sub and (held is None or not held.subscriptions or held.subscription_behind):
                sub_change = True       # rmqd: a group it holds no (or older) subscriptions of asks for them
            self._fingerprints[group] = fingerprint
            sg = ctx.groups.find(group)
            notify = True
            if sg is not None:
                notify = sg.notify_consumer_ids_changed_enable
                rt = retry_topic(group)
                if ctx.topics.get(rt) is None:
                    # topics.json change callback re-registers with the name servers.
                    ctx.topics.create_topic_in_send_message_back_method(
                        rt, sg.retry_queue_nums, 6, 0)
            channel = ClientChannelInfo(conn, client_id, language, request.version)
            changed = ctx.consumers.register(
                group, channel,
                enum_name(cd.get("consumeType"), CONSUME_TYPES, "CONSUME_PASSIVELY"),
                enum_name(cd.get("messageModel"), MESSAGE_MODELS, "CLUSTERING"),
                enum_name(cd.get("consumeFromWhere"), CONSUME_FROM_WHERE, "CONSUME_FROM_LAST_OFFSET"),
                None if without_sub else list(cd.get("subscriptionDataSet") or []), notify=notify)
            if changed:
                log.info("consumer group %s changed by heartbeat from %s (%s)", group, client_id,
                         conn.remote_address)
        for pd in data.get("producerDataSet") or []:
            group = pd.get("groupName")
            if group:
                ctx.producers.register(group, ClientChannelInfo(conn, client_id, language,
                                                                          request.version))
        return new_response(ResponseCode.SUCCESS, None, {"IS_SUPPORT_HEART_BEAT_V2": "true",
                                                         "IS_SUB_CHANGE": "true" if sub_change else "false"})

    # ------------------------------------------------------------------ UNREGISTER_CLIENT
    def unregister_client(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        require(request, "clientID")
        ext = request.ext_fields or {}
        ctx = self.ctx
        producer_group = ext.get("producerGroup")
        if producer_group:
            ctx.producers.unregister(producer_group, conn)
        consumer_group = ext.get("consumerGroup")
        if consumer_group:
            sg = ctx.groups.table.get(consumer_group)
            notify = sg.notify_consumer_ids_changed_enable if sg is not None else True
            ctx.consumers.unregister(consumer_group, conn, notify=notify)
        return new_response()

    # ------------------------------------------------------------------ CHECK_CLIENT_CONFIG
    def check_client_config(self, conn: RequestPeer, request: RemotingCommand) -> RemotingCommand:
        body = parse_json_body(request) or {}
        if not isinstance(body, dict):
            raise BadBodyError("the CHECK_CLIENT_CONFIG body is not a JSON object")
        sub = body.get("subscriptionData")
        if sub:
            etype = sub.get("expressionType")
            if is_tag_type(etype):
                return new_response()
            if not self.ctx.config.enablePropertyFilter:
                return error_response(ResponseCode.SYSTEM_ERROR,
                                      f"The broker does not support consumer to filter message by {etype}")
            if etype != "SQL92":
                return error_response(ResponseCode.SUBSCRIPTION_PARSE_FAILED,
                                      f"Not found filter for type {etype}")
            from rmqd.filter.sql92 import compile_expression      # loaded with the first SQL92 expression
            try:
                compile_expression(sub.get("subString") or "")
            except SQLParseError as exc:
                return error_response(ResponseCode.SUBSCRIPTION_PARSE_FAILED, str(exc))
        return new_response()

    # ------------------------------------------------------------------ GET_CONSUMER_RUNNING_INFO
    async def get_consumer_running_info(self, conn: RequestPeer, request: RemotingCommand) -> RemotingCommand:
        """Relay to the consumer's own connection (loop handler; awaits the client)."""
        group, client_id = require(request, "consumerGroup", "clientId")
        info = self.ctx.consumers.get(group)
        channel = info.find_channel(client_id) if info is not None else None
        if channel is None or channel.conn.closed:
            return error_response(ResponseCode.SYSTEM_ERROR, f"The Consumer <{group}> <{client_id}> not online")
        if channel.version < Version.V3_1_8_SNAPSHOT:
            return error_response(ResponseCode.SYSTEM_ERROR,
                                  f"The Consumer <{group}> Version <{channel.version}> too low to finish, "
                                  "please upgrade it to V3_1_8_SNAPSHOT")
        ext = {k: v for k, v in (request.ext_fields or {}).items()}
        relay = new_request(RequestCode.GET_CONSUMER_RUNNING_INFO, ext)
        try:
            answer = await channel.conn.invoke(relay, self.ctx.identity.call_client_timeout_s)
        except asyncio.TimeoutError:
            return error_response(ResponseCode.CONSUME_MSG_TIMEOUT,
                                  f"consumer <{group}> <{client_id}> Timeout: invoke client timeout")
        except Exception as exc:  # connection closed while waiting
            log.warning("GET_CONSUMER_RUNNING_INFO relay to %s failed: %s", channel.conn.remote_address, exc)
            return error_response(ResponseCode.SYSTEM_ERROR,
                                  f"invoke consumer <{group}> <{client_id}> Exception: {exc}")
        return new_response(answer.code, answer.remark, answer.ext_fields,
                            answer.body_bytes() if answer.body is not None else None)


def notify_consumer_ids_changed(group: str, conns: Iterable[ClientChannel]) -> None:
    """Send NOTIFY_CONSUMER_IDS_CHANGED (oneway, header consumerGroup) to every channel of a group."""
    for conn in conns:
        if conn.closed:
            continue
        try:
            conn.invoke_oneway(new_request(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, {"consumerGroup": group}))
        except Exception:
            log.exception("notify consumer ids changed to %s failed (group %s)", conn.remote_address, group)


def find_consumer_conn(ctx: BrokerContext, group: str, client_id: str) -> Optional[ClientChannel]:
    info = ctx.consumers.get(group)
    ch = info.find_channel(client_id) if info is not None else None
    return ch.conn if ch is not None else None
