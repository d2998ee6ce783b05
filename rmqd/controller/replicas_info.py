"""The controller's replicated state machine (Java's ``ReplicasInfoManager``): pure, no I/O, no clock.

Per broker-set (``brokerName``) it holds the registered replicas (``brokerId -> (address,
registerCheckCode)``, ids assigned from 1) and the SyncStateInfo (master id and epoch, the
SyncStateSet and its epoch).  Request methods read the state and return a :class:`ControllerResult`
(response code, header, body, and the events to replicate); they change nothing.  Only
:meth:`ReplicasInfoManager.apply` changes state, one committed event at a time, identically on every
controller.  Liveness and heartbeat data come in as callables (``alive``, an elect policy).

Where rmqd departs from Java (each is a bug or gap noted in ``controller-5x.md``):

* events that move a group's epochs carry the epochs they were computed against; :meth:`apply` of a
  stale one changes nothing and returns False (no double election across a leader change);
* the first election of a set needs the requesting broker to be registered (Java takes any id);
* broker ids below 1 are refused, and ``nextAssignBrokerId`` never hands out an id in use;
* ``cleanBrokerMetadata -l -b 1`` cleans broker 1, not the whole set; cleaning keeps the two tables
  in step, bumps the SyncStateSet epoch when the set changes, and drops a cleaned master;
* offsets are compared as integers of any size (#10578, in :mod:`rmqd.controller.elect_policy`).
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Iterable, Optional

import orjson

from rmqd.controller.codes import FIRST_BROKER_CONTROLLER_ID, ControllerResponseCode as C
from rmqd.controller.elect_policy import DefaultElectPolicy
from rmqd.controller.events import (
    AlterSyncStateSetEvent,
    ApplyBrokerIdEvent,
    CleanBrokerDataEvent,
    ElectMasterEvent,
    Event,
    UpdateBrokerAddressEvent,
)
from rmqd.remoting import fastjson

if TYPE_CHECKING:
    from rmqd.remoting.command import ExtValue
    from rmqd.remoting.fastjson import Encodable

    # A JSON object of a body built here (fastjson.dumps writes it; it takes no TypedDict)
    JsonObject = dict[str, Encodable]

log = logging.getLogger(__name__)

SUCCESS = 0
SNAPSHOT_VERSION = 1
AlivePredicate = Callable[[str, str, int], bool]


@dataclass
class ControllerResult:
    """What a request method decided: the response and the events that make it true."""

    code: int = SUCCESS
    remark: Optional[str] = None
    header: dict[str, Optional[ExtValue]] = field(default_factory=dict)
    body: Optional[bytes] = None
    events: list[Event] = field(default_factory=list)

    def fail(self, code: int, remark: str) -> "ControllerResult":
        self.code, self.remark = int(code), remark
        return self


@dataclass
class BrokerReplicaInfo:
    """The registered replicas of one broker-set."""

    clusterName: str
    brokerName: str
    nextAssignBrokerId: int = FIRST_BROKER_CONTROLLER_ID
    brokers: dict[int, tuple[str, str]] = field(default_factory=dict)   # id -> (address, registerCheckCode)

    def address(self, broker_id: Optional[int]) -> Optional[str]:
        entry = self.brokers.get(broker_id) if broker_id is not None else None
        return entry[0] if entry else None

    def check_code(self, broker_id: int) -> Optional[str]:
        entry = self.brokers.get(broker_id)
        return entry[1] if entry else None

    def add(self, broker_id: int, address: str, check_code: str) -> None:
        self.brokers[broker_id] = (address, check_code)
        self.nextAssignBrokerId = max(self.nextAssignBrokerId, broker_id + 1)

    def id_table(self) -> dict[int, str]:
        return {bid: addr for bid, (addr, _) in sorted(self.brokers.items())}


@dataclass
class SyncStateInfo:
    """Master, SyncStateSet and their epochs of one broker-set (both epochs start at 0)."""

    clusterName: str
    brokerName: str
    masterEpoch: int = 0
    syncStateSetEpoch: int = 0
    syncStateSet: set[int] = field(default_factory=set)
    masterBrokerId: Optional[int] = None

    def first_time_for_elect(self) -> bool:
        return self.masterEpoch == 0


def sync_state_set_body(members: Iterable[int], epoch: int) -> bytes:
    """SyncStateSet: ``{"syncStateSet":[1,2],"syncStateSetEpoch":3}``."""
    return fastjson.dumps({"syncStateSet": sorted(members), "syncStateSetEpoch": epoch})


def parse_broker_ids(text: Optional[str]) -> Optional[set[int]]:
    """``"1;2;3"`` -> {1, 2, 3}; blank -> None; ValueError (Java's NumberFormatException words) otherwise."""
    if text is None or not text.strip():
        return None
    out = set()
    for part in text.split(";"):
        try:
            out.add(int(part.strip()))
        except ValueError:
            raise ValueError(f'java.lang.NumberFormatException: For input string: "{part}"') from None
    return out


class ReplicasInfoManager:
    def __init__(self, enable_elect_unclean_master: Callable[[], bool] = lambda: False) -> None:
        """``enable_elect_unclean_master`` is read at each election (it can be changed at run time)."""
        self.enable_elect_unclean_master = enable_elect_unclean_master
        self.replica_info: dict[str, BrokerReplicaInfo] = {}
        self.sync_state_info: dict[str, SyncStateInfo] = {}

    def contains(self, broker_name: str) -> bool:
        return broker_name in self.replica_info and broker_name in self.sync_state_info

    # ================================================================ requests (read-only)
    def alter_sync_state_set(self, broker_name: str, master_broker_id: Optional[int], master_epoch: Optional[int],
                             new_set: set[int], set_epoch: int, alive: AlivePredicate) -> ControllerResult:
        """CONTROLLER_ALTER_SYNC_STATE_SET: the master reports the set it wants, at the epochs it knows."""
        result = ControllerResult()
        if not self.contains(broker_name):
            return result.fail(C.CONTROLLER_ALTER_SYNC_STATE_SET_FAILED, "Broker metadata is not existed")
        ssi = self.sync_state_info[broker_name]
        bri = self.replica_info[broker_name]
        if ssi.syncStateSet == new_set:
            return result.fail(C.CONTROLLER_ALTER_SYNC_STATE_SET_FAILED,
                               "The newSyncStateSet is equal with oldSyncStateSet, no needed to update syncStateSet")
        if ssi.masterBrokerId is None or ssi.masterBrokerId != master_broker_id:
            return result.fail(C.CONTROLLER_INVALID_MASTER,
                               f"Rejecting alter syncStateSet request because the current leader is:"
                               f"{{{_j(ssi.masterBrokerId)}}}, not {{{_j(master_broker_id)}}}")
        if master_epoch != ssi.masterEpoch:
            return result.fail(C.CONTROLLER_FENCED_MASTER_EPOCH,
                               f"Rejecting alter syncStateSet request because the current master epoch is:"
                               f"{{{ssi.masterEpoch}}}, not {{{_j(master_epoch)}}}")
        if set_epoch != ssi.syncStateSetEpoch:
            return result.fail(C.CONTROLLER_FENCED_SYNC_STATE_SET_EPOCH,
                               f"Rejecting alter syncStateSet request because the current syncStateSet epoch is:"
                               f"{{{ssi.syncStateSetEpoch}}}, not {{{set_epoch}}}")
        for replica in sorted(new_set):
            if replica not in bri.brokers:
                return result.fail(C.CONTROLLER_INVALID_REPLICAS,
                                   f"Rejecting alter syncStateSet request because the replicas {{{replica}}} "
                                   f"don't exist")
            if not alive(bri.clusterName, broker_name, replica):
                return result.fail(C.CONTROLLER_BROKER_NOT_ALIVE,
                                   f"Rejecting alter syncStateSet request because the replicas {{{replica}}} "
                                   f"don't alive")
        if ssi.masterBrokerId not in new_set:
            return result.fail(C.CONTROLLER_ALTER_SYNC_STATE_SET_FAILED,
                               f"Rejecting alter syncStateSet request because the newSyncStateSet don't contains "
                               f"origin leader {{{ssi.masterBrokerId}}}")
        epoch = ssi.syncStateSetEpoch + 1
        result.header["newSyncStateSetEpoch"] = epoch
        result.body = sync_state_set_body(new_set, epoch)
        result.events.append(AlterSyncStateSetEvent(broker_name, tuple(sorted(new_set)),
                                                    ssi.masterEpoch, ssi.syncStateSetEpoch))
        return result

    def elect_master(self, cluster: str, broker_name: str, broker_id: Optional[int], designate: bool,
                     policy: DefaultElectPolicy) -> ControllerResult:
        """CONTROLLER_ELECT_MASTER from a broker (its own id), an admin (designated id) or the controller (None)."""
        result = ControllerResult()
        if not self.contains(broker_name):
            return result.fail(C.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED, "Broker hasn't been registered")
        ssi = self.sync_state_info[broker_name]
        bri = self.replica_info[broker_name]
        requester = None if broker_id is None or broker_id == -1 else broker_id
        old_master = ssi.masterBrokerId
        new_master: Optional[int] = None
        if ssi.first_time_for_elect() and requester is not None and requester in bri.brokers:
            if not designate or policy.alive is None or policy.alive(bri.clusterName, broker_name, requester):
                new_master = requester
        if new_master is None:
            all_replicas = set(bri.brokers) if self.enable_elect_unclean_master() else None
            new_master = policy.elect(bri.clusterName, broker_name, set(ssi.syncStateSet), all_replicas, old_master,
                                      requester if designate else None)
        if new_master is not None and new_master == old_master:
            result.header.update(masterEpoch=ssi.masterEpoch, syncStateSetEpoch=ssi.syncStateSetEpoch,
                                 masterBrokerId=old_master, masterAddress=bri.address(old_master))
            result.body = fastjson.dumps({"syncStateSet": sorted(ssi.syncStateSet)})
            return result.fail(C.CONTROLLER_MASTER_STILL_EXIST,
                               f"The old master {old_master} is still alive, not need to elect new master for "
                               f"broker {broker_name}")
        if new_master is not None:
            result.header.update(masterBrokerId=new_master, masterAddress=bri.address(new_master),
                                 masterEpoch=ssi.masterEpoch + 1, syncStateSetEpoch=ssi.syncStateSetEpoch + 1)
            result.body = fastjson.dumps({"brokerMemberGroup": self.member_group(broker_name),
                                          "syncStateSet": [new_master]})
            result.events.append(ElectMasterEvent(broker_name, True, new_master, ssi.masterEpoch))
            log.info("elect new master %s for broker %s (epoch %d)", new_master, broker_name, ssi.masterEpoch + 1)
            return result
        log.warning("failed to elect a new master for broker %s", broker_name)
        if requester is None:
            # Controller-triggered: record that the old master is gone even though nobody replaces it
            # (once: with no master left, a retry records nothing and moves no epoch).
            if old_master is not None:
                result.events.append(ElectMasterEvent(broker_name, False, None, ssi.masterEpoch))
            return result.fail(C.CONTROLLER_MASTER_NOT_AVAILABLE,
                               "Old master has down and failed to elect a new broker master")
        return result.fail(C.CONTROLLER_ELECT_MASTER_FAILED, "Failed to elect a new master")

    def get_next_broker_id(self, cluster: str, broker_name: str) -> ControllerResult:
        bri = self.replica_info.get(broker_name)
        next_id = FIRST_BROKER_CONTROLLER_ID if bri is None else bri.nextAssignBrokerId
        return ControllerResult(header={"clusterName": cluster, "brokerName": broker_name, "nextBrokerId": next_id})

    def apply_broker_id(self, cluster: str, broker_name: str, broker_id: int, check_code: str) -> ControllerResult:
        """CONTROLLER_APPLY_BROKER_ID: take ``broker_id`` if free, or if it is already this broker's (same check code)."""
        result = ControllerResult(header={"clusterName": cluster, "brokerName": broker_name})
        if broker_id < FIRST_BROKER_CONTROLLER_ID:
            return result.fail(C.CONTROLLER_BROKER_ID_INVALID,
                               f"Fail to apply brokerId: {broker_id} in broker-set: {broker_name}, "
                               f"controller broker ids start at {FIRST_BROKER_CONTROLLER_ID}")
        address = check_code.split(";")[0]
        event = ApplyBrokerIdEvent(cluster, broker_name, address, broker_id, check_code)
        bri = self.replica_info.get(broker_name)
        if bri is None:
            if broker_id == FIRST_BROKER_CONTROLLER_ID:
                result.events.append(event)
                return result
            return result.fail(C.CONTROLLER_BROKER_ID_INVALID,
                               f"Broker-set: {broker_name} hasn't been registered in controller, but broker try "
                               f"to apply brokerId: {broker_id}")
        if broker_id not in bri.brokers or bri.check_code(broker_id) == check_code:
            result.events.append(event)
            return result
        return result.fail(C.CONTROLLER_BROKER_ID_INVALID,
                           f"Fail to apply brokerId: {broker_id} in broker-set: {broker_name}")

    def register_broker(self, cluster: str, broker_name: str, broker_id: int, address: str,
                        alive: AlivePredicate) -> ControllerResult:
        """CONTROLLER_REGISTER_BROKER: a broker with an applied id says it is up (at ``address``)."""
        result = ControllerResult(header={"clusterName": cluster, "brokerName": broker_name})
        if not self.contains(broker_name):
            return result.fail(C.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED,
                               f"Broker-set: {broker_name} hasn't been registered in controller")
        bri = self.replica_info[broker_name]
        ssi = self.sync_state_info[broker_name]
        if broker_id not in bri.brokers:
            return result.fail(C.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED,
                               f"BrokerId: {broker_id} hasn't been registered in broker-set: {broker_name}")
        master = ssi.masterBrokerId
        if master is not None and alive(cluster, broker_name, master):
            result.header.update(masterBrokerId=master, masterAddress=bri.address(master),
                                 masterEpoch=ssi.masterEpoch, syncStateSetEpoch=ssi.syncStateSetEpoch)
        result.body = sync_state_set_body(ssi.syncStateSet, ssi.syncStateSetEpoch)
        if address != bri.address(broker_id):
            result.events.append(UpdateBrokerAddressEvent(cluster, broker_name, address, broker_id))
        return result

    def get_replica_info(self, broker_name: str) -> ControllerResult:
        result = ControllerResult()
        if not self.contains(broker_name):
            return result.fail(C.CONTROLLER_BROKER_METADATA_NOT_EXIST, "Broker metadata is not existed")
        ssi = self.sync_state_info[broker_name]
        bri = self.replica_info[broker_name]
        result.header.update(masterBrokerId=ssi.masterBrokerId, masterAddress=bri.address(ssi.masterBrokerId),
                             masterEpoch=ssi.masterEpoch)
        result.body = sync_state_set_body(ssi.syncStateSet, ssi.syncStateSetEpoch)
        return result

    def sync_state_data(self, broker_names: Iterable[str], alive: AlivePredicate) -> JsonObject:
        """BrokerReplicasInfo of the known names among ``broker_names`` (a dict, encoded by the caller):
        ``{"replicasInfoTable": {name: {masterBrokerId, masterAddress, masterEpoch, syncStateSetEpoch,
        inSyncReplicas, notInSyncReplicas}}}``, each replica ``{brokerName, brokerId, brokerAddress, alive}``."""
        table: JsonObject = {}
        for name in broker_names:
            if not self.contains(name):
                continue
            ssi = self.sync_state_info[name]
            bri = self.replica_info[name]
            in_sync: list[Encodable] = []
            not_in_sync: list[Encodable] = []
            for bid, addr in bri.id_table().items():
                replica: JsonObject = {"brokerName": name, "brokerId": bid, "brokerAddress": addr,
                           "alive": bool(alive(bri.clusterName, name, bid))}
                (in_sync if bid in ssi.syncStateSet else not_in_sync).append(replica)
            table[name] = {"masterBrokerId": ssi.masterBrokerId, "masterAddress": bri.address(ssi.masterBrokerId),
                           "masterEpoch": ssi.masterEpoch, "syncStateSetEpoch": ssi.syncStateSetEpoch,
                           "inSyncReplicas": in_sync, "notInSyncReplicas": not_in_sync}
        return {"replicasInfoTable": table}

    def get_sync_state_data(self, broker_names: Iterable[str], alive: AlivePredicate) -> ControllerResult:
        return ControllerResult(body=fastjson.dumps(self.sync_state_data(broker_names, alive)))

    def clean_broker_data(self, cluster: Optional[str], broker_name: str, ids_text: Optional[str],
                          clean_living: bool, alive: AlivePredicate) -> ControllerResult:
        """CLEAN_BROKER_DATA: forget a whole set, or some of its ids (refused while they are alive unless ``-l``)."""
        result = ControllerResult()
        try:
            ids = parse_broker_ids(ids_text)
        except ValueError as exc:
            return result.fail(C.CONTROLLER_INVALID_CLEAN_BROKER_METADATA,
                               f"Please set the option <brokerControllerIdsToClean> according to the format, "
                               f"exception: {exc}")
        if not clean_living:
            ssi = self.sync_state_info.get(broker_name)
            if ids is None and ssi is not None and ssi.masterBrokerId is not None:
                return result.fail(C.CONTROLLER_INVALID_CLEAN_BROKER_METADATA,
                                   f"Broker {broker_name} is still alive, clean up failure")
            for bid in sorted(ids or ()):
                # without a cluster name no broker is known alive (Java looks its heartbeat up under a null
                # cluster and finds none)
                if cluster is not None and alive(cluster, broker_name, bid):
                    return result.fail(C.CONTROLLER_INVALID_CLEAN_BROKER_METADATA,
                                       f"Broker [{broker_name},  {bid}] is still alive, clean up failure")
        if self.contains(broker_name):
            result.events.append(CleanBrokerDataEvent(broker_name, tuple(sorted(ids)) if ids else None))
            return result
        return result.fail(C.CONTROLLER_INVALID_CLEAN_BROKER_METADATA,
                           f"Broker {broker_name} is not existed,clean broker data failure.")

    def scan_need_reelect_broker_sets(self, alive: AlivePredicate) -> list[str]:
        """Sets whose master is dead while at least one of their brokers is alive."""
        out = []
        for name, ssi in sorted(self.sync_state_info.items()):
            master = ssi.masterBrokerId
            if master is None or alive(ssi.clusterName, name, master):
                continue
            bri = self.replica_info.get(name)
            if bri is not None and any(alive(ssi.clusterName, name, bid) for bid in bri.brokers):
                out.append(name)
        return out

    # ================================================================ views used by the controller
    def member_group(self, broker_name: str) -> Optional[JsonObject]:
        """BrokerMemberGroup: ``{"cluster", "brokerName", "brokerAddrs": {id: addr}}``."""
        bri = self.replica_info.get(broker_name)
        if bri is None:
            return None
        return {"cluster": bri.clusterName, "brokerName": broker_name, "brokerAddrs": bri.id_table()}

    def master_of(self, broker_name: str) -> Optional[int]:
        ssi = self.sync_state_info.get(broker_name)
        return ssi.masterBrokerId if ssi is not None else None

    def master_address_of(self, broker_name: str) -> Optional[str]:
        """The address of ``broker_name``'s master as this controller knows it (None: none, or no such group)."""
        master = self.master_of(broker_name)
        bri = self.replica_info.get(broker_name)
        return bri.address(master) if master is not None and bri is not None else None

    # ================================================================ apply (the only writer)
    def apply(self, event: Event) -> bool:
        """Apply one committed event; False (and nothing changed) when it no longer fits the state."""
        if isinstance(event, AlterSyncStateSetEvent):
            applied = self._apply_alter_sync_state_set(event)
        elif isinstance(event, ApplyBrokerIdEvent):
            applied = self._apply_broker_id(event)
        elif isinstance(event, ElectMasterEvent):
            applied = self._apply_elect_master(event)
        elif isinstance(event, CleanBrokerDataEvent):
            applied = self._apply_clean_broker_data(event)
        elif isinstance(event, UpdateBrokerAddressEvent):
            applied = self._apply_update_broker_address(event)
        else:
            log.error("unknown controller event %r ignored", event)
            return False
        if not applied:
            log.warning("controller event not applied (state moved on): %s", event)
        return applied

    def _apply_alter_sync_state_set(self, e: AlterSyncStateSetEvent) -> bool:
        if not self.contains(e.brokerName):
            return False
        ssi = self.sync_state_info[e.brokerName]
        if (e.expectMasterEpoch is not None and e.expectMasterEpoch != ssi.masterEpoch) or \
                (e.expectSyncStateSetEpoch is not None and e.expectSyncStateSetEpoch != ssi.syncStateSetEpoch):
            return False
        if not set(e.newSyncStateSet) <= set(self.replica_info[e.brokerName].brokers):
            return False
        ssi.syncStateSet = set(e.newSyncStateSet)
        ssi.syncStateSetEpoch += 1
        return True

    def _apply_broker_id(self, e: ApplyBrokerIdEvent) -> bool:
        bri = self.replica_info.get(e.brokerName)
        if bri is None:
            bri = BrokerReplicaInfo(e.clusterName, e.brokerName)
            self.replica_info[e.brokerName] = bri
            self.sync_state_info[e.brokerName] = SyncStateInfo(e.clusterName, e.brokerName)
        existing = bri.check_code(e.newBrokerId)
        if existing is None:
            bri.add(e.newBrokerId, e.brokerAddress, e.registerCheckCode)
            return True
        return existing == e.registerCheckCode       # the same broker applying again: nothing to change

    def _apply_elect_master(self, e: ElectMasterEvent) -> bool:
        if not self.contains(e.brokerName):
            log.error("ElectMasterEvent for the unregistered broker-set %s", e.brokerName)
            return False
        ssi = self.sync_state_info[e.brokerName]
        if e.expectMasterEpoch is not None and e.expectMasterEpoch != ssi.masterEpoch:
            return False
        if e.newMasterElected:
            if e.newMasterBrokerId not in self.replica_info[e.brokerName].brokers:
                return False
            ssi.masterBrokerId = e.newMasterBrokerId
            ssi.masterEpoch += 1
            ssi.syncStateSet = {e.newMasterBrokerId}
            ssi.syncStateSetEpoch += 1
        else:
            ssi.masterBrokerId = None
            ssi.masterEpoch += 1
        return True

    def _apply_clean_broker_data(self, e: CleanBrokerDataEvent) -> bool:
        if not e.brokerIdSetToClean:
            self.replica_info.pop(e.brokerName, None)
            self.sync_state_info.pop(e.brokerName, None)
            return True
        if not self.contains(e.brokerName):
            return False
        bri = self.replica_info[e.brokerName]
        ssi = self.sync_state_info[e.brokerName]
        for bid in e.brokerIdSetToClean:
            bri.brokers.pop(bid, None)
        if not bri.brokers:
            del self.replica_info[e.brokerName]
            del self.sync_state_info[e.brokerName]
            return True
        if ssi.masterBrokerId in e.brokerIdSetToClean:
            ssi.masterBrokerId = None
            ssi.masterEpoch += 1
        remaining = ssi.syncStateSet - set(e.brokerIdSetToClean)
        if remaining != ssi.syncStateSet:
            ssi.syncStateSet = remaining
            ssi.syncStateSetEpoch += 1
        return True

    def _apply_update_broker_address(self, e: UpdateBrokerAddressEvent) -> bool:
        bri = self.replica_info.get(e.brokerName)
        if bri is None or e.brokerId not in bri.brokers:
            return False
        bri.brokers[e.brokerId] = (e.brokerAddress, bri.brokers[e.brokerId][1])
        return True

    # ================================================================ snapshot
    def snapshot(self) -> bytes:
        """The whole state as JSON (Raft snapshots; ``restore`` reads it back)."""
        return orjson.dumps({
            "version": SNAPSHOT_VERSION,
            "replicaInfoTable": {
                name: {"clusterName": b.clusterName, "brokerName": b.brokerName,
                       "nextAssignBrokerId": b.nextAssignBrokerId,
                       "brokers": [[bid, addr, code] for bid, (addr, code) in sorted(b.brokers.items())]}
                for name, b in sorted(self.replica_info.items())},
            "syncStateSetInfoTable": {
                name: {"clusterName": s.clusterName, "brokerName": s.brokerName, "masterEpoch": s.masterEpoch,
                       "syncStateSetEpoch": s.syncStateSetEpoch, "syncStateSet": sorted(s.syncStateSet),
                       "masterBrokerId": s.masterBrokerId}
                for name, s in sorted(self.sync_state_info.items())},
        })

    def restore(self, data: bytes) -> None:
        doc = orjson.loads(data)
        if doc.get("version") != SNAPSHOT_VERSION:
            raise ValueError(f"unknown controller snapshot version {doc.get('version')!r}")
        replica_info = {}
        for name, b in doc["replicaInfoTable"].items():
            bri = BrokerReplicaInfo(b["clusterName"], b["brokerName"], int(b["nextAssignBrokerId"]))
            bri.brokers = {int(bid): (addr, code) for bid, addr, code in b["brokers"]}
            replica_info[name] = bri
        sync_state_info = {}
        for name, s in doc["syncStateSetInfoTable"].items():
            sync_state_info[name] = SyncStateInfo(
                s["clusterName"], s["brokerName"], int(s["masterEpoch"]), int(s["syncStateSetEpoch"]),
                {int(x) for x in s["syncStateSet"]},
                None if s["masterBrokerId"] is None else int(s["masterBrokerId"]))
        self.replica_info, self.sync_state_info = replica_info, sync_state_info


def _j(value: object) -> str:
    """Java's String.valueOf for a boxed number (None -> "null")."""
    return "null" if value is None else str(value)
