"""Cut a running store's CommitLog back to an offset: a returning old master or a diverged slave drops the tail
its new master never had (5.x ``DefaultMessageStore.truncateDirtyFiles``), crash-safely.

Java resets only the in-memory positions of the file holding the cut and leaves the old bytes on disk, so a
crash brings the stale tail back as valid messages (apache/rocketmq#10666). Here the order is:

1. zero the containing file from the cut to its old write position (and any valid-looking bytes after it) and
   msync that range, so recovery finds the end of the CommitLog at the cut whatever happens next;
2. delete the later CommitLog files (recovery would also drop them: they follow an invalid record);
3. cut the consume queues (their entries past the cut, zeroed and msynced) and forget the put engine's cursors
   (next queue offsets are re-read from the consume queues: no queue offset is handed out twice, #7689);
4. lower the checkpoint to the cut.

Index files are left as they are: a key whose entry points past the cut reads back another record, which the
query path drops (``record_matches``), as it drops a hash collision; destroying index files under a running
broker would race its readers.

Every step can be repeated: a kill -9 between two of them and a second truncation (the handshake computes the same
point again) or plain recovery give the same store. The broker must be a slave with no HA client running
(nothing else appends).
"""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from rmqd.cython_ext import store_commitlog as _cl

if TYPE_CHECKING:
    from rmqd.store.layer import StoreChain

log = logging.getLogger(__name__)


def truncate_store(store: "StoreChain", offset: int) -> int:
    """Cut ``store`` (any layer; the local store at the bottom is cut) back to ``offset``, a record boundary;
    returns the new max offset."""
    local = store.message_store
    cl = local.commitlog
    with local._put_lock:
        old_max = cl.max_offset()
        if offset >= old_max:
            return old_max
        mf = cl.mfq.find(offset) if offset % cl.file_size else None
        if mf is not None:
            pos = offset - mf.file_from_offset
            old = mf.wrote_pos
            if old > pos:
                _cl.copy_in(mf.mm, pos, bytes(old - pos))
            cleared = max(old, _cl.zero_tail(mf.mm, max(pos, old), local.max_record_size + 65536))
            if cleared > pos:
                _cl.msync_range(mf.mm, pos, cleared)
            mf.wrote_pos = pos
            mf.flushed_pos = min(mf.flushed_pos, pos)
            cl.mfq.truncate_from(mf.end_offset)
        else:
            cl.mfq.truncate_from(offset)
        cl.flushed_where = min(cl.flushed_where, offset)
        for cq in local.consume_queues.queues():
            cq.truncate_dirty(offset)
        ck = local._checkpoint
        if ck is not None:
            ck.physic_offset = min(ck.physic_offset, offset)
            ck.logics_offset = min(ck.logics_offset, offset)
            ck.index_offset = min(ck.index_offset, offset)
            ck.flush()
        local.put_engine.reset()
        new_max = cl.max_offset()
    log.warning("truncated the CommitLog from %d to %d (the new master never had that tail)", old_max, new_max)
    return new_max
