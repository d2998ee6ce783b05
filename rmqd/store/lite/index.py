"""The lite index: per (LITE parent topic, lite topic), the CommitLog offsets of its messages.

A lite message is stored once, in its parent topic's queue, like any message. The index gives each lite
topic its own queue of offsets 0, 1, 2… (Java's LMQ ``%LMQ%$parent$lite``, queue 0) without a consume
queue file: an idle lite topic is a small object in memory (a name, an ``array('q')`` of CommitLog
offsets, the newest store time) and costs no file handle. Reads go through the store interface
(``read_message(commitlog offset)``), see :mod:`rmqd.store.lite.view`.

**Feeding and order.** ``add_dispatch_listener(on_dispatch, topic=parent)`` hands each stored message of
the parent to :meth:`LiteIndex.on_dispatch` in the putting thread, after the put lock is released, so two
threads may report in the reverse order of the CommitLog. A lite offset must be the message's rank in
CommitLog order (a restart rebuilds the index from the parent's consume queues, in that order, and the
consumer offsets and POP checkpoints of lite topics must still mean the same messages). So messages are
applied in CommitLog order: one reported while a parent queue still has an entry that was written (the
consume queue says so, under the put lock) but not yet reported waits for it, unless its CommitLog offset
is below every such entry. The wait ends with the late report, a few microseconds later.

**Lifetime.** Start-up rebuilds the index from each LITE parent's consume queues (offsets and lite names
come from the records). Entries whose CommitLog file was deleted by retention are dropped from the head
(the lite topic's min offset moves up). :meth:`delete` forgets a lite topic (TTL expiry).
"""
from __future__ import annotations

import heapq
import logging
import threading
from array import array
from typing import TYPE_CHECKING, Callable, Iterator, Literal, Optional, overload

from rmqd.cython_ext import store_commitlog as _cl
from rmqd.store.lite.names import LITE_TOPIC_PROPERTY, lmq_name
from rmqd.store.message import find_property

if TYPE_CHECKING:
    from rmqd.cython_ext.store_put import DispatchRequest
    from rmqd.store.api import MessageStoreAPI

log = logging.getLogger(__name__)

_PREPARED_OR_ROLLBACK = (0x4, 0xC)


class LiteQueue:
    """One lite topic: its messages' CommitLog offsets; lite offset of ``phys[i]`` is ``base + i``."""

    __slots__ = ("base", "phys", "last_store_ts")

    def __init__(self) -> None:
        self.base = 0
        self.phys: array[int] = array("q")
        self.last_store_ts = 0

    @property
    def max_offset(self) -> int:
        return self.base + len(self.phys)

    @property
    def min_offset(self) -> int:
        return self.base


class LiteParent:
    """The lite topics of one LITE parent topic, and the order-keeping state of its feed."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.queues: dict[str, LiteQueue] = {}
        self.lock = threading.Lock()
        self.next_qoff: dict[int, int] = {}          # parent queue -> next queue offset not yet reported
        self.last_phys: dict[int, int] = {}          # parent queue -> CommitLog offset of its entry before that
        self.early: dict[int, dict[int, int]] = {}   # parent queue -> {queue offset: phys} reported ahead
        self.held: list[tuple[int, str, int]] = []   # heap of (phys, lite, store ts) waiting for their turn
        self.messages = 0                            # lite messages applied since start


class LiteIndex:
    """Every LITE parent's lite topics (thread-safe: fed by putting threads, read by POP threads)."""

    def __init__(self, store: "MessageStoreAPI", queue_count: Callable[[str], int]) -> None:
        """``store``: the message store (``get_max_offset`` / ``get_min_offset`` / ``get_messages`` of the
        parent's queues); ``queue_count(parent)``: how many queues the parent has."""
        self.store = store
        self.queue_count = queue_count
        self.parents: dict[str, LiteParent] = {}
        self._lock = threading.Lock()
        self.on_arrival: Optional[Callable[[str, str], None]] = None   # (parent, lite): new messages applied
        self.on_create: Optional[Callable[[str, str], None]] = None    # (parent, lite): a new lite topic
        self.lite_count = 0

    # ------------------------------------------------------------------ lookup
    @overload
    def parent(self, name: str, create: Literal[True]) -> LiteParent: ...

    @overload
    def parent(self, name: str, create: bool = False) -> Optional[LiteParent]: ...

    def parent(self, name: str, create: bool = False) -> Optional[LiteParent]:
        p = self.parents.get(name)
        if p is None and create:
            with self._lock:
                p = self.parents.get(name)
                if p is None:
                    p = LiteParent(name)
                    for q in range(max(1, self.queue_count(name))):
                        p.next_qoff[q] = max(0, self.store.get_max_offset(name, q))
                        p.last_phys[q] = -1
                    self.parents = {**self.parents, name: p}
        return p

    def queue(self, parent: str, lite: str) -> Optional[LiteQueue]:
        p = self.parents.get(parent)
        return p.queues.get(lite) if p is not None else None

    def exists(self, parent: str, lite: str) -> bool:
        q = self.queue(parent, lite)
        return q is not None and q.max_offset > 0

    def lite_topics(self, parent: str) -> list[str]:
        p = self.parents.get(parent)
        return list(p.queues) if p is not None else []

    def items(self) -> Iterator[tuple[str, str, LiteQueue]]:
        """(parent, lite, queue) of every lite topic (a snapshot per parent)."""
        for pname, p in list(self.parents.items()):
            for lite, q in list(p.queues.items()):
                yield pname, lite, q

    # ------------------------------------------------------------------ feed
    def on_dispatch(self, req: "DispatchRequest") -> None:
        """Store dispatch listener of a LITE parent (any putting thread)."""
        if req.sys_flag & 0xC in _PREPARED_OR_ROLLBACK:
            return                                   # no consume-queue entry: not part of the parent's order
        p = self.parent(req.topic, create=True)
        props = req.properties or ""
        lite = find_property(props, LITE_TOPIC_PROPERTY) if LITE_TOPIC_PROPERTY in props else None
        with p.lock:
            q, qoff, phys = req.queue_id, req.queue_offset, req.commitlog_offset
            nxt = p.next_qoff.get(q)
            if nxt is None:                          # a queue added to the parent since
                nxt = qoff
                p.last_phys[q] = -1
            elif qoff < nxt:
                return                               # indexed by a rebuild already
            if qoff == nxt:
                p.last_phys[q] = phys
                nxt += 1
                early = p.early.get(q)
                while early and nxt in early:
                    p.last_phys[q] = early.pop(nxt)
                    nxt += 1
                p.next_qoff[q] = nxt
            elif qoff > nxt:
                p.early.setdefault(q, {})[qoff] = phys
            if lite:
                heapq.heappush(p.held, (phys, lite, req.store_timestamp))
            applied = self._drain(p)
        self._announce(p.name, applied)

    def _drain(self, p: LiteParent) -> list[tuple[str, bool]]:
        """Apply the held messages no unreported entry can precede (caller holds ``p.lock``)."""
        if not p.held:
            return []
        limit = 1 << 62
        for q in range(max(1, self.queue_count(p.name), len(p.next_qoff))):
            nxt = p.next_qoff.get(q)
            if nxt is None:
                p.next_qoff[q] = nxt = max(0, self.store.get_max_offset(p.name, q))
                p.last_phys[q] = -1
            if self.store.get_max_offset(p.name, q) > nxt:     # written, not reported yet
                limit = min(limit, p.last_phys.get(q, -1) + 1)
        applied: list[tuple[str, bool]] = []
        while p.held and p.held[0][0] < limit:
            phys, lite, ts = heapq.heappop(p.held)
            applied.append((lite, self._append(p, lite, phys, ts)))
        return applied

    def _append(self, p: LiteParent, lite: str, phys: int, store_ts: int) -> bool:
        lq = p.queues.get(lite)
        created = lq is None
        if lq is None:
            lq = p.queues[lite] = LiteQueue()
            self.lite_count += 1
        lq.phys.append(phys)
        if store_ts > lq.last_store_ts:
            lq.last_store_ts = store_ts
        p.messages += 1
        return created

    def _announce(self, parent: str, applied: list[tuple[str, bool]]) -> None:
        for lite, created in applied:
            if created and self.on_create is not None:
                self.on_create(parent, lite)
        if self.on_arrival is not None:
            for lite in dict.fromkeys(lite for lite, _ in applied):
                try:
                    self.on_arrival(parent, lite)
                except Exception:
                    log.exception("lite arrival callback failed for %s", lmq_name(parent, lite))

    # ------------------------------------------------------------------ rebuild, retention, expiry
    def rebuild(self, parent: str, batch: int = 512) -> int:
        """Index the lite messages already stored in ``parent``'s queues (start-up, or a topic that became
        LITE); returns how many. Runs before the parent's listener is added, or under its lock."""
        p = self.parent(parent, create=True)
        found: list[tuple[int, str, int]] = []
        with p.lock:
            for q in range(max(1, self.queue_count(parent))):
                off = max(0, self.store.get_min_offset(parent, q))
                end = max(0, self.store.get_max_offset(parent, q))
                while off < end:
                    res = self.store.get_messages(parent, q, off, batch)
                    try:
                        if not res.buffers:
                            if res.next_begin_offset > off:
                                off = res.next_begin_offset
                                continue
                            break
                        for buf in res.buffers:
                            _, _, _, phys, sys_flag, store_ts, _, props_b = _cl.record_dispatch_fields(buf, 0)
                            if sys_flag & 0xC in _PREPARED_OR_ROLLBACK:
                                continue
                            props = props_b.decode("utf-8", errors="replace")
                            lite = find_property(props, LITE_TOPIC_PROPERTY) if LITE_TOPIC_PROPERTY in props \
                                else None
                            if lite:
                                found.append((phys, lite, store_ts))
                            p.last_phys[q] = phys
                    finally:
                        res.release()
                    off = res.next_begin_offset
                p.next_qoff[q] = end
            known = {(phys) for lq in p.queues.values() for phys in lq.phys}
            found.sort()
            for phys, lite, ts in found:
                if phys not in known:
                    self._append(p, lite, phys, ts)
        if found:
            log.info("lite index: %d messages in %d lite topics of %s", len(found), len(p.queues), parent)
        return len(found)

    def trim(self, commitlog_min: int) -> int:
        """Drop entries whose CommitLog offset is below ``commitlog_min`` (retention deleted them)."""
        dropped = 0
        for p in list(self.parents.values()):
            with p.lock:
                for lq in p.queues.values():
                    n = 0
                    while n < len(lq.phys) and lq.phys[n] < commitlog_min:
                        n += 1
                    if n:
                        del lq.phys[:n]
                        lq.base += n
                        dropped += n
        return dropped

    def delete(self, parent: str, lite: str) -> bool:
        """Forget a lite topic (expired); its next message starts it again at offset 0."""
        p = self.parents.get(parent)
        if p is None:
            return False
        with p.lock:
            gone = p.queues.pop(lite, None) is not None
        if gone:
            self.lite_count -= 1
        return gone

    def memory_estimate(self) -> int:
        """Bytes the index holds (objects, arrays, dict slots), for admin and benchmarks."""
        import sys
        total = 0
        for p in list(self.parents.values()):
            total += sys.getsizeof(p.queues)
            for lite, lq in list(p.queues.items()):
                total += sys.getsizeof(lite) + sys.getsizeof(lq) + sys.getsizeof(lq.phys)
        return total
