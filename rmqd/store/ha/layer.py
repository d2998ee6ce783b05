"""ReplicatedStore: the store layer that makes a put durable on the slave too (SYNC_MASTER), and refuses puts on
a slave (Java's ``CommitLog.submitReplicaRequest`` and ``DefaultMessageStore.checkStoreStatus``).

It is the outermost :class:`~rmqd.store.layer.StoreLayer` (over the local store or the compaction/tier layers)
and delegates everything else to them unchanged, so processors keep one store interface. The role is pushed in by the broker's role owner (:meth:`ReplicatedStore.set_role`).

In controller mode (unless ``readUnCommitted``) reads stop at the HA service's **confirmOffset** (5.x stops the
consume-queue dispatch there): a pull or POP gets no record ending past it, and a queue's max offset counts only the
records below it, so no consumer reads a message a failover could cut off (:meth:`ReplicatedStore.
bound_reads`). While everything is confirmed (the usual case between sends) this costs one comparison per read.

SYNC_MASTER applies to messages whose WAIT property is not ``false``: once stored, a put waits until a slave has
acknowledged its end offset. No slave connected, or the slave ``haSlaveFallbehindMax`` or more behind, answers
SLAVE_NOT_AVAILABLE at once; no acknowledgement within ``slaveTimeout`` answers FLUSH_SLAVE_TIMEOUT. Both mean
stored (the response carries the message id), and a replica failure wins over a flush timeout, as in Java.
:meth:`ReplicatedStore.on_durable` is the same without holding a thread (the send lane answers from its callback).
"""
from __future__ import annotations

import struct
import threading
from typing import TYPE_CHECKING, Callable, Literal, Optional, Sequence, overload

from rmqd.config import BrokerRole
from rmqd.store.ha.service import DefaultHAService
from rmqd.store.layer import StoreLayer
from rmqd.store.message import find_property
from rmqd.store.message_store import PutMessageResult, PutMessageStatus
from rmqd.store.results import GetMessageResult, GetMessageStatus, QueryResult

if TYPE_CHECKING:
    from rmqd.store.api import MessageFilter
    from rmqd.store.layer import StoreChain
    from rmqd.store.message import MessageToStore

_OK = PutMessageStatus.PUT_OK
_SLAVE_TIMEOUT = PutMessageStatus.FLUSH_SLAVE_TIMEOUT
_STORED = (PutMessageStatus.PUT_OK, PutMessageStatus.FLUSH_DISK_TIMEOUT)
SLAVE_REFUSAL = "broker role is slave, so putMessage is forbidden"
_RECORD_HEAD = struct.Struct(">i24xq")        # TOTALSIZE ... PHYSICALOFFSET (byte 28) of a CommitLog record
FENCED_REFUSAL = "broker is fenced: it lost contact with the controller, so putMessage is forbidden"


def waits_for_store(msg: "MessageToStore") -> bool:
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
        self._flush: Optional[PutMessageStatus] = None
        self._replica: Optional[PutMessageStatus] = None
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


class ReplicatedStore(StoreLayer):
    """The replication layer over ``inner`` (see the module docstring): overrides the puts and
    :meth:`on_durable`; everything else is :class:`~rmqd.store.layer.StoreLayer`'s delegation."""

    def __init__(self, inner: "StoreChain", ha: DefaultHAService, role: BrokerRole = BrokerRole.ASYNC_MASTER) -> None:
        super().__init__(inner)
        self.ha = ha
        self._fenced = False
        #: controller mode: the offset reads stop at (the confirmOffset), None = no bound
        self._confirm: Optional[Callable[[], int]] = None
        self.set_role(role)

    # ------------------------------------------------------------------ reads bounded by the confirmOffset
    def bound_reads(self, confirm_offset: Optional[Callable[[], int]]) -> None:
        """Reads stop at ``confirm_offset()`` (controller mode without readUnCommitted), or nowhere (None)."""
        self._confirm = confirm_offset

    @property
    def reads_bounded(self) -> bool:
        return self._confirm is not None

    def _unconfirmed_from(self) -> int:
        """The confirmOffset when some of the CommitLog lies past it, else -1 (nothing to hide)."""
        fn = self._confirm
        if fn is None:
            return -1
        c = fn()
        return c if c < self.inner.commitlog_max_offset() else -1

    def get_max_offset(self, topic: str, queue_id: int) -> int:
        mx = self.inner.get_max_offset(topic, queue_id)
        c = self._unconfirmed_from()
        if c < 0 or mx <= 0:
            return mx
        cq = self.message_store.consume_queues.get(topic, queue_id)
        if cq is None:
            return mx
        lo = cq.min_offset
        while mx > lo:                       # the unconfirmed tail is short: walk back over it
            entries = cq.iter_from(mx - 1, 1)
            entry = next(iter(entries), None) if entries is not None else None
            if entry is None or entry[0] + entry[1] <= c:
                break
            mx -= 1
        return mx

    def get_messages(self, topic: str, queue_id: int, offset: int, max_nums: int,
                     max_total_bytes: Optional[int] = None,
                     message_filter: Optional["MessageFilter"] = None) -> GetMessageResult:
        r = self.inner.get_messages(topic, queue_id, offset, max_nums, max_total_bytes, message_filter)
        return self._bounded(r, offset) if r.buffers and self._confirm is not None else r

    def get_messages_resident(self, topic: str, queue_id: int, offset: int, max_nums: int,
                              tag_codes: Optional[Sequence[int]]) -> Optional[GetMessageResult]:
        r = self.inner.get_messages_resident(topic, queue_id, offset, max_nums, tag_codes)
        if r is None or not r.buffers or self._confirm is None:
            return r
        return self._bounded(r, offset, resident=True)

    def query_message(self, topic: str, key: str, max_num: int, begin_ts: int = 0,
                      end_ts: int = 2 ** 62) -> QueryResult:
        """Key queries see what pulls see: no record ending past the confirmOffset (5.x builds the index only
        up to it). A lookup by offset msgId reads the CommitLog directly, unbounded, as in 5.x."""
        r = self.inner.query_message(topic, key, max_num, begin_ts, end_ts)
        c = self._unconfirmed_from() if r.messages else -1
        if c < 0:
            return r
        kept = []
        for m in r.messages:
            size, phys = _RECORD_HEAD.unpack_from(m, 0)
            if phys + size <= c:
                kept.append(m)
        return QueryResult(kept, r.index_last_update_timestamp, min(r.index_last_update_phyoffset, c))

    @overload
    def _bounded(self, r: GetMessageResult, offset: int, resident: Literal[False] = False) -> GetMessageResult: ...

    @overload
    def _bounded(self, r: GetMessageResult, offset: int, resident: Literal[True]) -> Optional[GetMessageResult]: ...

    def _bounded(self, r: GetMessageResult, offset: int, resident: bool = False) -> Optional[GetMessageResult]:
        """``r`` without the records that end past the confirmOffset; none left: as if the queue ended at
        ``offset`` (OFFSET_OVERFLOW_ONE, what a consumer of an undispatched queue gets). A resident read that
        must be cut answers None (its records carry no queue offsets: :meth:`get_messages` cuts it)."""
        c = self._unconfirmed_from()
        if c < 0:
            return r
        records = []                          # (buffer index, start in buffer, size, end phys offset)
        for i, buf in enumerate(r.buffers):
            pos, n = 0, len(buf)
            while pos + _RECORD_HEAD.size <= n:
                size, phys = _RECORD_HEAD.unpack_from(buf, pos)
                if size <= 0:
                    break
                records.append((i, pos, size, phys + size))
                pos += size
        keep = 0
        while keep < len(records) and records[keep][3] <= c:
            keep += 1
        if keep == len(records):
            return r
        if resident:
            return None
        if keep == 0:
            r.release()
            return GetMessageResult(GetMessageStatus.OFFSET_OVERFLOW_ONE, offset, r.min_offset, offset)
        if len(r.buffers) == len(records):   # one record per buffer (zero-copy views)
            for b in r.buffers[keep:]:
                if isinstance(b, memoryview):
                    b.release()
            r.buffers = r.buffers[:keep]
            if r.queue_offsets:
                r.queue_offsets = r.queue_offsets[:keep]
                r.next_begin_offset = r.queue_offsets[-1] + 1
            else:
                r.next_begin_offset = offset + keep
        else:                                 # several records in one buffer, contiguous from ``offset``
            i, start, size, _ = records[keep - 1]
            r.buffers = r.buffers[:i] + [r.buffers[i][:start + size]]
            r.message_count_hint = keep
            r.next_begin_offset = offset + keep
        r.buffer_total_size = sum(len(b) for b in r.buffers)
        return r

    # ------------------------------------------------------------------ role
    def set_role(self, role: BrokerRole) -> None:
        """The role now in effect (pushed by the broker's RoleManager)."""
        self._role = role
        self._slave = role is BrokerRole.SLAVE
        self._sync_master = role is BrokerRole.SYNC_MASTER

    def set_fenced(self, fenced: bool) -> None:
        """Controller mode: a master that lost its lease refuses every put (no two masters take writes)."""
        self._fenced = fenced

    @property
    def waits_for_replica(self) -> bool:
        """Puts are answered only once a slave has them (SYNC_MASTER)."""
        return self._sync_master

    @property
    def refuses_puts(self) -> bool:
        """No put takes the send lane (it would skip :meth:`put_message`'s checks)."""
        return self._slave or self._fenced or self.ha.gates_puts

    # ------------------------------------------------------------------ puts
    def _refusal(self) -> Optional[PutMessageResult]:
        """Why no put is taken now (a slave, a fenced master, the HA service's gate), None when puts are."""
        if self._slave:
            return PutMessageResult(PutMessageStatus.SERVICE_NOT_AVAILABLE, remark=SLAVE_REFUSAL)
        if self._fenced:
            return PutMessageResult(PutMessageStatus.SERVICE_NOT_AVAILABLE, remark=FENCED_REFUSAL)
        refusal = self.ha.put_refusal() if self.ha.gates_puts else None
        if refusal is not None:
            return PutMessageResult(PutMessageStatus.UNKNOWN_ERROR, remark=refusal)
        return None

    def put_message(self, msg: "MessageToStore") -> PutMessageResult:
        refused = self._refusal()
        if refused is not None:
            return refused
        r = self.inner.put_message(msg)
        if self._sync_master and r.status in _STORED and waits_for_store(msg):
            self._wait_replica(r)
        return r

    def put_messages(self, msgs: Sequence["MessageToStore"]) -> PutMessageResult:
        refused = self._refusal()
        if refused is not None:
            return refused
        r = self.inner.put_messages(msgs)
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
        inner = self.inner
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
