"""The controller's Raft group member, on pysyncobj (the only module of rmqd that imports it).

pysyncobj runs Raft (leader election, log replication, commit, snapshots) on its own thread: it owns
the Raft TCP port, the journal and the snapshot file under ``controllerStorePath``.  This adapter gives
the controller an asyncio face:

* :meth:`RaftNode.propose` appends one entry on the leader and resolves when it is committed *and*
  applied here (the state machine's return value), or raises;
* :meth:`RaftNode.read_barrier` proves, by committing an empty entry, that this node still leads and
  has applied everything committed before the call: a read served after it is not stale.  Barriers of
  concurrent reads are shared (one entry for all reads that arrived while the previous one was in
  flight);
* role changes reach the controller on the event loop.

The state machine is called on pysyncobj's thread (``apply``, ``snapshot``, ``restore``); the controller
guards its state with a lock.  Followers never forward proposals to the leader (a controller that is not
the leader answers CONTROLLER_NOT_LEADER, as Java's does).

Raft settings: a follower starts an election after 1-2 election timeouts without a leader; a leader that
has not heard from a majority for 0.9 election timeout steps down (so a partitioned leader stops before
the majority elects another).  The snapshot is JSON state + msgpack Raft metadata, fsynced.
"""
from __future__ import annotations

import asyncio
import fcntl
import logging
import os
import struct
from typing import Callable, Generic, Iterable, Optional, Protocol, TypeVar, cast

import _socket
import socket

import msgpack
import orjson
from pysyncobj import FAIL_REASON, SyncObj, SyncObjConf, replicated
from pysyncobj.node import TCPNode

from rmqd.common.fileutil import atomic_write
from rmqd.controller.request_meter import OperationMeter

# pysyncobj.win_inet_pton (imported by pysyncobj.tcp_connection) replaces socket.inet_ntop with a Windows-only
# ctypes version on every platform (its `if os.name == 'nt'` guards only inet_pton; 0.3.14-0.3.17): anything in
# the process that formats an IPv6 address would then raise.  Put the C implementation back.
socket.inet_ntop = _socket.inet_ntop

log = logging.getLogger(__name__)

_LEADER_STATE = 2                 # pysyncobj's _RAFT_STATE.LEADER
_SNAPSHOT_MAGIC = b"RMQDCTL1"
_FAIL_NAMES = {v: k for k, v in vars(FAIL_REASON).items() if not k.startswith("_")}

R = TypeVar("R")                                  # what the state machine's apply_entry returns
R_co = TypeVar("R_co", covariant=True)


class StateMachine(Protocol[R_co]):
    """What Raft drives; every call comes from pysyncobj's thread, in log order."""

    def apply_entry(self, payload: bytes) -> R_co: ...

    def snapshot(self) -> bytes: ...

    def restore(self, data: bytes) -> None: ...


class RaftError(Exception):
    """An entry was not committed (the reason is pysyncobj's FAIL_REASON name) or the outcome is unknown."""


class NotLeaderError(RaftError):
    """This node is not the Raft leader."""


class RaftTimeout(RaftError):
    """No commit within the time allowed; the entry may still commit later."""


class RaftStartError(OSError):
    """The Raft port could not be bound, or the store belongs to another controller."""


class _DialNode(TCPNode):  # type: ignore[misc]  # pysyncobj ships no type information
    """A peer known by its Raft address (its identity in the group) but reached at ``dial`` (a tunnel, NAT, a
    fault-injecting proxy)."""

    def __init__(self, address: str, dial: Optional[str] = None) -> None:
        super().__init__(address)
        host, _, port = (dial or address).rpartition(":")
        self._dial_host, self._dial_port = host, int(port)

    @property
    def ip(self) -> Optional[str]:
        """The dial host's address (None while it does not resolve, as pysyncobj's own nodes)."""
        from pysyncobj.dns_resolver import globalDnsResolver
        ip: Optional[str] = globalDnsResolver().resolve(self._dial_host)
        return ip

    @property
    def port(self) -> int:
        return self._dial_port


class _GroupMember(SyncObj):  # type: ignore[misc]  # pysyncobj ships no type information
    """pysyncobj's replicated object: one replicated method, which hands the entry to the state machine."""

    def __init__(self, machine: StateMachine[object], self_addr: str, others: list[_DialNode],
                 conf: SyncObjConf) -> None:
        self._machine = machine
        super().__init__(self_addr, others, conf)

    @replicated  # type: ignore[untyped-decorator]  # pysyncobj ships no type information
    def _entry(self, payload: bytes) -> object:
        return self._machine.apply_entry(payload)


class RaftNode(Generic[R]):
    """One member of the controller Raft group (see the module docstring)."""

    def __init__(self, self_id: str, peers: dict[str, str], store_dir: str, machine: StateMachine[R], *,
                 group: str = "", dial: Optional[dict[str, str]] = None, election_timeout_s: float = 1.0,
                 heartbeat_interval_s: float = 0.1, password: Optional[str] = None,
                 on_role_change: Optional[Callable[[bool], None]] = None,
                 append_meter: Optional[OperationMeter] = None) -> None:
        """``peers``: peer id -> Raft address ("host:port"), this node included; ``append_meter`` counts
        proposals as 5.x's ``dledger_op_total``/``dledger_op_latency`` (operation ``append``)."""
        if self_id not in peers:
            raise ValueError(f"self id {self_id} is not among the peers {sorted(peers)}")
        if election_timeout_s <= 3 * heartbeat_interval_s:
            raise ValueError("the Raft election timeout must exceed 3 heartbeat intervals")
        self.self_id = self_id
        self.peers = dict(peers)
        self.group = group
        self.store_dir = store_dir
        self._machine = machine
        self._dial = dict(dial or {})
        self._election_timeout_s = election_timeout_s
        self._heartbeat_s = heartbeat_interval_s
        self._password = password or None
        self._on_role_change = on_role_change
        self.append_meter = append_meter or OperationMeter()
        self._id_by_addr = {addr: pid for pid, addr in peers.items()}
        self._obj: Optional[_GroupMember] = None
        self._loop: Optional[asyncio.AbstractEventLoop] = None
        self._barrier_waiters: list[asyncio.Future[None]] = []
        self._barrier_running = False
        self._barrier_task: Optional[asyncio.Task[None]] = None
        self._lock_fd: Optional[int] = None

    # -- lifecycle ---------------------------------------------------------------------------------------
    async def start(self) -> None:
        """Open the store and bind the Raft port (must run on the thread that owns the process's loop)."""
        self._loop = asyncio.get_running_loop()
        os.makedirs(self.store_dir, exist_ok=True)
        self._lock_store()
        try:
            self._check_store_identity()
        except BaseException:
            self._unlock_store()
            raise
        min_t = self._election_timeout_s
        conf = SyncObjConf(
            journalFile=os.path.join(self.store_dir, "raft.journal"),
            fullDumpFile=os.path.join(self.store_dir, "raft.snapshot"),
            serializer=self._write_snapshot, deserializer=self._read_snapshot,
            raftMinTimeout=min_t, raftMaxTimeout=2 * min_t, appendEntriesPeriod=self._heartbeat_s,
            leaderFallbackTimeout=0.9 * min_t, connectionTimeout=max(3.5, 2 * min_t), connectionRetryTime=1.0,
            commandsWaitLeader=False, appendEntriesUseBatch=False, dynamicMembershipChange=False,
            bindAddress=self.peers[self.self_id], bindRetryTime=0.2, maxBindRetries=5,
            logCompactionMinEntries=5000, logCompactionMinTime=300, password=self._password,
            onStateChanged=self._state_changed)
        others = [_DialNode(addr, self._dial.get(pid)) for pid, addr in self.peers.items() if pid != self.self_id]
        self._obj = _GroupMember(self._machine, self.peers[self.self_id], others, conf)
        try:
            await self._loop.run_in_executor(None, self._obj.waitBinded)
        except Exception as exc:
            obj, self._obj = self._obj, None
            _destroy(obj)
            self._unlock_store()
            raise RaftStartError(f"controller {self.self_id}: cannot bind the Raft port "
                                 f"{self.peers[self.self_id]}: {exc}") from exc
        log.info("controller Raft member %s on %s, store %s, peers %s", self.self_id, self.peers[self.self_id],
                 self.store_dir, self.peers)

    async def stop(self) -> None:
        obj, self._obj = self._obj, None
        if obj is None:
            return
        await asyncio.get_running_loop().run_in_executor(None, _destroy, obj)
        self._unlock_store()
        for fut in self._barrier_waiters:
            if not fut.done():
                fut.set_exception(RaftError("controller stopped"))
        self._barrier_waiters.clear()

    def _lock_store(self) -> None:
        """One process per store: two controllers writing one journal would corrupt it."""
        fd = os.open(os.path.join(self.store_dir, "LOCK"), os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(fd)
            raise RaftStartError(f"{self.store_dir} is in use by another controller process ({exc})") from None
        self._lock_fd = fd

    def _unlock_store(self) -> None:
        if self._lock_fd is not None:
            os.close(self._lock_fd)            # closing releases the flock
            self._lock_fd = None

    def _check_store_identity(self) -> None:
        """A store belongs to one member: refuse to start on another member's (or group's) journal."""
        path = os.path.join(self.store_dir, "member.json")
        mine = {"group": self.group, "selfId": self.self_id}
        if os.path.exists(path):
            with open(path, "rb") as f:
                theirs = orjson.loads(f.read())
            if theirs != mine:
                raise RaftStartError(f"{self.store_dir} holds the Raft log of {theirs}, not of {mine}; "
                                     f"use another controllerStorePath")
            return
        atomic_write(path, orjson.dumps(mine), keep_backup=False)

    # -- status --------------------------------------------------------------------------------------------
    @property
    def is_leader(self) -> bool:
        obj = self._obj
        return obj is not None and obj._isLeader()

    @property
    def leader_id(self) -> Optional[str]:
        """The peer id of the leader this node last heard of (None while unknown)."""
        obj = self._obj
        node = obj._getLeader() if obj is not None else None
        return None if node is None else self._id_by_addr.get(node.id)

    @property
    def term(self) -> int:
        obj = self._obj
        return obj.raftCurrentTerm if obj is not None else 0

    def status(self) -> dict[str, object]:
        obj = self._obj
        if obj is None:
            return {"state": "stopped"}
        s = obj.getStatus()
        return {"state": {0: "follower", 1: "candidate", 2: "leader"}.get(s["state"], s["state"]),
                "leader": self.leader_id, "term": s["raft_term"], "commitIndex": s["commit_idx"],
                "lastApplied": s["last_applied"], "logLength": s["log_len"], "hasQuorum": s["has_quorum"]}

    def force_snapshot(self) -> None:
        """Write a snapshot and compact the journal now (pysyncobj does it every 5000 entries or 300 s)."""
        if self._obj is not None:
            self._obj.forceLogCompaction()

    def _state_changed(self, old: int, new: int) -> None:
        """pysyncobj's thread: hand role changes to the loop."""
        if self._on_role_change is None or self._loop is None or (old == _LEADER_STATE) == (new == _LEADER_STATE):
            return
        try:
            self._loop.call_soon_threadsafe(self._on_role_change, new == _LEADER_STATE)
        except RuntimeError:                 # loop closed while shutting down
            log.debug("role change to %s after the loop closed", new)

    # -- proposals -----------------------------------------------------------------------------------------
    async def propose(self, payload: bytes, timeout: float) -> R:
        """Commit ``payload`` through this leader; returns what the state machine's apply returned."""
        obj = self._obj
        if obj is None or not obj._isLeader():
            raise NotLeaderError(f"controller {self.self_id} is not the Raft leader")
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[R] = loop.create_future()

        def done(result: object, error: int) -> None:       # pysyncobj's thread
            try:
                loop.call_soon_threadsafe(_settle, fut, result, error)
            except RuntimeError:
                log.debug("Raft result after the loop closed")

        obj._entry(payload, callback=done)
        return await self.append_meter.timed("append", self._committed(fut, timeout), timeouts=(RaftTimeout,))

    @staticmethod
    async def _committed(fut: asyncio.Future[R], timeout: float) -> R:
        try:
            return await asyncio.wait_for(fut, timeout)
        except asyncio.TimeoutError:
            raise RaftTimeout(f"no Raft commit within {timeout:.1f}s (outcome unknown)") from None

    async def read_barrier(self, timeout: float) -> None:
        """Return once an empty entry proposed after this call has committed here (see the module docstring)."""
        if not self.is_leader:
            raise NotLeaderError(f"controller {self.self_id} is not the Raft leader")
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._barrier_waiters.append(fut)
        if not self._barrier_running:
            self._barrier_running = True
            self._barrier_task = asyncio.ensure_future(self._run_barriers(timeout))
        await fut

    async def _run_barriers(self, timeout: float) -> None:
        try:
            while self._barrier_waiters:
                batch, self._barrier_waiters = self._barrier_waiters, []
                try:
                    await self.propose(b"", timeout)
                except RaftError as exc:
                    for fut in batch:
                        if not fut.done():
                            fut.set_exception(type(exc)(str(exc)))
                    continue
                for fut in batch:
                    if not fut.done():
                        fut.set_result(None)
        finally:
            self._barrier_running = False

    # -- snapshots (pysyncobj's thread) ---------------------------------------------------------------------
    def _write_snapshot(self, path: str,
                        raft_data: tuple[Iterable[object], Iterable[object], Iterable[object]]) -> None:
        """pysyncobj's serializer: our state + its metadata (last two applied entries, members), fsynced."""
        state = self._machine.snapshot()
        entry_last, entry_prev, cluster = raft_data
        meta = msgpack.packb([list(entry_last), list(entry_prev), sorted(str(getattr(n, "id", n)) for n in cluster)],
                             use_bin_type=True)
        with open(path, "wb") as f:
            f.write(_SNAPSHOT_MAGIC + struct.pack(">I", len(state)) + state + meta)
            f.flush()
            os.fsync(f.fileno())

    def _read_snapshot(self, path: str) -> tuple[tuple[object, ...], tuple[object, ...], object]:
        with open(path, "rb") as f:
            data = f.read()
        if not data.startswith(_SNAPSHOT_MAGIC):
            raise ValueError(f"{path} is not an rmqd controller snapshot")
        n = struct.unpack(">I", data[8:12])[0]
        self._machine.restore(data[12:12 + n])
        entry_last, entry_prev, cluster = msgpack.unpackb(data[12 + n:], raw=False)
        log.info("controller state restored from the Raft snapshot at index %s", entry_last[1])
        return tuple(entry_last), tuple(entry_prev), cluster


def _destroy(obj: _GroupMember) -> None:
    """Stop pysyncobj's thread and close its sockets and journal (also when the thread already ended)."""
    if obj.tick_thread_alive():
        obj.destroy_synchronous()
    else:
        obj._doDestroy()


def _settle(fut: asyncio.Future[R], result: object, error: int) -> None:
    if fut.done():
        return
    if error == FAIL_REASON.SUCCESS:
        fut.set_result(cast(R, result))     # pysyncobj hands back what _entry (the machine's apply_entry) returned
    elif error in (FAIL_REASON.NOT_LEADER, FAIL_REASON.MISSING_LEADER, FAIL_REASON.LEADER_CHANGED):
        fut.set_exception(NotLeaderError(f"Raft: {_FAIL_NAMES.get(error, error)}"))
    else:
        fut.set_exception(RaftError(f"Raft: {_FAIL_NAMES.get(error, error)}"))
