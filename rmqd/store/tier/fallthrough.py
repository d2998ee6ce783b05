"""Where a read goes, local store or tier: every rule in one place (Java ``TieredMessageStore``).

``tieredStorageLevel`` decides pulls: DISABLE never reads the tier; NOT_IN_DISK reads it for
offsets the local store no longer has (below its min offset, or whose CommitLog file is gone);
NOT_IN_MEM also for cold offsets (further behind the CommitLog head than
``accessMessageInMemoryMaxRatio`` % of RAM); FORCE for every offset the tier holds. With any level
but DISABLE:

* GET_MIN_OFFSET = min(local, tier); GET_EARLIEST_MSG_STORETIME = the earlier of the two.
* SEARCH_OFFSET_BY_TIMESTAMP before the local store's earliest message is answered from the tier
  (4.9 semantics: the exact time, else the nearer neighbour; the local min offset competes).
* QUERY_MESSAGE: local hits first; when fewer than maxNum and ``begin`` is before the local
  CommitLog's earliest message, the tier's index is searched over [begin, localEarliest] (hits
  already found locally are skipped by their CommitLog offset, so none is returned twice) and each
  hit is checked against its record (topic, key, store time).
* VIEW_MESSAGE_BY_ID below the local CommitLog's min offset finds the record in the tier by its
  original CommitLog offset (the tier keeps records byte for byte, so offset msgIds stay valid).
"""
from __future__ import annotations

import logging
import struct
from typing import TYPE_CHECKING, AbstractSet, Callable, Optional

from rmqd.store.message import record_carries_key
from rmqd.store.results import GetMessageResult, GetMessageStatus as S, collect_records
from rmqd.store.tier.config import TieredStorageLevel as Level
from rmqd.store.tier.queue import PHYS_POS, TieredQueue, record_store_time

_I64 = struct.Struct(">q")

if TYPE_CHECKING:
    from rmqd.store.api import LocalStoreAPI, MessageFilter
    from rmqd.store.tier.store import TieredStore

log = logging.getLogger(__name__)


def search_offset_by_time(lo: int, hi: int, ts: int, time_of: Callable[[int], int]) -> tuple[int, int]:
    """4.9 SEARCH_OFFSET_BY_TIMESTAMP over offsets [lo, hi]: ``(offset, its time)`` of the exact
    hit (the first of equals), else of the nearer neighbour (ties: the earlier); (-1, -1) if none."""
    left = right = -1
    lt = rt = -1
    while lo <= hi:
        mid = (lo + hi) // 2
        v = time_of(mid)
        if v < 0:
            lo = mid + 1
            continue
        if v == ts:
            while mid - 1 >= 0 and time_of(mid - 1) == ts:
                mid -= 1
            return mid, ts
        if v < ts:
            left, lt = mid, v
            lo = mid + 1
        else:
            right, rt = mid, v
            hi = mid - 1
    if left == -1:
        return right, rt
    if right == -1:
        return left, lt
    return (right, rt) if abs(ts - lt) > abs(ts - rt) else (left, lt)


class TierReads:
    def __init__(self, tier: "TieredStore", local: "LocalStoreAPI") -> None:
        self.tier = tier
        self.local_store = local
        self.level = tier.tier_config.storage_level

    def _tq(self, topic: str, qid: int) -> Optional[TieredQueue]:
        if self.level == Level.DISABLE:
            return None
        tq = self.tier.queues.get((topic, qid))
        return tq if tq is not None and not tq.is_empty() else None

    # ---- pulls ----------------------------------------------------------------------------------
    def local_has(self, topic: str, qid: int, offset: int) -> bool:
        q = self.local_store.local_queue(topic, qid)
        return q is not None and q.has(offset)

    def serves_pull(self, topic: str, qid: int, offset: int) -> bool:
        tq = self._tq(topic, qid)
        if tq is None or not (tq.min_offset <= offset < tq.max_offset):
            return False
        if self.level == Level.FORCE or not self.local_has(topic, qid, offset):
            return True
        return self.level == Level.NOT_IN_MEM and self.local_store.check_in_disk_by_consume_offset(topic, qid, offset)

    def min_offset(self, topic: str, qid: int, local_min: int) -> int:
        tq = self._tq(topic, qid)
        if tq is None:
            return local_min
        if self.local_store.local_queue(topic, qid) is None:
            return tq.min_offset
        return min(local_min, tq.min_offset)

    def get_messages(self, topic: str, qid: int, offset: int, max_nums: int, max_bytes: int,
                     message_filter: Optional["MessageFilter"],
                     local: Callable[[], GetMessageResult]) -> GetMessageResult:
        tq = self._tq(topic, qid)
        if tq is None or not self.serves_pull(topic, qid, offset):
            res = local()
            if tq is not None:
                has_local = self.local_store.local_queue(topic, qid) is not None
                mn = min(res.min_offset, tq.min_offset) if has_local else tq.min_offset
                res.min_offset = mn
                if res.status is S.OFFSET_TOO_SMALL or (res.status is S.NO_MATCHED_LOGIC_QUEUE and offset < mn):
                    if offset < mn:
                        res.status, res.next_begin_offset = S.OFFSET_TOO_SMALL, mn
                    elif offset < tq.max_offset:      # the tier has it after all (level rules said local)
                        return self._from_tier(tq, offset, max_nums, max_bytes, message_filter, res.max_offset)
            return res
        q = self.local_store.local_queue(topic, qid)
        mx = q.max_offset if q is not None else tq.max_offset
        return self._from_tier(tq, offset, max_nums, max_bytes, message_filter, max(mx, tq.max_offset))

    def _from_tier(self, tq: TieredQueue, offset: int, max_nums: int, max_bytes: int,
                   message_filter: Optional["MessageFilter"], max_offset: int) -> GetMessageResult:
        q = self.local_store.local_queue(tq.topic, tq.queue_id)
        local_min = q.min_offset if q is not None else tq.min_offset
        res = GetMessageResult(S.NO_MATCHED_MESSAGE, offset, min(local_min, tq.min_offset), max_offset)
        got = tq.read_messages(offset, max_nums, max_bytes)
        collect_records(res, got, message_filter)
        if not got:
            res.status = S.OFFSET_FOUND_NULL
        return res

    # ---- offsets and times ---------------------------------------------------------------------
    def _local_earliest(self, topic: str, qid: int) -> int:
        q = self.local_store.local_queue(topic, qid)
        return q.earliest_time() if q is not None else -1

    def earliest_time(self, topic: str, qid: int, local_time: int) -> int:
        tq = self._tq(topic, qid)
        t = tq.store_time(tq.min_offset) if tq is not None else -1
        if t < 0:
            return local_time
        return t if local_time < 0 else min(t, local_time)

    def offset_by_time(self, topic: str, qid: int, ts: int, local: Callable[[int], int]) -> int:
        tq = self._tq(topic, qid)
        if tq is None:
            return local(ts)
        q = self.local_store.local_queue(topic, qid)
        local_min = q.min_offset if q is not None else -1
        local_earliest = self._local_earliest(topic, qid)
        if self.level != Level.FORCE and local_earliest >= 0 and ts >= local_earliest:
            return local(ts)
        lo = tq.min_offset
        hi = tq.max_offset - 1 if local_min < 0 else min(tq.max_offset, local_min) - 1
        for seg in tq.consume_queue.segments:          # narrow to the segment(s) around ts: fewer reads
            if 0 <= seg.max_ts < ts and seg.end // 20 - 1 < hi:
                lo = max(lo, seg.end // 20 - 1)
            elif seg.min_ts > ts and seg.base // 20 > lo:
                hi = min(hi, seg.base // 20)
                break
        off, t = search_offset_by_time(lo, hi, ts, tq.store_time)
        if off < 0:
            return local(ts)
        if t < ts and local_earliest >= 0 and abs(local_earliest - ts) < abs(ts - t):
            return local_min                     # the local min is nearer than the tier's newest
        return off

    # ---- queries -----------------------------------------------------------------------------------
    def local_earliest_time(self) -> int:
        """Store time of the oldest record in the local CommitLog, -1 when it is empty."""
        rec = self.local_store.commitlog.read_record(self.local_store.commitlog.min_offset())
        if rec is None:
            return -1
        t = record_store_time(rec)
        rec.release()
        return t

    def query(self, topic: str, key: str, max_num: int, begin: int, end: int, found: list[bytes]) -> list[bytes]:
        """Records from the tier to add to ``found`` (the local hits), per the module docstring."""
        if self.level == Level.DISABLE or len(found) >= max_num or self.tier.index is None:
            return []
        earliest = self.local_earliest_time()
        if earliest >= 0:
            if begin > earliest:
                return []
            end = min(end, earliest)          # the boundary millisecond: local hits are skipped below
        have = {_phys_of(r) for r in found}
        return self.tier_query(topic, key, max_num - len(found), begin, end, have)

    def tier_query(self, topic: str, key: str, max_num: int, begin: int, end: int,
                   skip_phys: AbstractSet[int] = frozenset()) -> list[bytes]:
        """Up to ``max_num`` records of ``topic`` carrying ``key`` stored in [begin, end], newest
        index file first, stopping as soon as there are enough (``skip_phys``: original CommitLog
        offsets already found locally)."""
        out: list[bytes] = []
        seen: set[tuple[int, int, int]] = set()
        md = self.tier.metadata
        for _ts, items in self.tier.started_index().query(topic, key, begin, end, max_num + 16):
            todo: list[tuple[TieredQueue, int, int]] = []
            for topic_id, qid, offset, size, _diff in items:
                if (topic_id, qid, offset) in seen:
                    continue
                seen.add((topic_id, qid, offset))
                t = md.topic_of(topic_id)
                tq = self.tier.queues.get((t, qid)) if t is not None else None
                if tq is not None:
                    todo.append((tq, offset, size))
            records = _read_coalesced(todo)
            for tq, offset, size in todo:          # newest first, as the index gave them
                rec = records.get((tq.key, offset))
                try:
                    if rec is None or len(rec) != size or not record_carries_key(rec, topic, key):
                        continue
                except ValueError as exc:
                    log.warning("tier query: undecodable record %s@%d: %s", tq.key, offset, exc)
                    continue
                if not begin <= record_store_time(rec) <= end or _phys_of(rec) in skip_phys:
                    continue
                out.append(rec)
                if len(out) >= max_num:
                    return out
        return out

    def read_message(self, phys: int) -> Optional[bytes]:
        """VIEW_MESSAGE_BY_ID for an offset below the local CommitLog."""
        if self.level == Level.DISABLE or phys >= self.local_store.commitlog.min_offset():
            return None
        for tq in list(self.tier.queues.values()):
            rec = tq.find_by_commitlog_offset(phys)
            if rec is not None:
                return rec
        return None


COALESCE_GAP = 256 * 1024           # read neighbours together when less than this lies between them
COALESCE_MAX = 4 * 1024 * 1024


def _phys_of(record: bytes) -> int:
    """The original CommitLog offset a record carries (its PHYSICALOFFSET field)."""
    phys: int = _I64.unpack_from(record, PHYS_POS)[0]
    return phys


def _read_coalesced(todo: list[tuple[TieredQueue, int, int]]) -> dict[tuple[str, int], bytes]:
    """Records ``(queue, flat offset, size)`` read with one range read per run of neighbours (an
    object store answers one 1 MB read about as fast as one 1 KB read)."""
    out: dict[tuple[str, int], bytes] = {}
    by_queue: dict[str, tuple[TieredQueue, list[tuple[int, int]]]] = {}
    for tq, offset, size in todo:
        by_queue.setdefault(tq.key, (tq, []))[1].append((offset, size))
    for tq, spans in by_queue.values():
        spans.sort()
        i = 0
        while i < len(spans):
            lo, hi = spans[i][0], spans[i][0] + spans[i][1]
            j = i + 1
            while j < len(spans) and spans[j][0] - hi <= COALESCE_GAP and \
                    spans[j][0] + spans[j][1] - lo <= COALESCE_MAX:
                hi = max(hi, spans[j][0] + spans[j][1])
                j += 1
            data = tq.commitlog.read(lo, hi - lo)
            for offset, size in spans[i:j]:
                out[(tq.key, offset)] = data[offset - lo:offset - lo + size]
            i = j
    return out
