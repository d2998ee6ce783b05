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
"""
from __future__ import annotations

import asyncio
import logging
import os
import random
import time
from dataclasses import dataclass
from typing import Any, Callable, Optional

from rmqd.config import BrokerRole
from rmqd.controller.codes import ControllerRequestCode as Req, ControllerResponseCode as Res
from rmqd.fileutil import atomic_write
from rmqd.remoting import fastjson
from rmqd.remoting.client import RemotingClient
from rmqd.tls.contexts import remoting_client_tls
from rmqd.remoting.codes import ResponseCode
from rmqd.remoting.command import RemotingCommand, new_request, new_response
from rmqd.replicas.role_manager import RoleManager
from rmqd.store.ha.autoswitch import ControllerHAService
from rmqd.store.ha.epoch_file import LONG_MAX, EpochFileCache

log = logging.getLogger(__name__)

RPC_TIMEOUT_S = 3.0                 # BrokerOuterAPI's controller calls
REGISTER_RETRY_S = 1.0
FOLLOW_RETRY_S = 0.3
LEASE_FRACTION = 0.5


def _next_port(addr: str) -> str:
    host, _, port = addr.rpartition(":")
    return f"{host}:{int(port) + 1}"


@dataclass
class ReplicaInfo:
    """What the controller says about the group."""

    master_id: Optional[int]
    master_addr: Optional[str]
    master_epoch: int
    sync_state_set: Optional[frozenset[int]] = None
    sync_state_set_epoch: int = -1


def _int(value: Any, default: Optional[int] = None) -> Optional[int]:
    if value is None or value == "" or value == "null":
        return default
    return int(value)


def read_identity(path: str) -> Optional[list[str]]:
    try:
        with open(path, encoding="utf-8") as f:
            return f.read().strip().split("#")
    except FileNotFoundError:
        return None


class ReplicasManager:
    """See the module docstring."""

    def __init__(self, config: Any, role: RoleManager, ha: ControllerHAService, store: Any) -> None:
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
        self.leader: Optional[str] = None
        self.ready = False
        self.lease_until = 0.0
        self.last_switch_ms = 0
        self._client: Optional[RemotingClient] = None
        self._loop: Optional[asyncio.AbstractEventLoop] = None
        self._tasks: list[asyncio.Task] = []
        self._follow_task: Optional[asyncio.Task] = None
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
    def register(self, dispatcher: Any, pool: Any) -> None:
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
        self._client = RemotingClient(connect_timeout=RPC_TIMEOUT_S, tls=remoting_client_tls(self.config.extra),
                                      signer=signer)
        self.ha.client.on_disconnect = lambda addr: loop.call_soon_threadsafe(self._on_ha_disconnect, addr)
        self.ha.on_slave_change.append(lambda: loop.call_soon_threadsafe(self._schedule_set_check, 0.05))
        self.ha.on_ack.append(self._on_ack)
        self._tasks = [loop.create_task(self._run(), name="controller-mode")]

    async def stop(self) -> None:
        self._stopping = True
        tasks = self._tasks + ([self._follow_task] if self._follow_task else [])
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        if self._check_soon is not None:
            self._check_soon.cancel()
        if self._client is not None:
            self._client.close()

    def status(self) -> dict:
        """Role, epoch, SyncStateSet, lease (metrics and the admin surface)."""
        return {"brokerId": self.broker_id, "role": self.role.role.value, "masterEpoch": self.master_epoch,
                "masterBrokerId": self.master_id, "syncStateSet": sorted(self.ha.sync_state_set),
                "syncStateSetEpoch": self.set_epoch, "fenced": self.role.fenced,
                "controllerLeader": self.leader, "lastSwitchMillis": self.last_switch_ms,
                "confirmOffset": self.ha.get_confirm_offset(),
                "epochs": self.epoch_cache.snapshot()}

    # ================================================================ controller calls
    async def _call(self, addr: str, code: int, ext: Optional[dict] = None,
                    body: Optional[bytes] = None) -> RemotingCommand:
        return await self._client.invoke(addr, new_request(code, {k: v for k, v in (ext or {}).items()
                                                                  if v is not None}, body), RPC_TIMEOUT_S)

    async def _find_leader(self) -> Optional[str]:
        """The leader, by the address this broker dials when that controller says it leads (an advertised
        address may not be reachable from here, apache/rocketmq#9082), else by the address others advertise."""
        advertised = None
        for addr in self.controller_addrs:
            try:
                r = await self._call(addr, Req.CONTROLLER_GET_METADATA_INFO)
            except (OSError, asyncio.TimeoutError, ConnectionError) as exc:
                log.debug("controller %s unreachable: %r", addr, exc)
                continue
            ext = r.ext_fields or {}
            if r.code != ResponseCode.SUCCESS:
                continue
            if str(ext.get("isLeader")).lower() == "true":
                return self._leader_is(addr)
            leader = ext.get("controllerLeaderAddress")
            if leader and leader != "null":
                advertised = advertised or leader
        if advertised is not None:
            return self._leader_is(advertised)
        self.leader = None
        return None

    def _leader_is(self, addr: str) -> str:
        if addr != self.leader:
            log.info("controller leader: %s", addr)
        self.leader = addr
        return addr

    async def _leader_call(self, code: int, ext: Optional[dict] = None,
                           body: Optional[bytes] = None) -> Optional[RemotingCommand]:
        """A call to the leader (found again when it moved); None when no leader answers."""
        for _ in range(2):
            leader = self.leader or await self._find_leader()
            if leader is None:
                return None
            try:
                r = await self._call(leader, code, ext, body)
            except (OSError, asyncio.TimeoutError, ConnectionError) as exc:
                log.info("controller leader %s: %r", leader, exc)
                self.leader = None
                continue
            if r.code == Res.CONTROLLER_NOT_LEADER:
                self.leader = None
                continue
            return r
        return None

    def _base(self) -> dict:
        return {"clusterName": self.config.brokerClusterName, "brokerName": self.config.brokerName}

    async def _heartbeat(self, only: Optional[str] = None) -> None:
        """BROKER_HEARTBEAT (904, oneway) to every controller at once (or to ``only``): an unreachable one must
        not hold up the others."""
        ext = dict(self._base(), brokerAddr=self._own_address(), brokerId=self.broker_id,
                   epoch=self.epoch_cache.last_epoch(), maxOffset=self.store.commitlog_max_offset(),
                   confirmOffset=self.ha.get_confirm_offset(), heartbeatTimeoutMills=self.timeout_ms,
                   electionPriority=int(self.config.brokerElectionPriority))

        async def one(addr: str) -> None:
            try:
                await self._client.invoke_oneway(addr, new_request(Req.BROKER_HEARTBEAT, ext))
            except (OSError, asyncio.TimeoutError, ConnectionError) as exc:
                log.debug("heartbeat to controller %s failed: %r", addr, exc)
        await asyncio.gather(*(one(a) for a in ([only] if only else self.controller_addrs)))

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
        loop = self._loop
        self._tasks.append(loop.create_task(self._heartbeat_loop(), name="controller-heartbeat"))
        self._tasks.append(loop.create_task(self._poll_loop(), name="controller-poll"))
        self._tasks.append(loop.create_task(self._set_check_loop(), name="sync-state-set-check"))
        self._tasks.append(loop.create_task(self._lease_watch(), name="master-lease"))

    async def _register(self) -> bool:
        if await self._find_leader() is None:
            log.info("no controller leader yet among %s", self.controller_addrs)
            return False
        if self.broker_id <= 0 and not await self._obtain_id():
            return False
        r = await self._leader_call(Req.CONTROLLER_REGISTER_BROKER,
                                    dict(self._base(), brokerId=self.broker_id, brokerAddress=self._own_address()))
        if r is None or r.code != ResponseCode.SUCCESS:
            log.warning("REGISTER_BROKER to the controller failed: %s", None if r is None else (r.code, r.remark))
            return False
        await self._heartbeat()
        info = self._info_from(r)
        if info.master_id is None:
            info = await self._elect() or info
        if info.master_id is None:
            log.info("%s has no master yet (epoch %d); retrying", self.config.brokerName, info.master_epoch)
            return False
        await self._apply(info, "registration")
        return True

    async def _obtain_id(self) -> bool:
        """brokerIdentity, else brokerIdentity-temp + APPLY_BROKER_ID, else GET_NEXT_BROKER_ID first."""
        c = self.config
        ident = read_identity(self.identity_path)
        if ident is not None:
            if ident[:2] != [c.brokerClusterName, c.brokerName] or len(ident) < 3:
                raise RuntimeError(f"{self.identity_path} belongs to {ident[:2]}, not "
                                   f"{[c.brokerClusterName, c.brokerName]}: remove it to join this group")
            self._set_id(int(ident[2]))
            return True
        temp = self.identity_path + "-temp"
        ident = read_identity(temp)
        if ident is None or ident[:2] != [c.brokerClusterName, c.brokerName]:
            r = await self._leader_call(Req.CONTROLLER_GET_NEXT_BROKER_ID, self._base())
            if r is None or r.code != ResponseCode.SUCCESS:
                return False
            next_id = int(r.ext_fields["nextBrokerId"])
            check = f"{self._own_address()};{int(time.time() * 1000)}"
            ident = [c.brokerClusterName, c.brokerName, str(next_id), check]
            await self._in_executor(atomic_write, temp, "#".join(ident), False)
        r = await self._leader_call(Req.CONTROLLER_APPLY_BROKER_ID, dict(self._base(), appliedBrokerId=ident[2],
                                                                        registerCheckCode=ident[3]))
        if r is None:
            return False
        if r.code != ResponseCode.SUCCESS:
            log.warning("APPLY_BROKER_ID %s refused: %s %s; asking for another id", ident[2], r.code, r.remark)
            await self._in_executor(os.unlink, temp)
            return False
        await self._in_executor(atomic_write, self.identity_path, "#".join(ident[:3]), False)
        await self._in_executor(os.unlink, temp)
        self._set_id(int(ident[2]))
        return True

    def _set_id(self, broker_id: int) -> None:
        self.broker_id = broker_id
        self.ha.client.broker_id = broker_id
        if self.role.is_slave:
            self.role.change_to_slave(broker_id)
        log.info("%s/%s has controller brokerId %d", self.config.brokerClusterName, self.config.brokerName,
                 broker_id)

    async def _elect(self) -> Optional[ReplicaInfo]:
        r = await self._leader_call(Req.CONTROLLER_ELECT_MASTER, dict(self._base(), brokerId=self.broker_id,
                                                                      designateElect="false",
                                                                      invokeTime=int(time.time() * 1000)))
        if r is None:
            return None
        if r.code in (ResponseCode.SUCCESS, Res.CONTROLLER_MASTER_STILL_EXIST):
            return self._info_from(r)
        log.info("ELECT_MASTER for %s: %s %s", self.config.brokerName, r.code, r.remark)
        return None

    @staticmethod
    def _info_from(r: RemotingCommand) -> ReplicaInfo:
        ext = r.ext_fields or {}
        members, set_epoch = None, -1
        if r.body:
            try:
                doc = fastjson.loads_lenient(r.body)
                if "syncStateSet" in doc:
                    members = frozenset(int(x) for x in doc["syncStateSet"] or ())
                set_epoch = int(doc.get("syncStateSetEpoch", -1))
            except (ValueError, TypeError) as exc:
                log.warning("undecodable SyncStateSet from the controller: %s", exc)
        set_epoch = _int(ext.get("syncStateSetEpoch"), set_epoch)
        return ReplicaInfo(_int(ext.get("masterBrokerId")), ext.get("masterAddress") or None,
                           _int(ext.get("masterEpoch"), 0), members, set_epoch)

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
        leader = self.leader or await self._find_leader()
        if leader is not None:
            # a heartbeat first, on the same connection: a confirmation then proves the leader heard this broker
            # at or after ``sent`` (the lease below starts no earlier)
            await self._heartbeat(only=leader)
        r = await self._leader_call(Req.CONTROLLER_GET_REPLICA_INFO, {"brokerName": self.config.brokerName})
        if r is None or r.code != ResponseCode.SUCCESS:
            return
        info = self._info_from(r)
        if info.master_id is None and info.master_epoch >= self.master_epoch:
            await self._apply(info, "poll")
            if await self._elect() is not None:
                await self._poll()
            return
        if self.role.is_master and info.master_id == self.broker_id and info.master_epoch == self.master_epoch \
                and leader is not None and self.leader == leader:     # answered by the controller heartbeated
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

    def _on_notify(self, conn: Any, request: RemotingCommand) -> RemotingCommand:
        """NOTIFY_BROKER_ROLE_CHANGED: act on it now (on the loop; the work is a task)."""
        info = self._info_from(request)
        if self.ready:
            self._loop.create_task(self._apply_logged(info, "notification"))
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
        async with self._apply_lock:
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
        start = await self._in_executor(self._promote_blocking, info.master_epoch)
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
            self._follow_task = self._loop.create_task(self._follow(info.master_addr, info.master_epoch),
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
        self._follow_task = self._loop.create_task(self._follow(self.master_addr, self.master_epoch, 1.0),
                                                   name="epoch-handshake")

    async def _follow(self, master_addr: str, epoch: int, delay: float = 0.0) -> None:
        """Find the master's HA address, then hand the HA client over to it: the epoch handshake and the
        truncation happen on the HA connection (:mod:`rmqd.store.ha.autoswitch`). GET_BROKER_EPOCH_CACHE (1007)
        says when the master has taken over at ``epoch``; its ``haServerAddr`` (an rmqd master adds it) names the
        HA port, else the name server's answer (a Java master), else the master's port + 1 (5.x's default)."""
        await asyncio.sleep(delay)
        while self.master_epoch == epoch and self.role.is_slave:
            try:
                r = await self._call(master_addr, Req.GET_BROKER_EPOCH_CACHE)
            except (OSError, asyncio.TimeoutError, ConnectionError) as exc:
                log.info("master %s unreachable: %r", master_addr, exc)
                await asyncio.sleep(FOLLOW_RETRY_S * 3)
                continue
            if r.code != ResponseCode.SUCCESS or not r.body:
                await asyncio.sleep(FOLLOW_RETRY_S)
                continue
            doc = fastjson.loads_lenient(r.body)
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

    def _on_get_epoch_cache(self, conn: Any, request: RemotingCommand) -> RemotingCommand:
        """GET_BROKER_EPOCH_CACHE (1007): 5.x's EpochEntryCache; rmqd adds ``haServerAddr`` to the header."""
        mx = self.store.commitlog_max_offset()
        ends = self.epoch_cache.with_ends(mx)
        body = {"clusterName": self.config.brokerClusterName, "brokerName": self.config.brokerName,
                "brokerId": 0 if self.role.is_master else self.broker_id,
                "epochList": [{"epoch": e, "startOffset": s, "endOffset": LONG_MAX if i == len(ends) - 1 else end}
                              for i, (e, s, end) in enumerate(ends)],
                "maxOffset": mx}
        resp = new_response(ResponseCode.SUCCESS, None, {"haServerAddr": self._ha_address()}, fastjson.dumps(body))
        return resp

    # ================================================================ SyncStateSet (master)
    def _on_ack(self, conn: Any) -> None:
        """HA reader thread: a slave caught up that is not in the set yet -> check the set soon."""
        if conn.broker_id > 0 and conn.broker_id not in self.ha.sync_state_set and conn.last_caught_up and \
                conn.slave_ack_offset >= self.ha.epoch_start and self._loop is not None:
            self._loop.call_soon_threadsafe(self._schedule_set_check, 0.05)

    def _schedule_set_check(self, delay: float) -> None:
        if self._check_soon is None and self.ready and self.role.is_master:
            def run() -> None:
                self._check_soon = None
                self._loop.create_task(self._check_sync_state_set())
            self._check_soon = self._loop.call_later(delay, run)

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
        body = fastjson.dumps({"syncStateSet": sorted(wanted), "syncStateSetEpoch": self.set_epoch})
        r = await self._leader_call(Req.CONTROLLER_ALTER_SYNC_STATE_SET,
                                    {"brokerName": self.config.brokerName, "masterBrokerId": self.broker_id,
                                     "masterEpoch": epoch, "invokeTime": int(time.time() * 1000)}, body)
        if r is None or r.code != ResponseCode.SUCCESS:
            log.warning("ALTER_SYNC_STATE_SET %s -> %s refused: %s", sorted(current), sorted(wanted),
                        None if r is None else (r.code, r.remark))
            return                              # the union stays in force until the controller's set arrives
        async with self._apply_lock:
            if self.master_epoch != epoch or not self.role.is_master:
                return
            self.set_epoch = int((r.ext_fields or {}).get("newSyncStateSetEpoch", self.set_epoch + 1))
            self.ha.set_sync_state_set(wanted)
        log.info("SyncStateSet of %s: %s -> %s (epoch %d)", self.config.brokerName, sorted(current),
                 sorted(wanted), self.set_epoch)

    # ================================================================ helpers
    async def _in_executor(self, fn: Callable, *args: Any) -> Any:
        return await asyncio.get_running_loop().run_in_executor(None, fn, *args)
