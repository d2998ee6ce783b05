"""Replication in controller mode (5.x ``AutoSwitchHAService``), on the DefaultHA connection.

What rides on the wire: the slave opens the connection with 5.x AutoSwitch's 16-byte slave handshake
(``state=1:int32, syncFromLastFile:int16, asyncLearner:int16, brokerId:int64``, big-endian) so the master knows
which controller brokerId the connection is; after it, the connection is 4.x DefaultHA (8-byte reports, 12-byte
transfer headers). The epoch part of the handshake (the master's epoch list, the consistent point, truncation) is
done before the connection, over remoting: ``GET_BROKER_EPOCH_CACHE`` (1007) to the master
(:mod:`rmqd.replicas.controller_mode`). A slave therefore never takes data from a master whose epochs it has not
checked: :class:`ControllerHAClient` connects once per handshake and does not reconnect by itself, and a master
whose epoch changes drops its connections (5.x keeps them and mislabels data, apache/rocketmq#9689).

The master side adds what the controller needs to the DefaultHA service:

* which connected slaves are in sync (acknowledged everything sent within ``haMaxTimeSlaveNotCatchup``) and may
  join the SyncStateSet (caught up, and at or past the current epoch's start);
* acknowledgements by SyncStateSet member: with ``allAckInSyncStateSet`` a put completes once *every* member has
  it (the union of the confirmed set and one being proposed, as 5.x's #5663 fix); otherwise once
  ``inSyncReplicas - 1`` slaves have it;
* an empty slave starts at the master's min offset (the whole CommitLog), not at its last file.
"""
from __future__ import annotations

import logging
import socket
import struct
import threading
import time
from typing import Any, Callable, Optional

from rmqd.store.ha.client import HAClient
from rmqd.store.ha.config import HAConfig
from rmqd.store.ha.connection import HAConnection
from rmqd.store.ha.protocol import HAProtocolError
from rmqd.store.ha.service import DefaultHAService

log = logging.getLogger(__name__)

SLAVE_HANDSHAKE = struct.Struct(">ihhq")       # 5.x AutoSwitchHAClient: state, syncFromLastFile, asyncLearner, id
HANDSHAKE_STATE = 1
HANDSHAKE_TIMEOUT_S = 5.0


class ControllerHAConnection(HAConnection):
    """One slave seen from a controller-mode master: the handshake first, then DefaultHA."""

    def __init__(self, service: "ControllerHAService", sock: socket.socket, addr: tuple) -> None:
        super().__init__(service, sock, addr)
        self.broker_id = -1
        self.async_learner = False
        self.sync_from_last_file = False
        self.last_caught_up = 0.0            # monotonic; 0 = never
        self._catchup_target = -1            # the master's max offset at the previous acknowledgement

    def _read_loop(self) -> None:
        try:
            self._read_handshake()
        except HAProtocolError as exc:
            self.close(str(exc))
            return
        except OSError as exc:
            self.close(f"handshake read failed: {exc!r}", error=False)
            return
        super()._read_loop()

    def _read_handshake(self) -> None:
        sock = self.sock
        sock.settimeout(HANDSHAKE_TIMEOUT_S)
        data = b""
        try:
            while len(data) < SLAVE_HANDSHAKE.size:
                chunk = sock.recv(SLAVE_HANDSHAKE.size - len(data))
                if not chunk:
                    raise HAProtocolError("the slave closed the connection before its handshake")
                data += chunk
        except socket.timeout:
            raise HAProtocolError(f"no handshake from the slave within {HANDSHAKE_TIMEOUT_S:.0f} s") from None
        sock.settimeout(self.service.config.housekeeping_interval_ms / 1000)
        state, from_last, learner, broker_id = SLAVE_HANDSHAKE.unpack(data)
        if state != HANDSHAKE_STATE:
            raise HAProtocolError(f"the slave's handshake has state {state}, not {HANDSHAKE_STATE}")
        if broker_id <= 0:
            raise HAProtocolError(f"the slave's handshake names brokerId {broker_id}")
        if not self.service.accepting():
            raise HAProtocolError(f"slave {broker_id} connected, but this broker is not the master")
        self.broker_id, self.sync_from_last_file, self.async_learner = broker_id, bool(from_last), bool(learner)
        log.info("HA: slave brokerId %d connected from %s", broker_id, self.addr)

    def _start_offset(self) -> int:
        if self.slave_request_offset == 0 and not self.sync_from_last_file:
            return self.service.store.commitlog.min_offset()
        return super()._start_offset()

    def _on_report(self, offset: int) -> None:
        """An ack at or past the master's max offset at the previous ack means the slave keeps up (5.x: "ack >=
        the master's max at the last send"); one still working through a backlog never does."""
        super()._on_report(offset)
        master_max = self.service.store.commitlog_max_offset()
        if offset >= master_max or 0 <= self._catchup_target <= offset:
            self.last_caught_up = time.monotonic()
        self._catchup_target = master_max
        self.service.on_slave_ack(self)


class ControllerHAClient(HAClient):
    """The slave side: sends the handshake, replicates, and on any end of the connection forgets the master
    (the next connection comes after a new epoch handshake, asked for through ``on_disconnect``)."""

    def __init__(self, store: Any, config: HAConfig) -> None:
        super().__init__(store, config)
        self.broker_id = -1
        self.on_disconnect: Optional[Callable[[str], None]] = None
        self._began = False

    def _connect(self, addr: str) -> Optional[socket.socket]:
        sock = super()._connect(addr)
        if sock is None:
            return None
        try:
            sock.sendall(SLAVE_HANDSHAKE.pack(HANDSHAKE_STATE, 0, 0, self.broker_id))
        except OSError as exc:
            log.warning("HA client: handshake to %s failed: %r", addr, exc)
            sock.close()
            return None
        self.appender.reset()               # from here on the appender knows what it verified
        self._began = True
        return sock

    def _replicate(self, addr: str) -> None:
        self._began = False
        try:
            super()._replicate(addr)
        finally:
            if self._began:
                # the next master may be another broker: a record this one sent only in part must not stay
                try:
                    self.appender.rollback()
                except Exception:
                    log.exception("HA client: cutting the unverified tail after the connection failed")
            with self._cond:
                if self._master == addr:
                    self._master = None
            cb = self.on_disconnect
            if cb is not None:
                try:
                    cb(addr)
                except Exception:
                    log.exception("HA client disconnect listener failed")


class ControllerHAService(DefaultHAService):
    """DefaultHAService with SyncStateSet-aware acknowledgements (see the module docstring)."""

    connection_class = ControllerHAConnection

    def __init__(self, store: Any, config: HAConfig, slave: bool = True, all_ack: bool = False,
                 in_sync_replicas: int = 1, max_not_catchup_ms: int = 15000, min_in_sync_replicas: int = 1) -> None:
        super().__init__(store, config, slave=slave)
        self.min_in_sync_replicas = max(1, min_in_sync_replicas)
        self.gates_puts = self.min_in_sync_replicas > 1
        self.client = ControllerHAClient(store, config)
        self.all_ack = all_ack
        self.in_sync_replicas = max(1, in_sync_replicas)
        self.max_not_catchup_s = max_not_catchup_ms / 1000
        self.self_id = -1
        self.sync_state_set: frozenset[int] = frozenset()
        self.pending_set: Optional[frozenset[int]] = None
        self.epoch_start = 0
        self._state_lock = threading.Lock()
        self.on_ack: list[Callable[[ControllerHAConnection], None]] = []
        #: the master's lease (set by rmqd.replicas.controller_mode): False -> no put is acknowledged
        self.lease_valid: Callable[[], bool] = lambda: True

    # ------------------------------------------------------------------ role and set
    def accepting(self) -> bool:
        return not self._slave

    def become_master(self, self_id: int, epoch_start: int) -> None:
        """This broker is master from ``epoch_start`` on: its set is {itself}; old connections go."""
        with self._state_lock:
            self.self_id = self_id
            self.sync_state_set = frozenset({self_id})
            self.pending_set = None
            self.epoch_start = epoch_start
        self.transfer.reset()
        self.push2slave = 0
        self.close_connections("a new master epoch")
        self.change_to_master()

    def become_slave(self, self_id: int) -> None:
        with self._state_lock:
            self.self_id = self_id
            self.sync_state_set = frozenset()
            self.pending_set = None
        self.client.broker_id = self_id
        self.client.update_master_address(None)
        self.close_connections("this broker is a slave now")
        self.change_to_slave()

    def close_connections(self, reason: str) -> None:
        for conn in list(self.connections):
            conn.close(reason, error=False)

    def set_sync_state_set(self, members: frozenset[int], pending: Optional[frozenset[int]] = None) -> None:
        with self._state_lock:
            self.sync_state_set = frozenset(members)
            self.pending_set = pending
        self._recompute()

    def ack_members(self) -> frozenset[int]:
        """Whose acknowledgement a put needs (allAckInSyncStateSet): the set plus any proposed, minus self."""
        with self._state_lock:
            members = self.sync_state_set | (self.pending_set or frozenset())
            return members - {self.self_id}

    def _leads(self) -> bool:
        """Whether this broker is the master of its SyncStateSet (``become_slave`` empties the set)."""
        with self._state_lock:
            return self.self_id in self.sync_state_set

    def in_sync_members(self) -> set[int]:
        """Connected slaves that acknowledged everything sent within haMaxTimeSlaveNotCatchup, plus self."""
        now = time.monotonic()
        out = {self.self_id}
        for c in list(self.connections):
            if c.broker_id > 0 and not c.async_learner and c.last_caught_up and \
                    now - c.last_caught_up <= self.max_not_catchup_s and c.slave_ack_offset >= self.epoch_start:
                out.add(c.broker_id)
        return out

    def connection_of(self, broker_id: int) -> Optional[ControllerHAConnection]:
        for c in list(self.connections):
            if c.broker_id == broker_id:
                return c
        return None

    # ------------------------------------------------------------------ acknowledgements
    def on_slave_ack(self, conn: ControllerHAConnection) -> None:
        self._recompute()
        for fn in self.on_ack:
            try:
                fn(conn)
            except Exception:
                log.exception("HA ack listener failed")

    def notify_transfer_some(self, offset: int) -> None:
        """Acks are counted per member in :meth:`_recompute` (called by :meth:`on_slave_ack`)."""
        if offset > self.push2slave:
            self.push2slave = offset

    def _acked_offset(self) -> int:
        """The offset every needed replica has; -1 when a needed one has no connection."""
        acks = {c.broker_id: c.slave_ack_offset for c in list(self.connections) if c.broker_id > 0}
        if self.all_ack:
            members = self.ack_members()
            if not members:
                # alone in the set: nothing to wait for. A master demoted to slave (the set emptied) completes
                # nothing: its waiting sends were not on the new master, and are answered FLUSH_SLAVE_TIMEOUT
                return self.store.commitlog_max_offset() if self._leads() else -1
            if any(m not in acks for m in members):
                return -1
            return min(acks[m] for m in members)
        need = self.in_sync_replicas - 1
        if need <= 0:
            return self.store.commitlog_max_offset()
        ranked = sorted(acks.values(), reverse=True)
        return ranked[need - 1] if len(ranked) >= need else -1

    def _recompute(self) -> None:
        acked = self._acked_offset()
        if acked >= 0:
            self.transfer.notify_transfer_some(acked)

    def _needs_wait(self) -> bool:
        if self.all_ack:
            return bool(self.ack_members()) or not self._leads()
        return self.in_sync_replicas > 1

    def is_slave_ok(self, master_put_where: int) -> bool:
        if not self._needs_wait():
            return True
        conns = {c.broker_id for c in list(self.connections) if c.broker_id > 0}
        if self.all_ack:
            return self.ack_members() <= conns
        return len(conns) >= self.in_sync_replicas - 1

    def put_request(self, end_offset: int, done: Callable[[bool], None]) -> None:
        """As DefaultHA, and the lease is checked when the answer is due: a master that resumes after its lease
        ran out (SIGSTOP, a long pause) answers FLUSH_SLAVE_TIMEOUT, never SEND_OK, even before its lease timer
        has run and fenced it."""
        def answer(ok: bool) -> None:
            done(ok and self.lease_valid())
        if not self._needs_wait():
            answer(True)
            return
        super().put_request(end_offset, answer)
        self._recompute()

    def put_refusal(self) -> Optional[str]:
        """minInSyncReplicas: fewer replicas in the SyncStateSet (with one being proposed) refuse the put before
        it is appended, as 5.x's IN_SYNC_REPLICAS_NOT_ENOUGH (SYSTEM_ERROR)."""
        with self._state_lock:
            members = self.sync_state_set | (self.pending_set or frozenset())
        if len(members) < self.min_in_sync_replicas:
            return "in-sync replicas not enough"
        return None

    def in_sync_slaves(self, master_max: Optional[int] = None) -> int:
        return max(0, len(self.in_sync_members()) - 1)

    def remove_connection(self, conn: HAConnection) -> None:
        super().remove_connection(conn)
        self._recompute()
