"""One controller node's logic (Java's ``DLedgerController`` + ``ControllerManager``): requests become Raft
entries on the leader, committed entries become state on every node, and the leader watches masters.

Writes (elect, register, apply id, alter SyncStateSet, clean) go one at a time through the leader, as
Java's event queue does: compute the result against the applied state, commit its events, and answer
once they are applied here.  A leader first commits an empty entry in its term before it computes
anything (its state may lag the log until then).  Reads (replica info, SyncStateSet data, next id) wait
for a shared read barrier (:meth:`RaftNode.read_barrier`), so a deposed leader that has not noticed yet
cannot serve stale data; Java serves them from the leader's memory unless ``processReadEvent``.

Leader-only duties: elect a new master when a master's heartbeat expires or its channel closes, and
every ``scanInactiveMasterInterval`` for sets whose master is dead (retrying up to
``electMasterMaxRetryCount`` times); push NOTIFY_BROKER_ROLE_CHANGED after each new master.
"""
from __future__ import annotations

import asyncio
import logging
import threading
from typing import TYPE_CHECKING, Callable, Mapping, Optional, cast

from rmqd.controller.codes import ControllerResponseCode as C
from rmqd.controller.config import ControllerConfig
from rmqd.controller.elect_policy import DefaultElectPolicy
from rmqd.controller.events import decode_events, encode_events
from rmqd.controller.heartbeat import BrokerHeartbeatManager
from rmqd.controller.notify import RoleChange, RoleChangeNotifier
from rmqd.controller.raft import NotLeaderError, RaftError, RaftNode, RaftTimeout
from rmqd.controller.replicas_info import SUCCESS, ControllerResult, ReplicasInfoManager
from rmqd.controller.request_meter import OperationMeter
from rmqd.remoting import fastjson

if TYPE_CHECKING:
    from typing import TypedDict

    from rmqd.remoting.command import ExtValue

    # The body of a successful CONTROLLER_ELECT_MASTER (ReplicasInfoManager.elect_master), read back here.
    class BrokerMemberGroupJson(TypedDict, total=False):
        cluster: str
        brokerName: str
        brokerAddrs: dict[int, str]

    class ElectMasterBodyJson(TypedDict, total=False):
        brokerMemberGroup: Optional[BrokerMemberGroupJson]
        syncStateSet: list[int]

log = logging.getLogger(__name__)

SYSTEM_ERROR = 1
NOT_LEADER_REMARK = "The controller is not in leader state"
TRIGGER_ELECT_WAIT_S = 3.0           # Java waits up to 3 s for each controller-triggered election


class Controller:
    def __init__(self, config: ControllerConfig, heartbeat: BrokerHeartbeatManager,
                 notifier: RoleChangeNotifier, append_meter: Optional[OperationMeter] = None) -> None:
        self.config = config
        self.heartbeat = heartbeat
        self.notifier = notifier
        self.state = ReplicasInfoManager(lambda: bool(self.config.enableElectUncleanMaster))
        self._state_lock = threading.Lock()      # apply (Raft thread) vs. compute/read (loop)
        self.peers = config.peers()
        self.self_id = config.self_id()
        self.raft = RaftNode(self.self_id, {p.id: p.raft_addr for p in self.peers}, config.store_path(), self,
                             group=config.group(), dial=config.dial_addrs(),
                             election_timeout_s=int(config.controllerRaftElectionTimeoutMs) / 1000.0,
                             heartbeat_interval_s=int(config.controllerRaftHeartbeatIntervalMs) / 1000.0,
                             password=str(config.controllerRaftPassword or "") or None,
                             on_role_change=self._on_role_change, append_meter=append_meter)
        self.policy = DefaultElectPolicy(heartbeat.is_active, heartbeat.live_info, heartbeat.is_fresh)
        self._write_lock = asyncio.Lock()
        self._ready_term = -1                      # the term in which this leader committed its first entry
        self._leader_task: Optional[asyncio.Task[None]] = None
        self._scan_task: Optional[asyncio.Task[None]] = None
        self._background: set[asyncio.Task[bool]] = set()
        self._stopping = False
        self.applied_entries = 0
        self.election_counts: dict[str, int] = {}     # election_result -> elections answered as leader
        heartbeat.add_inactive_listener(self._on_broker_inactive)

    # ============================================================ lifecycle
    async def start(self) -> None:
        await self.raft.start()
        self._scan_task = asyncio.ensure_future(self._scan_not_active_brokers())

    async def stop(self) -> None:
        self._stopping = True
        tasks = [t for t in (self._scan_task, self._leader_task, *self._background) if t is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await self.raft.stop()

    @property
    def timeout_s(self) -> float:
        return int(self.config.controllerRequestTimeoutMs) / 1000.0

    # ============================================================ Raft state machine (Raft thread)
    def apply_entry(self, payload: bytes) -> Optional[list[bool]]:
        """One committed entry: its events applied in order; None for an empty (barrier) entry."""
        if not payload:
            return None
        try:
            events = decode_events(payload)
        except ValueError as exc:
            log.error("undecodable controller log entry skipped: %s (%r)", exc, payload[:200])
            return []
        with self._state_lock:
            applied = [self.state.apply(e) for e in events]
        self.applied_entries += 1
        return applied

    def snapshot(self) -> bytes:
        with self._state_lock:
            return self.state.snapshot()

    def restore(self, data: bytes) -> None:
        with self._state_lock:
            self.state.restore(data)

    # ============================================================ requests
    async def alter_sync_state_set(self, broker_name: str, master_id: Optional[int], master_epoch: Optional[int],
                                   new_set: set[int], set_epoch: int) -> ControllerResult:
        return await self._write(lambda: self.state.alter_sync_state_set(
            broker_name, master_id, master_epoch, new_set, set_epoch, self.heartbeat.is_active))

    async def elect_master(self, cluster: str, broker_name: str, broker_id: Optional[int],
                           designate: bool) -> ControllerResult:
        result = await self._write(lambda: self.state.elect_master(cluster, broker_name, broker_id, designate,
                                                                   self.policy))
        if result.code != C.CONTROLLER_NOT_LEADER:         # the metrics' election_total{election_result} (5.x's)
            outcome = "new_master_elected" if result.code == SUCCESS else \
                "keep_current_master" if result.code == C.CONTROLLER_MASTER_STILL_EXIST else "no_master_elected"
            self.election_counts[outcome] = self.election_counts.get(outcome, 0) + 1
        if result.code == SUCCESS:
            self._after_election(broker_name, result)
        return result

    async def register_broker(self, cluster: str, broker_name: str, broker_id: int, address: str) -> ControllerResult:
        return await self._write(lambda: self.state.register_broker(cluster, broker_name, broker_id, address,
                                                                    self.heartbeat.is_active))

    async def apply_broker_id(self, cluster: str, broker_name: str, broker_id: int, check_code: str) -> ControllerResult:
        return await self._write(lambda: self.state.apply_broker_id(cluster, broker_name, broker_id, check_code))

    async def clean_broker_data(self, cluster: Optional[str], broker_name: str, ids: Optional[str],
                                clean_living: bool) -> ControllerResult:
        return await self._write(lambda: self.state.clean_broker_data(cluster, broker_name, ids, clean_living,
                                                                      self.heartbeat.is_active))

    async def get_next_broker_id(self, cluster: str, broker_name: str) -> ControllerResult:
        return await self._read(lambda: self.state.get_next_broker_id(cluster, broker_name))

    async def get_replica_info(self, broker_name: str) -> ControllerResult:
        return await self._read(lambda: self.state.get_replica_info(broker_name))

    async def get_sync_state_data(self, broker_names: list[str]) -> ControllerResult:
        return await self._read(lambda: self.state.get_sync_state_data(broker_names, self.heartbeat.is_active))

    def metadata(self) -> dict[str, Optional[ExtValue]]:
        """CONTROLLER_GET_METADATA_INFO (any node): group, leader, whether this node leads, peers."""
        leader = self.raft.leader_id
        by_id = {p.id: p for p in self.peers}
        if self.config.is_jraft():
            peers = "".join(f"{p.addr};" for p in self.peers)
        else:
            peers = "".join(f"{p.id}:{p.addr};" for p in self.peers)
        return {"group": self.config.group(), "controllerLeaderId": leader,
                "controllerLeaderAddress": by_id[leader].addr if leader in by_id else None,
                "isLeader": self.raft.is_leader, "peers": peers}

    # ============================================================ the write and read paths
    async def _write(self, compute: Callable[[], ControllerResult]) -> ControllerResult:
        if not self.raft.is_leader:
            return ControllerResult().fail(C.CONTROLLER_NOT_LEADER, NOT_LEADER_REMARK)
        async with self._write_lock:
            try:
                await self._catch_up()
                with self._state_lock:
                    result = compute()
                if not result.events:
                    return result
                applied = await self.raft.propose(encode_events(result.events), self.timeout_s)
                if applied and all(applied):
                    return result
                # The state moved between compute and commit (another leader, a retried request): answer from
                # the state as it is now; what was committed changed nothing.
                with self._state_lock:
                    again = compute()
                if again.events:
                    return ControllerResult().fail(SYSTEM_ERROR, "controller state changed concurrently; retry")
                return again
            except NotLeaderError:
                return ControllerResult().fail(C.CONTROLLER_NOT_LEADER, NOT_LEADER_REMARK)
            except RaftTimeout as exc:
                return ControllerResult().fail(SYSTEM_ERROR, f"controller Raft commit timed out: {exc}")
            except RaftError as exc:
                return ControllerResult().fail(SYSTEM_ERROR, f"controller Raft commit failed: {exc}")

    async def _read(self, compute: Callable[[], ControllerResult]) -> ControllerResult:
        if not self.raft.is_leader:
            return ControllerResult().fail(C.CONTROLLER_NOT_LEADER, NOT_LEADER_REMARK)
        try:
            await self.raft.read_barrier(self.timeout_s)
        except NotLeaderError:
            return ControllerResult().fail(C.CONTROLLER_NOT_LEADER, NOT_LEADER_REMARK)
        except RaftError as exc:
            return ControllerResult().fail(SYSTEM_ERROR, f"controller read barrier failed: {exc}")
        with self._state_lock:
            return compute()

    async def _catch_up(self) -> None:
        """Before the first write of a term: commit an empty entry so everything committed before is applied."""
        term = self.raft.term
        if self._ready_term == term:
            return
        await self.raft.read_barrier(self.timeout_s)
        if self.raft.term == term:
            self._ready_term = term

    # ============================================================ leader duties
    def _on_role_change(self, leader: bool) -> None:
        log.info("controller %s is %s (term %d)", self.self_id, "now the leader" if leader else "no longer the leader",
                 self.raft.term)
        if self._leader_task is not None:
            self._leader_task.cancel()
            self._leader_task = None
        if leader:
            self._leader_task = asyncio.ensure_future(self._lead())

    async def _lead(self) -> None:
        """While leader: catch up, then scan for dead masters every scanInactiveMasterInterval."""
        while self.raft.is_leader:
            try:
                await self._catch_up()
                break
            except RaftError as exc:
                log.warning("new leader %s could not commit its first entry yet: %s", self.self_id, exc)
                await asyncio.sleep(0.2)
        while self.raft.is_leader:
            await asyncio.sleep(int(self.config.scanInactiveMasterInterval) / 1000.0)
            if not self.raft.is_leader:
                break
            with self._state_lock:
                names = self.state.scan_need_reelect_broker_sets(self.heartbeat.is_active)
            for name in names:
                log.info("master of %s is inactive while replicas are alive: electing", name)
                await self._trigger_elect(name)

    async def _scan_not_active_brokers(self) -> None:
        """Every node: drop expired heartbeats (the listener elects on the leader)."""
        interval = int(self.config.scanNotActiveBrokerInterval) / 1000.0
        await asyncio.sleep(min(2.0, interval))
        while True:
            try:
                self.heartbeat.scan_not_active()
            except Exception:
                log.exception("scanNotActiveBroker failed")
            await asyncio.sleep(int(self.config.scanNotActiveBrokerInterval) / 1000.0)

    def _on_broker_inactive(self, cluster: str, broker_name: str, broker_id: Optional[int]) -> None:
        if self._stopping:
            return
        if not self.raft.is_leader:
            log.info("broker %s/%s id %s inactive (not the leader: nothing to do)", cluster, broker_name, broker_id)
            return
        with self._state_lock:
            master = self.state.master_of(broker_name)
        if broker_id is not None and broker_id != master:
            log.info("broker %s id %s inactive; it is not the master (%s)", broker_name, broker_id, master)
            return
        task = asyncio.ensure_future(self._trigger_elect(broker_name))
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def _trigger_elect(self, broker_name: str) -> bool:
        """A controller-triggered election, retried as Java's ``triggerElectMaster``; True once a master is elected."""
        for attempt in range(max(1, int(self.config.electMasterMaxRetryCount))):
            try:
                result = await asyncio.wait_for(self.elect_master("", broker_name, None, False), TRIGGER_ELECT_WAIT_S)
            except asyncio.TimeoutError:
                log.warning("elect-master for %s timed out (attempt %d)", broker_name, attempt + 1)
                continue
            if result.code == SUCCESS:
                return True
            if result.code in (C.CONTROLLER_MASTER_STILL_EXIST, C.CONTROLLER_MASTER_NOT_AVAILABLE,
                               C.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED, C.CONTROLLER_NOT_LEADER):
                # a master is back, nobody can be master now, the set is gone, or we lost leadership:
                # retrying cannot help (an election by a broker or the next scan will)
                log.warning("elect-master for %s: %s %s", broker_name, result.code, result.remark)
                return False
            log.warning("elect-master for %s failed (attempt %d): %s %s", broker_name, attempt + 1, result.code,
                        result.remark)
        return False

    def _after_election(self, broker_name: str, result: ControllerResult) -> None:
        """Push NOTIFY_BROKER_ROLE_CHANGED about a new master to the group's alive brokers."""
        h = result.header
        if not self.config.notifyBrokerRoleChanged:
            return
        # the body elect_master wrote (fastjson): decoded, it has this shape
        body = cast("ElectMasterBodyJson", fastjson.loads_lenient(result.body)) if result.body else {}
        group = body.get("brokerMemberGroup") or {}
        cluster = group.get("cluster", "")
        addrs = [addr for bid, addr in sorted((group.get("brokerAddrs") or {}).items())
                 if self.heartbeat.is_active(cluster, broker_name, int(bid))]
        master_address = h.get("masterAddress")
        change = RoleChange(master_address if isinstance(master_address, str) else None,
                            _header_int(h, "masterBrokerId"), _header_int(h, "masterEpoch"),
                            _header_int(h, "syncStateSetEpoch"), tuple(body.get("syncStateSet") or ()))
        self.notifier.notify(addrs, change)


def _header_int(header: Mapping[str, Optional[ExtValue]], key: str) -> int:
    """A number the result's header must carry."""
    value = header[key]
    if value is None:
        raise ValueError(f"the controller result has no {key}")
    return int(value)
