"""The role transitions of a broker in controller mode: what it does with the controllers' word on its group.

:class:`RoleTransitions` takes a :class:`~rmqd.replicas.controller_client.ReplicaInfo` (a registration's, a poll's
or a NOTIFY_BROKER_ROLE_CHANGED's answer) and moves the broker to it, one change at a time:

* a newer master epoch naming this broker: cut the unverified tail, drop epochs at or after the new one, append
  ``(epoch, maxOffset)`` to the epoch file, become SYNC_MASTER with the controller's SyncStateSet;
* naming another broker: become its slave (brokerId = the controller id), wait until the master has taken over
  (GET_BROKER_EPOCH_CACHE 1007, which also names its HA address), then hand the HA client over to it: the 5.x
  AutoSwitch handshake, the consistent point and the crash-safe truncation happen on the HA connection
  (:mod:`rmqd.store.ha.autoswitch`, :mod:`rmqd.store.ha.truncate`); a dropped connection repeats the hand-off;
* the same epoch: a newer SyncStateSet is adopted, a stale one ignored.

It serves GET_BROKER_EPOCH_CACHE to the slaves. What it needs of the controller session (this broker's id and
addresses, its lease, the request for a master's epoch cache) is :class:`ControllerSession`, which
:class:`rmqd.replicas.controller_mode.ReplicasManager` offers.
"""
from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING, Optional, Protocol, TypedDict, cast

from rmqd.config import BrokerRole
from rmqd.remoting import fastjson
from rmqd.remoting.codes import ResponseCode
from rmqd.remoting.command import RemotingCommand, new_response
from rmqd.remoting.tasks import cancel_and_wait
from rmqd.replicas.controller_client import ReplicaInfo
from rmqd.replicas.role_manager import RoleManager
from rmqd.store.ha.autoswitch import ControllerHAService
from rmqd.store.ha.epoch_file import LONG_MAX, EpochFileCache

if TYPE_CHECKING:
    from rmqd.config import BrokerConfig
    from rmqd.remoting.connection import Connection
    from rmqd.remoting.fastjson import Encodable
    from rmqd.store.api import MessageStoreAPI

log = logging.getLogger(__name__)

FOLLOW_RETRY_S = 0.3


class EpochEntryJson(TypedDict):
    epoch: int
    startOffset: int


class EpochCacheBody(TypedDict, total=False):
    """GET_BROKER_EPOCH_CACHE's body (5.x ``EpochEntryCache``): what a slave reads of it."""

    brokerId: int
    epochList: Optional[list[EpochEntryJson]]


class ControllerSession(Protocol):
    """What the role transitions take from the broker's session with the controllers."""

    @property
    def broker_id(self) -> int:
        """This broker's controller id (a master registers as 0 on the name server)."""

    def own_address(self) -> str:
        """This broker's ``host:port``."""

    def ha_address(self) -> str:
        """This broker's HA ``host:port`` (told to the slaves with its epoch cache)."""

    def renew_lease(self) -> None:
        """A master's lease starts now (it takes writes until the controllers stop confirming it)."""

    async def broker_epoch_cache(self, broker_addr: str) -> RemotingCommand:
        """GET_BROKER_EPOCH_CACHE (1007) to the broker at ``broker_addr``: its answer."""


def _next_port(addr: str) -> str:
    host, _, port = addr.rpartition(":")
    return f"{host}:{int(port) + 1}"


class RoleTransitions:
    """See the module docstring. :meth:`start` on the broker's loop before the first :meth:`apply`."""

    def __init__(self, config: "BrokerConfig", role: RoleManager, ha: ControllerHAService, store: "MessageStoreAPI",
                 epoch_cache: EpochFileCache, session: ControllerSession) -> None:
        self.config = config
        self.role = role
        self.ha = ha
        self.store = store
        self.epoch_cache = epoch_cache
        self.session = session
        self.master_epoch = 0
        self.master_id: Optional[int] = None
        self.master_addr: Optional[str] = None
        self.set_epoch = -1
        self.last_switch_ms = 0
        #: master address -> HA address, from the name servers' answers to registrations
        self.namesrv_ha_addr: dict[str, str] = {}
        self._loop: Optional[asyncio.AbstractEventLoop] = None
        self._apply_lock: Optional[asyncio.Lock] = None
        self._follow_task: Optional[asyncio.Task[None]] = None
        self._stopping = False

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._apply_lock = asyncio.Lock()

    async def stop(self) -> None:
        """No more hand-offs: the one under way is cancelled."""
        self._stopping = True
        await cancel_and_wait([self._follow_task] if self._follow_task else [], "controller-mode task")

    def _running_loop(self) -> asyncio.AbstractEventLoop:
        """The broker's loop (set by :meth:`start`)."""
        if self._loop is None:
            raise RuntimeError("RoleTransitions.start was not called")
        return self._loop

    def _lock(self) -> asyncio.Lock:
        """Serialises the role transitions (made by :meth:`start`, on the loop)."""
        if self._apply_lock is None:
            raise RuntimeError("RoleTransitions.start was not called")
        return self._apply_lock

    # ================================================================ the controllers' word
    async def apply(self, info: ReplicaInfo, source: str) -> None:
        """Move to the group's state in ``info`` (``source``: registration, poll or notification)."""
        async with self._lock():
            if info.master_epoch < self.master_epoch:
                if source == "notification":            # a poll answered by a lagging controller is routine
                    log.warning("ignoring a stale role notification: master %s at epoch %d, this broker is at "
                                "epoch %d", info.master_id, info.master_epoch, self.master_epoch)
                return
            if info.master_epoch == self.master_epoch:
                if self.role.is_master and info.master_id == self.session.broker_id \
                        and info.sync_state_set is not None:
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
            if info.master_id == self.session.broker_id:
                await self._become_master(info)
            else:
                await self._become_slave(info)

    async def adopt_sync_state_set(self, epoch: int, wanted: frozenset[int], new_set_epoch: Optional[int]) -> bool:
        """The controllers accepted ``wanted`` (asked at master epoch ``epoch``): adopt it unless the role moved
        on meanwhile; ``new_set_epoch`` is the controller's (None: the next one)."""
        async with self._lock():
            if self.master_epoch != epoch or not self.role.is_master:
                return False
            self.set_epoch = self.set_epoch + 1 if new_set_epoch is None else new_set_epoch
            self.ha.set_sync_state_set(wanted)
            return True

    # ================================================================ master
    async def _become_master(self, info: ReplicaInfo) -> None:
        self._cancel_follow()
        self.role.set_fenced(True)
        start = await asyncio.get_running_loop().run_in_executor(None, self._promote_blocking, info.master_epoch)
        broker_id = self.session.broker_id
        self.master_epoch, self.master_id, self.master_addr = info.master_epoch, broker_id, self.session.own_address()
        self.set_epoch = info.sync_state_set_epoch
        self.ha.become_master(broker_id, start)
        if info.sync_state_set is not None:
            self.ha.set_sync_state_set(info.sync_state_set)
        self.role.epoch = info.master_epoch
        self.session.renew_lease()
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

    def _wait_client_stopped(self) -> None:
        """Until the HA client is off its connection (and has cut what it had not verified)."""
        client = self.ha.client
        deadline = time.monotonic() + 10
        while client.connected:
            if time.monotonic() > deadline:
                raise RuntimeError("the HA client did not leave its connection within 10 s")
            time.sleep(0.01)

    def on_get_epoch_cache(self, conn: "Connection", request: RemotingCommand) -> RemotingCommand:
        """GET_BROKER_EPOCH_CACHE (1007): 5.x's EpochEntryCache; rmqd adds ``haServerAddr`` to the header."""
        mx = self.store.commitlog_max_offset()
        ends = self.epoch_cache.with_ends(mx)
        body: dict[str, Encodable] = {
            "clusterName": self.config.brokerClusterName, "brokerName": self.config.brokerName,
            "brokerId": 0 if self.role.is_master else self.session.broker_id,
            "epochList": [{"epoch": e, "startOffset": s, "endOffset": LONG_MAX if i == len(ends) - 1 else end}
                          for i, (e, s, end) in enumerate(ends)],
            "maxOffset": mx}
        return new_response(ResponseCode.SUCCESS, None, {"haServerAddr": self.session.ha_address()},
                            fastjson.dumps(body))

    # ================================================================ slave
    async def _become_slave(self, info: ReplicaInfo) -> None:
        self._cancel_follow()
        self.master_epoch, self.master_id, self.master_addr = info.master_epoch, info.master_id, info.master_addr
        self.role.epoch = info.master_epoch
        was_master = self.role.is_master
        broker_id = self.session.broker_id
        self.ha.become_slave(broker_id)
        self.role.change_to_slave(broker_id)
        self.role.set_fenced(False)
        if was_master:
            log.warning("%s is no longer master: slave %d of %s", self.config.brokerName, broker_id,
                        info.master_addr)
        if info.master_id is not None and info.master_addr:
            self._follow_task = self._running_loop().create_task(self._follow(info.master_addr, info.master_epoch),
                                                                 name="epoch-handshake")

    def _cancel_follow(self) -> None:
        if self._follow_task is not None and not self._follow_task.done():
            self._follow_task.cancel()
        self._follow_task = None

    def on_ha_disconnect(self, addr: str) -> None:
        """The HA connection ended (on the loop): hand-shake again with the same master (if it still is)."""
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
                r = await self.session.broker_epoch_cache(master_addr)
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
            client.broker_id = self.session.broker_id
            client.expected_epoch = epoch
            client.master_label = master_addr
            self.ha.update_master_address(ha_addr)
            return
