"""The slave's side of a transfer: append the master's bytes at their offset, then dispatch whole records.

:meth:`SlaveAppender.append` checks the offset (it must be this CommitLog's max offset, or a file boundary of an
empty one) and that the range ends inside the current file, then copies it into the mapped file as it is. The
master cuts transfers at ``haTransferBatchSize`` wherever that falls, so :meth:`SlaveAppender.dispatch` builds the
ConsumeQueue and index entries of the records that are complete (Java's ReputMessageService on a slave) and keeps
a partial last record for the next transfer. Every record is verified (magic, lengths, body CRC, its own physical
offset) and a BLANK end-of-file record must end exactly at this slave's file end: anything else means the master's
CommitLog is not this one (another ``mapedFileSizeCommitLog``, a damaged transfer), and
:class:`~rmqd.store.ha.protocol.HAProtocolError` names it after :meth:`SlaveAppender.rollback` has cut the
CommitLog back to the last dispatched record, so nothing already stored is touched.
"""
from __future__ import annotations

import logging
from typing import Any

from rmqd.cython_ext import message_codec as _codec
from rmqd.cython_ext import store_commitlog as _cl
from rmqd.store.ha.protocol import HAProtocolError
from rmqd.store.message import find_property
from rmqd.store.message_store import DispatchRequest

log = logging.getLogger(__name__)

BLANK_MAGIC = -875286124
MIN_RECORD = 91


class SlaveAppender:
    """Raw appends and their dispatch on a slave's store (one HA client thread calls it)."""

    def __init__(self, store: Any) -> None:
        self.store = store
        self.dispatched = store.commitlog_max_offset()     # recovery dispatched everything there is

    def reset(self) -> None:
        """Start from the store's max offset (after recovery, or a rollback)."""
        self.dispatched = self.store.commitlog_max_offset()

    # ------------------------------------------------------------------ append
    def append(self, offset: int, data: memoryview) -> None:
        """Copy ``data`` into the CommitLog at ``offset``; HAProtocolError when it does not belong there."""
        store = self.store
        cl = store.commitlog
        n = len(data)
        with store._put_lock:
            mf = cl.mfq.last()
            if mf is None:
                if offset % cl.file_size:
                    raise HAProtocolError(f"the master's first transfer starts at {offset}, not at a CommitLog file "
                                          f"boundary of this slave ({cl.file_size} bytes per file): the master's "
                                          "mapedFileSizeCommitLog differs")
                mf = cl.mfq.create_file(offset)
                cl.allocator.request(mf.end_offset)
                self.dispatched = offset
            else:
                mx = mf.file_from_offset + mf.wrote_pos
                if offset != mx:
                    raise HAProtocolError(f"master pushed offset {offset} not equal to the max offset of this slave "
                                          f"{mx}")
                if mf.wrote_pos >= mf.file_size:
                    nxt = mf.end_offset
                    mf = cl.mfq.create_file(nxt, cl.allocator.take(nxt))
                    cl.allocator.request(mf.end_offset)
            pos = offset - mf.file_from_offset
            if pos + n > mf.file_size:
                raise HAProtocolError(f"a transfer of {n} bytes at {offset} crosses the end of this slave's CommitLog "
                                      f"file at {mf.end_offset}: the master's mapedFileSizeCommitLog differs")
            mf.buf[pos:pos + n] = data
            mf.wrote_pos = pos + n

    # ------------------------------------------------------------------ dispatch
    def dispatch(self) -> int:
        """Dispatch every complete record appended since the last call; returns how many."""
        store = self.store
        cl = store.commitlog
        limit = cl.file_size - 8
        count = 0
        while True:
            mf = cl.mfq.find(self.dispatched)
            if mf is None:
                return count
            start = self.dispatched - mf.file_from_offset
            wrote = mf.wrote_pos
            if start >= wrote:
                return count
            end, code, recs = _cl.scan_records(mf.mm, start, wrote, True, limit, True)
            if recs:
                count += self._dispatch_records(mf, recs)
            self.dispatched = mf.file_from_offset + end
            if code == _cl.SCAN_BLANK:
                if end != mf.file_size:
                    raise HAProtocolError(f"the master's end-of-file record at {mf.file_from_offset + start} ends at "
                                          f"{self.dispatched}, not at this slave's file end {mf.end_offset}: the "
                                          "master's mapedFileSizeCommitLog differs")
                continue
            if code == _cl.SCAN_LIMIT:
                return count
            self._check_tail(mf, end, wrote)
            return count

    def _check_tail(self, mf: Any, pos: int, wrote: int) -> None:
        """The scan stopped before ``wrote``: a record not complete yet is fine, anything else is not."""
        at = mf.file_from_offset + pos
        if wrote - pos < 8:
            return                                   # not even a whole header yet
        total, magic = _cl.read_header(mf.mm, pos)
        if magic == _codec.MESSAGE_MAGIC_CODE and MIN_RECORD <= total <= mf.file_size - pos and pos + total > wrote:
            return                                   # the rest of this record comes with the next transfer
        if magic == BLANK_MAGIC:
            raise HAProtocolError(f"the master's end-of-file record at {at} is {total} bytes, past this slave's file "
                                  f"end {mf.end_offset}: the master's mapedFileSizeCommitLog differs")
        raise HAProtocolError(f"the master sent a damaged record at offset {at} (size {total}, magic {magic})")

    def _dispatch_records(self, mf: Any, recs: list) -> int:
        store = self.store
        base = mf.file_from_offset
        tags_code = store._tags_code
        listeners = store._listeners
        dispatched = []
        size_total = 0
        last_ts = 0
        with store._put_lock:
            for pos, size in recs:
                (total, qid, qoff, phys, sys_flag, store_ts, topic_b, props_b) = \
                    _cl.record_dispatch_fields(mf.mm, pos)
                if phys != base + pos:
                    raise HAProtocolError(f"the record at offset {base + pos} says it is at {phys}: the master's "
                                          "CommitLog layout differs from this slave's (mapedFileSizeCommitLog?)")
                topic = topic_b.decode("utf-8", errors="replace")
                props = props_b.decode("utf-8", errors="replace")
                req = DispatchRequest(topic, qid, phys, total, tags_code(topic, props, store_ts), store_ts, qoff,
                                      find_property(props, "KEYS"), find_property(props, "UNIQ_KEY"), sys_flag, props)
                store._dispatch(req)
                dispatched.append(req)
                size_total += total
                last_ts = store_ts
            if last_ts > store._last_store_ts:
                store._last_store_ts = last_ts
        with store._stats_lock:
            store._stats.put_message_times_total += len(dispatched)
            store._stats.put_message_size_total += size_total
        if listeners:
            for req in dispatched:
                for entry in list(listeners):
                    if type(entry) is tuple:
                        key, fn = entry
                        if (key != req.topic) if type(key) is str else ((req.topic, req.queue_id) not in key):
                            continue
                    else:
                        fn = entry
                    try:
                        fn(req)
                    except Exception:
                        log.exception("dispatch listener failed on the slave for %s", req.topic)
        return len(dispatched)

    # ------------------------------------------------------------------ rollback
    def rollback(self) -> int:
        """Cut the CommitLog back to the last dispatched record (after bad input); returns the new max offset."""
        store = self.store
        cl = store.commitlog
        keep = self.dispatched
        with store._put_lock:
            mf = cl.mfq.find(keep)
            if mf is None:
                last = cl.mfq.last()
                if last is not None and keep >= last.end_offset:
                    cl.mfq.truncate_from(keep)
                return cl.max_offset()
            pos = keep - mf.file_from_offset
            if mf.wrote_pos > pos:
                cleared = mf.wrote_pos
                mf.buf[pos:cleared] = bytes(cleared - pos)
                mf.wrote_pos = pos
                mf.flushed_pos = min(mf.flushed_pos, pos)
                log.warning("HA: cut this slave's CommitLog back from %d to %d (bytes not dispatched)",
                            mf.file_from_offset + cleared, keep)
            cl.mfq.truncate_from(mf.end_offset)
        cl.flushed_where = min(cl.flushed_where, keep)
        return cl.max_offset()
