"""The MessagingService's backend over brokers anywhere (the 5.x proxy's CLUSTER mode): ``rmqd proxy``.

Every RPC becomes remoting requests to the brokers the name servers list (rmqd or Java), by broker name, to that
group's master now (:class:`rmqd.proxy.brokers.BrokerDirectory`):

- QueryRoute / QueryAssignment: the name servers' route, every broker group at the proxy's own address (the
  addresses the client used), a group's queues kept while it elects a master (calls then fail and are retried).
- SendMessage: the proxy picks the queue as Java's ``SendMessageQueueSelector``: a message group's or lite topic's
  by Guava's consistent hash over every broker's write queues, any other round robin over them, a broker whose call
  failed in the last seconds picked last; a master that cannot be reached is followed to the group's new master,
  else another broker's queue is tried once.
- Receive: POP_MESSAGE (queue -1) on the broker the client's queue names (round robin when none), long polling on
  the broker (:mod:`rmqd.proxy.remote_pop`); handles as the proxy's (:mod:`rmqd.proxy.popped`). Ack / change invisible / DLQ go to the broker the
  handle names. A push consumer's messages are renewed with CHANGE_MESSAGE_INVISIBLETIME and acked with the newest
  handle (Java's ``ReceiptHandleProcessor``).
- Transactions: the transaction id names the broker that holds the half message, so any instance ends it
  (END_TRANSACTION oneway, as the proxy); check-backs come in over the proxy's connections (:mod:`rmqd.proxy.registry`).
- Topic and group configs: GET_TOPIC_CONFIG / GET_SUBSCRIPTIONGROUP_CONFIG from a master, kept a few seconds.
"""
from __future__ import annotations

import asyncio
import itertools
import logging
import time
from typing import TYPE_CHECKING, Callable, Optional, Sequence, TypeVar, TypeVarTuple, Unpack, cast

import orjson

from rmqd.config import BrokerConfig
from rmqd.grpc.backend import Received, ReceiveRequest
from rmqd.grpc.local_backend import guava_consistent_hash
from rmqd.grpc.routes import MASTER_ID, Address, TopicRoute
from rmqd.pop.codes import PopError
from rmqd.pop.frontend import PopExecutor
from rmqd.processors.recall import RECALL_MESSAGE, RecallError, RecallHandle
from rmqd.proxy.brokers import CALL_TIMEOUT_S, CONNECT_ERRORS, BrokerDirectory, BrokerUnavailable
from rmqd.proxy.registry import ProxyRegistry
from rmqd.proxy.remote_pop import RemotePop
from rmqd.remoting.client import RemotingClient
from rmqd.remoting.codes import RequestCode, ResponseCode
from rmqd.remoting.command import RemotingCommand, error_response, new_request
from rmqd.remoting.dispatch import Dispatcher
from rmqd.store.message import java_string_hash
from rmqd.store.metadata import SubscriptionGroupConfig, TopicConfig

if TYPE_CHECKING:
    from rmqd.acl.plain_acl import PlainAclManager
    from rmqd.auth.guard import AuthGuard
    from rmqd.grpc.clients import GrpcClientManager
    from rmqd.proxy.lite import RemoteLite
    from rmqd.tls.contexts import ClientTls
    from rmqd.store.metadata import SubscriptionGroupJson, TopicConfigJson
    from rmqd.tls.contexts import ClientTls

T = TypeVar("T")
Ts = TypeVarTuple("Ts")

log = logging.getLogger(__name__)

GET_TOPIC_CONFIG = 351
GET_SUBSCRIPTIONGROUP_CONFIG = 352
NOTIFY_UNSUBSCRIBE_LITE = 200073
CONFIG_TTL_S = 5.0            # topic and group configs asked again after this
MISSING_TTL_S = 1.0           # "no such topic / group" asked again after this
SEND_TIMEOUT_S = 5.0


class RemoteBackend(RemotePop):
    """:class:`rmqd.grpc.backend.MessagingBackend` over remoting (``rmqd proxy``); the consumers' part is
    :class:`rmqd.proxy.remote_pop.RemotePop`'s."""

    directory: BrokerDirectory          # RemotePop's calls by broker name, and the name servers' view

    def __init__(self, config: BrokerConfig, namesrv_addrs: Callable[[], list[str]], endpoint: Callable[[], Address],
                 client_tls: Optional[ClientTls] = None) -> None:
        self.config = config
        self.guard: Optional[AuthGuard] = None
        self.acl_manager: Optional[PlainAclManager] = None
        self.inline_acks = False
        self.max_lite_topic_size = int(config.extra.get("maxLiteTopicSize", 64)) if hasattr(config, "extra") else 64
        self.endpoint = endpoint
        self.dispatcher = Dispatcher("proxy-client")        # what the brokers ask the proxy
        self.client = RemotingClient(self.dispatcher, tls=client_tls)
        self.directory = BrokerDirectory(self.client, namesrv_addrs)
        self.registry = ProxyRegistry(self.directory)
        self.dispatcher.register(RequestCode.CHECK_TRANSACTION_STATE, self.registry.check_transaction)
        self.dispatcher.register(NOTIFY_UNSUBSCRIBE_LITE, self.registry.notify_unsubscribe_lite)
        super().__init__(self.directory, PopExecutor(2, int(config.popExecutorCapacity), name="proxy"))
        self._topics: dict[str, tuple[float, Optional[TopicConfig]]] = {}
        self._groups: dict[str, tuple[float, Optional[SubscriptionGroupConfig]]] = {}
        self._round = itertools.count()

    def lite(self, clients: GrpcClientManager) -> RemoteLite:
        from rmqd.proxy.lite import RemoteLite
        return RemoteLite(clients, self)

    def start(self) -> None:
        self.registry.start()

    def close(self) -> None:
        self.registry.close()
        self.client.close()
        self.executor.shutdown()

    async def run(self, fn: Callable[[Unpack[Ts]], T], *args: Unpack[Ts]) -> T:
        return await self.executor.run(fn, *args)

    # ------------------------------------------------------------------ metadata
    async def _masters(self, topic: Optional[str] = None) -> list[str]:
        """Broker names with a master: the topic's (route order), else the whole cluster's."""
        if topic is not None:
            route = await self.directory.topic_route(topic)
            names = [q.broker_name for q in route.queue_datas] if route is not None else []
        else:
            names = sorted(await self.directory.cluster())
        return [n for n in dict.fromkeys(names) if self.directory.master_of(n)]

    async def _ask_config(self, code: int, ext: dict[str, str], names: list[str]) -> tuple[Optional[object], bool]:
        """(the first config a master answers, whether any answered at all)."""
        answered = False
        for name in names:
            try:
                resp = await self.directory.invoke(name, new_request(code, ext), CALL_TIMEOUT_S)
            except (BrokerUnavailable, asyncio.TimeoutError, *CONNECT_ERRORS) as exc:
                log.debug("proxy: config %s from %s failed: %r", ext, name, exc)
                continue
            answered = True
            if resp.code == ResponseCode.SUCCESS and resp.body:
                return orjson.loads(bytes(resp.body)), True
            if resp.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED:
                answered = False
        return None, answered

    async def topic(self, name: str) -> Optional[TopicConfig]:
        now = time.monotonic()
        kept = self._topics.get(name)
        if kept is not None and now - kept[0] < (CONFIG_TTL_S if kept[1] is not None else MISSING_TTL_S):
            return kept[1]
        route = await self.directory.topic_route(name)
        if route is None or not route.queue_datas:
            self._topics[name] = (now, None)
            return None
        raw, answered = await self._ask_config(GET_TOPIC_CONFIG, {"topic": name}, await self._masters(name))
        if raw is not None:
            # the JSON boundary: a broker's TopicConfig as JSON (from_json reads the fields it knows)
            tc = TopicConfig.from_json(cast("TopicConfigJson", raw))
        else:               # a broker without GET_TOPIC_CONFIG (4.x): what the route says, no attributes
            q = route.queue_datas[0]
            tc = TopicConfig(name, q.read_queue_nums, q.write_queue_nums, q.perm)
            if answered:
                log.info("proxy: topic %s has a route but its brokers have no config of it", name)
        self._topics[name] = (now, tc)
        return tc

    async def group(self, name: str, create: bool = True) -> Optional[SubscriptionGroupConfig]:
        now = time.monotonic()
        kept = self._groups.get(name)
        if kept is not None and now - kept[0] < (CONFIG_TTL_S if kept[1] is not None else MISSING_TTL_S):
            return kept[1]
        raw, _ = await self._ask_config(GET_SUBSCRIPTIONGROUP_CONFIG, {"group": name}, await self._masters())
        # the JSON boundary: a broker's SubscriptionGroupConfig as JSON (from_json reads the fields it knows)
        sg = SubscriptionGroupConfig.from_json(cast("SubscriptionGroupJson", raw)) if raw is not None else None
        self._groups[name] = (now, sg)
        return sg

    async def route(self, topic: str, tc: Optional[TopicConfig]) -> Optional[TopicRoute]:
        route = await self.directory.topic_route(topic)
        return route if route is not None and route.queue_datas else None

    async def endpoints(self, route: TopicRoute, asked: Sequence[Address]) -> dict[tuple[str, int], list[Address]]:
        """Every broker group of the route at the proxy (cluster mode): its master entry only (the proxy follows
        the master, so a client needs no replica)."""
        own = list(asked) or [self.endpoint()]
        return {(g.name, MASTER_ID): own for g in route.groups if g.addrs}

    # ------------------------------------------------------------------ producers
    def _write_queues(self, route: TopicRoute) -> list[tuple[str, int]]:
        out: list[tuple[str, int]] = []
        for q in sorted(route.queue_datas, key=lambda q: q.broker_name):
            if q.perm & 2:
                out.extend((q.broker_name, qid) for qid in range(q.write_queue_nums))
        return out

    def _pick(self, queues: list[tuple[str, int]], avoid: set[str]) -> Optional[tuple[str, int]]:
        """Round robin over the write queues, brokers that failed lately (or ``avoid``) last."""
        if not queues:
            return None
        start = next(self._round)
        fallback: Optional[tuple[str, int]] = None
        for i in range(len(queues)):
            name, qid = queues[(start + i) % len(queues)]
            if name in avoid or not self.directory.master_of(name):
                continue
            if self.directory.failed_recently(name):
                fallback = fallback or (name, qid)
                continue
            return name, qid
        return fallback

    async def send(self, tc: TopicConfig, request: RemotingCommand, key: str,
                   peer: tuple[str, int]) -> tuple[RemotingCommand, Optional[str]]:
        route = await self.directory.topic_route(tc.topic_name)
        queues = self._write_queues(route) if route is not None else []
        if not queues:
            return error_response(ResponseCode.TOPIC_NOT_EXIST, f"no writable queue of {tc.topic_name}"), None
        tried: set[str] = set()
        for attempt in range(2):
            target: Optional[tuple[str, int]]
            if key:
                target = queues[guava_consistent_hash(java_string_hash(key), len(queues))]
            else:
                target = self._pick(queues, tried)
            if target is None:
                break
            name, qid = target
            ext = dict(request.ext_fields or {})
            ext["queueId"] = str(qid)
            try:
                resp = await self.directory.invoke(name, new_request(request.code, ext, request.body), SEND_TIMEOUT_S)
            except BrokerUnavailable as exc:
                log.info("proxy: send to %s of %s failed: %s", name, tc.topic_name, exc)
                tried.add(name)
                if key:         # a message group stays on its queue: the client retries
                    return error_response(ResponseCode.SYSTEM_ERROR, str(exc)), None
                continue
            except asyncio.TimeoutError:
                return error_response(ResponseCode.SYSTEM_ERROR, f"send to broker {name} timed out"), None
            self.directory.succeeded(name)
            return resp, name
        return error_response(ResponseCode.SYSTEM_ERROR, f"no broker of {tc.topic_name} reachable"), None

    async def end_transaction(self, ext: dict[str, str], broker: Optional[str], peer: tuple[str, int]) -> Optional[RemotingCommand]:
        if not broker:
            return error_response(ResponseCode.SYSTEM_ERROR, "cannot found transaction data")
        try:
            await self.directory.invoke_oneway(broker, new_request(RequestCode.END_TRANSACTION, ext, oneway=True))
        except BrokerUnavailable as exc:
            return error_response(ResponseCode.SERVICE_NOT_AVAILABLE, str(exc))
        return None

    async def recall(self, topic: str, handle: str, producer_group: str, peer: tuple[str, int]) -> str:
        try:
            broker = RecallHandle.decode(handle).broker_name
        except ValueError as exc:
            raise RecallError(ResponseCode.SYSTEM_ERROR, str(exc)) from None
        try:
            resp = await self.directory.invoke(broker, new_request(RECALL_MESSAGE, {
                "topic": topic, "recallHandle": handle, "producerGroup": producer_group}), CALL_TIMEOUT_S)
        except (BrokerUnavailable, asyncio.TimeoutError) as exc:
            raise RecallError(ResponseCode.SERVICE_NOT_AVAILABLE, f"recall failed, broker {broker}: {exc}") from None
        if resp.code != ResponseCode.SUCCESS:
            raise RecallError(resp.code, resp.remark or str(resp.code))
        return (resp.ext_fields or {}).get("msgId", "")

    # ------------------------------------------------------------------ consumers
    async def _readable(self, topic: str) -> list[str]:
        route = await self.directory.topic_route(topic)
        if route is None:
            return []
        return [q.broker_name for q in sorted(route.queue_datas, key=lambda q: q.broker_name)
                if q.perm & 4 and q.read_queue_nums > 0]

    async def receive(self, rr: ReceiveRequest) -> Received:
        names = await self._readable(rr.topic.topic_name)
        if rr.broker and rr.broker in names:
            broker = rr.broker
        elif names:
            broker = names[next(self._round) % len(names)]
        else:
            raise PopError(ResponseCode.NO_PERMISSION, f"no readable queue of {rr.topic.topic_name}")
        return await self.pop(broker, rr)

    # ------------------------------------------------------------------ offsets
    async def _offset_call(self, broker: str, code: int, ext: dict[str, str]) -> RemotingCommand:
        if not broker:
            raise PopError(ResponseCode.SYSTEM_ERROR, "the message queue names no broker")
        try:
            return await self.directory.invoke(broker, new_request(code, ext), CALL_TIMEOUT_S)
        except (BrokerUnavailable, asyncio.TimeoutError) as exc:
            raise PopError(ResponseCode.SERVICE_NOT_AVAILABLE, str(exc)) from None

    async def get_offset(self, group: str, topic: str, queue_id: int, broker: str) -> int:
        resp = await self._offset_call(broker, RequestCode.QUERY_CONSUMER_OFFSET,
                                       {"consumerGroup": group, "topic": topic, "queueId": str(queue_id)})
        if resp.code != ResponseCode.SUCCESS:
            return -1
        return int((resp.ext_fields or {}).get("offset", -1))

    async def update_offset(self, client: str, group: str, topic: str, queue_id: int, broker: str,
                            offset: int) -> None:
        resp = await self._offset_call(broker, RequestCode.UPDATE_CONSUMER_OFFSET, {
            "consumerGroup": group, "topic": topic, "queueId": str(queue_id), "commitOffset": str(offset)})
        if resp.code != ResponseCode.SUCCESS:
            raise PopError(resp.code, resp.remark or str(resp.code))

    async def query_offset(self, topic: str, queue_id: int, broker: str, policy: str, timestamp_ms: int) -> int:
        ext = {"topic": topic, "queueId": str(queue_id)}
        if policy == "BEGINNING":
            code = RequestCode.GET_MIN_OFFSET
        elif policy == "END":
            code = RequestCode.GET_MAX_OFFSET
        else:
            code, ext["timestamp"] = RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, str(timestamp_ms)
        resp = await self._offset_call(broker, code, ext)
        if resp.code != ResponseCode.SUCCESS:
            raise PopError(resp.code, resp.remark or str(resp.code))
        return int((resp.ext_fields or {}).get("offset", 0))
