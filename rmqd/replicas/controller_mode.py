"""The broker side of RocketMQ 5's controller mode (Java's ``ReplicasManager``): this broker's place in its replica
group comes from the controllers, not from broker.conf.

Start (the broker is a fenced slave until this finishes, and does not register with the name servers):
find the controller leader (CONTROLLER_GET_METADATA_INFO 1005 to each ``controllerAddr``), get a brokerId
(``brokerIdentity`` file, else GET_NEXT_BROKER_ID 1012 + ``brokerIdentity-temp`` + APPLY_BROKER_ID 1013),
REGISTER_BROKER (1003), one heartbeat, and ELECT_MASTER (1002) with its own id when the group has no live master.

Running:

* BROKER_HEARTBEAT (904, oneway) to every controller every ``brokerHeartbeatInterval``, carrying the last epoch,
  the CommitLog max offset and ``controllerHeartBeatTimeoutMills``; the controllers elect from these;
* CONTROLLER_GET_REPLICA_INFO (1004) to the leader right after the heartbeat on the same connection, every
  ``brokerHeartbeatInterval`` on a master (it is the master's **lease**), every ``syncBrokerMetadataPeriod`` on a
  slave; NOTIFY_BROKER_ROLE_CHANGED (1008) from the leader says the same at once;
* a newer master epoch naming this broker: cut the unverified tail, drop epochs at or after the new one, append
  ``(epoch, maxOffset)`` to the epoch file, become SYNC_MASTER with SyncStateSet {self}, register with the name
  servers as brokerId 0. Naming another broker: become its slave (brokerId = the controller id), wait until the
  master has taken over (GET_BROKER_EPOCH_CACHE 1007, which also names its HA address), then the HA connection
  does the 5.x AutoSwitch handshake: the master's epochs, the consistent point, a crash-safe truncation of what
  the master never had (:mod:`rmqd.store.ha.autoswitch`, :mod:`rmqd.store.ha.truncate`); a dropped connection
  repeats it;
* **fencing:** a master whose last confirmation by the controller leader (a 1004 answer naming it master at its
  epoch, asked right after a heartbeat on the same connection) is older than half of
  ``controllerHeartBeatTimeoutMills`` refuses every put and stops registering with the name servers, until a
  confirmation comes back. The controllers elect a new master only after ``controllerHeartBeatTimeoutMills``
  without a heartbeat, so the old master stops taking writes before a new one can exist (5.x has no such lease);
* as master, every ``checkSyncStateSetPeriod`` and on each slave's catch-up or disconnection: the in-sync slaves
  become the proposed SyncStateSet (CONTROLLER_ALTER_SYNC_STATE_SET 1001); acknowledgements use the union of the
  confirmed and the proposed set until the controller answers.

All of it runs on the broker's event loop; disk work (truncation, epoch and identity files) in the executor.
The requests and the reading of their answers are :mod:`rmqd.replicas.controller_client`'s; this module decides
what the broker does with them (the role transitions, the lease, the SyncStateSet).
"""
from __future__ import annotations

import asyncio
import logging
import os
import random
import time
from typing import TYPE_CHECKING, Callable, Optional, TypedDict, cast

from rmqd.config import BrokerRole
from rmqd.controller.codes import ControllerRequestCode as Req
from rmqd.remoting import fastjson
from rmqd.tls.contexts import remoting_client_tls
from rmqd.remoting.codes import ResponseCode
from rmqd.remoting.command import RemotingCommand, new_response
from rmqd.remoting.tasks import cancel_and_wait
from rmqd.replicas.controller_client import ControllerClient, ReplicaInfo, replica_info_of
from rmqd.replicas.role_manager import RoleManager
from rmqd.store.ha.autoswitch import ControllerHAService
from rmqd.store.ha.epoch_file import LONG_MAX, EpochFileCache

if TYPE_CHECKING:
    from rmqd.config import BrokerConfig
    from rmqd.remoting.connection import Connection
    from rmqd.remoting.dispatch import Dispatcher, ProcessorPool
    from rmqd.remoting.fastjson import Encodable
    from rmqd.store.api import MessageStoreAPI
    from rmqd.store.ha.autoswitch import ControllerHAConnection

log = logging.getLogger(__name__)

REGISTER_RETRY_S = 1.0
FOLLOW_RETRY_S = 0.3
LEASE_FRACTION = 0.5


class EpochEntryJson(TypedDict):
    epoch: int
    startOffset: int


class EpochCacheBody(TypedDict, total=False):
    """GET_BROKER_EPOCH_CACHE's body (5.x ``EpochEntryCache``): what a slave reads of it."""

    brokerId: int
    epochList: Optional[list[EpochEntryJson]]


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


def _next_port(addr: str) -> str:
    host, _, port = addr.rpartition(":")
    return f"{host}:{int(port) + 1}"


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
        self.broker_id = -1                      # the controller id (a master registers as 0 on the name server)
        self.master_epoch = 0
        self.master_id: Optional[int] = None
        self.master_addr: Optional[str] = None
        self.set_epoch = -1
        self.ready = False
        self.lease_until = 0.0
        self.last_switch_ms = 0
        self._loop: Optional[asyncio.AbstractEventLoop] = None
        self._tasks: list[asyncio.Task[None]] = []
        self._follow_task: Optional[asyncio.Task[None]] = None
        self._apply_lock: Optional[asyncio.Lock] = None
        self._check_soon: Optional[asyncio.TimerHandle] = None
        self._own_address: Callable[[], str] = lambda: ""
        self._ha_address: Callable[[], str] = lambda: ""
        self._stopping = False
        #: master address -> HA address, from the name servers' answers to registrations
        self.namesrv_ha_addr: dict[str, str] = {}
        ha.set_epoch_cache(self.epoch_cache)
        role.set_fenced(True)                    # no writes until the controller says this broker is master
        ha.lease_valid = lambda: not self.role.fenced and time.monotonic() <= self.lease_until

    # ================================================================ wiring
    def _running_loop(self) -> asyncio.AbstractEventLoop:
        """The broker's loop (set by :meth:`start`)."""
        if self._loop is None:
            raise RuntimeError("ReplicasManager.start was not called")
        return self._loop

    def _lock(self) -> asyncio.Lock:
        """Serialises the role transitions (made by :meth:`start`, on the loop)."""
        if self._apply_lock is None:
            raise RuntimeError("ReplicasManager.start was not called")
        return self._apply_lock

    def register(self, dispatcher: "Dispatcher", pool: "ProcessorPool") -> None:
        """NOTIFY_BROKER_ROLE_CHANGED (1008, on the loop) and GET_BROKER_EPOCH_CACHE (1007)."""
        dispatcher.register(Req.NOTIFY_BROKER_ROLE_CHANGED, self._on_notify)
        dispatcher.register(Req.GET_BROKER_EPOCH_CACHE, self._on_get_epoch_cache, pool)

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
        self._apply_lock = asyncio.Lock()
        self.controllers.start(remoting_client_tls(self.config.extra), signer)

        def on_disconnect(addr: str) -> None:
            loop.call_soon_threadsafe(self._on_ha_disconnect, addr)

        def on_slave_change() -> None:
            loop.call_soon_threadsafe(self._schedule_set_check, 0.05)
        self.ha.client.on_disconnect = on_disconnect
        self.ha.on_slave_change.append(on_slave_change)
        self.ha.on_ack.append(self._on_ack)
        self._tasks = [loop.create_task(self._run(), name="controller-mode")]

    async def stop(self) -> None:
        self._stopping = True
        tasks = self._tasks + ([self._follow_task] if self._follow_task else [])
        await cancel_and_wait(tasks, "controller-mode task")
        if self._check_soon is not None:
            self._check_soon.cancel()
        self.controllers.close()

    def status(self) -> ManagerStatus:
        """Role, epoch, SyncStateSet, lease (metrics and the admin surface)."""
        return {"brokerId": self.broker_id, "role": self.role.role.value, "masterEpoch": self.master_epoch,
                "masterBrokerId": self.master_id, "syncStateSet": sorted(self.ha.sync_state_set),
                "syncStateSetEpoch": self.set_epoch, "fenced": self.role.fenced,
                "controllerLeader": self.controllers.leader, "lastSwitchMillis": self.last_switch_ms,
                "confirmOffset": self.ha.get_confirm_offset(),
                "epochs": self.epoch_cache.snapshot()}

    # ================================================================ heartbeat
    async def _heartbeat(self, only: Optional[str] = None) -> None:
        """BROKER_HEARTBEAT (904) with this broker's state to every controller (or to ``only``)."""
        await self.controllers.heartbeat(dict(
            brokerAddr=self._own_address(), brokerId=self.broker_id, epoch=self.epoch_cache.last_epoch(),
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
        self._tasks.append(loop.create_task(self._heartbeat_loop(), name="controller-heartbeat"))
        self._tasks.append(loop.create_task(self._poll_loop(), name="controller-poll"))
        self._tasks.append(loop.create_task(self._set_check_loop(), name="sync-state-set-check"))
        self._tasks.append(loop.create_task(self._lease_watch(), name="master-lease"))

    async def _register(self) -> bool:
        if await self.controllers.find_leader() is None:
            log.info("no controller leader yet among %s", self.controller_addrs)
            return False
        if self.broker_id <= 0:
            broker_id = await self.controllers.obtain_id(self._own_address())
            if broker_id is None:
                return False
            self._set_id(broker_id)
        info = await self.controllers.register_broker(self.broker_id, self._own_address())
        if info is None:
            return False
        await self._heartbeat()
        if info.master_id is None:
            info = await self.controllers.elect_master(self.broker_id) or info
        if info.master_id is None:
            log.info("%s has no master yet (epoch %d); retrying", self.config.brokerName, info.master_epoch)
            return False
        await self._apply(info, "registration")
        return True

    def _set_id(self, broker_id: int) -> None:
        self.broker_id = broker_id
        self.ha.client.broker_id = broker_id
        if self.role.is_slave:
            self.role.change_to_slave(broker_id)
        log.info("%s/%s has controller brokerId %d", self.config.brokerClusterName, self.config.brokerName,
                 broker_id)

    # ================================================================ running
    async def _heartbeat_loop(self) -> None:
        while True:
            await asyncio.sleep(self.heartbeat_s)
            try:
                await self._heartbeat()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("controller heartbeat round failed")

    async def _poll_loop(self) -> None:
        """The group's state from the leader: every heartbeat interval on a master (its lease), every
        syncBrokerMetadataPeriod on a slave (and every interval while it knows no master)."""
        last_poll = 0.0
        while True:
            await asyncio.sleep(self.heartbeat_s)
            now = time.monotonic()
            if not (self.role.is_master or now - last_poll >= self.sync_metadata_s or self.master_id is None):
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
        if info.master_id is None and info.master_epoch >= self.master_epoch:
            await self._apply(info, "poll")
            if await self.controllers.elect_master(self.broker_id) is not None:
                await self._poll()
            return
        if self.role.is_master and info.master_id == self.broker_id and info.master_epoch == self.master_epoch \
                and leader is not None and self.controllers.leader == leader:   # answered by the one heartbeated
            self.lease_until = sent + self.lease_s
            if self.role.fenced:
                log.warning("controller confirms this broker as master again: unfenced")
                self.role.set_fenced(False)
        await self._apply(info, "poll")

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
            await self._apply(info, source)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("acting on the controller's %s (master %s, epoch %d) failed; the next poll retries",
                          source, info.master_id, info.master_epoch)

    async def _apply(self, info: ReplicaInfo, source: str) -> None:
        async with self._lock():
            if info.master_epoch < self.master_epoch:
                if source == "notification":            # a poll answered by a lagging controller is routine
                    log.warning("ignoring a stale role notification: master %s at epoch %d, this broker is at "
                                "epoch %d", info.master_id, info.master_epoch, self.master_epoch)
                return
            if info.master_epoch == self.master_epoch:
                if self.role.is_master and info.master_id == self.broker_id and info.sync_state_set is not None:
                    if info.sync_state_set_epoch > self.set_epoch:
                        self.set_epoch = info.sync_state_set_epoch
                        self.ha.set_sync_state_set(info.sync_state_set)
                    elif info.sync_state_set_epoch < self.set_epoch and \
                            info.sync_state_set != self.ha.sync_state_set:
                        log.warning("ignoring a stale SyncStateSet %s (epoch %d) from the %s: this master has %s at "
                                    "epoch %d", sorted(info.sync_state_set), info.sync_state_set_epoch, source,
                                    sorted(self.ha.sync_state_set), self.set_epoch)
                return
            log.info("%s: master %s (%s) epoch %d, SyncStateSet %s (from the %s)", self.config.brokerName,
                     info.master_id, info.master_addr, info.master_epoch,
                     sorted(info.sync_state_set) if info.sync_state_set is not None else "?", source)
            self.last_switch_ms = int(time.time() * 1000)
            if info.master_id == self.broker_id:
                await self._become_master(info)
            else:
                await self._become_slave(info)

    async def _become_master(self, info: ReplicaInfo) -> None:
        self._cancel_follow()
        self.role.set_fenced(True)
        start = await asyncio.get_running_loop().run_in_executor(None, self._promote_blocking, info.master_epoch)
        self.master_epoch, self.master_id, self.master_addr = info.master_epoch, self.broker_id, self._own_address()
        self.set_epoch = info.sync_state_set_epoch
        self.ha.become_master(self.broker_id, start)
        if info.sync_state_set is not None:
            self.ha.set_sync_state_set(info.sync_state_set)
        self.role.epoch = info.master_epoch
        self.lease_until = time.monotonic() + self.lease_s
        self.role.change_to_master(BrokerRole.SYNC_MASTER)
        self.role.set_fenced(False)
        log.warning("%s is MASTER at epoch %d from offset %d", self.config.brokerName, info.master_epoch, start)

    def _promote_blocking(self, epoch: int) -> int:
        """Stop replicating, cut the bytes not verified, drop later epochs, record ``(epoch, maxOffset)``."""
        client = self.ha.client
        client.update_master_address(None)
        client.set_active(False)
        self._wait_client_stopped()
        new_max = self.store.commitlog_max_offset()     # the client cut its unverified tail when it stopped
        last = self.epoch_cache.last_entry()
        if last is not None and last[0] == epoch and last[1] <= new_max:
            return last[1]                  # the same master again at its epoch (a restart): nothing moves
        self.epoch_cache.drop_from_epoch(epoch)
        self.epoch_cache.truncate_suffix(new_max + 1)
        self.epoch_cache.append(epoch, new_max)
        return new_max

    async def _become_slave(self, info: ReplicaInfo) -> None:
        self._cancel_follow()
        self.master_epoch, self.master_id, self.master_addr = info.master_epoch, info.master_id, info.master_addr
        self.role.epoch = info.master_epoch
        was_master = self.role.is_master
        self.ha.become_slave(self.broker_id)
        self.role.change_to_slave(self.broker_id)
        self.role.set_fenced(False)
        if was_master:
            log.warning("%s is no longer master: slave %d of %s", self.config.brokerName, self.broker_id,
                        info.master_addr)
        if info.master_id is not None and info.master_addr:
            self._follow_task = self._running_loop().create_task(self._follow(info.master_addr, info.master_epoch),
                                                                 name="epoch-handshake")

    def _cancel_follow(self) -> None:
        if self._follow_task is not None and not self._follow_task.done():
            self._follow_task.cancel()
        self._follow_task = None

    def _on_ha_disconnect(self, addr: str) -> None:
        """The HA connection ended: hand-shake again with the same master (if it still is)."""
        if self._stopping or not self.role.is_slave or not self.master_addr or self.master_id is None:
            return
        if self._follow_task is not None and not self._follow_task.done():
            return
        self._follow_task = self._running_loop().create_task(self._follow(self.master_addr, self.master_epoch, 1.0),
                                                             name="epoch-handshake")

    async def _follow(self, master_addr: str, epoch: int, delay: float = 0.0) -> None:
        """Find the master's HA address, then hand the HA client over to it: the epoch handshake and the
        truncation happen on the HA connection (:mod:`rmqd.store.ha.autoswitch`). GET_BROKER_EPOCH_CACHE (1007)
        says when the master has taken over at ``epoch``; its ``haServerAddr`` (an rmqd master adds it) names the
        HA port, else the name server's answer (a Java master), else the master's port + 1 (5.x's default)."""
        await asyncio.sleep(delay)
        while self.master_epoch == epoch and self.role.is_slave:
            try:
                r = await self.controllers.broker_epoch_cache(master_addr)
            except (OSError, asyncio.TimeoutError, ConnectionError) as exc:
                log.info("master %s unreachable: %r", master_addr, exc)
                await asyncio.sleep(FOLLOW_RETRY_S * 3)
                continue
            if r.code != ResponseCode.SUCCESS or not r.body:
                await asyncio.sleep(FOLLOW_RETRY_S)
                continue
            doc = cast(EpochCacheBody, fastjson.loads_lenient(r.body))     # the JSON boundary: the master's answer
            entries = [(int(e["epoch"]), int(e["startOffset"])) for e in doc.get("epochList") or ()]
            if not entries or entries[-1][0] < epoch or int(doc.get("brokerId", -1)) != 0:
                await asyncio.sleep(FOLLOW_RETRY_S)        # it has not taken over yet
                continue
            if entries[-1][0] > epoch:
                return                                      # a newer epoch: the controller will tell us
            ha_addr = (r.ext_fields or {}).get("haServerAddr") or self.namesrv_ha_addr.get(master_addr) \
                or _next_port(master_addr)
            if self.master_epoch != epoch or not self.role.is_slave:
                return
            log.info("master %s is at epoch %d; replicating from %s", master_addr, epoch, ha_addr)
            self.role.update_master(master_addr, ha_addr)
            client = self.ha.client
            client.broker_id = self.broker_id
            client.expected_epoch = epoch
            client.master_label = master_addr
            self.ha.update_master_address(ha_addr)
            return

    def _wait_client_stopped(self) -> None:
        """Until the HA client is off its connection (and has cut what it had not verified)."""
        client = self.ha.client
        deadline = time.monotonic() + 10
        while client.connected:
            if time.monotonic() > deadline:
                raise RuntimeError("the HA client did not leave its connection within 10 s")
            time.sleep(0.01)

    def _on_get_epoch_cache(self, conn: "Connection", request: RemotingCommand) -> RemotingCommand:
        """GET_BROKER_EPOCH_CACHE (1007): 5.x's EpochEntryCache; rmqd adds ``haServerAddr`` to the header."""
        mx = self.store.commitlog_max_offset()
        ends = self.epoch_cache.with_ends(mx)
        body: dict[str, Encodable] = {
            "clusterName": self.config.brokerClusterName, "brokerName": self.config.brokerName,
            "brokerId": 0 if self.role.is_master else self.broker_id,
            "epochList": [{"epoch": e, "startOffset": s, "endOffset": LONG_MAX if i == len(ends) - 1 else end}
                          for i, (e, s, end) in enumerate(ends)],
            "maxOffset": mx}
        resp = new_response(ResponseCode.SUCCESS, None, {"haServerAddr": self._ha_address()}, fastjson.dumps(body))
        return resp

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

    async def _set_check_loop(self) -> None:
        while True:
            await asyncio.sleep(self.check_set_s)
            try:
                await self._check_sync_state_set()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("SyncStateSet check failed")

    async def _check_sync_state_set(self) -> None:
        if not self.role.is_master or self.role.fenced:
            return
        current = self.ha.sync_state_set
        wanted = frozenset(self.ha.in_sync_members())
        if wanted == current or self.set_epoch < 0:
            return
        epoch = self.master_epoch
        self.ha.set_sync_state_set(current, pending=wanted)
        accepted, new_set_epoch = await self.controllers.alter_sync_state_set(self.broker_id, epoch, self.set_epoch,
                                                                              current, wanted)
        if not accepted:
            return                              # the union stays in force until the controller's set arrives
        async with self._lock():
            if self.master_epoch != epoch or not self.role.is_master:
                return
            self.set_epoch = self.set_epoch + 1 if new_set_epoch is None else new_set_epoch
            self.ha.set_sync_state_set(wanted)
        log.info("SyncStateSet of %s: %s -> %s (epoch %d)", self.config.brokerName, sorted(current),
                 sorted(wanted), self.set_epoch)
