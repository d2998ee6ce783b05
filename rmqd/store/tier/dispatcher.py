"""The copier (Java ``MessageStoreDispatcherImpl``): follows each queue's local ConsumeQueue into
the tier.

Per queue, from the tier's next offset, records are read from the local CommitLog and appended as
one group commit (``tieredStoreGroupCommitCount`` records / ``tieredStoreGroupCommitSize`` bytes)
to the flat CommitLog, then their ConsumeQueue units, then their keys go into the index. A queue
whose oldest pending record is younger than ``tieredStoreGroupCommitTimeout`` and has fewer than a
group's worth pending waits (as in Java), unless forced (retention, ``rmqd admin commitTier``).
At the end of a round the new state of every touched queue and the writable index file's item
count are committed together (:class:`rmqd.store.tier.metadata.TierMetadata`). A queue starts at
the local min offset, so everything still on disk reaches the tier.
"""
from __future__ import annotations

import logging
import threading
import time
from typing import TYPE_CHECKING, Optional

from rmqd.cython_ext import tier_index as _ix
from rmqd.store.results import GetMessageStatus
from rmqd.store.tier.index.layout import java_hashset_order
from rmqd.store.tier.queue import BLANK_SIZE

if TYPE_CHECKING:
    from rmqd.store.api import LocalStoreAPI
    from rmqd.store.local_queue import LocalQueue
    from rmqd.store.tier.index.store_file import IndexMessage
    from rmqd.store.tier.metadata import QueueDoc
    from rmqd.store.tier.queue import TieredQueue
    from rmqd.store.tier.store import TieredStore

log = logging.getLogger(__name__)

MAX_GROUPS_PER_QUEUE_PER_ROUND = 8      # fairness between queues within one round
FAST_GROUP_MAX = 1024                   # records per group commit of the fast path
SLICE = 128                             # records per C gather and scan: each holds the GIL ~0.25 ms at most
YIELD_S = 50e-6                         # a real sleep: a thread waiting for the GIL (the event loop) takes it


def yield_gil() -> None:
    """Hand the GIL to a thread waiting for it. ``time.sleep(0)`` is not enough: it returns
    before the waiting thread wakes, the copier takes the GIL again and the waiter waits a whole
    switch interval (5 ms) more."""
    time.sleep(YIELD_S)


class TierDispatcher:
    def __init__(self, tier: "TieredStore", local: "LocalStoreAPI") -> None:
        self.tier = tier
        self.local_store = local
        self.lock = threading.Lock()
        self._last_expire = 0.0
        self.copied_total = 0
        self.backlog = False        # the last round left records behind (a queue reached its cap)

    def run_once(self, force: bool = False) -> int:
        """One round over every queue; returns how many records were copied."""
        tier = self.tier
        cfg = tier.tier_config
        index = tier.started_index()
        with self.lock:
            now = time.time()
            if now - self._last_expire >= cfg.delete_file_interval_ms / 1000:
                self._last_expire = now
                expired = self._expire(now)
                if expired:
                    tier.metadata.commit(expired, {})
                    tier.mark_committed()
            try:
                copied, touched = self._round(force)
                entries = index.checkpoint()
                if touched or entries:
                    index.flush()
                    tier.step("dispatch.metadata")
                    tier.metadata.commit(touched, entries)
                    index.committed(entries)
                    tier.mark_committed()
            except BaseException:
                tier.rollback_uncommitted()       # back to the committed state; the next round redoes it
                raise
            self.copied_total += copied
            return copied

    def _round(self, force: bool) -> tuple[int, dict[str, "QueueDoc"]]:
        tier = self.tier
        self.backlog = False
        copied = 0
        touched: dict[str, "QueueDoc"] = {}
        tier.started_index().maybe_roll()
        for cq in self.local_store.local_queues():
            topic, qid = cq.topic, cq.queue_id
            if not tier.eligible(topic):
                continue
            tq = tier.created_queue(topic, qid, init_offset=cq.min_offset)
            try:
                n = self._copy_queue(tq, cq, force)
            except Exception:
                log.exception("tier: copying %s-%d failed at offset %d", topic, qid, tq.max_offset)
                raise
            if n or tq.key not in tier.metadata.queues:
                copied += n
                touched[tq.key] = tq.to_json()
        return copied, touched

    def _copy_group_fast(self, tq: "TieredQueue", cq: "LocalQueue", nxt: int, entries: list[tuple[int, int, int]],
                         topic_id: int) -> int:
        """One group commit in C when its records are in memory (the usual case: the copier
        follows the head): memcpy gathers and scans for times and keys, in slices of
        :data:`SLICE` records with the GIL handed over in between. -1 when it cannot."""
        tier = self.tier
        cfg = tier.tier_config
        count = min(len(entries), FAST_GROUP_MAX)
        base = tq.commitlog.commit_offset
        parts: list[bytes] = []
        msgs: list["IndexMessage"] = []
        n = size = 0
        min_ts = max_ts = first = last = -1
        while n < count and size < cfg.group_commit_size:
            k = min(SLICE, count - n)
            got = cq.read_resident(nxt + n, k, cfg.group_commit_size - size)
            if got is None or got[0] is not GetMessageStatus.FOUND or got[2] <= 0:
                break
            body = got[3]
            found, lo, hi, f, la = _ix.index_batch(body, tq.topic, topic_id, tq.queue_id, base + size,
                                                   java_hashset_order, cfg.message_index_enable)
            msgs += found
            min_ts = lo if min_ts < 0 or 0 <= lo < min_ts else min_ts
            max_ts = max(max_ts, hi)
            first = f if first < 0 else first
            last = la
            parts.append(body)
            n += got[2]
            size += len(body)
            if got[2] < k:
                break                               # the group's byte budget is reached
            if n < count:
                yield_gil()
        if n == 0:
            return -1
        body = parts[0] if len(parts) == 1 else b"".join(parts)
        tier.step("dispatch.commitlog")
        tq.append_raw(body, _ix.cq_units(entries, n, base), min_ts, max_ts, first, last)
        if cfg.message_index_enable:
            tier.step("dispatch.index")
            if msgs:
                tier.started_index().put(msgs)
        return n

    def _copy_group(self, tq: "TieredQueue", nxt: int, entries: list[tuple[int, int, int]], topic_id: int) -> int:
        """One group commit record by record (blank entries, records not in memory)."""
        tier = self.tier
        cfg = tier.tier_config
        local = self.local_store
        # (record or None for a blank, tagsCode, storeTime, CommitLog offset, KEYS, UNIQ_KEY)
        batch: list[tuple[Optional[bytes], int, int, int, Optional[str], Optional[str]]] = []
        size = 0
        for phys, sz, tags in entries:
            if sz == BLANK_SIZE:
                batch.append((None, 0, 0, -1, None, None))
                continue
            if batch and size + sz > cfg.group_commit_size:
                break
            view = local.commitlog.get(phys, sz)
            if view is None:
                log.warning("tier: %s-%d offset %d: record at %d is not in the local CommitLog",
                            tq.topic, tq.queue_id, nxt + len(batch), phys)
                break
            rec = bytes(view)
            view.release()
            ts, keys, uniq = _ix.record_index_fields(rec)
            batch.append((rec, tags, ts, phys, keys, uniq))
            size += sz
            if len(batch) % SLICE == 0:
                yield_gil()
        if not batch:
            return 0
        tier.step("dispatch.commitlog")
        positions = tq.append([b[:4] for b in batch])
        if cfg.message_index_enable:
            msgs: list["IndexMessage"] = []
            for (record, _tags, ts, _phys, keys, uniq), pos in zip(batch, positions):
                if record is None or pos is None or (not keys and not uniq):
                    continue
                hashes = _ix.message_key_hashes(tq.topic, keys, uniq, java_hashset_order)   # = entries_of_message
                if hashes:
                    msgs.append((hashes, topic_id, tq.queue_id, pos, len(record), ts))
            tier.step("dispatch.index")
            if msgs:
                tier.started_index().put(msgs)
        return len(batch)

    def _expire(self, now: float) -> dict[str, "QueueDoc"]:
        limit = int((now - self.tier.tier_config.file_reserved_hours * 3600) * 1000)
        out: dict[str, "QueueDoc"] = {}
        for tq in list(self.tier.queues.values()):
            if tq.delete_expired(limit):
                log.info("tier: expired segments of %s-%d, min offset now %d", tq.topic, tq.queue_id, tq.min_offset)
                out[tq.key] = tq.to_json()
        return out

    def _copy_queue(self, tq: "TieredQueue", cq: "LocalQueue", force: bool) -> int:
        tier = self.tier
        cfg = tier.tier_config
        local = self.local_store
        nxt = tq.max_offset
        if nxt < cq.min_offset:
            log.error("tier: %s-%d lost offsets %d..%d locally before they were copied; the tier restarts "
                      "at %d", tq.topic, tq.queue_id, nxt, cq.min_offset - 1, cq.min_offset)
            tq.destroy()
            tq.init(cq.min_offset)
            nxt = cq.min_offset
        if nxt > cq.max_offset:
            return 0
        total = 0
        topic_id = tier.metadata.topic_id(tq.topic)
        for group in range(MAX_GROUPS_PER_QUEUE_PER_ROUND):
            pending = cq.max_offset - nxt
            if pending <= 0:
                break
            entries = cq.iter_from(nxt, min(cfg.group_commit_count, FAST_GROUP_MAX) * 20)
            if not entries:
                break
            if group == 0 and not force and pending < cfg.group_commit_count:
                e = entries[0]
                ts = local.pickup_store_timestamp(e[0], e[1]) if e[1] != BLANK_SIZE else 0
                if ts > 0 and ts + cfg.group_commit_timeout_ms > local.clock():
                    break
            n = self._copy_group_fast(tq, cq, nxt, entries, topic_id)
            if n < 0:
                n = self._copy_group(tq, nxt, entries, topic_id)
            if n <= 0:
                break
            if cfg.message_index_enable:
                tq.mark_indexed(nxt, nxt + n)
            nxt += n
            total += n
            yield_gil()
        else:
            if cq.max_offset > nxt:
                self.backlog = True                 # stopped by the round's cap, not by the queue's end
        return total
