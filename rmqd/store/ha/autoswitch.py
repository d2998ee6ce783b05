"""Replication in controller mode: the 5.x AutoSwitch HA protocol (``AutoSwitchHAService``), both sides.

Wire format: :mod:`rmqd.store.ha.autoswitch_protocol`. The slave's connection goes READY -> HANDSHAKE ->
TRANSFER (``HAConnectionState``), as 5.x's ``AutoSwitchHAClient``:

* HANDSHAKE: the slave sends its 16-byte handshake (syncFromLastFile, asyncLearner, its controller brokerId); the
  master answers with its max offset, its last epoch and its epoch entries. The slave computes the consistent
  point (the newest local epoch the master has with the same start offset gives ``min(local end, master end)``),
  cuts its CommitLog back to it crash-safely (:mod:`rmqd.store.ha.truncate`; 5.x leaves the old bytes valid on
  disk, apache/rocketmq#10666), drops its epoch entries from there on, and goes TRANSFER. A slave with an empty
  epoch file skips the truncation and is trusted as it is (5.x). No consistent point: the connection ends and the
  handshake is tried again 2 s later (5.x does the same, forever).
* TRANSFER: the slave acks with ``state, maxPhyOffset`` (the first ack is where the transfer starts: 0 means the
  master's min offset, or the start of its last CommitLog file with ``syncFromLastFile``); the master sends 36-byte
  headers (offset, epoch and epochStartOffset of the data, its confirmOffset) and CommitLog bytes, zero-copy
  (``sendmsg`` of mapped slices, :class:`~rmqd.store.ha.connection.HAConnection`). A frame never crosses the end of
  an epoch. The slave records each new epoch it receives in its epoch file and keeps
  ``confirmOffset = min(header confirmOffset, its max offset)``.

A slave connects only to a master at (or past) the epoch the controller named (the handshake reply carries the
master's last epoch), and after any end of a connection it asks the broker (``on_disconnect``) for the master
again; a master whose epoch changes drops its connections (5.x keeps them and mislabels data,
apache/rocketmq#9689).

The master side adds what the controller needs:

* which connected slaves are in sync (acknowledged everything sent within ``haMaxTimeSlaveNotCatchup``, at or past
  the current epoch's start and the confirmOffset, not an async learner) and may join the SyncStateSet;
* acknowledgements by SyncStateSet member: with ``allAckInSyncStateSet`` a put completes once *every* member has
  it (the union of the confirmed set and one being proposed, as 5.x's #5663 fix); otherwise once
  ``inSyncReplicas - 1`` slaves have it;
* **confirmOffset** (5.x ``computeConfirmOffset``/``getConfirmOffset``): with ``allAckInSyncStateSet`` and more
  than one member, the least offset every SyncStateSet member acknowledged (kept as it was while a member has no
  connection, #6662); otherwise the max offset. Consumers read no further (:class:`~rmqd.store.ha.layer.
  ReplicatedStore`), so nothing a failover can cut off is ever consumed.
"""
from __future__ import annotations

import logging
import socket
import threading
import time
from typing import TYPE_CHECKING, Callable, Optional

from rmqd.store.ha import autoswitch_protocol as wire
from rmqd.store.ha.autoswitch_protocol import HAConnectionState
from rmqd.store.ha.client import HAClient
from rmqd.store.ha.config import HAConfig
from rmqd.store.ha.connection import HAConnection
from rmqd.store.ha.epoch_file import EpochFileCache, consistent_point
from rmqd.store.ha.protocol import HAProtocolError
from rmqd.store.ha.service import DefaultHAService
from rmqd.store.ha.truncate import truncate_store

if TYPE_CHECKING:
    from rmqd.store.layer import StoreChain

log = logging.getLogger(__name__)

HANDSHAKE_TIMEOUT_S = 5.0
NO_MATCH_RETRY_S = 2.0


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    data = bytearray()
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise HAProtocolError(f"the peer closed the connection inside a handshake ({len(data)} of {n} bytes)")
        data += chunk
    return bytes(data)


class ControllerHAConnection(HAConnection):
    """One slave seen from a controller-mode master: its handshake, the epoch reply, then AutoSwitch transfers."""

    report_size = wire.SLAVE_ACK.size
    header_size = wire.TRANSFER_HEADER.size
    if TYPE_CHECKING:
        service: ControllerHAService

    def __init__(self, service: "ControllerHAService", sock: socket.socket, addr: tuple[str, int]) -> None:
        super().__init__(service, sock, addr)
        self.state = HAConnectionState.HANDSHAKE
        self.broker_id = -1
        self.async_learner = False
        self.sync_from_last_file = False
        self.last_caught_up = 0.0            # monotonic; 0 = never
        self._catchup_target = -1            # the master's max offset at the previous acknowledgement
        self._epoch = (-1, 0)                # (epoch, start) of the data of the round being sent
        self._confirm = -1                   # the confirmOffset the round's headers carry

    def _read_loop(self) -> None:
        try:
            self._handshake()
        except HAProtocolError as exc:
            self.close(str(exc))
            return
        except socket.timeout:
            self.close(f"no handshake from the slave within {HANDSHAKE_TIMEOUT_S:.0f} s")
            return
        except OSError as exc:
            self.close(f"handshake failed: {exc!r}", error=False)
            return
        super()._read_loop()

    def _handshake(self) -> None:
        """Read the slave's handshake, answer with this master's epochs (the writer waits for the first ack)."""
        sock = self.sock
        sock.settimeout(HANDSHAKE_TIMEOUT_S)
        hs = wire.unpack_slave_handshake(_recv_exact(sock, wire.SLAVE_HANDSHAKE.size))
        if hs.broker_id <= 0:
            raise HAProtocolError(f"the slave's handshake names brokerId {hs.broker_id}")
        svc = self.service
        if not svc.accepting():
            raise HAProtocolError(f"slave {hs.broker_id} connected, but this broker is not the master")
        self.broker_id, self.sync_from_last_file, self.async_learner = \
            hs.broker_id, hs.sync_from_last_file, hs.async_learner
        entries = svc.epoch_entries()
        mx = svc.store.commitlog_max_offset()
        last_epoch = entries[-1][0] if entries else -1
        sock.sendall(wire.pack_master_handshake(mx, last_epoch, entries))
        sock.settimeout(svc.config.housekeeping_interval_ms / 1000)
        log.info("HA: slave brokerId %d connected from %s (syncFromLastFile=%s, asyncLearner=%s); sent epochs %s, "
                 "max offset %d", hs.broker_id, self.addr, hs.sync_from_last_file, hs.async_learner,
                 entries[-3:], mx)

    def close(self, reason: str, error: bool = True) -> None:
        self.state = HAConnectionState.SHUTDOWN
        super().close(reason, error)

    def _decode_report(self, buf: bytearray, pos: int) -> int:
        offset = wire.unpack_ack(buf, pos)
        self.state = HAConnectionState.TRANSFER
        return offset

    def _start_offset(self) -> int:
        if self.slave_request_offset == 0 and not self.sync_from_last_file:
            return self.service.store.commitlog.min_offset()
        return super()._start_offset()

    def _bound(self, start: int, avail: int) -> int:
        """A round stays inside the epoch holding ``start`` (5.x: a frame never crosses an epoch boundary)."""
        epoch, estart, end = self.service.epoch_entry_at(start)
        self._epoch = (epoch, estart)
        self._confirm = self.service.get_confirm_offset()
        if end is not None:
            avail = min(avail, end - start)
        return avail

    def _frame_header(self, offset: int, size: int) -> bytes:
        if size == 0:                                  # a heartbeat: the epoch of where the slave is
            epoch, estart, _ = self.service.epoch_entry_at(offset)
            return wire.pack_transfer_header(0, offset, epoch, estart, self.service.get_confirm_offset())
        epoch, estart = self._epoch
        return wire.pack_transfer_header(size, offset, epoch, estart, self._confirm)

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
    """The slave side (5.x ``AutoSwitchHAClient``): handshake, truncation, transfer; on any end of the connection
    it forgets the master (the broker names it again through ``on_disconnect``)."""

    def __init__(self, store: "StoreChain", config: HAConfig) -> None:
        super().__init__(store, config)
        self.broker_id = -1
        self.sync_from_last_file = False
        self.async_learner = False
        self.epoch_cache: Optional[EpochFileCache] = None     # the broker's (set by ReplicasManager)
        self.expected_epoch = -1              # the master epoch the controller named
        self.state = HAConnectionState.READY
        self.confirm_offset = -1              # min(the master's confirmOffset, this CommitLog's max); -1 unknown
        self.consistent_point = -1            # the last handshake's
        self.master_label = ""                # the master's remoting address (for the log)
        self.on_disconnect: Optional[Callable[[str], None]] = None
        self._received_epoch = -1
        self._began = False

    def shutdown(self) -> None:
        super().shutdown()
        self.state = HAConnectionState.SHUTDOWN

    def _connect(self, addr: str) -> Optional[socket.socket]:
        sock = super()._connect(addr)
        if sock is None:
            return None
        self.state = HAConnectionState.HANDSHAKE
        # the broker waits for ``connected`` to drop before it promotes itself (no truncation under it), and a
        # new master address closes ``_sock``, which ends the handshake at once
        self.connected = True
        with self._cond:
            self._sock = sock
        try:
            with self._cond:
                if self._stopping or not self._active or self._master != addr:
                    raise HAProtocolError("the master changed before the handshake")
            self._handshake(sock)
        except (OSError, HAProtocolError) as exc:
            log.warning("HA client: handshake with master %s failed: %s", addr, exc)
            sock.close()
            self.state = HAConnectionState.READY
            return None
        self.appender.reset()               # from here on the appender knows what it verified
        self._began = True
        self.state = HAConnectionState.TRANSFER
        return sock

    def _handshake(self, sock: socket.socket) -> None:
        sock.settimeout(HANDSHAKE_TIMEOUT_S)
        sock.sendall(wire.pack_slave_handshake(self.sync_from_last_file, self.async_learner, self.broker_id))
        reply = wire.unpack_master_handshake(_recv_exact(sock, wire.MASTER_HANDSHAKE.size))
        entries = wire.unpack_epoch_entries(_recv_exact(sock, reply.body_size), 0, reply.body_size)
        if reply.last_epoch < self.expected_epoch:
            raise HAProtocolError(f"the master is at epoch {reply.last_epoch}, not yet at {self.expected_epoch}")
        point = self.truncate_to_master(entries, reply.max_offset)
        if self.confirm_offset > point:           # an older master's value: never past what this one confirms
            self.confirm_offset = point
        self._received_epoch = -1
        sock.settimeout(None)

    def truncate_to_master(self, master_entries: list[tuple[int, int]], master_max: int) -> int:
        """The consistent point with the master's epochs, and the cut to it; returns the point."""
        store, cache = self.store, self.epoch_cache
        local_max = store.commitlog_max_offset()
        local = cache.snapshot() if cache is not None else []
        if cache is None or not local:
            log.info("epoch handshake with %s done: consistent at %d (empty epoch file: no truncation)",
                     self.master_label or self.master_address, local_max)
            self.consistent_point = local_max
            return local_max
        point = consistent_point(local, local_max, master_entries, master_max)
        if point < 0:
            time.sleep(NO_MATCH_RETRY_S)
            raise HAProtocolError(f"no epoch in common with the master (local {local}, master {master_entries}): "
                                  "this slave cannot follow it until its store is cleaned")
        if point < local_max:
            log.warning("HA handshake: this broker has %d bytes the master never had; truncating %d -> %d",
                        local_max - point, local_max, point)
            truncate_store(store, point)
            self.appender.reset()
        cache.truncate_suffix(point)
        self.consistent_point = point
        log.info("epoch handshake with %s done: consistent at %d (master max %d, epoch %d)",
                 self.master_label or self.master_address, point, master_max,
                 master_entries[-1][0] if master_entries else -1)
        return point

    def _report(self, sock: socket.socket, offset: int) -> None:
        sock.sendall(wire.pack_ack(offset))
        self.last_write_ms = int(time.time() * 1000)

    def _consume(self, view: memoryview, filled: int) -> int:
        """Append every whole AutoSwitch frame in ``view[:filled]`` (recording new epochs, the confirmOffset)."""
        pos = 0
        hsize = wire.TRANSFER_HEADER.size
        max_body = self.store.commitlog.file_size
        while filled - pos >= hsize:
            h = wire.unpack_transfer_header(view, pos)
            size, offset = h.body_size, h.offset
            if size < 0 or size > max_body:
                raise HAProtocolError(f"the master sent a transfer of {size} bytes at offset {offset}")
            if offset < 0:
                # a 5.x master with an empty CommitLog (getMinOffset answers -1) heartbeats at -1 until it has data;
                # its slaves check offsets only once they hold data themselves (AutoSwitchHAClient)
                if size == 0 and self.store.commitlog_max_offset() == 0:
                    self.confirm_offset = 0
                    pos += hsize
                    continue
                raise HAProtocolError(f"the master sent a negative offset {offset}")
            whole = filled - pos >= hsize + size
            if size == 0 or not whole:                 # a whole transfer's offset is the appender's to check
                mx = self.store.commitlog_max_offset()
                if mx and offset != mx:
                    raise HAProtocolError(f"master pushed offset {offset} not equal to the max offset of this "
                                          f"slave {mx}")
            if not whole:
                if hsize + size > len(view):
                    raise HAProtocolError(f"a transfer of {size} bytes is larger than the read buffer")
                break
            if h.epoch != self._received_epoch:
                if self.epoch_cache is not None and not self.epoch_cache.append(h.epoch, h.epoch_start):
                    raise HAProtocolError(f"epoch {h.epoch} from {h.epoch_start} does not follow this slave's epochs "
                                          f"{self.epoch_cache.snapshot()[-3:]}")
                self._received_epoch = h.epoch
            if size:
                self.appender.append(offset, view[pos + hsize:pos + hsize + size])
            self.confirm_offset = min(h.confirm_offset, self.store.commitlog_max_offset())
            pos += hsize + size
        return pos

    def _replicate(self, addr: str) -> None:
        self._began = False
        try:
            super()._replicate(addr)
        finally:
            if self.state is not HAConnectionState.SHUTDOWN:
                self.state = HAConnectionState.READY
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

    connection_class: type[HAConnection] = ControllerHAConnection
    if TYPE_CHECKING:
        client: ControllerHAClient
        connections: list[ControllerHAConnection]  # type: ignore[assignment]  # made by connection_class

    def __init__(self, store: "StoreChain", config: HAConfig, slave: bool = True, all_ack: bool = False,
                 in_sync_replicas: int = 1, max_not_catchup_ms: int = 15000, min_in_sync_replicas: int = 1,
                 async_learner: bool = False, sync_from_last_file: bool = False) -> None:
        super().__init__(store, config, slave=slave)
        self.min_in_sync_replicas = max(1, min_in_sync_replicas)
        self.gates_puts = self.min_in_sync_replicas > 1
        self.client = ControllerHAClient(store, config)
        self._local = store.message_store
        self.client.async_learner = async_learner
        self.client.sync_from_last_file = sync_from_last_file
        self.epoch_cache: Optional[EpochFileCache] = None   # the broker's (set by ReplicasManager)
        self._confirm = -1                       # the master's confirmOffset (see get_confirm_offset)
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
        self._local.record_confirm_offset_from(self.get_confirm_offset)   # the checkpoint keeps it across restarts

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
            self._confirm = epoch_start
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

    def set_epoch_cache(self, cache: EpochFileCache) -> None:
        self.epoch_cache = cache
        self.client.epoch_cache = cache

    def epoch_entries(self) -> list[tuple[int, int]]:
        return self.epoch_cache.snapshot() if self.epoch_cache is not None else []

    def epoch_entry_at(self, offset: int) -> tuple[int, int, Optional[int]]:
        """``(epoch, startOffset, endOffset or None for the last)`` of the epoch holding ``offset``; data older
        than the first entry (a store from before controller mode) belongs to the first epoch."""
        entries = self.epoch_entries()
        if not entries:
            return -1, 0, None
        i = len(entries) - 1
        while i > 0 and entries[i][1] > offset:
            i -= 1
        end = entries[i + 1][1] if i + 1 < len(entries) else None
        return entries[i][0], entries[i][1], end

    def get_confirm_offset(self) -> int:
        """5.x ``getConfirmOffset`` in controller mode. A master: its max offset unless ``allAckInSyncStateSet``
        with more than one member; then the least offset every SyncStateSet member (with one being proposed)
        acknowledged, kept as it was while a member has no connection (#6662). A slave: ``min(the master's
        confirmOffset, this CommitLog's max)`` from the last transfer header; before one came since the start, the
        value the checkpoint recorded (its max offset when none was)."""
        mx = self.store.commitlog_max_offset()
        if self._slave:
            c = self.client.confirm_offset
            if c < 0:                                   # no header yet since the start: the recorded value
                c = self._local.recorded_confirm_offset()
            return mx if c < 0 else min(c, mx)
        with self._state_lock:
            members = (self.sync_state_set | (self.pending_set or frozenset())) - {self.self_id}
        if not self.all_ack or not members:
            return mx
        acks = {c.broker_id: c.slave_ack_offset for c in list(self.connections) if c.broker_id > 0}
        if any(acks.get(m, -1) < 0 for m in members):       # no connection, or no report on it yet
            return min(self._confirm, mx) if self._confirm >= 0 else mx
        # 5.x skips members whose ack is 0: a member that has nothing yet did not hold the confirmOffset back, so
        # the first message of a fresh group was readable (and counted the slaves as behind) before any had it
        confirm = min(mx, *(acks[m] for m in members))
        self._confirm = confirm
        return confirm

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
                    now - c.last_caught_up <= self.max_not_catchup_s and c.slave_ack_offset >= self.epoch_start \
                    and (not self.all_ack or c.slave_ack_offset >= self._confirm):
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
