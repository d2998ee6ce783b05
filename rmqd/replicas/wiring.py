"""Replication for one broker: the role owner, the store's HA service and layer, SlaveSynchronize, the codes.

:class:`Replication` is built by the BrokerController right after the store; the controller then uses
``replication.store`` (the :class:`~rmqd.store.ha.layer.ReplicatedStore` over its store) everywhere, asks
``replication.role`` for the role, and calls the lifecycle hooks in order: :meth:`Replication.start_services`
(instead of starting its services itself: master-only ones wait while it is a slave), :meth:`Replication.bind`
once its listen port is known (the HA port is listen port + 1, as Java's BrokerStartup sets it),
:meth:`Replication.start` on the loop, :meth:`Replication.on_registered` with each name server answer, and
:meth:`Replication.shutdown` before the store shuts down.
"""
from __future__ import annotations

import asyncio
import logging
from typing import (TYPE_CHECKING, Awaitable, Callable, Iterable, Optional, Required, TypedDict, TypeVar, TypeVarTuple,
                    cast)

from rmqd.common.periodic import run_every
from rmqd.remoting import fastjson
from rmqd.remoting.codes import ResponseCode
from rmqd.remoting.command import RemotingCommand, new_response
from rmqd.remoting.tasks import cancel_and_wait
from rmqd.replicas.role_manager import RoleManager, RoleSnapshot
from rmqd.replicas.slave_sync import FIRST_DELAY_S, PERIOD_S, WAIT_METADATA_CHANGE, MetadataChangeWaiter, \
    SlaveSynchronize
from rmqd.store.ha.config import ha_config_from
from rmqd.store.ha.layer import ReplicatedStore
from rmqd.store.ha.service import DefaultHAService
from rmqd.store.topic_restore import restore_topics_from_store

if TYPE_CHECKING:
    from rmqd.auth.store import AuthStore
    from rmqd.config import BrokerConfig
    from rmqd.remoting.client import RemotingClient
    from rmqd.remoting.connection import Connection
    from rmqd.remoting.dispatch import Dispatcher, ProcessorPool
    from rmqd.remoting.fastjson import Encodable
    from rmqd.replicas.controller_mode import ReplicasManager
    from rmqd.replicas.handles import BrokerService, HeldPops, HeldPulls
    from rmqd.store.ha.autoswitch import ControllerHAConnection
    from rmqd.store.ha.service import HARuntimeInfo
    from rmqd.store.layer import StoreChain
    from rmqd.store.metadata import (ConsumerOffsetManager, DelayOffsetManager, SubscriptionGroupManager,
                                     TopicConfig, TopicConfigManager)

T = TypeVar("T")
Ts = TypeVarTuple("Ts")

log = logging.getLogger(__name__)

GET_BROKER_HA_STATUS = 907            # 5.x RequestCode (mqadmin haStatus)


class SlaveSyncStatus(TypedDict):
    rounds: int
    pushes: int
    offsetPushes: int
    lastOffsetCopyMillis: int
    pushSupported: Optional[bool]


class ReplicaStatus(RoleSnapshot, total=False):
    """:meth:`Replication.replica_status`: the role manager's snapshot, then controller mode's and SlaveSynchronize's
    parts when they run."""

    controllerMode: Required[bool]
    controllerBrokerId: int
    masterEpoch: int
    masterBrokerId: Optional[int]
    syncStateSet: list[int]
    syncStateSetEpoch: int
    controllerLeader: Optional[str]
    controllerAddrs: list[str]
    epochs: list[list[int]]
    slaveSync: SlaveSyncStatus


def is_master_only(service: object) -> bool:
    """Services a slave does not run (Java: the schedule and transaction-check services, 5.x timers and POP revive):
    their classes say ``master_only = True``."""
    return bool(getattr(service, "master_only", False))


class Replication:
    """See the module docstring."""

    sync_first_delay_s = FIRST_DELAY_S      # SlaveSynchronize's schedule (Java's); attributes so tests shorten it
    sync_period_s = PERIOD_S

    def __init__(self, config: "BrokerConfig", store: "StoreChain", host: str) -> None:
        self.config = config
        self.controller_mode = bool(config.enableControllerMode)
        if self.controller_mode:            # the controllers decide the role: start as a fenced slave
            config.brokerRole = "SLAVE"
            config.brokerId = max(1, int(config.brokerId))
        self.role = RoleManager(config)
        ha_config = ha_config_from(config)
        ha_config.listen_host = host
        self.replicas_manager: Optional["ReplicasManager"] = None
        controller_ha: Optional["ControllerHAService"] = None
        if self.controller_mode:
            # controller mode's modules load only for a broker that uses it (start-up time of a lone broker)
            from rmqd.store.ha.autoswitch import ControllerHAService
            controller_ha = ControllerHAService(store, ha_config, slave=True,
                                                all_ack=bool(config.allAckInSyncStateSet),
                                                in_sync_replicas=int(config.inSyncReplicas),
                                                max_not_catchup_ms=int(config.haMaxTimeSlaveNotCatchup),
                                                min_in_sync_replicas=int(config.minInSyncReplicas),
                                                async_learner=bool(config.asyncLearner),
                                                sync_from_last_file=bool(config.syncFromLastFile))
        self.ha: DefaultHAService = controller_ha if controller_ha is not None else \
            DefaultHAService(store, ha_config, slave=self.role.is_slave)
        self.store = ReplicatedStore(store, self.ha, self.role.role)
        self._applied_role = self.role.role
        if controller_ha is not None:
            from rmqd.replicas.controller_mode import ReplicasManager
            #: controller mode (5.x): the broker's ReplicasManager (rmqd.replicas.controller_mode), else None
            self.replicas_manager = ReplicasManager(config, self.role, controller_ha, self.store)
            if not bool(config.readUnCommitted):
                self.store.bound_reads(controller_ha.get_confirm_offset)
        self.slave_sync: Optional[SlaveSynchronize] = None
        #: the master's side of WAIT_METADATA_CHANGE (set by :meth:`register`)
        self.metadata_waiter: Optional[MetadataChangeWaiter] = None
        self._services: list["BrokerService"] = []
        self._started_services: list["BrokerService"] = []
        self._tasks: list[asyncio.Task[None]] = []
        self._reapers: set[asyncio.Task[None]] = set()     # _restart_tasks: the old tasks being stopped
        self._loop: Optional[asyncio.AbstractEventLoop] = None
        self.role.on_master_change(lambda _addr, ha_addr: self.ha.update_master_address(ha_addr))
        if self.controller_mode:           # a new master: SlaveSynchronize starts over with it at once
            self.role.on_master_change(self._restart_tasks_soon)
        self.role.on_role_change(self._apply_role, call_now=False)
        if self.role.master_ha_addr:
            self.ha.update_master_address(self.role.master_ha_addr)

    # ------------------------------------------------------------------ role
    def _restart_tasks_soon(self, _addr: Optional[str], _ha_addr: Optional[str]) -> None:
        """A new master (controller mode): SlaveSynchronize starts over with it at once (on the loop)."""
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._restart_tasks)

    def _apply_role(self, role: RoleManager) -> None:
        self.store.set_fenced(role.fenced)
        if self.controller_mode and role.role is self._applied_role:
            return                          # a fence change, or a new id for a slave: nothing else moves
        self._applied_role = role.role
        self.store.set_role(role.role)
        if role.is_slave:
            self.ha.change_to_slave()
            for svc in reversed([s for s in self._started_services if is_master_only(s)]):
                self._stop_service(svc)
        else:
            self.ha.change_to_master()
            self._start_services(s for s in self._services if s not in self._started_services)
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._restart_tasks)

    # ------------------------------------------------------------------ services
    def start_services(self, services: list["BrokerService"]) -> None:
        """Start the broker's services; on a slave the master-only ones wait until it becomes master."""
        self._services = services
        self._start_services(s for s in services if not (self.role.is_slave and is_master_only(s)))

    def _start_services(self, services: Iterable["BrokerService"]) -> None:
        for svc in services:
            svc.start()
            self._started_services.append(svc)

    def _stop_service(self, svc: "BrokerService") -> None:
        try:
            svc.shutdown()
        except Exception:
            log.exception("stopping %s on the change to slave failed", type(svc).__name__)
        self._started_services.remove(svc)

    def services_to_shut_down(self) -> list["BrokerService"]:
        """What the broker's shutdown must stop (a slave's master-only services never started)."""
        return list(self._started_services)

    # ------------------------------------------------------------------ lifecycle
    def bind(self, listen_port: int, configured_port: int) -> int:
        """Listen on the HA port, ``listen_port + 1`` as Java's BrokerStartup sets it (also for a broker given port
        0, so a master restarted on its port is found again at the same HA port). When it is taken: a broker
        given port 0 takes any free port; a broker given its port does too, with a warning, instead of Java's
        failed start (the registration tells slaves where: ``haServerAddr``). Returns the port, which the caller
        stores as ``haListenPort``."""
        cfg = self.ha.config
        cfg.listen_port = listen_port + 1
        try:
            port = self.ha.bind()
        except OSError as exc:
            (log.warning if configured_port else log.info)(
                "HA port %d is taken (%s): listening on any free port; slaves learn it from the name server "
                "(haServerAddr), a slave with haMasterAddress set must be told", listen_port + 1, exc)
            cfg.listen_port = 0
            port = self.ha.bind()
        cfg.listen_port = port
        return port

    def start(self, loop: asyncio.AbstractEventLoop, client: "RemotingClient", topics: "TopicConfigManager",
              groups: "SubscriptionGroupManager", offsets: "ConsumerOffsetManager",
              delay_offsets: "DelayOffsetManager", own_address: Callable[[], str],
              on_topics_replaced: Optional[Callable[[list["TopicConfig"]], None]] = None,
              auth_store: Optional["AuthStore"] = None,
              signer: Optional[Callable[[RemotingCommand], None]] = None) -> None:
        """Start the HA service and, on a slave, SlaveSynchronize (on the loop). ``auth_store``: access control 2.0's
        users and ACLs (rmqd.auth.store), copied from the master as the topics are; ``signer``: signs controller
        mode's requests to other brokers (``client`` signs SlaveSynchronize's itself)."""
        self._loop = loop
        waiter = self.metadata_waiter
        if waiter is not None:              # the master tells its slaves of group, offset and auth changes too
            waiter.groups, waiter.offsets, waiter.auth = groups, offsets, auth_store
        self.ha.start()
        if self.replicas_manager is not None:
            cfg = self.config
            self.replicas_manager.start(loop, own_address,
                                        lambda: f"{cfg.brokerIP2 or cfg.brokerIP1}:{cfg.haListenPort}", signer)

        def run_blocking(fn: Callable[[*Ts], T], /, *args: *Ts) -> Awaitable[T]:
            return loop.run_in_executor(None, fn, *args)
        self.slave_sync = SlaveSynchronize(self.role, client, topics, groups, offsets, delay_offsets, own_address,
                                           run_blocking, on_topics_replaced, auth_store)
        self._restart_tasks()

    def watch_confirm(self, hold: "HeldPulls", pop_polling: Optional["HeldPops"] = None) -> None:
        """Controller mode with reads bounded by the confirmOffset: a slave's ack moves it, so the pulls parked in
        ``hold`` (a PullRequestHoldService) and the POPs parked in ``pop_polling`` (PopLongPolling) look again
        then (one sweep at a time, on the loop)."""
        if self.replicas_manager is None or not self.store.reads_bounded:
            return
        ha = self.replicas_manager.ha
        loop = hold.loop
        pending = [False]

        def sweep() -> None:
            pending[0] = False
            for topic, queue_id in list(hold.watched_queues):
                hold.notify_message_arriving(topic, queue_id, None, None, None)
            if pop_polling is not None:
                for topic in {t for t, _ in list(pop_polling.watched)}:
                    pop_polling.notify(topic)

        def on_ack(_conn: "ControllerHAConnection") -> None:
            if pending[0] or not (hold.watched_queues or (pop_polling is not None and pop_polling.watched)):
                return
            pending[0] = True
            try:
                loop.call_soon_threadsafe(sweep)
            except RuntimeError:             # the loop closed (shutdown)
                pending[0] = False
        ha.on_ack.append(on_ack)

    def _restart_tasks(self) -> None:
        """On the loop: the slave's sync tasks for the current role; the old ones are cancelled until they end (a
        lost cancel would leave one running beside its replacement)."""
        loop = self._loop
        old, self._tasks = self._tasks, []
        if old and loop is not None:
            reaper = loop.create_task(cancel_and_wait(old, "replication task"), name="replication-tasks-stop")
            self._reapers.add(reaper)               # held until done (the loop keeps only a weak reference)
            reaper.add_done_callback(self._reapers.discard)
        else:
            for task in old:
                task.cancel()
        if self.role.is_slave and self.slave_sync is not None and loop is not None:
            sync = run_every(self.sync_period_s, self.slave_sync.sync_all, "SlaveSynchronize round",
                             first_delay_s=self.sync_first_delay_s, logger=log)
            self._tasks = [loop.create_task(sync, name="slave-synchronize"),
                           loop.create_task(self.slave_sync.follow_changes(), name="slave-follow-changes")]

    def on_registered(self, response: RemotingCommand) -> None:
        """A name server's answer to REGISTER_BROKER: the master's addresses (Java's doRegisterBrokerAll)."""
        ext = response.ext_fields or {}
        if self.controller_mode:            # the controllers name the master; this only hints at its HA port
            if ext.get("masterAddr") and ext.get("haServerAddr") and self.replicas_manager is not None:
                self.replicas_manager.namesrv_ha_addr[ext["masterAddr"]] = ext["haServerAddr"]
            return
        self.role.update_master(ext.get("masterAddr"), ext.get("haServerAddr"))

    def wait_topics_replicated(self, timeout_s: float) -> bool:
        """Controller mode, on a master (from a pool thread): wait until every other SyncStateSet member has copied
        the current topic table (their WAIT_METADATA_CHANGE names it), so a topic the master just created survives
        a switch to any of them (5.x slaves poll every 10 s: apache/rocketmq#9804). False after ``timeout_s``."""
        return self._wait_replicated("topic", timeout_s)

    def wait_groups_replicated(self, timeout_s: float) -> bool:
        """The same for the subscription-group table: a group created or updated on the master is answered once
        every other SyncStateSet member holds it (5.x: up to 10 s later, and lost if the master dies first)."""
        return self._wait_replicated("group", timeout_s)

    def wait_auth_replicated(self, timeout_s: float) -> bool:
        """The same for access control 2.0's users and ACLs: a change on the master is answered once every other
        SyncStateSet member holds it (it survives a switch to any of them)."""
        return self._wait_replicated("auth", timeout_s)

    def _wait_replicated(self, kind: str, timeout_s: float) -> bool:
        waiter = self.metadata_waiter
        manager = self.replicas_manager
        if manager is None or waiter is None or not self.role.is_master:
            return True
        if kind == "auth":
            if waiter.auth is None:
                return True
            version, holds = waiter.auth.state.version, waiter.holds_auth
        else:
            mgr, holds = (waiter.topics, waiter.holds) if kind == "topic" else (waiter.groups, waiter.holds_groups)
            if mgr is None:
                return True
            version = mgr.data_version
        missing = waiter.wait_copied(manager.ha.ack_members, lambda m: holds(m, version.timestamp, version.counter),
                                     timeout_s)
        if missing:
            log.warning("%s table version %s not copied by SyncStateSet member(s) %s within %.1f s",
                        kind, version.counter, missing, timeout_s)
        return not missing

    def may_register(self) -> bool:
        """Controller mode: register with the name servers only once the role is known, and never as a fenced
        master (its entry would take brokerId 0 back from the new master)."""
        return self.replicas_manager is None or self.replicas_manager.may_register_to_namesrv()

    async def stop_tasks(self) -> None:
        if self.replicas_manager is not None:
            await self.replicas_manager.stop()
        tasks, self._tasks = self._tasks, []
        await cancel_and_wait(tasks, "replication task")
        if self._reapers:                           # old tasks of a role change still ending
            await asyncio.wait(set(self._reapers))

    def shutdown(self) -> None:
        """Stop the HA service (blocking: call it off the loop, before the store shuts down)."""
        self.ha.shutdown()

    def topic_from_store(self, topics: "TopicConfigManager", topic: str) -> Optional["TopicConfig"]:
        """A slave asked for a topic its master's config has not reached yet (SlaveSynchronize runs every 10 s,
        and the master may be gone): when the replicated CommitLog holds its consume queues, put its config
        back from them (rmqd.store.topic_restore) so the slave serves what it holds; Java answers
        TOPIC_NOT_EXIST there. None on a master, or when the store has nothing of it."""
        if not self.role.is_slave:
            return None
        queues = [key for key in self.store.queue_keys() if key[0] == topic]
        if not queues:
            return None
        log.warning("topic %s has not come from the master yet; serving it from the %d replicated consume "
                    "queue(s) this slave holds", topic, len(queues))
        restore_topics_from_store(topics, queues)
        return topics.get(topic)

    # ------------------------------------------------------------------ codes
    def register(self, dispatcher: "Dispatcher", pool: "ProcessorPool", topics: "TopicConfigManager") -> None:
        """GET_BROKER_HA_STATUS (907, 5.x) and rmqd's WAIT_METADATA_CHANGE (9010)."""
        dispatcher.register(GET_BROKER_HA_STATUS, self.get_ha_status, pool)
        self.metadata_waiter = MetadataChangeWaiter(topics)
        dispatcher.register(WAIT_METADATA_CHANGE, self.metadata_waiter.wait)
        if self.replicas_manager is not None:
            self.replicas_manager.register(dispatcher, pool)

    def runtime_info(self) -> "HARuntimeInfo":
        return self.ha.runtime_info(self.role.is_master)

    def replica_status(self) -> ReplicaStatus:
        """A read-only snapshot of this broker's place in its replica group for the console and the metrics:
        the role manager's state and switch history; in controller mode the ReplicasManager's (brokerId from the
        controller, master epoch, SyncStateSet and its epoch, controller leader, epoch entries); SlaveSynchronize's
        pushes and last offset copy."""
        snap = self.role.snapshot()
        out: ReplicaStatus = {"controllerMode": self.controller_mode, "role": snap["role"],
                              "brokerId": snap["brokerId"], "epoch": snap["epoch"], "fenced": snap["fenced"],
                              "masterAddr": snap["masterAddr"], "lastSwitch": snap["lastSwitch"],
                              "switches": snap["switches"], "switchCounts": snap["switchCounts"]}
        if self.replicas_manager is not None:
            st = self.replicas_manager.status()
            out["controllerBrokerId"] = st["brokerId"]
            out["masterEpoch"] = st["masterEpoch"]
            out["masterBrokerId"] = st["masterBrokerId"]
            out["syncStateSet"] = st["syncStateSet"]
            out["syncStateSetEpoch"] = st["syncStateSetEpoch"]
            out["controllerLeader"] = st["controllerLeader"]
            out["controllerAddrs"] = list(self.replicas_manager.controller_addrs)
            out["epochs"] = [list(e) for e in st["epochs"]]
        sync = self.slave_sync
        if sync is not None:
            out["slaveSync"] = {"rounds": sync.rounds, "pushes": sync.pushes, "offsetPushes": sync.offset_pushes,
                                "lastOffsetCopyMillis": sync.last_offset_copy_ms,
                                "pushSupported": sync.push_supported}
        return out

    def get_ha_status(self, conn: "Connection", request: RemotingCommand) -> RemotingCommand:
        """5.x's HARuntimeInfo; rmqd adds ``rmqdReplicaStatus`` (:meth:`replica_status`), which 5.x's mqadmin
        ignores (an unknown field)."""
        body = dict(self.runtime_info(), rmqdReplicaStatus=self.replica_status())
        # the JSON boundary: TypedDicts of JSON values (fastjson's Encodable has no TypedDict form)
        return new_response(ResponseCode.SUCCESS, None, None, fastjson.dumps(cast("Encodable", body)))
