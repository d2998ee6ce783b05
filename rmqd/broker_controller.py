"""BrokerController: wires the store, the processors and name-server registration together.

Lifecycle: ``await start()`` recovers the store and loads metadata (in an executor), starts the
pools and the listening sockets, registers with every name server and schedules the periodic
tasks (re-registration, offset persistence when changed, client channel expiry).  ``await close()``
unregisters, closes connections and pools, persists metadata and shuts the store down.
"""
from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import zlib
from typing import Any, Callable, Optional

import orjson

from rmqd.config import BrokerConfig
from rmqd.metrics.recorders import BrokerMetrics
from rmqd.processors import admin_acl, admin_install
from rmqd.processors import query, queue_lock, reply, transaction
from rmqd.processors.client_manage import ClientManageProcessor, notify_consumer_ids_changed
from rmqd.processors.client_manager import ConsumerManager, ProducerManager
from rmqd.processors.consumer_manage import ConsumerManageProcessor
from rmqd.processors.long_polling import PullRequestHoldService
from rmqd.processors.offset_query import OffsetQueryProcessor
from rmqd.processors.lite_priority import LitePriority, ParentTopicCounters
from rmqd.processors import assignment, pop, pop_ack, schedule
from rmqd.pop.frontend import PopExecutor
from rmqd.pop.service import PopService
from rmqd.processors.pull import PullMessageProcessor
from rmqd.processors.send import SendMessageProcessor
from rmqd.remoting.client import RemotingClient
from rmqd.remoting.codes import RequestCode, ResponseCode
from rmqd.remoting.command import new_request
from rmqd.remoting.dispatch import Dispatcher, ProcessorPool
from rmqd.remoting.server import RemotingServer
from rmqd.store.message import pack_host
from rmqd.store.compaction.store import CompactionConfig
from rmqd.store.topic_attributes import is_compaction_topic
from rmqd.store.layers import build_store
from rmqd.store.message_store import StoreConfig
from rmqd.store.tier.config import tier_config_from
from rmqd.store.topic_restore import restore_topics_from_store
from rmqd.store.metadata import (ConsumerOffsetManager, DelayOffsetManager, SubscriptionGroupManager,
                                 TopicConfigManager)

log = logging.getLogger(__name__)

REGISTER_TIMEOUT_S = 3.0


def store_config_from(c: BrokerConfig) -> StoreConfig:
    """Map the Java property names of BrokerConfig onto the store's config."""
    return StoreConfig(
        store_root_dir=c.storePathRootDir,
        mapped_file_size_commitlog=int(c.mapedFileSizeCommitLog),
        mapped_file_size_consume_queue=int(c.mapedFileSizeConsumeQueue),
        flush_disk_type=c.flushDiskType,
        flush_interval_commitlog_ms=int(c.flushIntervalCommitLog),
        flush_least_pages=int(c.flushCommitLogLeastPages),
        sync_flush_timeout_ms=int(c.syncFlushTimeout),
        max_message_size=int(c.maxMessageSize),
        file_reserved_time_hours=float(c.fileReservedTime),
        delete_when=str(c.deleteWhen),
        disk_max_used_space_ratio=int(c.diskMaxUsedSpaceRatio),
        max_hash_slot_num=int(c.maxHashSlotNum),
        max_index_num=int(c.maxIndexNum),
        max_transfer_bytes_on_message_in_memory=int(c.maxTransferBytesOnMessageInMemory),
        max_transfer_count_on_message_in_memory=int(c.maxTransferCountOnMessageInMemory),
        access_message_in_memory_max_ratio=int(c.accessMessageInMemoryMaxRatio),
        message_delay_level=c.messageDelayLevel,
    )


def compaction_config_from(c: BrokerConfig) -> CompactionConfig:
    """The compaction store's settings from their RocketMQ 5.x broker.conf names."""
    return CompactionConfig(
        enabled=str(c.enableCompaction).lower() == "true",
        log_file_size=int(c.compactionMappedFileSize),
        cq_file_size=int(c.compactionCqMappedFileSize),
        schedule_interval_ms=int(c.compactionScheduleInternal),
        max_offset_map_size=int(c.maxOffsetMapSize),
        thread_num=int(c.compactionThreadNum),
    )


class BrokerController:
    """One broker: listens on ``listenPort`` and the VIP port ``listenPort - 2``."""

    def __init__(self, config: BrokerConfig | None = None, host: str = "127.0.0.1") -> None:
        self.config = config or BrokerConfig()
        c = self.config
        # Timings that Java hard-codes; attributes so tests can shorten them.
        self.channel_expired_timeout_ms = 120_000
        self.channel_scan_interval_s = 10.0
        self.offset_persist_interval_s = c.flushConsumerOffsetInterval / 1000.0
        self.call_client_timeout = 10.0

        self.dispatcher = Dispatcher("broker")
        self.pools = {
            "send": ProcessorPool("send", c.sendMessageThreadPoolNums, c.sendThreadPoolQueueCapacity,
                                  c.waitTimeMillsInSendQueue),
            "pull": ProcessorPool("pull", c.pullMessageThreadPoolNums, c.pullThreadPoolQueueCapacity,
                                  c.waitTimeMillsInPullQueue),
            "query": ProcessorPool("query", c.queryMessageThreadPoolNums, c.queryThreadPoolQueueCapacity),
            "admin": ProcessorPool("admin", c.adminBrokerThreadPoolNums, 10000),
            "client": ProcessorPool("client", c.clientManageThreadPoolNums, 50000),
            "consumer": ProcessorPool("consumer", c.consumerManageThreadPoolNums, 100000),
            "transaction": ProcessorPool("transaction", c.endTransactionThreadPoolNums, 100000,
                                         c.waitTimeMillsInTransactionQueue),
        }
        for pool in self.pools.values():
            self.dispatcher.add_pool(pool)
        extra = [c.vip_port] if c.listenPort else [0]
        self.server = RemotingServer(self.dispatcher, host, c.listenPort, extra_ports=extra, name="broker",
                                     max_frame_length=c.serverMaxFrameLength, busy_poll_us=int(c.busyPollMicros),
                                     max_idle_s=float(c.serverChannelMaxIdleTimeSeconds))
        self.server.add_close_listener(self._on_channel_close)

        # store and metadata
        self.store_config = store_config_from(c)
        self.store = build_store(self.store_config, compaction_config_from(c), tier_config_from(c.to_properties()))
        cfg_dir = self.store_config.config_dir
        self.topic_config_manager = TopicConfigManager(
            cfg_dir, c.brokerClusterName, c.brokerName, c.autoCreateTopicEnable, c.defaultTopicQueueNums,
            trace_topic_enable=c.traceTopicEnable, on_change=self._on_topic_change)
        self.subscription_group_manager = SubscriptionGroupManager(cfg_dir, c.autoCreateSubscriptionGroup)
        self.consumer_offset_manager = ConsumerOffsetManager(cfg_dir)
        self.delay_offset_manager = DelayOffsetManager(cfg_dir)
        self.consumer_manager = ConsumerManager(self._on_consumer_group_changed)
        self.producer_manager = ProducerManager()

        self.loop: Optional[asyncio.AbstractEventLoop] = None
        self.namesrv_client: Optional[RemotingClient] = None
        self.pull_hold_service: Optional[PullRequestHoldService] = None
        self._tasks: list[asyncio.Task] = []
        self._register_lock: Optional[asyncio.Lock] = None
        self._registered_version = -1
        self._started = False
        self.store_host: tuple = (c.brokerIP1, c.listenPort)
        self.msg_id_prefix = ""
        # Background services (start()/shutdown()): started after the store and metadata load,
        # shut down (reverse order) before metadata is persisted.
        self.services: list[Any] = []
        # rmqd.metrics: counters the processors and the dispatcher record into (read at scrape time)
        self.metrics = BrokerMetrics()
        self.dispatcher.set_observer(self.metrics.rpc.observe)
        self.acl_manager = None
        if c.aclEnable:
            from rmqd.acl.setup import build_acl

            self.acl_manager, self.dispatcher.request_hook = build_acl(c.aclFile)
            self.services.append(self.acl_manager)
        self._register_processors()

    # ------------------------------------------------------------------ processors
    def _register_processors(self) -> None:
        """Register the broker request processors (send, pull, client and consumer management...)."""
        d, p = self.dispatcher, self.pools
        self.send_processor = SendMessageProcessor(self)
        d.register([RequestCode.SEND_MESSAGE, RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_BATCH_MESSAGE],
                   self.send_processor.process, p["send"],
                   inline_first=self.send_processor.process_inline)
        self.pull_processor = PullMessageProcessor(self)
        d.register(RequestCode.PULL_MESSAGE, self.pull_processor.process, p["pull"],
                   inline_first=self.pull_processor.process_inline)
        cm = self.client_manage_processor = ClientManageProcessor(self)
        d.register(RequestCode.HEART_BEAT, cm.heart_beat, p["client"])
        d.register(RequestCode.UNREGISTER_CLIENT, cm.unregister_client, p["client"])
        d.register(RequestCode.CHECK_CLIENT_CONFIG, cm.check_client_config, p["client"])
        d.register(RequestCode.GET_CONSUMER_RUNNING_INFO, cm.get_consumer_running_info)  # awaits the client
        cons = self.consumer_manage_processor = ConsumerManageProcessor(self)
        d.register(RequestCode.GET_CONSUMER_LIST_BY_GROUP, cons.get_consumer_list_by_group, p["consumer"])
        d.register(RequestCode.QUERY_CONSUMER_OFFSET, cons.query_consumer_offset, p["consumer"])
        d.register(RequestCode.UPDATE_CONSUMER_OFFSET, cons.update_consumer_offset, p["consumer"])
        oq = self.offset_query_processor = OffsetQueryProcessor(self)
        d.register(RequestCode.GET_MAX_OFFSET, oq.get_max_offset, p["admin"])
        d.register(RequestCode.GET_MIN_OFFSET, oq.get_min_offset, p["admin"])
        d.register(RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, oq.search_offset_by_timestamp, p["admin"])
        d.register(RequestCode.GET_EARLIEST_MSG_STORETIME, oq.get_earliest_msg_storetime, p["admin"])
        schedule.install_all(self)   # delay levels, 5.x timers, CONSUMER_SEND_MSG_BACK
        admin_install.install(self)   # admin codes (topics, groups, broker config/stats)
        admin_acl.install(self)       # ACL admin codes 50-53
        for m in (queue_lock, query, transaction, reply): m.install(self)  # locks, queries, transactions, request/reply
        # POP (5.x): one PopService under the remoting codes here and the gRPC endpoint (rmqd.grpc)
        c = self.config
        # 5.4 priority / 5.5 Lite Mode: POP reads lite topics through the store/lite views, orders queues by priority
        lp = self.lite_priority = LitePriority.build(c.to_properties(), self.store, self.topic_config_manager)
        self.pop_service = PopService(c.brokerName, c.brokerClusterName, lp.store_view, lp.topics_view,
                                      self.subscription_group_manager, self.consumer_offset_manager,
                                      lambda: self.store_host, int(c.reviveQueueNum), self.metrics.messages.on_dlq,
                                      counters=ParentTopicCounters(self.metrics.pop),
                                      on_out=lp.fold_out(self._count_pop_out), queue_selector=lp.queue_selector)
        self.pop_executor = PopExecutor(max(2, int(c.pullMessageThreadPoolNums)), int(c.popExecutorCapacity))
        self.services.append(self.pop_service)
        for m in (pop, pop_ack, assignment): m.install(self)   # POP codes, QUERY_ASSIGNMENT / SET_MESSAGE_REQUEST_MODE
        lp.install(self)   # lite registry and delivery, priority/lite send hooks, lite remoting codes

    def _count_pop_out(self, group: str, topic: str, messages: int, size: int) -> None:
        """Messages a pop or peek handed out: the GROUP_GET stats (and so rocketmq_messages_out_total)."""
        stats = getattr(self, "broker_stats", None)
        if stats is not None:
            stats.inc_group_get(group, topic, messages, size)

    # ------------------------------------------------------------------ addresses
    @property
    def address(self) -> str:
        return f"{self.config.brokerIP1}:{self.server.port}"

    @property
    def vip_address(self) -> str:
        ports = self.server.bound_ports
        return f"{self.config.brokerIP1}:{ports[1] if len(ports) > 1 else ports[0]}"

    # ------------------------------------------------------------------ lifecycle
    def _load_blocking(self) -> None:
        self.store.start()
        for mgr in (self.topic_config_manager, self.subscription_group_manager,
                    self.consumer_offset_manager, self.delay_offset_manager):
            mgr.load()
        restore_topics_from_store(self.topic_config_manager, list(self.store._cqs))  # topics.json damaged/lost
        for tc in list(self.topic_config_manager.table.values()):
            self._tell_store_policy(tc)
        for svc in self.services:
            svc.start()

    async def start(self) -> None:
        loop = self.loop = asyncio.get_running_loop()
        self._register_lock = asyncio.Lock()
        await loop.run_in_executor(None, self._load_blocking)
        try:
            self.pull_hold_service = PullRequestHoldService(loop, self.store.get_max_offset,
                                                            self.pull_processor.rerun)
            if self.config.longPollingEnable:
                self.store.add_dispatch_listener(self.pull_hold_service.on_dispatch,
                                                 watch=self.pull_hold_service.watched_queues)
            self.pull_hold_service.start()
            self.pop_service.attach(self.store.add_dispatch_listener)
            await self.server.start()
        except BaseException:
            await loop.run_in_executor(None, self.store.shutdown)
            raise
        self.config.listenPort = self.server.port
        self.config.haListenPort = self.server.port + 1     # BrokerStartup: haListenPort = listenPort + 1
        self.store_host = (self.config.brokerIP1, self.server.port)
        self.msg_id_prefix = pack_host(self.store_host).hex().upper()
        self.send_processor.open_lane()
        self.dispatcher.lane = self.send_processor.lane
        self.namesrv_client = RemotingClient()
        self._started = True
        await self.register_broker_all()
        self._tasks = [
            loop.create_task(self._every(max(10.0, min(self.config.registerNameServerPeriod, 60000) / 1000.0),
                                         self.register_broker_all), name="broker-register"),
            loop.create_task(self._every(self.offset_persist_interval_s, self._persist_offsets_if_changed),
                             name="broker-persist-offsets"),
            loop.create_task(self._every(self.channel_scan_interval_s, self._scan_not_active_channels),
                             name="broker-scan-channels"),
        ]

    async def _every(self, interval_s: float, fn: Callable[[], Any]) -> None:
        while True:
            await asyncio.sleep(interval_s)
            try:
                result = fn()
                if asyncio.iscoroutine(result):
                    await result
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("periodic broker task %s failed", getattr(fn, "__name__", fn))

    async def close(self) -> None:
        loop = asyncio.get_running_loop()
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            try:
                await task
            except (asyncio.CancelledError, Exception):
                pass
        self._tasks = []
        if self._started:
            await self.unregister_broker_all()
        if self.pull_hold_service is not None:
            self.pull_hold_service.shutdown()
        self.send_processor.close_lane()
        await self.server.close()
        self.pop_executor.shutdown()
        if self.namesrv_client is not None:
            self.namesrv_client.close()
        if self._started:
            self._started = False
            await loop.run_in_executor(None, self._shutdown_blocking)

    def _shutdown_blocking(self) -> None:
        for svc in reversed(self.services):
            try:
                svc.shutdown()
            except Exception:
                log.exception("shutting down %s failed", type(svc).__name__)
        for mgr in (self.consumer_offset_manager, self.delay_offset_manager):
            try:
                mgr.shutdown()
            except Exception:
                log.exception("persisting %s on shutdown failed", mgr.path)
        for mgr in (self.topic_config_manager, self.subscription_group_manager):
            try:
                mgr.persist()
            except Exception:
                log.exception("persisting %s on shutdown failed", mgr.path)
        self.store.shutdown()

    # ------------------------------------------------------------------ periodic work
    async def _persist_offsets_if_changed(self) -> None:
        await self.loop.run_in_executor(None, self.consumer_offset_manager.persist_if_dirty)

    def _scan_not_active_channels(self) -> None:
        for conn in self.consumer_manager.scan_not_active(self.channel_expired_timeout_ms):
            conn.close()
        for conn in self.producer_manager.scan_not_active(self.channel_expired_timeout_ms):
            conn.close()

    def _on_channel_close(self, conn: Any) -> None:
        groups = self.consumer_manager.do_channel_close(conn)
        if groups:
            log.info("consumer channel %s closed; removed from groups %s", conn.remote_address, groups)
        self.producer_manager.do_channel_close(conn)

    def _on_consumer_group_changed(self, group: str, conns: list) -> None:
        notify_consumer_ids_changed(group, conns)

    # ------------------------------------------------------------------ name server registration
    def _register_header(self) -> dict:
        c = self.config
        return {"brokerName": c.brokerName, "brokerAddr": self.address, "clusterName": c.brokerClusterName,
                "haServerAddr": f"{c.brokerIP2 or c.brokerIP1}:{c.haListenPort}", "brokerId": str(c.brokerId)}

    def register_body(self, only: Any = None) -> tuple[bytes, int]:
        """RegisterBrokerBody JSON (topic config wrapper + empty filter server list) and the
        topics DataVersion counter it carries.  Takes the topic manager's lock: never call it on
        the loop thread (a pool thread may hold that lock while it waits for the loop).

        With ``only`` (a TopicConfig), the body carries just that topic (Java's
        registerIncrementBrokerData): the name server adds or updates it and keeps the others."""
        wrapper = self.topic_config_manager.wrapper(only)
        perm = self.config.brokerPermission
        if (perm & 6) != 6:
            for tc in wrapper["topicConfigTable"].values():
                tc["perm"] &= perm | 1
        body = orjson.dumps({"filterServerList": [], "topicConfigSerializeWrapper": wrapper})
        return body, int(wrapper["dataVersion"]["counter"])

    async def register_broker_all(self, body: Optional[bytes] = None, version: int = -1) -> None:
        """REGISTER_BROKER to every name server (failures are logged, not raised).

        A body older than one already sent is skipped, so a slow periodic registration cannot
        roll the name server back to a stale topic table."""
        addrs = self.config.namesrv_addrs
        if not addrs or not self._started:
            return
        if body is None:
            body, version = await self.loop.run_in_executor(None, self.register_body)
        async with self._register_lock:
            if version < self._registered_version:
                return
            self._registered_version = version
            header = dict(self._register_header(), compressed="false",
                          bodyCrc32=str(zlib.crc32(body) & 0x7FFFFFFF))

            async def one(addr: str) -> None:
                try:
                    resp = await self.namesrv_client.invoke(
                        addr, new_request(RequestCode.REGISTER_BROKER, header, body), REGISTER_TIMEOUT_S)
                    if resp.code != ResponseCode.SUCCESS:
                        log.warning("register broker to name server %s failed: %d %s", addr, resp.code, resp.remark)
                except Exception as exc:
                    log.warning("register broker to name server %s failed: %r", addr, exc)

            await asyncio.gather(*(one(a) for a in addrs))

    async def unregister_broker_all(self) -> None:
        addrs = self.config.namesrv_addrs
        if not addrs or self.namesrv_client is None:
            return
        header = self._register_header()
        header.pop("haServerAddr")

        async def one(addr: str) -> None:
            try:
                await self.namesrv_client.invoke(addr, new_request(RequestCode.UNREGISTER_BROKER, header),
                                                 REGISTER_TIMEOUT_S)
            except Exception as exc:
                log.warning("unregister broker from name server %s failed: %r", addr, exc)

        await asyncio.gather(*(one(a) for a in addrs))

    def register_broker_all_sync(self, timeout: float = 5.0, only: Any = None) -> None:
        """Re-register now.  From a pool thread: waits until done, so a new topic is routable when
        the caller answers its client.  On the loop: schedules it."""
        loop = self.loop
        if loop is None or not self._started or loop.is_closed():
            return
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:
            loop.create_task(self.register_broker_all())
            return
        body, version = self.register_body(only)
        fut = asyncio.run_coroutine_threadsafe(self.register_broker_all(body, version), loop)
        try:
            fut.result(timeout)
        except concurrent.futures.TimeoutError:
            log.warning("re-registration with the name servers did not finish within %.1fs", timeout)

    def _tell_store_policy(self, tc: Any) -> None:
        """A COMPACTION topic's reads go to the compaction store; its sends skip the fast lane
        (the processor checks the key)."""
        if tc is not None and is_compaction_topic(tc) and self.store.compaction is not None:
            self.store.compaction.on_topic_config(tc.topic_name, True)
            self.send_processor.forget_lane_topic(tc.topic_name)

    def _on_topic_change(self, topic_config: Any) -> None:
        self._tell_store_policy(topic_config)
        # A created/updated topic is registered alone; a deletion re-registers the whole table.
        self.register_broker_all_sync(only=topic_config)
