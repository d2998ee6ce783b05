"""ReplicatedStore: the store layer that makes a put durable on the slave too (SYNC_MASTER), and refuses puts on
a slave (Java's ``CommitLog.submitReplicaRequest`` and ``DefaultMessageStore.checkStoreStatus``).

It wraps the local store (or the outermost layer) and delegates everything else to it unchanged, so processors
keep one store interface. The role is pushed in by the broker's role owner (:meth:`ReplicatedStore.set_role`).

SYNC_MASTER applies to messages whose WAIT property is not ``false``: once stored, a put waits until a slave has
acknowledged its end offset. No slave connected, or the slave ``haSlaveFallbehindMax`` or more behind, answers
SLAVE_NOT_AVAILABLE at once; no acknowledgement within ``slaveTimeout`` answers FLUSH_SLAVE_TIMEOUT. Both mean
stored (the response carries the message id), and a replica failure wins over a flush timeout, as in Java.
:meth:`ReplicatedStore.on_durable` is the same without holding a thread (the send lane answers from its callback).
"""
from __future__ import annotations

import inspect
import threading
from typing import Any, Callable, Sequence

from rmqd.config import BrokerRole
from rmqd.store.ha.service import DefaultHAService
from rmqd.store.message import find_property
from rmqd.store.message_store import PutMessageResult, PutMessageStatus

_OK = PutMessageStatus.PUT_OK
_SLAVE_TIMEOUT = PutMessageStatus.FLUSH_SLAVE_TIMEOUT
_STORED = (PutMessageStatus.PUT_OK, PutMessageStatus.FLUSH_DISK_TIMEOUT)
SLAVE_REFUSAL = "broker role is slave, so putMessage is forbidden"
_OWN = frozenset({"_inner", "ha", "_role", "_slave", "_sync_master"})


def waits_for_store(msg: Any) -> bool:
    """Java's ``isWaitStoreMsgOK``: the WAIT property, true unless it says false."""
    props = msg.properties
    if not props or "WAIT\x01false" not in props:
        return True
    return find_property(props, "WAIT") != "false"


class _Join:
    """Combines the flush outcome and the replica outcome of one put into one status."""

    __slots__ = ("_lock", "_flush", "_replica", "_done")

    def __init__(self, done: Callable[[PutMessageStatus], None]) -> None:
        self._lock = threading.Lock()
        self._flush = None
        self._replica = None
        self._done = done

    def flushed(self, ok: bool) -> None:
        self._set(True, _OK if ok else PutMessageStatus.FLUSH_DISK_TIMEOUT)

    def replicated(self, ok: bool) -> None:
        self._set(False, _OK if ok else PutMessageStatus.FLUSH_SLAVE_TIMEOUT)

    def replica_status(self, status: PutMessageStatus) -> None:
        self._set(False, status)

    def _set(self, flush: bool, status: PutMessageStatus) -> None:
        with self._lock:
            if flush:
                self._flush = status
            else:
                self._replica = status
            if self._flush is None or self._replica is None:
                return
        self._done(self._replica if self._replica is not _OK else self._flush)


class ReplicatedStore:
    """A store layer (see the module docstring); attribute reads and writes not its own go to ``inner``."""

    def __init__(self, inner: Any, ha: DefaultHAService, role: BrokerRole = BrokerRole.ASYNC_MASTER) -> None:
        object.__setattr__(self, "_inner", inner)
        object.__setattr__(self, "ha", ha)
        self.set_role(role)

    # ------------------------------------------------------------------ delegation
    def __getattr__(self, name: str) -> Any:
        value = getattr(self._inner, name)
        if inspect.ismethod(value) and value.__self__ is self._inner:
            object.__setattr__(self, name, value)       # bound methods are fixed: cache them
        return value

    def __setattr__(self, name: str, value: Any) -> None:
        if name in _OWN:
            object.__setattr__(self, name, value)
        else:
            self.__dict__.pop(name, None)            # a cached bound method must not hide the new value
            setattr(self._inner, name, value)

    def __delattr__(self, name: str) -> None:
        self.__dict__.pop(name, None)
        delattr(self._inner, name)

    @property
    def inner(self) -> Any:
        return self._inner

    @property
    def clock(self) -> Any:
        return self._inner.clock

    @clock.setter
    def clock(self, fn: Any) -> None:
        self._inner.clock = fn

    # ------------------------------------------------------------------ role
    def set_role(self, role: BrokerRole) -> None:
        object.__setattr__(self, "_role", role)
        object.__setattr__(self, "_slave", role is BrokerRole.SLAVE)
        object.__setattr__(self, "_sync_master", role is BrokerRole.SYNC_MASTER)

    @property
    def waits_for_replica(self) -> bool:
        """Puts are answered only once a slave has them (SYNC_MASTER)."""
        return self._sync_master

    @property
    def refuses_puts(self) -> bool:
        return self._slave

    # ------------------------------------------------------------------ puts
    def put_message(self, msg: Any) -> PutMessageResult:
        if self._slave:
            return PutMessageResult(PutMessageStatus.SERVICE_NOT_AVAILABLE, remark=SLAVE_REFUSAL)
        r = self._inner.put_message(msg)
        if self._sync_master and r.status in _STORED and waits_for_store(msg):
            self._wait_replica(r)
        return r

    def put_messages(self, msgs: Sequence[Any]) -> PutMessageResult:
        if self._slave:
            return PutMessageResult(PutMessageStatus.SERVICE_NOT_AVAILABLE, remark=SLAVE_REFUSAL)
        r = self._inner.put_messages(msgs)
        if self._sync_master and msgs and r.status in _STORED and waits_for_store(msgs[0]):
            self._wait_replica(r)
        return r

    def _wait_replica(self, r: PutMessageResult) -> None:
        ha = self.ha
        end = r.end_offset
        if not ha.is_slave_ok(end):
            r.status = PutMessageStatus.SLAVE_NOT_AVAILABLE
            return
        ev = threading.Event()
        got = [False]

        def done(ok: bool) -> None:
            got[0] = ok
            ev.set()
        ha.put_request(end, done)
        ev.wait(ha.config.slave_timeout_ms / 1000 + 5.0)
        if not got[0]:
            r.status = PutMessageStatus.FLUSH_SLAVE_TIMEOUT

    def on_durable(self, end_offset: int, done: Callable[[PutMessageStatus], None]) -> None:
        """``done(status)`` once the message ending at ``end_offset`` is flushed (SYNC_FLUSH) and on a slave
        (SYNC_MASTER), never blocking: PUT_OK, FLUSH_DISK_TIMEOUT, FLUSH_SLAVE_TIMEOUT or SLAVE_NOT_AVAILABLE."""
        inner = self._inner
        if not self._sync_master:
            inner.on_flushed(end_offset, lambda ok: done(_OK if ok else PutMessageStatus.FLUSH_DISK_TIMEOUT))
            return
        ha = self.ha
        if inner.config.flush_disk_type != "SYNC_FLUSH":          # nothing to join: the slave decides alone
            if ha.is_slave_ok(end_offset):
                ha.put_request(end_offset, lambda ok: done(_OK if ok else _SLAVE_TIMEOUT))
            else:
                done(PutMessageStatus.SLAVE_NOT_AVAILABLE)
            return
        join = _Join(done)
        if ha.is_slave_ok(end_offset):
            ha.put_request(end_offset, join.replicated)
        else:
            join.replica_status(PutMessageStatus.SLAVE_NOT_AVAILABLE)
        inner.on_flushed(end_offset, join.flushed)
