"""ControllerClient: the requests a broker in controller mode sends (Java's ``BrokerOuterAPI``, its controller half).

It finds the controller leader (CONTROLLER_GET_METADATA_INFO 1005 to each ``controllerAddr``: the address this broker
dials when that controller says it leads, apache/rocketmq#9082, else the address the others advertise) and follows it
when it moves (a failed call or CONTROLLER_NOT_LEADER asks again once); it gets this broker's id (the
``brokerIdentity`` file, else GET_NEXT_BROKER_ID 1012 + ``brokerIdentity-temp`` + APPLY_BROKER_ID 1013), registers
(1003), heartbeats every controller (904, oneway), asks for the group's state (1004), for an election (1002) and to
change the SyncStateSet (1001); and it asks a master for its epoch cache (GET_BROKER_EPOCH_CACHE 1007). What the
broker does with the answers is :mod:`rmqd.replicas.controller_mode`'s (the session) and
:mod:`rmqd.replicas.role_transitions`'s (the role changes).
"""
from __future__ import annotations

import asyncio
import logging
import os
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Mapping, Optional, ParamSpec, TypedDict, TypeVar, cast, overload

from rmqd.controller.codes import ControllerRequestCode as Req, ControllerResponseCode as Res
from rmqd.common.fileutil import atomic_write
from rmqd.remoting import fastjson
from rmqd.remoting.client import RemotingClient
from rmqd.remoting.codes import ResponseCode
from rmqd.remoting.command import ExtValue, RemotingCommand, new_request

if TYPE_CHECKING:
    from rmqd.tls.contexts import ClientTls

log = logging.getLogger(__name__)

RPC_TIMEOUT_S = 3.0                 # BrokerOuterAPI's controller calls


@dataclass
class ReplicaInfo:
    """What the controller says about the group."""

    master_id: Optional[int]
    master_addr: Optional[str]
    master_epoch: int
    sync_state_set: Optional[frozenset[int]] = None
    sync_state_set_epoch: int = -1


class SyncStateSetBody(TypedDict, total=False):
    """The body of a controller's answer naming the SyncStateSet (Java ``SyncStateSet``)."""

    syncStateSet: Optional[list[int]]
    syncStateSetEpoch: int


@overload
def _int(value: Optional[str], default: int) -> int: ...
@overload
def _int(value: Optional[str], default: None = None) -> Optional[int]: ...
def _int(value: Optional[str], default: Optional[int] = None) -> Optional[int]:
    if value is None or value == "" or value == "null":
        return default
    return int(value)


def replica_info_of(r: RemotingCommand) -> ReplicaInfo:
    """The group's state in a controller's answer (1002, 1003, 1004) or role notification (1008)."""
    ext = r.ext_fields or {}
    members, set_epoch = None, -1
    if r.body:
        try:
            # the JSON boundary: the controller's SyncStateSet body (the int() calls below check its values)
            doc = cast(SyncStateSetBody, fastjson.loads_lenient(r.body))
            if "syncStateSet" in doc:
                members = frozenset(int(x) for x in doc["syncStateSet"] or ())
            set_epoch = int(doc.get("syncStateSetEpoch", -1))
        except (ValueError, TypeError) as exc:
            log.warning("undecodable SyncStateSet from the controller: %s", exc)
    set_epoch = _int(ext.get("syncStateSetEpoch"), set_epoch)
    return ReplicaInfo(_int(ext.get("masterBrokerId")), ext.get("masterAddress") or None,
                       _int(ext.get("masterEpoch"), 0), members, set_epoch)


def read_identity(path: str) -> Optional[list[str]]:
    try:
        with open(path, encoding="utf-8") as f:
            return f.read().strip().split("#")
    except FileNotFoundError:
        return None


P = ParamSpec("P")
T = TypeVar("T")


async def _blocking(fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
    return await asyncio.get_running_loop().run_in_executor(None, lambda: fn(*args, **kwargs))


class ControllerClient:
    """See the module docstring. ``leader`` is the controller leader as last found (None: ask again)."""

    def __init__(self, controller_addrs: list[str], cluster: str, broker_name: str, identity_path: str) -> None:
        self.controller_addrs = controller_addrs
        self.cluster = cluster
        self.broker_name = broker_name
        self.identity_path = identity_path
        self.leader: Optional[str] = None
        self._client: Optional[RemotingClient] = None

    def start(self, tls: "ClientTls | None", signer: Optional[Callable[[RemotingCommand], None]] = None) -> None:
        """``signer``: signs the requests (the master's epoch cache is asked of a broker that may demand access
        control 2.0's signature)."""
        self._client = RemotingClient(connect_timeout=RPC_TIMEOUT_S, tls=tls, signer=signer)

    def close(self) -> None:
        if self._client is not None:
            self._client.close()

    # ================================================================ transport and the leader
    def _remoting(self) -> RemotingClient:
        if self._client is None:
            raise RuntimeError("ControllerClient.start was not called")
        return self._client

    async def call(self, addr: str, code: int, ext: Optional[Mapping[str, Optional[ExtValue]]] = None,
                   body: Optional[bytes] = None) -> RemotingCommand:
        return await self._remoting().invoke(addr, new_request(code, {k: v for k, v in (ext or {}).items()
                                                                  if v is not None}, body), RPC_TIMEOUT_S)

    async def find_leader(self) -> Optional[str]:
        """The leader, by the address this broker dials when that controller says it leads (an advertised
        address may not be reachable from here, apache/rocketmq#9082), else by the address others advertise."""
        advertised = None
        for addr in self.controller_addrs:
            try:
                r = await self.call(addr, Req.CONTROLLER_GET_METADATA_INFO)
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

    async def leader_call(self, code: int, ext: Optional[Mapping[str, Optional[ExtValue]]] = None,
                          body: Optional[bytes] = None) -> Optional[RemotingCommand]:
        """A call to the leader (found again when it moved); None when no leader answers."""
        for _ in range(2):
            leader = self.leader or await self.find_leader()
            if leader is None:
                return None
            try:
                r = await self.call(leader, code, ext, body)
            except (OSError, asyncio.TimeoutError, ConnectionError) as exc:
                log.info("controller leader %s: %r", leader, exc)
                self.leader = None
                continue
            if r.code == Res.CONTROLLER_NOT_LEADER:
                self.leader = None
                continue
            return r
        return None

    def _base(self) -> dict[str, Optional[ExtValue]]:
        return {"clusterName": self.cluster, "brokerName": self.broker_name}

    # ================================================================ the requests
    async def heartbeat(self, fields: Mapping[str, Optional[ExtValue]], only: Optional[str] = None) -> None:
        """BROKER_HEARTBEAT (904, oneway) with ``fields`` to every controller at once (or to ``only``): an
        unreachable one must not hold up the others."""
        ext = dict(self._base(), **fields)

        async def one(addr: str) -> None:
            try:
                await self._remoting().invoke_oneway(addr, new_request(Req.BROKER_HEARTBEAT, ext))
            except (OSError, asyncio.TimeoutError, ConnectionError) as exc:
                log.debug("heartbeat to controller %s failed: %r", addr, exc)
        await asyncio.gather(*(one(a) for a in ([only] if only else self.controller_addrs)))

    async def register_broker(self, broker_id: int, address: str) -> Optional[ReplicaInfo]:
        """REGISTER_BROKER (1003): the group's state, None when refused or no leader answers."""
        r = await self.leader_call(Req.CONTROLLER_REGISTER_BROKER,
                                   dict(self._base(), brokerId=broker_id, brokerAddress=address))
        if r is None or r.code != ResponseCode.SUCCESS:
            log.warning("REGISTER_BROKER to the controller failed: %s", None if r is None else (r.code, r.remark))
            return None
        return replica_info_of(r)

    async def obtain_id(self, own_address: str) -> Optional[int]:
        """brokerIdentity, else brokerIdentity-temp + APPLY_BROKER_ID, else GET_NEXT_BROKER_ID first; None when the
        controller does not give one this time. An identity file of another group raises RuntimeError."""
        cluster, name = self.cluster, self.broker_name
        ident = read_identity(self.identity_path)
        if ident is not None:
            if ident[:2] != [cluster, name] or len(ident) < 3:
                raise RuntimeError(f"{self.identity_path} belongs to {ident[:2]}, not "
                                   f"{[cluster, name]}: remove it to join this group")
            return int(ident[2])
        temp = self.identity_path + "-temp"
        ident = read_identity(temp)
        if ident is None or ident[:2] != [cluster, name]:
            r = await self.leader_call(Req.CONTROLLER_GET_NEXT_BROKER_ID, self._base())
            if r is None or r.code != ResponseCode.SUCCESS:
                return None
            next_id = int((r.ext_fields or {})["nextBrokerId"])
            check = f"{own_address};{int(time.time() * 1000)}"
            ident = [cluster, name, str(next_id), check]
            await _blocking(atomic_write, temp, "#".join(ident), False)
        r = await self.leader_call(Req.CONTROLLER_APPLY_BROKER_ID, dict(self._base(), appliedBrokerId=ident[2],
                                                                        registerCheckCode=ident[3]))
        if r is None:
            return None
        if r.code != ResponseCode.SUCCESS:
            log.warning("APPLY_BROKER_ID %s refused: %s %s; asking for another id", ident[2], r.code, r.remark)
            await _blocking(os.unlink, temp)
            return None
        await _blocking(atomic_write, self.identity_path, "#".join(ident[:3]), False)
        await _blocking(os.unlink, temp)
        return int(ident[2])

    async def elect_master(self, broker_id: int) -> Optional[ReplicaInfo]:
        """ELECT_MASTER (1002) naming ``broker_id``: the group's state after it (also when a master still lives)."""
        r = await self.leader_call(Req.CONTROLLER_ELECT_MASTER, dict(self._base(), brokerId=broker_id,
                                                                     designateElect="false",
                                                                     invokeTime=int(time.time() * 1000)))
        if r is None:
            return None
        if r.code in (ResponseCode.SUCCESS, Res.CONTROLLER_MASTER_STILL_EXIST):
            return replica_info_of(r)
        log.info("ELECT_MASTER for %s: %s %s", self.broker_name, r.code, r.remark)
        return None

    async def replica_info(self) -> Optional[ReplicaInfo]:
        """CONTROLLER_GET_REPLICA_INFO (1004) from the leader; None when it does not answer with it."""
        r = await self.leader_call(Req.CONTROLLER_GET_REPLICA_INFO, {"brokerName": self.broker_name})
        if r is None or r.code != ResponseCode.SUCCESS:
            return None
        return replica_info_of(r)

    async def alter_sync_state_set(self, master_id: int, master_epoch: int, set_epoch: int,
                                   current: frozenset[int], wanted: frozenset[int]) -> tuple[bool, Optional[int]]:
        """CONTROLLER_ALTER_SYNC_STATE_SET (1001) from ``current`` to ``wanted`` (at SyncStateSet epoch
        ``set_epoch``): whether the leader took it, and the new SyncStateSet epoch its answer names (if any)."""
        body = fastjson.dumps({"syncStateSet": sorted(wanted), "syncStateSetEpoch": set_epoch})
        r = await self.leader_call(Req.CONTROLLER_ALTER_SYNC_STATE_SET,
                                   {"brokerName": self.broker_name, "masterBrokerId": master_id,
                                    "masterEpoch": master_epoch, "invokeTime": int(time.time() * 1000)}, body)
        if r is None or r.code != ResponseCode.SUCCESS:
            log.warning("ALTER_SYNC_STATE_SET %s -> %s refused: %s", sorted(current), sorted(wanted),
                        None if r is None else (r.code, r.remark))
            return False, None
        new_epoch = (r.ext_fields or {}).get("newSyncStateSetEpoch")
        return True, None if new_epoch is None else int(new_epoch)

    async def broker_epoch_cache(self, broker_addr: str) -> RemotingCommand:
        """GET_BROKER_EPOCH_CACHE (1007) of a broker (the master this one follows)."""
        return await self.call(broker_addr, Req.GET_BROKER_EPOCH_CACHE)
