"""The broker side of RocketMQ 5's controller mode (Java's ``ReplicasManager``): this broker's place in its replica
group comes from the controllers, not from broker.conf. This module is the broker's session with the controllers;
what the broker does with their answers (become master or slave, the epochs, the hand-off to the HA client) is
:class:`rmqd.replicas.role_transitions.RoleTransitions`, seen here through :class:`RoleState`.

Start (the broker is a fenced slave until this finishes, and does not register with the name servers):
find the controller leader (CONTROLLER_GET_METADATA_INFO 1005 to each ``controllerAddr``), get a brokerId
(``brokerIdentity`` file, else GET_NEXT_BROKER_ID 1012 + ``brokerIdentity-temp`` + APPLY_BROKER_ID 1013),
REGISTER_BROKER (1003), one heartbeat, and ELECT_MASTER (1002) with its own id when the group has no live master.

Running:

* BROKER_HEARTBEAT (904, oneway) to every controller every ``brokerHeartbeatInterval``, carrying the last epoch,
  the CommitLog max offset and ``controllerHeartBeatTimeoutMills``; the controllers elect from these;
* CONTROLLER_GET_REPLICA_INFO (1004) to the leader right after the heartbeat on the same connection, every
  ``brokerHeartbeatInterval`` on a master (it is the master's **lease**), every ``syncBrokerMetadataPeriod`` on a
  slave; NOTIFY_BROKER_ROLE_CHANGED (1008) from the leader says the same at once; each answer goes to the role
  transitions;
* **fencing:** a master whose last confirmation by the controller leader (a 1004 answer naming it master at its
  epoch, asked right after a heartbeat on the same connection) is older than half of
  ``controllerHeartBeatTimeoutMills`` refuses every put and stops registering with the name servers, until a
  confirmation comes back. The controllers elect a new master only after ``controllerHeartBeatTimeoutMills``
  without a heartbeat, so the old master stops taking writes before a new one can exist (5.x has no such lease);
* as master, every ``checkSyncStateSetPeriod`` and on each slave's catch-up or disconnection: the in-sync slaves
  become the proposed SyncStateSet (CONTROLLER_ALTER_SYNC_STATE_SET 1001); acknowledgements use the union of the
  confirmed and the proposed set until the controller answers.

All of it runs on the broker's event loop; disk work (truncation, epoch and identity files) in the executor.
The requests and the reading of their answers are :mod:`rmqd.replicas.controller_client`'s.
"""
from __future__ import annotations

import asyncio
import logging
import os
import random
import time
from typing import TYPE_CHECKING, Callable, Optional, Protocol, TypedDict

from rmqd.common.periodic import run_every
from rmqd.controller.codes import ControllerRequestCode as Req
from rmqd.tls.contexts import remoting_client_tls
from rmqd.remoting.codes import ResponseCode
from rmqd.remoting.command import RemotingCommand, new_response
from rmqd.remoting.tasks import cancel_and_wait
from rmqd.replicas.controller_client import ControllerClient, ReplicaInfo, replica_info_of
from rmqd.replicas.role_manager import RoleManager
from rmqd.replicas.role_transitions import RoleTransitions
from rmqd.store.ha.autoswitch import ControllerHAService
from rmqd.store.ha.epoch_file import EpochFileCache

if TYPE_CHECKING:
    from rmqd.config import BrokerConfig
    from rmqd.remoting.connection import Connection
    from rmqd.remoting.dispatch import Dispatcher, ProcessorPool
    from rmqd.store.api import MessageStoreAPI
    from rmqd.store.ha.autoswitch import ControllerHAConnection

log = logging.getLogger(__name__)

REGISTER_RETRY_S = 1.0
LEASE_FRACTION = 0.5


class ManagerStatus(TypedDict):
    """:meth:`ReplicasManager.status`."""

    brokerId: int
    role: str
    masterEpoch: int
    masterBrokerId: Optional[int]
    syncStateSet: list[int]
    syncStateSetEpoch: int
    fenced: bool
    controllerLeader: Optional[str]
    lastSwitchMillis: int
    confirmOffset: int
    epochs: list[tuple[int, int]]


class RoleState(Protocol):
    """What the controller session takes from the role transitions (:class:`RoleTransitions`)."""

    @property
    def master_epoch(self) -> int: ...

    @property
    def master_id(self) -> Optional[int]: ...

    @property
    def set_epoch(self) -> int:
        """The SyncStateSet epoch of this master (-1: none yet)."""

    @property
    def last_switch_ms(self) -> int: ...

    @property
    def namesrv_ha_addr(self) -> dict[str, str]:
        """Master address -> HA address, from the name servers' answers to registrations."""

    def start(self, loop: asyncio.AbstractEventLoop) -> None: ...

    async def stop(self) -> None: ...

    async def apply(self, info: ReplicaInfo, source: str) -> None:
        """Move to the group's state in ``info``."""

    async def adopt_sync_state_set(self, epoch: int, wanted: frozenset[int], new_set_epoch: Optional[int]) -> bool:
        """The controllers accepted ``wanted``: adopt it unless the role moved on."""

    def on_ha_disconnect(self, addr: str) -> None:
        """The HA connection ended (on the loop)."""

    def on_get_epoch_cache(self, conn: "Connection", request: RemotingCommand) -> RemotingCommand:
        """GET_BROKER_EPOCH_CACHE (1007)."""


class ReplicasManager:
    """See the module docstring."""

    def __init__(self, config: "BrokerConfig", role: RoleManager, ha: ControllerHAService,
                 store: "MessageStoreAPI") -> None:
        self.config = config
        self.role = role
        self.ha = ha
        self.store = store
        c = config
        self.controller_addrs = [a.strip() for a in str(c.controllerAddr or "").split(";") if a.strip()]
        if not self.controller_addrs:
            raise ValueError("enableControllerMode=true needs controllerAddr")
        root = str(c.storePathRootDir)
        self.epoch_cache = EpochFileCache(str(c.storePathEpochFile or os.path.join(root, "epochFileCheckpoint")))
        self.identity_path = str(c.storePathBrokerIdentity or os.path.join(root, "brokerIdentity"))
        #: the requests to the controllers (and the followed master's epoch cache)
        self.controllers = ControllerClient(self.controller_addrs, str(c.brokerClusterName), str(c.brokerName),
                                            self.identity_path)
        self.heartbeat_s = int(c.brokerHeartbeatInterval) / 1000
        self.timeout_ms = int(c.controllerHeartBeatTimeoutMills)
        self.lease_s = self.timeout_ms / 1000 * LEASE_FRACTION
        self.sync_metadata_s = int(c.syncBrokerMetadataPeriod) / 1000
        self.check_set_s = int(c.checkSyncStateSetPeriod) / 1000
        self._broker_id = -1                     # the controller id (a master registers as 0 on the name server)
        self.ready = False
        self.lease_until = 0.0
        self._loop: Optional[asyncio.AbstractEventLoop] = None
        self._tasks: list[asyncio.Task[None]] = []
        self._check_soon: Optional[asyncio.TimerHandle] = None
        self._own_address: Callable[[], str] = lambda: ""
        self._ha_address: Callable[[], str] = lambda: ""
        self._stopping = False
        #: the role transitions, told every answer of the controllers
        self.transitions: RoleState = RoleTransitions(config, role, ha, store, self.epoch_cache, self)
        ha.set_epoch_cache(self.epoch_cache)
        role.set_fenced(True)                    # no writes until the controller says this broker is master
        ha.lease_valid = lambda: not self.role.fenced and time.monotonic() <= self.lease_until

    # ================================================================ what the role transitions use
    @property
    def broker_id(self) -> int:
        return self._broker_id

    def own_address(self) -> str:
        return self._own_address()

    def ha_address(self) -> str:
        return self._ha_address()

    def renew_lease(self) -> None:
        self.lease_until = time.monotonic() + self.lease_s

    async def broker_epoch_cache(self, broker_addr: str) -> RemotingCommand:
        return await self.controllers.broker_epoch_cache(broker_addr)

    @property
    def namesrv_ha_addr(self) -> dict[str, str]:
        """Master address -> HA address, from the name servers' answers to registrations."""
        return self.transitions.namesrv_ha_addr

    # ================================================================ wiring
    def _running_loop(self) -> asyncio.AbstractEventLoop:
        """The broker's loop (set by :meth:`start`)."""
        if self._loop is None:
            raise RuntimeError("ReplicasManager.start was not called")
        return self._loop

    def register(self, dispatcher: "Dispatcher", pool: "ProcessorPool") -> None:
        """NOTIFY_BROKER_ROLE_CHANGED (1008, on the loop) and GET_BROKER_EPOCH_CACHE (1007)."""
        dispatcher.register(Req.NOTIFY_BROKER_ROLE_CHANGED, self._on_notify)
        dispatcher.register(Req.GET_BROKER_EPOCH_CACHE, self.transitions.on_get_epoch_cache, pool)

    def may_register_to_namesrv(self) -> bool:
        """Only a broker that knows its role, and no fenced master, registers with the name servers."""
        return self.ready and not (self.role.is_master and self.role.fenced)

    def start(self, loop: asyncio.AbstractEventLoop, own_address: Callable[[], str],
              ha_address: Callable[[], str], signer: Optional[Callable[[RemotingCommand], None]] = None) -> None:
        """``signer``: signs the requests (the master's epoch cache is asked of a broker that may demand
        access control 2.0's signature: ``innerClientAuthenticationCredentials``)."""
        self._loop = loop
        self._own_address = own_address
        self._ha_address = ha_address
        self.transitions.start(loop)
        self.controllers.start(remoting_client_tls(self.config.extra), signer)
        transitions = self.transitions

        def on_disconnect(addr: str) -> None:
            loop.call_soon_threadsafe(transitions.on_ha_disconnect, addr)

        def on_slave_change() -> None:
            loop.call_soon_threadsafe(self._schedule_set_check, 0.05)
        self.ha.client.on_disconnect = on_disconnect
        self.ha.on_slave_change.append(on_slave_change)
        self.ha.on_ack.append(self._on_ack)
        self._tasks = [loop.create_task(self._run(), name="controller-mode")]

    async def stop(self) -> None:
        self._stopping = True
        await cancel_and_wait(self._tasks, "controller-mode task")
        await self.transitions.stop()
        if self._check_soon is not None:
            self._check_soon.cancel()
        self.controllers.close()

    def status(self) -> ManagerStatus:
        """Role, epoch, SyncStateSet, lease (metrics and the admin surface)."""
        t = self.transitions
        return {"brokerId": self._broker_id, "role": self.role.role.value, "masterEpoch": t.master_epoch,
                "masterBrokerId": t.master_id, "syncStateSet": sorted(self.ha.sync_state_set),
                "syncStateSetEpoch": t.set_epoch, "fenced": self.role.fenced,
                "controllerLeader": self.controllers.leader, "lastSwitchMillis": t.last_switch_ms,
                "confirmOffset": self.ha.get_confirm_offset(),
                "epochs": self.epoch_cache.snapshot()}

    # ================================================================ heartbeat
    async def _heartbeat(self, only: Optional[str] = None) -> None:
        """BROKER_HEARTBEAT (904) with this broker's state to every controller (or to ``only``)."""
        await self.controllers.heartbeat(dict(
            brokerAddr=self._own_address(), brokerId=self._broker_id, epoch=self.epoch_cache.last_epoch(),
            maxOffset=self.store.commitlog_max_offset(), confirmOffset=self.ha.get_confirm_offset(),
            heartbeatTimeoutMills=self.timeout_ms, electionPriority=int(self.config.brokerElectionPriority)), only)

    # ================================================================ start-up
    async def _run(self) -> None:
        while not self._stopping:
            try:
                if await self._register():
                    break
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("registering with the controllers failed")
            await asyncio.sleep(REGISTER_RETRY_S + random.random() * 0.5)
        self.ready = True
        loop = self._running_loop()
        self._tasks.append(loop.create_task(run_every(self.heartbeat_s, self._heartbeat, "controller heartbeat round",
                                                      logger=log), name="controller-heartbeat"))
        self._tasks.append(loop.create_task(self._poll_loop(), name="controller-poll"))
        self._tasks.append(loop.create_task(run_every(self.check_set_s, self._check_sync_state_set,
                                                      "SyncStateSet check", logger=log), name="sync-state-set-check"))
        self._tasks.append(loop.create_task(self._lease_watch(), name="master-lease"))

    async def _register(self) -> bool:
        if await self.controllers.find_leader() is None:
            log.info("no controller leader yet among %s", self.controller_addrs)
            return False
        if self._broker_id <= 0:
            broker_id = await self.controllers.obtain_id(self._own_address())
            if broker_id is None:
                return False
            self._set_id(broker_id)
        info = await self.controllers.register_broker(self._broker_id, self._own_address())
        if info is None:
            return False
        await self._heartbeat()
        if info.master_id is None:
            info = await self.controllers.elect_master(self._broker_id) or info
        if info.master_id is None:
            log.info("%s has no master yet (epoch %d); retrying", self.config.brokerName, info.master_epoch)
            return False
        await self.transitions.apply(info, "registration")
        return True

    def _set_id(self, broker_id: int) -> None:
        self._broker_id = broker_id
        self.ha.client.broker_id = broker_id
        if self.role.is_slave:
            self.role.change_to_slave(broker_id)
        log.info("%s/%s has controller brokerId %d", self.config.brokerClusterName, self.config.brokerName,
                 broker_id)

    # ================================================================ running
    async def _poll_loop(self) -> None:
        """The group's state from the leader: every heartbeat interval on a master (its lease), every
        syncBrokerMetadataPeriod on a slave (and every interval while it knows no master)."""
        last_poll = 0.0
        while True:
            await asyncio.sleep(self.heartbeat_s)
            now = time.monotonic()
            if not (self.role.is_master or now - last_poll >= self.sync_metadata_s
                    or self.transitions.master_id is None):
                continue
            last_poll = now
            try:
                await self._poll()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("controller poll failed")

    async def _poll(self) -> None:
        sent = time.monotonic()
        leader = self.controllers.leader or await self.controllers.find_leader()
        if leader is not None:
            # a heartbeat first, on the same connection: a confirmation then proves the leader heard this broker
            # at or after ``sent`` (the lease below starts no earlier)
            await self._heartbeat(only=leader)
        info = await self.controllers.replica_info()
        if info is None:
            return
        master_epoch = self.transitions.master_epoch
        if info.master_id is None and info.master_epoch >= master_epoch:
            await self.transitions.apply(info, "poll")
            if await self.controllers.elect_master(self._broker_id) is not None:
                await self._poll()
            return
        if self.role.is_master and info.master_id == self._broker_id and info.master_epoch == master_epoch \
                and leader is not None and self.controllers.leader == leader:   # answered by the one heartbeated
            self.lease_until = sent + self.lease_s
            if self.role.fenced:
                log.warning("controller confirms this broker as master again: unfenced")
                self.role.set_fenced(False)
        await self.transitions.apply(info, "poll")

    async def _lease_watch(self) -> None:
        while True:
            await asyncio.sleep(0.1)
            if self.role.is_master and not self.role.fenced and time.monotonic() > self.lease_until:
                log.error("no confirmation from the controller for %.1f s: fencing this master (no writes)",
                          self.lease_s)
                self.role.set_fenced(True)

    def _on_notify(self, conn: "Connection", request: RemotingCommand) -> RemotingCommand:
        """NOTIFY_BROKER_ROLE_CHANGED: act on it now (on the loop; the work is a task)."""
        info = replica_info_of(request)
        if self.ready:
            self._running_loop().create_task(self._apply_logged(info, "notification"))
        return new_response(ResponseCode.SUCCESS)

    async def _apply_logged(self, info: ReplicaInfo, source: str) -> None:
        try:
            await self.transitions.apply(info, source)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("acting on the controller's %s (master %s, epoch %d) failed; the next poll retries",
                          source, info.master_id, info.master_epoch)

    # ================================================================ SyncStateSet (master)
    def _on_ack(self, conn: "ControllerHAConnection") -> None:
        """HA reader thread: a slave caught up that is not in the set yet -> check the set soon."""
        if conn.broker_id > 0 and conn.broker_id not in self.ha.sync_state_set and conn.last_caught_up and \
                conn.slave_ack_offset >= self.ha.epoch_start and self._loop is not None:
            self._loop.call_soon_threadsafe(self._schedule_set_check, 0.05)

    def _schedule_set_check(self, delay: float) -> None:
        if self._check_soon is None and self.ready and self.role.is_master:
            loop = self._running_loop()

            def run() -> None:
                self._check_soon = None
                loop.create_task(self._check_sync_state_set())
            self._check_soon = loop.call_later(delay, run)

    async def _check_sync_state_set(self) -> None:
        if not self.role.is_master or self.role.fenced:
            return
        current = self.ha.sync_state_set
        wanted = frozenset(self.ha.in_sync_members())
        set_epoch = self.transitions.set_epoch
        if wanted == current or set_epoch < 0:
            return
        epoch = self.transitions.master_epoch
        self.ha.set_sync_state_set(current, pending=wanted)
        accepted, new_set_epoch = await self.controllers.alter_sync_state_set(self._broker_id, epoch, set_epoch,
                                                                              current, wanted)
        if not accepted:
            return                              # the union stays in force until the controller's set arrives
        if await self.transitions.adopt_sync_state_set(epoch, wanted, new_set_epoch):
            log.info("SyncStateSet of %s: %s -> %s (epoch %d)", self.config.brokerName, sorted(current),
                     sorted(wanted), self.transitions.set_epoch)
