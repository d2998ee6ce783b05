"""DefaultHAService: RocketMQ 4.x master/slave replication of the CommitLog (Java's ``HAService``).

Every broker listens on ``haListenPort`` (listen port + 1); a master accepts its slaves there
(:class:`~rmqd.store.ha.connection.HAConnection`), a slave runs the :class:`~rmqd.store.ha.client.HAClient`
towards its master's HA address. ``push2slave`` is the highest offset any slave acknowledged (it never goes back,
as in Java); :meth:`is_slave_ok` and :meth:`put_request` are the SYNC_MASTER seam
(:class:`~rmqd.store.ha.layer.ReplicatedStore` uses them).

The interface (``start``/``shutdown``, ``change_to_master``/``change_to_slave``, ``update_master_address``,
``is_slave_ok``/``put_request``, ``in_sync_slaves``, ``runtime_info``) is the one an AutoSwitch variant (5.x
controller mode: epochs, handshake, truncation) implements beside this one; the wire protocol of this one lives in
:mod:`.protocol`, :mod:`.connection` and :mod:`.client`.
"""
from __future__ import annotations

import logging
import socket
import threading
import time
from typing import TYPE_CHECKING, Callable, Optional, TypedDict

from rmqd.store.ha.client import HAClient, HAClientRuntimeInfo
from rmqd.store.ha.config import HAConfig
from rmqd.store.ha.connection import HAConnection
from rmqd.store.ha.transfer import GroupTransferService

if TYPE_CHECKING:
    from rmqd.store.layer import StoreChain

log = logging.getLogger(__name__)


class HAConnectionInfo(TypedDict):
    """One slave in ``HARuntimeInfo`` (JSON), with rmqd's ``lagMillis``."""

    addr: str
    slaveAckOffset: int
    diff: int
    inSync: bool
    transferredByteInSecond: int
    transferFromWhere: int
    lagMillis: int


class HARuntimeInfo(TypedDict):
    """5.x ``HARuntimeInfo`` (GET_BROKER_HA_STATUS, JSON)."""

    master: bool
    masterCommitLogMaxOffset: int
    inSyncSlaveNums: int
    haConnectionInfo: list[HAConnectionInfo]
    haClientRuntimeInfo: HAClientRuntimeInfo


class DefaultHAService:
    """The HA port, the slaves' connections, the SYNC_MASTER waits and (on a slave) the HA client."""

    #: the master side of one slave's connection (the AutoSwitch variant has its own)
    connection_class: type[HAConnection] = HAConnection
    #: how long an idle writer sleeps before looking at the CommitLog again (SYNC_MASTER puts wake it at once)
    poll_interval_s = 0.002

    def __init__(self, store: "StoreChain", config: HAConfig, slave: bool = False) -> None:
        self.store = store
        self.config = config
        self._slave = slave
        self.connections: list[HAConnection] = []
        self._conn_lock = threading.Lock()
        self.push2slave = 0
        self.transfer = GroupTransferService()
        self.client = HAClient(store, config)
        self._wake_pending = False
        self._slave_timeout_s = config.slave_timeout_ms / 1000
        self._fallbehind_max = config.slave_fallbehind_max
        self._listener: Optional[socket.socket] = None
        self._accept_thread: Optional[threading.Thread] = None
        self._stopping = False
        self.on_slave_change: list[Callable[[], None]] = []

    # ------------------------------------------------------------------ lifecycle
    @property
    def port(self) -> int:
        return self._listener.getsockname()[1] if self._listener is not None else self.config.listen_port

    def bind(self) -> int:
        """Listen on the HA port (0 = any free port); returns the bound port."""
        lsock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            lsock.bind((self.config.listen_host, self.config.listen_port))
            lsock.listen(64)
        except OSError:
            lsock.close()
            raise
        lsock.settimeout(1.0)
        self._listener = lsock
        port: int = lsock.getsockname()[1]
        return port

    def start(self) -> None:
        if self._listener is None:
            self.bind()
        self.transfer.start()
        self._accept_thread = threading.Thread(target=self._accept_loop, name="rmqd-ha-accept", daemon=True)
        self._accept_thread.start()
        self.client.start()
        self.client.set_active(self._slave)
        # every lone broker is a master with an HA port: only a slave says so at the default level (a quiet start)
        (log.info if self._slave else log.debug)("HA service listening on %s:%d (%s)", self.config.listen_host,
                                                 self.port, "slave" if self._slave else "master")

    def shutdown(self) -> None:
        self._stopping = True
        self.client.shutdown()
        if self._listener is not None:
            try:
                self._listener.shutdown(socket.SHUT_RDWR)      # wakes the accept() in progress
            except OSError:
                pass                                           # not listening (never started)
            self._listener.close()
        if self._accept_thread is not None:
            self._accept_thread.join(3)
        conns = list(self.connections)
        for conn in conns:
            conn.close("the broker is shutting down", error=False)
        for conn in conns:
            conn.join(3)
        self.transfer.shutdown()

    # ------------------------------------------------------------------ role
    def change_to_master(self) -> None:
        """Stop replicating from a master (the connections of slaves are accepted in either role, as in Java)."""
        self._slave = False
        self.client.set_active(False)

    def change_to_slave(self) -> None:
        self._slave = True
        self.client.set_active(True)

    def update_master_address(self, addr: Optional[str]) -> None:
        """The master's HA address (``host:port``) the slave connects to."""
        self.client.update_master_address(addr)

    # ------------------------------------------------------------------ master side
    def _accept_loop(self) -> None:
        lsock = self._listener
        assert lsock is not None, "start() binds first"
        while not self._stopping:
            try:
                sock, addr = lsock.accept()
            except socket.timeout:
                continue
            except OSError as exc:
                if not self._stopping:
                    log.error("HA accept failed: %r", exc)
                    time.sleep(0.5)
                continue
            log.info("HA service: new connection from %s:%d", addr[0], addr[1])
            try:
                conn = self.connection_class(self, sock, addr)
                with self._conn_lock:
                    self.connections = self.connections + [conn]
                conn.start()
            except Exception:
                log.exception("starting the HA connection of %s:%d failed", addr[0], addr[1])
                sock.close()
                continue
            self._slaves_changed()

    def remove_connection(self, conn: HAConnection) -> None:
        with self._conn_lock:
            if conn not in self.connections:
                return
            self.connections = [c for c in self.connections if c is not conn]
        self._slaves_changed()

    def _slaves_changed(self) -> None:
        for fn in self.on_slave_change:
            try:
                fn()
            except Exception:
                log.exception("HA slave-change listener failed")

    def connection_count(self) -> int:
        return len(self.connections)

    def notify_transfer_some(self, offset: int) -> None:
        """A slave acknowledged ``offset`` (reader thread)."""
        if offset > self.push2slave:
            self.push2slave = offset
            self.transfer.notify_transfer_some(offset)

    def wakeup(self) -> None:
        """New CommitLog data: ring the writers now instead of at their next poll (once per look of theirs at
        the CommitLog: the puts that follow before it ride on the same ring)."""
        if self._wake_pending:
            return
        self._wake_pending = True
        for conn in self.connections:
            conn.ring()

    def looking(self) -> None:
        """A writer is about to look at the CommitLog: the next put rings again."""
        self._wake_pending = False

    # ------------------------------------------------------------------ SYNC_MASTER
    #: the controller-mode variant refuses some puts before they are appended (minInSyncReplicas)
    gates_puts = False

    def put_refusal(self) -> Optional[str]:
        """Why a put must be refused before it is appended (None: take it)."""
        return None

    def is_slave_ok(self, master_put_where: int) -> bool:
        """Java's ``isSlaveOK``: a slave is connected and less than ``haSlaveFallbehindMax`` behind."""
        return bool(self.connections) and master_put_where - self.push2slave < self._fallbehind_max

    def put_request(self, end_offset: int, done: Callable[[bool], None]) -> None:
        """Call ``done(True)`` once a slave has everything before ``end_offset``, ``done(False)`` after
        ``slaveTimeout``; rings the writers."""
        self.transfer.put_request(end_offset, self._slave_timeout_s, done)
        if not self._wake_pending:
            self.wakeup()

    def in_sync_slaves(self, master_max: Optional[int] = None) -> int:
        """Slaves less than ``haSlaveFallbehindMax`` behind (5.x ``inSyncReplicasNums`` minus the master)."""
        mx = self.store.commitlog_max_offset() if master_max is None else master_max
        return sum(1 for c in self.connections
                   if c.slave_ack_offset >= 0 and mx - c.slave_ack_offset < self.config.slave_fallbehind_max)

    # ------------------------------------------------------------------ status
    def runtime_info(self, is_master: bool) -> HARuntimeInfo:
        """5.x ``HARuntimeInfo`` (GET_BROKER_HA_STATUS), with rmqd's ``lagMillis`` per slave."""
        mx = self.store.commitlog_max_offset()
        conns: list[HAConnectionInfo] = []
        for c in list(self.connections):
            ack = max(c.slave_ack_offset, 0)
            conns.append({"addr": c.addr, "slaveAckOffset": ack, "diff": max(0, mx - ack),
                          "inSync": mx - ack < self.config.slave_fallbehind_max,
                          "transferredByteInSecond": int(c.transferred_per_second()),
                          "transferFromWhere": max(c.transfer_from, 0), "lagMillis": c.lag_millis()})
        return {"master": is_master, "masterCommitLogMaxOffset": mx, "inSyncSlaveNums": self.in_sync_slaves(mx),
                "haConnectionInfo": conns, "haClientRuntimeInfo": self.client.runtime_info()}
