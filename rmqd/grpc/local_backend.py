"""The broker in this process as the MessagingService's backend (the 5.x proxy's LOCAL mode).

Sends and transaction ends become the broker's own SEND_MESSAGE / END_TRANSACTION requests (the same checks,
timers, retry/DLQ and half-message rules as 4.x clients get); receive, ack, change invisible duration use
:class:`rmqd.pop.PopService`, like the remoting POP codes. A slave's endpoint has its master do what is written
there (:mod:`rmqd.grpc.master_link`): sends, transaction ends, and receives with their acks, invisible times and
DLQ forwards (:class:`rmqd.proxy.remote_pop.RemotePop`, with the broker's own receipt handles, so an ack may come
through any endpoint of the group). Every part comes as a named handle (:class:`LocalParts`), never the broker
controller.
"""
from __future__ import annotations

import asyncio
import dataclasses
import logging
from typing import (TYPE_CHECKING, Callable, Hashable, NamedTuple, Optional, Sequence, TypeVar, TypeVarTuple, Unpack,
                    cast)

from rmqd.broker.client_manager import ClientChannelInfo
from rmqd.config import BrokerConfig
from rmqd.grpc.backend import Received, ReceiveRequest
from rmqd.grpc.clients import producer_group_of
from rmqd.grpc.convert import to_grpc_message
from rmqd.grpc.handles import namesrv_invoke
from rmqd.grpc.master_link import MasterLink
from rmqd.grpc.routes import Address, ClusterRoutes, TopicRoute, local_route
from rmqd.pop.extra_info import ExtraInfo, ReceiptHandle
from rmqd.pop.frontend import PopExecutor, pop_with_polling
from rmqd.proxy.brokers import BrokerUnavailable
from rmqd.proxy.remote_pop import RemotePop
from rmqd.remoting.codes import RequestCode, ResponseCode, Version
from rmqd.remoting.command import RemotingCommand, error_response, new_request
from rmqd.remoting.dispatch import TO_POOL
from rmqd.store.lite.names import is_lite_queue
from rmqd.store.message import decode_message, java_string_hash
from rmqd.store.metadata import SubscriptionGroupConfig, TopicConfig

if TYPE_CHECKING:
    from rmqd.broker.client_manager import SubscriptionData
    from rmqd.pop.checkpoint import CkKey
    from rmqd.grpc import handles
    from rmqd.grpc.clients import GrpcChannel
    from rmqd.grpc.lite import LiteGrpc
    from rmqd.grpc.pb import definition_pb2 as d
    from rmqd.grpc.routes import Invoke
    from rmqd.grpc.clients import GrpcClientManager
    from rmqd.acl.plain_acl import PlainAclManager
    from rmqd.pop.service import PopResult, PoppedMessage, PopService
    from rmqd.store.api import MessageStoreAPI

T = TypeVar("T")
Ts = TypeVarTuple("Ts")

log = logging.getLogger(__name__)

FORWARD_TIMEOUT_S = 5.0               # a slave's endpoint waiting for its master's answer to a forwarded send
INNER_MULTI_DISPATCH = "INNER_MULTI_DISPATCH"


async def _in(executor: PopExecutor, fn: Callable[[Unpack[Ts]], T], *args: Unpack[Ts]) -> T:
    """``fn(*args)`` in ``executor`` (Busy when full), typed as ``fn``'s result."""
    result: T = await executor.run(fn, *args)      # PopExecutor.run's own result type is open
    return result


def _header(request: RemotingCommand) -> dict[str, str]:
    """The ext fields of a request the service built (always with a header)."""
    if request.ext_fields is None:
        raise TypeError(f"request {request.code} has no ext fields")
    return request.ext_fields


def guava_consistent_hash(key: int, buckets: int) -> int:
    """Guava's ``Hashing.consistentHash(long, int)`` (the proxy's queue of a message group or lite topic)."""
    state, candidate = key & 0xFFFFFFFFFFFFFFFF, 0
    while True:
        state = (2862933555777941757 * state + 1) & 0xFFFFFFFFFFFFFFFF
        nxt = int((candidate + 1) / (((state >> 33) + 1) / 2.0 ** 31))
        if 0 <= nxt < buckets:
            candidate = nxt
        else:
            return candidate


class AtMaster(NamedTuple):
    """The renewal key of a message a slave's endpoint received through its master (RemotePop's key)."""

    key: Hashable


class GrpcConn:
    """The remoting-connection surface the broker's processors read (peer address)."""

    def __init__(self, peer_host: str, peer_port: int) -> None:
        self.peer_host, self.peer_port = peer_host, peer_port
        self.remote_address = f"{peer_host}:{peer_port}"
        self.closed = False


@dataclasses.dataclass
class LocalParts:
    """The broker's parts the gRPC endpoint uses."""

    config: BrokerConfig
    store: MessageStoreAPI
    topics: handles.Topics
    groups: handles.Groups
    offsets: handles.Offsets
    producers: handles.Producers
    consumers: handles.Consumers
    pop_service: PopService
    pop_executor: PopExecutor
    send_processor: handles.SendProcessor
    end_transaction_processor: handles.RequestProcessor
    send_back_processor: handles.RequestProcessor
    recaller: handles.Recaller
    role: handles.ReplicaRole         # the replication role manager (is_slave, master_addr)
    lite_priority: handles.LiteParts
    auth: handles.Auth                # rmqd.auth (guard, request_signer)
    acl_manager: Optional[PlainAclManager]
    namesrv_invoke: Invoke            # (addr, request, timeout) -> awaitable response
    address: Callable[[], str]        # this broker's remoting address

    @classmethod
    def of(cls, broker: handles.BrokerParts) -> "LocalParts":
        """The parts of a broker controller (where the endpoint is made)."""
        return cls(broker.config, broker.store, broker.topic_config_manager, broker.subscription_group_manager,
                   broker.consumer_offset_manager, broker.producer_manager, broker.consumer_manager,
                   broker.pop_service, broker.pop_executor, broker.send_processor, broker.end_transaction_processor,
                   broker.send_back_processor, broker.recaller, broker.role_manager, broker.lite_priority,
                   broker.auth, broker.acl_manager, namesrv_invoke(broker), lambda: broker.address)


class LocalRegistry:
    """5.x clients in the broker's producer and consumer managers, as 4.x clients' channels."""

    def __init__(self, producers: handles.Producers, consumers: handles.Consumers) -> None:
        self.producers, self.consumers = producers, consumers

    @staticmethod
    def _info(ch: GrpcChannel) -> ClientChannelInfo:
        return ClientChannelInfo(ch, ch.client_id, ch.language, Version.V4_9_8)

    def register_producer(self, group: str, channel: GrpcChannel) -> None:
        self.producers.register(group, self._info(channel))

    def register_consumer(self, group: str, channel: GrpcChannel, subscriptions: list[SubscriptionData]) -> None:
        self.consumers.register(group, self._info(channel), "CONSUME_POP", "CLUSTERING", "CONSUME_FROM_LAST_OFFSET",
                                subscriptions, notify=False)

    def release(self, channel: GrpcChannel) -> list[str]:
        self.producers.do_channel_close(channel)
        return self.consumers.do_channel_close(channel) or []


class LocalBackend:
    """The MessagingService's backend over this process's broker (:class:`rmqd.grpc.backend.MessagingBackend`)."""

    def __init__(self, parts: LocalParts, endpoint_address: Callable[[], Address]) -> None:
        self.parts = p = parts
        self.config = c = p.config
        self.guard = p.auth.guard
        self.acl_manager = p.acl_manager
        self.registry = LocalRegistry(p.producers, p.consumers)
        self.pop = p.pop_service
        self.pop_executor: PopExecutor = p.pop_executor
        self.send_executor = PopExecutor(max(2, min(8, int(c.sendMessageThreadPoolNums))),
                                         int(c.popExecutorCapacity), name="grpc-send")
        self.inline_acks = p.store.config.flush_disk_type == "ASYNC_FLUSH"
        self.max_lite_topic_size = int(p.lite_priority.lite_config.maxLiteTopicSize)
        # a slave's calls to its master: sends, transaction ends, and the consumers' part (RemotePop)
        self.master = MasterLink(lambda: p.role.master_addr, p.auth.request_signer)
        self.at_master = RemotePop(self.master, self.pop_executor)
        # the name server's routes and the other brokers' gRPC ports (rmqd.grpc.routes), over the broker's client
        self.routes = ClusterRoutes(p.namesrv_invoke, lambda: c.namesrv_addrs, p.address, endpoint_address)

    def lite(self, clients: GrpcClientManager) -> LiteGrpc:
        from rmqd.grpc.lite import LiteGrpc
        manager = self.parts.lite_priority.manager
        if manager is None:         # LitePriority.install runs while the broker is made, before any endpoint
            raise RuntimeError("the broker's Lite Mode is not installed (LitePriority.install)")
        return LiteGrpc(clients, manager, self)

    def start(self) -> None:
        pass

    def close(self) -> None:
        self.master.close()
        self.send_executor.shutdown()

    async def run(self, fn: Callable[[Unpack[Ts]], T], *args: Unpack[Ts]) -> T:
        return await _in(self.send_executor, fn, *args)

    # ------------------------------------------------------------------ metadata
    async def topic(self, name: str) -> Optional[TopicConfig]:
        return self.parts.topics.get(name)

    async def group(self, name: str, create: bool = True) -> Optional[SubscriptionGroupConfig]:
        """The group's config; auto-creating one writes subscriptionGroup.json, so that runs off the loop."""
        groups = self.parts.groups
        sg = groups.table.get(name)
        if sg is None and create and groups.auto_create:
            sg = await _in(self.send_executor, groups.find, name)
        return sg

    async def route(self, topic: str, tc: Optional[TopicConfig]) -> Optional[TopicRoute]:
        """The name server's route of ``topic`` (every broker, as the proxy in local mode), else this broker alone."""
        route = await self.routes.topic_route(topic) if self.config.namesrv_addrs else None
        if route is None or not route.queue_datas:
            if tc is None:
                return None
            route = local_route(self.config.brokerName, self.parts.address(), tc.read_queue_nums,
                                tc.write_queue_nums, tc.perm)
        return route

    async def endpoints(self, route: TopicRoute, asked: Sequence[Address]) -> dict[tuple[str, int], list[Address]]:
        return await self.routes.endpoints(route, asked)

    # ------------------------------------------------------------------ producers
    async def send(self, tc: TopicConfig, request: RemotingCommand, key: str,
                   peer: tuple[str, int]) -> tuple[RemotingCommand, Optional[str]]:
        ext = _header(request)
        if key:
            ext["queueId"] = str(guava_consistent_hash(java_string_hash(key), max(1, tc.write_queue_nums)))
        master = self._master_to_forward(ext.get("sysFlag") == "4")
        if master is not None:
            return await self._forward_send(master, request), None
        sp = self.parts.send_processor
        conn = GrpcConn(*peer)
        # the broker's send lane rule: a small ASYNC_FLUSH append to an existing topic is a memory copy,
        # answered on the loop; anything that may block goes to the executor
        inline = sp.process_inline(conn, request)
        resp = await _in(self.send_executor, sp.process, conn, request) if inline is TO_POOL else inline
        if not isinstance(resp, RemotingCommand):
            raise TypeError(f"the send processor answered {resp!r}, not a RemotingCommand")
        return resp, None

    def _on_slave(self) -> bool:
        """Whether this broker is a slave now: what it would write goes to its master (:attr:`master`)."""
        return bool(self.parts.role.is_slave)

    def _master_to_forward(self, transactional: bool) -> Optional[str]:
        """A slave's endpoint passes a (non-transactional) send on to its master, as the 5.x proxy routes sends to
        the master: a client given every replica's endpoint keeps sending through a failover. None on a master,
        or while a slave knows no master (then the local broker refuses it, and the client retries)."""
        rm = self.parts.role
        if transactional or not rm.is_slave:
            return None
        return rm.master_addr

    async def _forward_send(self, master: str, request: RemotingCommand) -> RemotingCommand:
        return await self._to_master(request, f"gRPC send forwarded to the master {master}")

    async def _to_master(self, request: RemotingCommand, what: str) -> RemotingCommand:
        """``request`` answered by the master; SERVICE_NOT_AVAILABLE when it cannot be (the client retries)."""
        try:
            return await self.master.invoke(self.config.brokerName, request, FORWARD_TIMEOUT_S)
        except (BrokerUnavailable, asyncio.TimeoutError) as exc:
            log.warning("%s failed: %r", what, exc)
            return error_response(ResponseCode.SERVICE_NOT_AVAILABLE, f"{what} failed: {exc!r}")

    async def end_transaction(self, ext: dict[str, str], broker: Optional[str],
                              peer: tuple[str, int]) -> Optional[RemotingCommand]:
        if self._on_slave():        # the half message was stored on the master (a slave takes none)
            return await self._to_master(new_request(RequestCode.END_TRANSACTION, ext), "END_TRANSACTION")
        proc = self.parts.end_transaction_processor
        return await _in(self.send_executor, proc.process, GrpcConn(*peer),
                         new_request(RequestCode.END_TRANSACTION, ext))

    async def recall(self, topic: str, handle: str, producer_group: str, peer: tuple[str, int]) -> str:
        return await _in(self.send_executor, self.parts.recaller.recall, topic, handle, producer_group, peer)

    # ------------------------------------------------------------------ consumers
    async def receive(self, rr: ReceiveRequest) -> Received:
        if self._on_slave():        # the checkpoint is written on the master: it pops there
            got = await self.at_master.pop(self.config.brokerName, rr)
            return Received(got.messages, got.state, [(match, AtMaster(key)) for match, key in got.holds])
        qid = -1     # as the proxy: a receive pops every queue of the broker, whatever queue the client names
        result, state = await pop_with_polling(self.pop, self.pop_executor, rr.group.group_name, rr.topic.topic_name,
                                               qid, rr.batch, rr.invisible_ms, rr.message_filter, 0, rr.poll_ms,
                                               rr.host, order=rr.group.consume_message_orderly)
        return await self.received(result, state, rr)

    async def received(self, result: PopResult, state: str, rr: ReceiveRequest) -> Received:
        """A pop's result as 5.x messages (decoded in the executor: CPU work), with their renewal keys."""
        if not result.messages:
            return Received([], state)
        out = await _in(self.pop_executor, self._to_messages, result.messages, rr.topic.topic_name, rr.namespace)
        group = rr.group.group_name
        holds: list[tuple[Hashable, Hashable]] = [
            ((group, pm.extra.broker_name, pm.queue_id, pm.extra.ck_queue_offset, pm.extra.pop_time),
             (pm.topic, group, pm.queue_id, pm.extra.ck_queue_offset, pm.extra.pop_time))
            for pm in result.messages]
        return Received(out, state, holds)

    @staticmethod
    def _to_messages(popped: list[PoppedMessage], topic: str, namespace: str) -> list[d.Message]:
        """Popped records as 5.x messages."""
        out = []
        for pm in popped:
            m = decode_message(pm.record)
            real = (m.properties.get("RETRY_TOPIC") or topic) if pm.topic.startswith("%RETRY%") else topic
            msg = to_grpc_message(m, real, ReceiptHandle(pm.extra, m.commit_log_offset), namespace=namespace)
            if pm.attempt:                  # an orderly batch handed out again
                msg.system_properties.delivery_attempt = pm.attempt
            if is_lite_queue(pm.topic):     # as the broker hands a lite message to the proxy: its LMQ
                msg.user_properties.setdefault(INNER_MULTI_DISPATCH, pm.topic)
            out.append(msg)
        return out

    def handle_key(self, group: str, h: ReceiptHandle) -> Hashable:
        """The same key whether the message was popped here or through the master (RemotePop's)."""
        return self.at_master.handle_key(group, h)

    async def renew(self, keys: list[Hashable], invisible_ms: int, within_ms: int) -> list[Hashable]:
        remote = [k.key for k in keys if isinstance(k, AtMaster)]
        # the others are this broker's own POP keys (AtMaster is a NamedTuple: isinstance(k, tuple) would not do)
        local = [cast("CkKey", k) for k in keys if not isinstance(k, AtMaster)]
        still: list[Hashable] = list(await _in(self.pop_executor, self.pop.renew, local, invisible_ms, within_ms)) \
            if local else []
        if remote:
            still.extend(AtMaster(k) for k in await self.at_master.renew(remote, invisible_ms, within_ms))
        return still

    async def ack(self, group: str, queue: str, h: ReceiptHandle, inline: bool = False) -> None:
        if self._on_slave():
            await self.at_master.ack(group, queue, h)
        elif inline:        # ASYNC_FLUSH: an ack record is a memory copy, done on the loop
            self.pop.ack(group, queue, h.extra, h.extra.queue_offset)
        else:
            await _in(self.pop_executor, self.pop.ack, group, queue, h.extra, h.extra.queue_offset)

    async def change_invisible(self, group: str, queue: str, h: ReceiptHandle, invisible_ms: int,
                               suspend: bool) -> ExtraInfo:
        if self._on_slave():
            return await self.at_master.change_invisible(group, queue, h, invisible_ms, suspend)
        return await _in(self.pop_executor, self.pop.change_invisible_time, group, queue, h.extra,
                         h.extra.queue_offset, invisible_ms, suspend)

    async def send_back(self, ext: dict[str, str], h: ReceiptHandle, peer: tuple[str, int]) -> RemotingCommand:
        if self._on_slave():
            return await self.at_master.send_back(ext, h, peer)
        resp = await _in(self.send_executor, self.parts.send_back_processor.process, GrpcConn(*peer),
                         new_request(RequestCode.CONSUMER_SEND_MSG_BACK, ext))
        if resp is None:
            raise TypeError("the send-back processor answered nothing")
        return resp

    # ------------------------------------------------------------------ offsets
    async def get_offset(self, group: str, topic: str, queue_id: int, broker: str) -> int:
        return self.parts.offsets.query_offset(group, topic, queue_id)

    async def update_offset(self, client: str, group: str, topic: str, queue_id: int, broker: str,
                            offset: int) -> None:
        self.parts.offsets.commit_offset(client, group, topic, queue_id, offset)

    async def query_offset(self, topic: str, queue_id: int, broker: str, policy: str, timestamp_ms: int) -> int:
        store = self.parts.store
        if policy == "BEGINNING":
            return store.get_min_offset(topic, queue_id)
        if policy == "END":
            return store.get_max_offset(topic, queue_id)
        return await _in(self.pop_executor, store.get_offset_by_time, topic, queue_id, timestamp_ms)

    # ------------------------------------------------------------------ lite (rmqd.grpc.lite)
    def read_message(self, commit_log_offset: int) -> Optional[bytes]:
        return self.parts.store.read_message(commit_log_offset)


__all__ = ["LocalBackend", "LocalParts", "GrpcConn", "guava_consistent_hash", "producer_group_of"]
