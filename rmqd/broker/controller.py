"""BrokerController: builds the broker's parts, wires them together and runs their lifecycle.

It is the composition root: every collaborator is built in ``__init__`` and declared there, collected
in one :class:`rmqd.broker.context.BrokerContext` that the processors and services are given (they never
see this class), and every request processor is built by an explicit constructor and registers its codes
with the dispatcher (``processor.register(dispatcher, pool)``), as the name server's processors do.

Lifecycle: ``await start()`` recovers the store and loads metadata (in an executor), starts the
services and the listening sockets, registers with every name server and schedules the periodic
tasks (re-registration, offset persistence when changed, client channel expiry).  ``await close()``
unregisters, closes connections and pools, persists metadata and shuts the store down.
"""
from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
import time
import zlib
from typing import TYPE_CHECKING, Optional

import orjson

from rmqd.auth.hook import HookChain
from rmqd.auth.setup import build_auth
from rmqd.broker.client_manager import ConsumerManager, ProducerManager
from rmqd.broker.context import BrokerContext, BrokerIdentity
from rmqd.broker.long_polling import PullRequestHoldService
from rmqd.broker.schedule import ScheduleMessageService
from rmqd.broker.stats import BrokerStatsManager
from rmqd.broker.timer import TimerMessageService
from rmqd.broker.transaction import TransactionalMessageBridge
from rmqd.broker.transaction_check import TransactionalMessageCheckService
from rmqd.common.periodic import run_every
from rmqd.config import BrokerConfig, compaction_config_from, store_config_from, store_runtime_changes, \
    tier_config_from
from rmqd.metrics.recorders import BrokerMetrics
from rmqd.lite.parent_topics import ParentTopicCounters
from rmqd.lite.wiring import LitePriority
from rmqd.pop.frontend import PopExecutor
from rmqd.pop.extra_info import original_topic_of_pop_retry
from rmqd.pop.service import PopService
from rmqd.processors.admin_acl import AclAdminProcessor
from rmqd.processors.admin_auth import AuthAdminProcessor
from rmqd.processors.admin_broker import BrokerAdminProcessor
from rmqd.processors.admin_compaction import CompactionAdminProcessor
from rmqd.processors.admin_group import GroupAdminProcessor
from rmqd.processors.admin_store import StoreAdminProcessor
from rmqd.processors.admin_timer import TimerAdminProcessor
from rmqd.processors.admin_tier import TierAdminProcessor
from rmqd.processors.admin_topic import TopicAdminProcessor
from rmqd.processors.assignment import AssignmentProcessor, MessageRequestModeManager
from rmqd.processors.client_manage import ClientManageProcessor, notify_consumer_ids_changed
from rmqd.processors.consumer_manage import ConsumerManageProcessor
from rmqd.processors.offset_query import OffsetQueryProcessor
from rmqd.processors.pop_ack import AckMessageProcessor
from rmqd.processors.pop_message import PopMessageProcessor
from rmqd.processors.pull import PullMessageProcessor
from rmqd.processors.recall import RecallMessageProcessor, Recaller
from rmqd.processors.query import QueryMessageProcessor
from rmqd.processors.queue_lock import QueueLockProcessor, RebalanceLockManager
from rmqd.processors.reply import ReplyMessageProcessor
from rmqd.processors.send import SendMessageProcessor
from rmqd.processors.send_back import SendMessageBackProcessor
from rmqd.processors.transaction import EndTransactionProcessor
from rmqd.remoting.client import RemotingClient
from rmqd.remoting.tasks import cancel_and_wait
from rmqd.remoting.codes import RequestCode, ResponseCode
from rmqd.remoting.command import new_request
from rmqd.remoting.dispatch import Dispatcher, ProcessorPool
from rmqd.remoting.server import RemotingServer
from rmqd.tls.contexts import remoting_client_tls, remoting_server_tls
from rmqd.replicas.wiring import Replication
from rmqd.store.message import pack_host
from rmqd.store.topic_attributes import is_compaction_topic
from rmqd.store.layers import build_store
from rmqd.store.topic_restore import restore_topics_from_store
from rmqd.store.metadata import (ConsumerOffsetManager, DelayOffsetManager, SubscriptionGroupManager, TopicConfig,
                                 TopicConfigManager)

if TYPE_CHECKING:
    from rmqd.acl.plain_acl import PlainAclManager
    from rmqd.broker.handles import ClientConnection
    from rmqd.remoting.connection import Connection
    from rmqd.replicas.handles import BrokerService
    from rmqd.store.metadata import TopicsFileJson

log = logging.getLogger(__name__)

REGISTER_TIMEOUT_S = 3.0
#: a slave whose master's HA port refuses connections re-registers at most this often to learn the current one
MASTER_UNREACHABLE_REREGISTER_S = 2.0


class BrokerController:
    """One broker: listens on ``listenPort`` and the VIP port ``listenPort - 2``."""

    def __init__(self, config: BrokerConfig | None = None, host: str | None = None) -> None:
        self.config = config or BrokerConfig()
        c = self.config
        # Timings that Java hard-codes; attributes so tests can shorten them.
        self.channel_expired_timeout_ms = 120_000
        self.channel_scan_interval_s = 10.0
        self.offset_persist_interval_s = c.flushConsumerOffsetInterval / 1000.0

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
        # TLS as Java's TlsSystemConfig (environment, broker.conf, tls.config.file): the ports' and the clients'
        self.tls = remoting_server_tls(c.extra)
        self.client_tls = remoting_client_tls(c.extra)
        self.server = RemotingServer(self.dispatcher, host or c.bind_host, c.listenPort, extra_ports=extra,
                                     name="broker",
                                     max_frame_length=c.serverMaxFrameLength, busy_poll_us=int(c.busyPollMicros),
                                     max_idle_s=float(c.serverChannelMaxIdleTimeSeconds), tls=self.tls)
        self.server.add_close_listener(self._on_channel_close)

        # store and metadata
        self.store_config = store_config_from(c)
        chain = build_store(self.store_config, compaction_config_from(c), tier_config_from(c))
        # replication: the role owner, the HA service and the ReplicatedStore layer every processor writes through
        self.replication = Replication(c, chain, host or c.ha_bind_host)
        self.store = self.replication.store
        self.role_manager = self.replication.role
        cfg_dir = self.store_config.config_dir
        self.topic_config_manager = TopicConfigManager(
            cfg_dir, c.brokerClusterName, c.brokerName, c.autoCreateTopicEnable, c.defaultTopicQueueNums,
            trace_topic_enable=c.traceTopicEnable, on_change=self._on_topic_change,
            on_change_many=self._on_topics_change, transaction_topics_at_start=c.enableControllerMode)
        self.subscription_group_manager = SubscriptionGroupManager(cfg_dir, c.autoCreateSubscriptionGroup)
        self.consumer_offset_manager = ConsumerOffsetManager(cfg_dir)
        self.delay_offset_manager = DelayOffsetManager(cfg_dir)
        self.message_request_mode_manager = MessageRequestModeManager(cfg_dir)
        self.message_request_mode_manager.load()     # at construction, before the loop runs (a missing file is fine)
        self.rebalance_lock_manager = RebalanceLockManager()
        self.consumer_manager = ConsumerManager(self._on_consumer_group_changed)
        self.producer_manager = ProducerManager()
        # rmqd.metrics: counters the processors and the dispatcher record into (read at scrape time)
        self.metrics = BrokerMetrics()
        self.dispatcher.set_observer(self.metrics.rpc.observe)
        # puts are counted by the store, gets by the pull processor and POP
        self.broker_stats = BrokerStatsManager(self.store)

        self.loop: Optional[asyncio.AbstractEventLoop] = None
        self.namesrv_client: Optional[RemotingClient] = None
        self.pull_hold_service: Optional[PullRequestHoldService] = None
        self._tasks: list[asyncio.Task[None]] = []
        self._register_lock = asyncio.Lock()        # made again by each start(), for the loop it runs on
        self._registered_version = -1
        self._body_lock = threading.Lock()          # register_body: a body and its sequence number together
        self._body_seq = 0
        self._unreachable_registered = 0.0          # time.monotonic() of the last re-registration for that reason
        self._started = False
        self.identity = BrokerIdentity(store_host=(c.brokerIP1, c.listenPort))
        self.ctx = BrokerContext(
            config=c, store=self.store, topics=self.topic_config_manager,
            groups=self.subscription_group_manager, offsets=self.consumer_offset_manager,
            delay_offsets=self.delay_offset_manager, consumers=self.consumer_manager,
            producers=self.producer_manager, metrics=self.metrics, stats=self.broker_stats,
            identity=self.identity, replication=self.replication)
        # Background services (start()/shutdown()): started after the store and metadata load,
        # shut down (reverse order) before metadata is persisted.
        self.services: list[BrokerService] = []
        self.acl_manager: Optional[PlainAclManager] = None
        if c.aclEnable:
            from rmqd.acl.setup import build_acl

            self.acl_manager, self.dispatcher.request_hook = build_acl(c.aclFile)
            self.services.append(self.acl_manager)
        # access control 2.0 (5.x users and policies): the store is kept and administered even when it is off
        self.auth = build_auth(c.to_properties(), c.brokerClusterName, cfg_dir)
        if self.auth.hook is not None:
            acl1 = self.dispatcher.request_hook
            self.dispatcher.request_hook = self.auth.hook if acl1 is None else HookChain(self.auth.hook, acl1)
        self.services.append(self.broker_stats)
        self._build_services()
        self._register_processors()
        c.subscribe(self._on_config_change)

    # ------------------------------------------------------------------ services and processors
    def _build_services(self) -> None:
        """Delay levels, 5.x timers, the transaction check-back and POP (started with the broker)."""
        c, ctx = self.config, self.ctx
        self.schedule_message_service = ScheduleMessageService(self.store, self.delay_offset_manager,
                                                               c.messageDelayLevel, int(c.flushDelayOffsetInterval))
        self.timer_message_service = TimerMessageService.from_config(self.store, self.topic_config_manager,
                                                                     self.store_config.config_dir, c,
                                                                     counters=self.metrics.timer)
        self.transactional_message_bridge = TransactionalMessageBridge(ctx)
        self.transaction_check_service = TransactionalMessageCheckService(ctx, self.transactional_message_bridge)
        # POP (5.x): one PopService under the remoting codes here and the gRPC endpoint (rmqd.grpc)
        # 5.4 priority / 5.5 Lite Mode: POP reads lite topics through the store/lite views, orders queues by priority
        lp = self.lite_priority = LitePriority.build(c.to_properties(), self.store, self.topic_config_manager)
        self.pop_service = PopService(c.brokerName, c.brokerClusterName, lp.lite_store.store_view,
                                      lp.lite_store.topics_view, self.subscription_group_manager,
                                      self.consumer_offset_manager, lambda: self.identity.store_host,
                                      int(c.reviveQueueNum),
                                      self.metrics.messages.on_dlq, counters=ParentTopicCounters(self.metrics.pop),
                                      on_out=lp.fold_out(self._on_pop_out),
                                      queue_selector=lp.queue_selector)
        self.pop_executor = PopExecutor(max(2, int(c.pullMessageThreadPoolNums)), int(c.popExecutorCapacity))
        self.services += [self.schedule_message_service, self.timer_message_service,
                          self.transaction_check_service, self.pop_service, self.lite_priority]

    def _on_pop_out(self, group: str, topic: str, nums: int, size: int) -> None:
        """Messages a pop or peek handed out: the broker's GROUP_GET stats, POP's messages-out series and the
        consumer manager's compensation table (the group keeps its lag series once its clients leave)."""
        self.broker_stats.inc_group_get(group, topic, nums, size)
        self.metrics.pop_out.on_out(group, topic, nums, size)
        self.consumer_manager.compensate(group, "CONSUME_POP", original_topic_of_pop_retry(topic, group))

    def _register_processors(self) -> None:
        """Build every request processor and register its codes, each in its pool (or on the loop)."""
        c, ctx, d, p = self.config, self.ctx, self.dispatcher, self.pools
        self.send_processor = SendMessageProcessor(ctx)
        self.send_processor.add_before_store(self.schedule_message_service.before_store,
                                             ScheduleMessageService.MARKERS)
        self.send_processor.add_before_store(self.timer_message_service.before_store, TimerMessageService.MARKERS)
        self.send_processor.prepare_half_message = self.transactional_message_bridge.prepare_half_message
        self.send_processor.register(d, p["send"])
        timer = self.timer_message_service
        self.recaller = Recaller(c, lambda: ctx.role, self.topic_config_manager, self.store.put_message,
                                 lambda: timer.max_delay_ms, lambda: self.identity.store_host)
        RecallMessageProcessor(self.recaller, lambda: c.regionId).register(d, p["send"])
        self.pull_processor = PullMessageProcessor(ctx, p["pull"].submit)
        self.pull_processor.register(d, p["pull"])
        self.send_back_processor = SendMessageBackProcessor(ctx, self.schedule_message_service.max_level)
        self.send_back_processor.register(d, p["send"])
        self.reply_message_processor = ReplyMessageProcessor(ctx, self.send_processor)
        self.reply_message_processor.register(d, p["send"])
        self.client_manage_processor = ClientManageProcessor(ctx)
        self.client_manage_processor.register(d, p["client"])
        self.consumer_manage_processor = ConsumerManageProcessor(self.consumer_manager, self.consumer_offset_manager,
                                                                 self.store)
        self.consumer_manage_processor.register(d, p["consumer"])
        self.offset_query_processor = OffsetQueryProcessor(self.store)
        self.offset_query_processor.register(d, p["admin"])
        self.query_message_processor = QueryMessageProcessor(self.store, lambda: c.defaultQueryMaxNum)
        self.query_message_processor.register(d, p["query"])
        self.queue_lock_processor = QueueLockProcessor(self.rebalance_lock_manager)
        self.queue_lock_processor.register(d)
        self.end_transaction_processor = EndTransactionProcessor(ctx, self.transactional_message_bridge)
        self.end_transaction_processor.register(d, p["transaction"])
        # admin codes: topics, groups, broker config/stats, store, compaction, tier, ACL
        self.admin_topic_processor = TopicAdminProcessor(ctx)
        self.admin_topic_processor.register(d, p["admin"])
        self.admin_group_processor = GroupAdminProcessor(ctx)
        self.admin_group_processor.register(d, p["admin"])
        self.admin_broker_processor = BrokerAdminProcessor(ctx, self.pools, self.timer_message_service)
        self.admin_broker_processor.register(d, p["admin"])
        self.admin_store_processor = StoreAdminProcessor(self.store, self.consumer_manager)
        self.admin_store_processor.register(d, p["admin"])
        self.admin_timer_processor = TimerAdminProcessor(self.timer_message_service)
        self.admin_timer_processor.register(d, p["admin"])
        self.admin_compaction_processor = CompactionAdminProcessor(self.store)
        self.admin_compaction_processor.register(d, p["admin"])
        self.admin_tier_processor = TierAdminProcessor(self.store)
        self.admin_tier_processor.register(d, p["admin"])
        self.admin_acl_processor = AclAdminProcessor(self.acl_manager, c, self.identity)
        self.admin_acl_processor.register(d, p["admin"])
        self.admin_auth_processor = AuthAdminProcessor(
            self.auth.manager, self.auth.config.authenticationEnabled,
            lambda: self.replication.wait_auth_replicated(c.slaveTimeout / 1000))
        self.admin_auth_processor.register(d, p["admin"])
        # POP codes (on the loop: they await the POP executor) and server-side rebalance
        self.pop_message_processor = PopMessageProcessor(self.pop_service, self.pop_executor, c.brokerIP1,
                                                         lambda: bool(c.brokerPermission & 4))
        self.pop_message_processor.register(d)
        self.ack_message_processor = AckMessageProcessor(self.pop_service, self.pop_executor)
        self.ack_message_processor.register(d)
        self.assignment_processor = AssignmentProcessor(c, self.topic_config_manager, self.consumer_manager,
                                                        self.message_request_mode_manager,
                                                        self.subscription_group_manager)
        self.assignment_processor.register(d, p["client"], p["admin"])
        # lite registry and delivery, priority/lite send hooks, lite remoting codes
        self.lite_priority.install(ctx, self.pop_service, self.pop_executor, self.send_processor, d, p)
        # GET_BROKER_HA_STATUS (907) and rmqd's WAIT_METADATA_CHANGE
        self.replication.register(d, p["admin"], self.topic_config_manager)

    # ------------------------------------------------------------------ runtime config (UPDATE_BROKER_CONFIG)
    def _on_config_change(self, c: BrokerConfig, changed: frozenset[str]) -> None:
        """Push what the Java broker applies at runtime: auto-create flags, the store settings read on each use,
        the offset persist interval, and a new permission (re-register at once)."""
        if "autoCreateTopicEnable" in changed:
            self.topic_config_manager.auto_create_topic_enable = bool(c.autoCreateTopicEnable)
        if "autoCreateSubscriptionGroup" in changed:
            self.subscription_group_manager.auto_create = bool(c.autoCreateSubscriptionGroup)
        for name, value in store_runtime_changes(c, changed).items():
            setattr(self.store.config, name, value)
        if "flushConsumerOffsetInterval" in changed:
            self.offset_persist_interval_s = c.flushConsumerOffsetInterval / 1000.0
        if "brokerPermission" in changed:
            log.info("brokerPermission changed to %d: re-registering with the name servers", c.brokerPermission)
            self.topic_config_manager.bump_version()
            self.register_broker_all_sync()

    @property
    def call_client_timeout(self) -> float:
        """Seconds a broker -> client call (consumer running info, direct consume) may take."""
        return self.identity.call_client_timeout_s

    @call_client_timeout.setter
    def call_client_timeout(self, value: float) -> None:
        self.identity.call_client_timeout_s = value

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
        self.auth.load(self.config.aclFile)
        self.store.start()
        for mgr in (self.topic_config_manager, self.subscription_group_manager,
                    self.consumer_offset_manager, self.delay_offset_manager):
            mgr.load()
        restore_topics_from_store(self.topic_config_manager, self.store.queue_keys())  # topics.json damaged/lost
        for tc in list(self.topic_config_manager.table.values()):
            self._tell_store_policy(tc)
        self.replication.start_services(self.services)     # a slave's master-only services wait

    async def start(self) -> None:
        loop = self.loop = asyncio.get_running_loop()
        self._register_lock = asyncio.Lock()        # a restarted broker may run on another loop
        await loop.run_in_executor(None, self._load_blocking)
        try:
            self.pull_hold_service = PullRequestHoldService(loop, self.store.get_max_offset,
                                                            self.pull_processor.rerun)
            self.pull_processor.hold = self.pull_hold_service
            if self.config.longPollingEnable:
                self.store.add_dispatch_listener(self.pull_hold_service.on_dispatch,
                                                 watch=self.pull_hold_service.watched_queues)
            self.pull_hold_service.start()
            self.replication.watch_confirm(self.pull_hold_service, self.pop_service.polling)
            self.pop_service.attach(self.store.add_dispatch_listener)
            await self.server.start()
            # BrokerStartup: haListenPort = listenPort + 1 (any free port when the broker was given port 0)
            self.config.haListenPort = self.replication.bind(self.server.port, self.config.listenPort)
        except BaseException:
            await self._close_after_failed_start(loop)
            raise
        self.config.listenPort = self.server.port
        identity = self.identity
        identity.store_host = (self.config.brokerIP1, self.server.port)
        identity.msg_id_prefix = pack_host(identity.store_host).hex().upper()
        identity.address = self.address
        identity.loop = loop
        self.send_processor.open_lane(self.dispatcher.request_hook)
        self.dispatcher.lane = self.send_processor.lane
        self.namesrv_client = RemotingClient(tls=self.client_tls, signer=self.auth.request_signer())  # name servers, the master
        self.replication.start(loop, self.namesrv_client, self.topic_config_manager, self.subscription_group_manager,
                               self.consumer_offset_manager, self.delay_offset_manager, lambda: self.address,
                               self._tell_store_policies, auth_store=self.auth.store,
                               signer=self.auth.request_signer())
        self.role_manager.on_role_change(lambda _role: self.send_processor.open_lane(self.dispatcher.request_hook),
                                         call_now=False)
        # a slave that cannot reach its master's HA port asks the name servers again (a restarted master may listen
        # on another port); at most every MASTER_UNREACHABLE_REREGISTER_S
        self.replication.ha.client.on_connect_failed = self._master_unreachable
        # a new role (or fence) is told to the name servers at once (Java: changeToMaster/changeToSlave)
        self.role_manager.on_role_change(lambda _role: self._register_soon(), call_now=False)
        self._started = True
        await self.register_broker_all()
        self._tasks = [
            loop.create_task(run_every(max(10.0, min(self.config.registerNameServerPeriod, 60000) / 1000.0),
                                       self.register_broker_all, "registering with the name servers", logger=log),
                             name="broker-register"),
            loop.create_task(run_every(lambda: self.offset_persist_interval_s, self._persist_offsets_if_changed,
                                       "persisting the consumer offsets", logger=log),
                             name="broker-persist-offsets"),
            loop.create_task(run_every(self.channel_scan_interval_s, self._scan_not_active_channels,
                                       "closing idle client channels", logger=log),
                             name="broker-scan-channels"),
        ]

    async def close(self) -> None:
        loop = asyncio.get_running_loop()
        tasks, self._tasks = self._tasks, []
        await cancel_and_wait(tasks, "broker task")
        await self.replication.stop_tasks()
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

    async def _close_after_failed_start(self, loop: asyncio.AbstractEventLoop) -> None:
        """Undo a start that failed after loading: the ports it bound, the services it started, the store (a
        restart in the same process must find its port free)."""
        try:
            if self.pull_hold_service is not None:
                self.pull_hold_service.shutdown()
            await self.server.close()
        except Exception:
            log.exception("closing the broker's server after a failed start failed")
        await loop.run_in_executor(None, self._shutdown_blocking)

    def _shutdown_blocking(self) -> None:
        self.replication.shutdown()
        for svc in reversed(self.replication.services_to_shut_down()):
            try:
                svc.shutdown()
            except Exception:
                log.exception("shutting down %s failed", type(svc).__name__)
        for mgr in (self.consumer_offset_manager, self.delay_offset_manager):
            try:
                mgr.shutdown()
            except Exception:
                log.exception("persisting %s on shutdown failed", mgr.path)
        for table in (self.topic_config_manager, self.subscription_group_manager):
            try:
                table.persist()
            except Exception:
                log.exception("persisting %s on shutdown failed", table.path)
        self.store.shutdown()

    # ------------------------------------------------------------------ periodic work
    async def _persist_offsets_if_changed(self) -> None:
        await asyncio.get_running_loop().run_in_executor(None, self.consumer_offset_manager.persist_if_dirty)

    def _scan_not_active_channels(self) -> None:
        for conn in self.consumer_manager.scan_not_active(self.channel_expired_timeout_ms):
            conn.close()
        for conn in self.producer_manager.scan_not_active(self.channel_expired_timeout_ms):
            conn.close()

    def _on_channel_close(self, conn: Connection) -> None:
        groups = self.consumer_manager.do_channel_close(conn)
        if groups:
            log.info("consumer channel %s closed; removed from groups %s", conn.remote_address, groups)
        self.producer_manager.do_channel_close(conn)

    def _on_consumer_group_changed(self, group: str, conns: list[ClientConnection]) -> None:
        notify_consumer_ids_changed(group, conns)

    # ------------------------------------------------------------------ name server registration
    def _register_header(self) -> dict[str, str]:
        c = self.config
        return {"brokerName": c.brokerName, "brokerAddr": self.address, "clusterName": c.brokerClusterName,
                "haServerAddr": f"{c.brokerIP2 or c.brokerIP1}:{c.haListenPort}", "brokerId": str(c.brokerId)}

    def register_body(self, only: Optional[TopicConfig | list[TopicConfig]] = None) -> tuple[bytes, int]:
        """RegisterBrokerBody JSON (topic config wrapper + empty filter server list) and its sequence number
        (bodies built later carry later states of the table).  Takes the topic manager's lock: never call it on
        the loop thread (a pool thread may hold that lock while it waits for the loop).

        The number is this process's own count, not the table's DataVersion counter: that one goes back when a
        slave copies its master's table (a Java master's counter is its own), and registrations compared by it
        stopped for good (a Java slave then never learned of the rmqd master it should follow).

        With ``only`` (a TopicConfig or a list of them), the body carries just those topics (Java's
        registerIncrementBrokerData): the name server adds or updates them and keeps the others."""
        with self._body_lock:
            wrapper: TopicsFileJson = self.topic_config_manager.wrapper(only)
            self._body_seq += 1
            seq = self._body_seq
        if self.replication.controller_mode:
            # 5.x (#6316): the master epoch as the registration's stateVersion; a name server keeps routing to the
            # master of the newer epoch when an unreachable old master's entry is still live (a 5.x name server
            # ignored an rmqd master without it, and kept the old Java master in the route)
            wrapper = {**wrapper, "dataVersion": {**wrapper["dataVersion"], "stateVersion": self.role_manager.epoch}}
        perm = self.config.brokerPermission
        if (perm & 6) != 6:
            for tc in wrapper["topicConfigTable"].values():
                tc["perm"] &= perm | 1
        body = orjson.dumps({"filterServerList": [], "topicConfigSerializeWrapper": wrapper})
        return body, seq

    def _master_unreachable(self, _addr: str) -> None:
        """From the HA client's thread: re-register soon, so the name servers' answer names the master's HA address
        as it is now (Java's slave waits for its next periodic registration, 30 s by default)."""
        now = time.monotonic()
        loop = self.loop
        if now - self._unreachable_registered < MASTER_UNREACHABLE_REREGISTER_S or loop is None or loop.is_closed():
            return
        self._unreachable_registered = now
        self._register_soon()

    def _register_soon(self) -> None:
        """From any thread: a registration with every name server, scheduled on the broker's loop."""
        loop = self.loop
        if loop is None or loop.is_closed():
            return
        loop.call_soon_threadsafe(lambda: loop.create_task(self.register_broker_all()))

    async def register_broker_all(self, body: Optional[bytes] = None, version: int = -1) -> None:
        """REGISTER_BROKER to every name server (failures are logged, not raised).

        A body older than one already sent is skipped, so a slow periodic registration cannot
        roll the name server back to a stale topic table."""
        addrs, client = self.config.namesrv_addrs, self.namesrv_client
        if not addrs or client is None or not self._started or not self.replication.may_register():
            return
        if body is None:
            payload, version = await asyncio.get_running_loop().run_in_executor(None, self.register_body)
        else:
            payload = body
        async with self._register_lock:
            if version < self._registered_version:
                return
            self._registered_version = version
            header = dict(self._register_header(), compressed="false",
                          bodyCrc32=str(zlib.crc32(payload) & 0x7FFFFFFF))

            async def one(addr: str) -> None:
                try:
                    resp = await client.invoke(
                        addr, new_request(RequestCode.REGISTER_BROKER, header, payload), REGISTER_TIMEOUT_S)
                    if resp.code != ResponseCode.SUCCESS:
                        log.warning("register broker to name server %s failed: %d %s", addr, resp.code, resp.remark)
                    else:
                        self.replication.on_registered(resp)
                except Exception as exc:
                    log.warning("register broker to name server %s failed: %r", addr, exc)

            await asyncio.gather(*(one(a) for a in addrs))

    async def unregister_broker_all(self) -> None:
        addrs, client = self.config.namesrv_addrs, self.namesrv_client
        if not addrs or client is None:
            return
        header = self._register_header()
        header.pop("haServerAddr")

        async def one(addr: str) -> None:
            try:
                await client.invoke(addr, new_request(RequestCode.UNREGISTER_BROKER, header), REGISTER_TIMEOUT_S)
            except Exception as exc:
                log.warning("unregister broker from name server %s failed: %r", addr, exc)

        await asyncio.gather(*(one(a) for a in addrs))

    def register_broker_all_sync(self, timeout: float = 5.0,
                                 only: Optional[TopicConfig | list[TopicConfig]] = None) -> None:
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

    def _tell_store_policy(self, tc: Optional[TopicConfig]) -> None:
        """A COMPACTION topic's reads go to the compaction store; its sends skip the fast lane
        (the processor checks the key)."""
        if tc is not None and is_compaction_topic(tc) and self.store.compaction is not None:
            self.store.compaction.on_topic_config(tc.topic_name, True)
            self.send_processor.forget_lane_topic(tc.topic_name)

    def _on_topic_change(self, topic_config: Optional[TopicConfig]) -> None:
        self._tell_store_policy(topic_config)
        # A created/updated topic is registered alone; a deletion re-registers the whole table.
        self.register_broker_all_sync(only=topic_config)

    def _tell_store_policies(self, topic_configs: list[TopicConfig]) -> None:
        for tc in topic_configs:
            self._tell_store_policy(tc)

    def _on_topics_change(self, topic_configs: list[TopicConfig]) -> None:
        """Topics created or updated together (UPDATE_AND_CREATE_TOPIC_LIST): one incremental registration of
        all of them, as Java's registerIncrementBrokerData."""
        self._tell_store_policies(topic_configs)
        self.register_broker_all_sync(only=topic_configs)
