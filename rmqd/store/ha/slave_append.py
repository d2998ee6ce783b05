"""The slave's side of a transfer: append the master's bytes at their offset, verify, then dispatch.

:meth:`SlaveAppender.append` checks the offset (it must be this CommitLog's max offset, or a file boundary of an
empty one) and that the range ends inside one of this slave's files, then writes it as it is
(:meth:`rmqd.store.commitlog.CommitLog.append_raw`). The master cuts transfers at ``haTransferBatchSize``
wherever that falls, so only the records that are complete are verified (magic, lengths, body CRC, in C) and then
dispatched to the consume queues, the index and the dispatch listeners (``PutEngine.dispatch_range``: Java's
ReputMessageService on a slave, with no per-message Python); a partial last record waits for the next transfer.
A BLANK end-of-file record must end exactly at this slave's file end. Anything else means the master's CommitLog
is not laid out as this one (another ``mapedFileSizeCommitLog``, a damaged transfer, a larger ``maxMessageSize``):
:class:`~rmqd.store.ha.protocol.HAProtocolError` names it, and :meth:`SlaveAppender.rollback` cuts the
CommitLog back to the last verified record, so nothing already stored and dispatched is touched.

One thread (the HA client's) calls it; the broker refuses every other put on a slave.
"""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from rmqd.cython_ext import message_codec as _codec
from rmqd.cython_ext import store_commitlog as _cl
from rmqd.cython_ext.ha_verify import IN_PADDING, VERIFY_BLANK, VERIFY_LIMIT, locate, verify_range
from rmqd.store.ha.protocol import HAProtocolError

if TYPE_CHECKING:
    from rmqd.store.layer import StoreChain
    from rmqd.store.mapped_file import MappedFile

log = logging.getLogger(__name__)

BLANK_MAGIC = -875286124
MIN_RECORD = 91


class SlaveAppender:
    """Raw appends, their verification and dispatch on a slave's store."""

    def __init__(self, store: "StoreChain") -> None:
        self.store = store.message_store                # the local store at the bottom of the layers
        self.checked = store.commitlog_max_offset()     # verified and dispatched up to here (recovery did the rest)

    def reset(self) -> None:
        """Start from the store's max offset (after recovery, or a rollback), or from its last file's end when
        that offset is inside the file's BLANK padding (the end-of-file record is verified; zeros follow)."""
        cl = self.store.commitlog
        self.checked = cl.max_offset()
        mf = cl.mfq.last()
        if mf is not None and 0 < mf.wrote_pos < mf.file_size and \
                locate(mf.mm, mf.wrote_pos, mf.wrote_pos, cl.file_size) == IN_PADDING:
            self.checked = mf.end_offset

    # ------------------------------------------------------------------ append
    def append(self, offset: int, data: memoryview) -> None:
        """Write ``data`` at ``offset``, then verify and dispatch the records it completes; HAProtocolError when
        it does not belong there (nothing written then) or is not a well-formed part of a CommitLog."""
        store = self.store
        cl = store.commitlog
        n = len(data)
        mf = cl.mfq.last()
        if mf is None:
            if offset % cl.file_size:
                raise HAProtocolError(f"the master's first transfer starts at {offset}, not at a CommitLog file "
                                      f"boundary of this slave ({cl.file_size} bytes per file): the master's "
                                      "mapedFileSizeCommitLog differs")
            self.checked = offset
        else:
            mx = mf.file_from_offset + mf.wrote_pos
            if offset != mx:
                raise HAProtocolError(f"master pushed offset {offset} not equal to the max offset of this slave {mx}")
        pos = offset % cl.file_size
        if pos + n > cl.file_size:
            raise HAProtocolError(f"a transfer of {n} bytes at {offset} crosses the end of this slave's CommitLog "
                                  f"file at {offset - pos + cl.file_size}: the master's mapedFileSizeCommitLog differs")
        if not store.put_engine.running:
            raise HAProtocolError("the message store is shut down")
        with store._put_lock:
            cl.append_raw(offset, data)
        self._verify_and_dispatch()

    def _verify_and_dispatch(self) -> None:
        start = self.checked
        end, records, nbytes = self._verify(start)
        if end <= start:
            return
        reached = self.store.put_engine.dispatch_range(start, end)
        if reached < end:
            self.checked = reached
            raise HAProtocolError(f"dispatch stopped at offset {reached} before {end}")
        self.checked = end
        store = self.store
        # a slave's puts are the records it receives (as Java's reput counts them)
        store.count_received(records, nbytes)

    def _verify(self, start: int) -> tuple[int, int, int]:
        """How far the CommitLog holds whole, well-formed records from ``start`` (BLANK markers included), and how
        many records (and bytes) that is; HAProtocolError for anything that is neither that nor a record still
        arriving."""
        cl = self.store.commitlog
        limit = self.store.max_record_size
        pos_off = start
        records = nbytes = 0
        while True:
            mf = cl.mfq.find(pos_off)
            if mf is None:
                return pos_off, records, nbytes
            begin = pos_off - mf.file_from_offset
            wrote = mf.wrote_pos
            if begin >= wrote:
                return pos_off, records, nbytes
            end, code, n, size = verify_range(mf.mm, begin, wrote, True, limit)
            records += n
            nbytes += size
            if code == VERIFY_BLANK:
                if end != mf.file_size:
                    raise HAProtocolError(f"the master's end-of-file record at {mf.file_from_offset + begin} does "
                                          f"not end at this slave's file end {mf.end_offset}: the master's "
                                          "mapedFileSizeCommitLog differs")
                pos_off = mf.end_offset
                continue
            pos_off = mf.file_from_offset + end
            if code != VERIFY_LIMIT:
                self._check_tail(mf, end, wrote, limit)
            return pos_off, records, nbytes

    @staticmethod
    def _check_tail(mf: "MappedFile", pos: int, wrote: int, limit: int) -> None:
        """The scan stopped before ``wrote``: a record not complete yet is fine, anything else is not."""
        at = mf.file_from_offset + pos
        if wrote - pos < 8:
            return                                   # not even a whole header yet
        total, magic = _cl.read_header(mf.mm, pos)
        if magic == _codec.MESSAGE_MAGIC_CODE and MIN_RECORD <= total <= limit and pos + total > wrote:
            if pos + total > mf.file_size:
                raise HAProtocolError(f"the record at {at} ({total} bytes) crosses this slave's file end "
                                      f"{mf.end_offset}: the master's mapedFileSizeCommitLog differs")
            return                                   # the rest of this record comes with the next transfer
        if magic == _codec.MESSAGE_MAGIC_CODE and total > limit:
            raise HAProtocolError(f"the record at {at} is {total} bytes, more than this slave takes ({limit}): "
                                  "its maxMessageSize is smaller than the master's")
        if magic == BLANK_MAGIC:
            raise HAProtocolError(f"the master's end-of-file record at {at} is {total} bytes, past this slave's file "
                                  f"end {mf.end_offset}: the master's mapedFileSizeCommitLog differs")
        raise HAProtocolError(f"the master sent a damaged record at offset {at} (size {total}, magic {magic})")

    # ------------------------------------------------------------------ rollback
    def rollback(self) -> int:
        """Cut the CommitLog back to the last verified record (after bad input); returns the new max offset."""
        store = self.store
        cl = store.commitlog
        keep = self.checked
        with store._put_lock:
            mf = cl.mfq.find(keep)
            if mf is None:
                cl.mfq.truncate_from(keep)
            else:
                pos = keep - mf.file_from_offset
                if mf.wrote_pos > pos:
                    cleared = mf.wrote_pos
                    _cl.copy_in(mf.mm, pos, bytes(cleared - pos))
                    mf.wrote_pos = pos
                    mf.flushed_pos = min(mf.flushed_pos, pos)
                    log.warning("HA: cut this slave's CommitLog back from %d to %d (bytes not verified)",
                                mf.file_from_offset + cleared, keep)
                cl.mfq.truncate_from(mf.end_offset)
            cl.flushed_where = min(cl.flushed_where, keep)
            store.put_engine.reset()
        return cl.max_offset()
