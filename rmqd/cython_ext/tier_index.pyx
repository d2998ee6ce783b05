# cython: language_level=3
"""Hot paths of the tiered store's random index (layouts in :mod:`rmqd.store.tier.index.layout`).

* :func:`put_batch` — Java ``IndexStoreFile.putKey`` for many messages on the mapped writable file:
  item, slot head, header (magic, end time, used slots, item count), in that order per key.
* :func:`compact` — the slot-grouped compacted form, written into a mapped scratch file, GIL free
  (whole, or in resumable pieces of slots).
* :func:`query_chain` — walk one slot's chain of a writable file.
* :func:`filter_run` — the items of one compacted slot run matching a hash and a time window.

Multi-byte fields are big-endian. Pure Python equivalents (the reference the tests compare against
byte for byte) live in the layout module.
"""
from libc.stdint cimport int32_t, int64_t, uint8_t, uint32_t, uint64_t
from libc.stdlib cimport free, malloc
from libc.string cimport memcmp, memcpy
from rmqd.cython_ext.byteorder cimport rd32, rd64, wr32, wr64

DEF HEADER = 28
DEF SLOT = 8
DEF ITEM = 32
DEF CITEM = 28
DEF BEGIN_MAGIC = -1127939447        # 0xCCDDEEFF ^ 1880681590 as a Java int
DEF END_MAGIC = -1127939451          # 0xCCDDEEFF ^ 1880681594


cdef inline int64_t slot_of(int32_t h, int64_t slots) noexcept nogil:
    if h < 0:
        return (<int64_t>(h & 0x7FFFFFFF)) % slots
    return (<int64_t>h) % slots


cdef inline int32_t time_diff(int64_t ts, int64_t begin) noexcept nogil:
    cdef int64_t d = ts - begin
    cdef int64_t q = d / 1000          # C division truncates toward zero, as Java's
    return <int32_t>q


def put_batch(uint8_t[::1] buf not None, int64_t slots, int64_t max_items, int64_t begin_ts, list messages):
    """Put messages into a writable file; each message is ``(hashes, topicId, queueId, offset,
    size, storeTime)`` with ``hashes`` a tuple/list of its keys' hashes in put order. Returns how
    many messages were put: the first one whose keys would reach ``max_items`` stops the batch
    (the file is then full, Java's FILE_FULL/SEALED). The writes (first touches of a sparse
    file's pages: page faults) run without the GIL."""
    cdef uint8_t* base = &buf[0]
    if buf.shape[0] < HEADER + slots * SLOT + max_items * ITEM:
        raise ValueError("index buffer smaller than its layout")
    cdef int32_t count = rd32(base + 24)
    cdef Py_ssize_t put = 0, nkeys = 0, k = 0, i, j
    cdef int64_t fits = count
    cdef object msg, hashes
    for msg in messages:                      # how many fit, and how many keys they have
        hashes = msg[0]
        if len(hashes) and fits + len(hashes) >= max_items:
            break
        fits += len(hashes)
        nkeys += len(hashes)
        put += 1
    if nkeys == 0:
        return put
    cdef int32_t* hs = <int32_t*>malloc(nkeys * sizeof(int32_t))
    cdef int64_t* meta = <int64_t*>malloc(nkeys * 5 * sizeof(int64_t))   # topicId, queueId, offset, size, ts
    if hs == NULL or meta == NULL:
        free(hs)
        free(meta)
        raise MemoryError()
    try:
        for i in range(put):
            hashes, topic_id, queue_id, offset, size, ts = messages[i]
            for hobj in hashes:
                hs[k] = <int32_t>hobj
                meta[k * 5] = <int32_t>topic_id
                meta[k * 5 + 1] = <int32_t>queue_id
                meta[k * 5 + 2] = <int64_t>offset
                meta[k * 5 + 3] = <int32_t>size
                meta[k * 5 + 4] = <int64_t>ts
                k += 1
        with nogil:
            _put_keys(base, slots, max_items, begin_ts, hs, meta, nkeys)
    finally:
        free(hs)
        free(meta)
    return put


cdef void _put_keys(uint8_t* base, int64_t slots, int64_t max_items, int64_t begin_ts, const int32_t* hs,
                    const int64_t* meta, Py_ssize_t nkeys) noexcept nogil:
    """Java ``putKey`` for each key in order: item, slot head, header."""
    cdef int32_t count = rd32(base + 24)
    cdef int32_t used = rd32(base + 20)
    cdef int64_t end_ts = rd64(base + 12)
    cdef int32_t h, old
    cdef int64_t ts
    cdef uint8_t* sp
    cdef uint8_t* ip
    cdef Py_ssize_t k
    for k in range(nkeys):
        h = hs[k]
        ts = meta[k * 5 + 4]
        sp = base + HEADER + slot_of(h, slots) * SLOT
        old = rd32(sp)
        if old < 0:
            old = 0
        count += 1
        ip = base + HEADER + slots * SLOT + <int64_t>count * ITEM
        wr32(ip, h)
        wr32(ip + 4, <int32_t>meta[k * 5])
        wr32(ip + 8, <int32_t>meta[k * 5 + 1])
        wr64(ip + 12, meta[k * 5 + 2])
        wr32(ip + 20, <int32_t>meta[k * 5 + 3])
        wr32(ip + 24, time_diff(ts, begin_ts))
        wr32(ip + 28, old)
        wr32(sp, count)
        if old <= 0:
            used += 1
        if end_ts < ts:
            end_ts = ts
        wr32(base, END_MAGIC if max_items == <int64_t>count + 1 else BEGIN_MAGIC)
        wr64(base + 4, begin_ts)
        wr64(base + 12, end_ts)
        wr32(base + 20, used)
        wr32(base + 24, count)


def init_header(uint8_t[::1] buf not None, int64_t begin_ts, int64_t max_items) -> None:
    """The header of a fresh writable file (Java: end time 0, no slots, no items)."""
    if buf.shape[0] < HEADER:
        raise ValueError("index buffer smaller than its header")
    cdef uint8_t* base = &buf[0]
    wr32(base, END_MAGIC if max_items == 1 else BEGIN_MAGIC)
    wr64(base + 4, begin_ts)
    wr64(base + 12, 0)
    wr32(base + 20, 0)
    wr32(base + 24, 0)


def compact(const uint8_t[::1] src not None, uint8_t[::1] dst not None, int64_t slots, int64_t slot_lo=0,
            int64_t slot_hi=-1, int64_t wpos=-1) -> int:
    """Write the compacted form of writable file ``src`` into ``dst`` (exactly
    ``28 + slots*8 + 28*items`` bytes); returns the write position reached. Runs without the GIL.

    It can run in pieces: slots [``slot_lo``, ``slot_hi``) starting at write position ``wpos``
    (-1: after the slot table), the next piece continuing at the returned position. The header
    is written by the piece that reaches the last slot, so a partial result never has the
    compacted magic.

    Both buffers are held (exported) for the whole call, so neither mapping can be closed under
    it; ``src`` must hold the header, the slot table and every item its header counts, and a
    chain link past the item count ends the chain (a damaged file cannot make it read outside)."""
    if slots <= 0 or src.shape[0] < HEADER:
        raise ValueError("index buffer smaller than its header")
    cdef const uint8_t* s = &src[0]
    cdef uint8_t* d = &dst[0]
    cdef int32_t items = rd32(s + 24)
    if items < 0 or src.shape[0] < HEADER + slots * SLOT + (<int64_t>items + 1) * ITEM:
        raise ValueError("index buffer smaller than its layout")
    cdef int64_t end = HEADER + slots * SLOT + <int64_t>items * CITEM
    if dst.shape[0] < end:
        raise ValueError("compaction target too small")
    if slot_hi < 0 or slot_hi > slots:
        slot_hi = slots
    if wpos < 0:
        wpos = HEADER + slots * SLOT
    if slot_lo < 0 or slot_lo > slot_hi or wpos < HEADER + slots * SLOT or wpos > end:
        raise ValueError("compaction piece out of range")
    cdef int64_t i, begin
    cdef int32_t cur
    cdef const uint8_t* ip
    with nogil:
        for i in range(slot_lo, slot_hi):
            cur = rd32(s + HEADER + i * SLOT)
            begin = wpos
            while cur > 0 and cur <= items and wpos < end:
                ip = s + HEADER + slots * SLOT + <int64_t>cur * ITEM
                memcpy(d + wpos, ip, CITEM)
                cur = rd32(ip + CITEM)
                wpos += CITEM
            wr32(d + HEADER + i * SLOT, <int32_t>begin)
            wr32(d + HEADER + i * SLOT + 4, <int32_t>(wpos - begin))
        if slot_hi == slots:
            wr32(d, END_MAGIC)
            memcpy(d + 4, s + 4, 24)
    return wpos


def query_chain(const uint8_t[::1] buf not None, int64_t slots, int32_t h, int64_t t_lo, int64_t t_hi,
                Py_ssize_t max_count, Py_ssize_t max_hops=-1):
    """Items of a writable file's chain for hash ``h`` whose claimed time is in [t_lo, t_hi],
    newest first: ``[(topicId, queueId, offset, size, timeDiff)]``, at most ``max_count``.
    Returns ``(items, hops)``; ``max_hops`` -1 walks the whole chain (bounded by the item count)."""
    if slots <= 0 or buf.shape[0] < HEADER + slots * SLOT:
        raise ValueError("index buffer smaller than its slot table")
    cdef const uint8_t* base = &buf[0]
    cdef int32_t count = rd32(base + 24)
    cdef int64_t fit = (buf.shape[0] - HEADER - slots * SLOT) // ITEM - 1    # the last whole item
    if count > fit:
        count = <int32_t>fit if fit > 0 else 0
    cdef int64_t begin_ts = rd64(base + 4)
    cdef int32_t cur = rd32(base + HEADER + slot_of(h, slots) * SLOT)
    cdef Py_ssize_t hops = 0
    cdef Py_ssize_t limit = count if max_hops < 0 else max_hops
    cdef const uint8_t* ip
    cdef int64_t t
    out = []
    while cur > 0 and cur <= count and hops < limit and len(out) < max_count:
        ip = base + HEADER + slots * SLOT + <int64_t>cur * ITEM
        hops += 1
        if rd32(ip) == h:
            t = begin_ts + <int64_t>rd32(ip + 24) * 1000
            if t_lo <= t <= t_hi:
                out.append((rd32(ip + 4), rd32(ip + 8), rd64(ip + 12), rd32(ip + 20), rd32(ip + 24)))
        cur = rd32(ip + CITEM)
    return out, hops


def filter_run(const uint8_t[::1] run not None, int32_t h, int64_t begin_ts, int64_t t_lo, int64_t t_hi,
               Py_ssize_t max_count):
    """Items of a compacted slot run (28-byte items) for hash ``h`` with claimed time in
    [t_lo, t_hi]: ``[(topicId, queueId, offset, size, timeDiff)]``, at most ``max_count``."""
    cdef Py_ssize_t n = run.shape[0] // CITEM
    cdef Py_ssize_t i
    cdef const uint8_t* ip
    cdef int64_t t
    out = []
    if n == 0:
        return out
    for i in range(n):
        if len(out) >= max_count:
            break
        ip = &run[0] + i * CITEM
        if rd32(ip) != h:
            continue
        t = begin_ts + <int64_t>rd32(ip + 24) * 1000
        if t_lo <= t <= t_hi:
            out.append((rd32(ip + 4), rd32(ip + 8), rd64(ip + 12), rd32(ip + 20), rd32(ip + 24)))
    return out


def undo_after(uint8_t[::1] buf not None, int64_t slots, int64_t max_items, int32_t keep, int64_t end_ts,
               int32_t used) -> int:
    """Roll a writable file back to its first ``keep`` items (crash recovery: items written after
    the last metadata checkpoint are re-dispatched). Items are unlinked newest first, so each
    slot head returns to the value it had; returns how many items were dropped."""
    if slots <= 0 or max_items <= 0 or buf.shape[0] < HEADER + slots * SLOT + max_items * ITEM:
        raise ValueError("index buffer smaller than its layout")
    cdef uint8_t* base = &buf[0]
    cdef int64_t last = min(max_items - 1, <int64_t>rd32(base + 24) + 1)
    cdef uint8_t* ip
    cdef uint8_t* sp
    cdef int64_t i
    cdef int32_t dropped = 0
    cdef int j
    cdef bint empty
    with nogil:
        # the highest item written: the header's count, or one more when a kill came between an
        # item and its header update
        while last > keep:
            ip = base + HEADER + slots * SLOT + last * ITEM
            empty = True
            for j in range(ITEM):
                if ip[j] != 0:
                    empty = False
                    break
            if not empty:
                break
            last -= 1
        i = last
        while i > keep:
            ip = base + HEADER + slots * SLOT + i * ITEM
            sp = base + HEADER + slot_of(rd32(ip), slots) * SLOT
            if rd32(sp) == i:
                wr32(sp, rd32(ip + CITEM))
            for j in range(ITEM):
                ip[j] = 0
            dropped += 1
            i -= 1
        wr32(base, END_MAGIC if max_items == <int64_t>keep + 1 else BEGIN_MAGIC)
        wr64(base + 12, end_ts)
        wr32(base + 20, used)
        wr32(base + 24, keep)
    return dropped


cdef inline object _prop(const uint8_t* p, Py_ssize_t n, const char* name, Py_ssize_t nl):
    """The value of property ``name`` in ``k\\x01v\\x02k\\x01v`` text, or None."""
    cdef Py_ssize_t i = 0, j, v
    while i < n:
        j = i
        while j < n and p[j] != 2:
            j += 1
        if j - i > nl and p[i + nl] == 1 and memcmp(p + i, name, nl) == 0:
            v = i + nl + 1
            return (<const char*>p)[v:j].decode("utf-8", "replace")
        i = j + 1
    return None


def record_index_fields(const uint8_t[::1] rec not None):
    """``(storeTimestamp, KEYS or None, UNIQ_KEY or None)`` of one CommitLog-format record: what
    the tier's copier needs per message, read in C without decoding the rest."""
    if rec.shape[0] < 64:
        raise ValueError("record too short")
    return _index_fields(&rec[0], rec.shape[0])


cdef tuple _index_fields(const uint8_t* r, Py_ssize_t n):
    if n < 64:
        raise ValueError("record too short")
    cdef int32_t magic = rd32(r + 4)
    cdef int32_t sys_flag = rd32(r + 36)
    cdef Py_ssize_t p = 48 + (20 if sys_flag & 0x10 else 8)
    cdef int64_t ts = rd64(r + p)
    p += 8 + (20 if sys_flag & 0x20 else 8) + 4 + 8
    if p + 4 > n:
        raise ValueError("malformed record")
    p += 4 + rd32(r + p)
    if p + 1 > n:
        raise ValueError("malformed record")
    if magic == <int32_t>0xDAA320A8:               # V2: 2-byte topic length
        p += 2 + ((<Py_ssize_t>r[p] << 8) | r[p + 1])
    else:
        p += 1 + r[p]
    if p + 2 > n:
        raise ValueError("malformed record")
    cdef Py_ssize_t plen = (<Py_ssize_t>r[p] << 8) | r[p + 1]
    p += 2
    if p + plen > n:
        raise ValueError("malformed record")
    return ts, _prop(r + p, plen, b"KEYS", 4), _prop(r + p, plen, b"UNIQ_KEY", 8)


# ---------------------------------------------------------------------------- the copier's batch
cdef inline uint32_t _h16(const uint8_t* p, Py_ssize_t n, Py_ssize_t* units) noexcept:
    """Java String.hashCode of ASCII bytes (one UTF-16 unit each)."""
    cdef uint32_t h = 0
    cdef Py_ssize_t i
    for i in range(n):
        h = h * 31 + p[i]
    units[0] = n
    return h


cdef uint32_t _hstr(str s, Py_ssize_t* units):
    """Java String.hashCode of a str (UTF-16 code units) and its length in units."""
    cdef uint32_t h = 0
    cdef Py_UCS4 ch
    cdef uint32_t c
    cdef Py_ssize_t n = 0
    for ch in s:
        c = <uint32_t>ch
        if c >= 0x10000:
            c -= 0x10000
            h = h * 31 + (0xD800 + (c >> 10))
            h = h * 31 + (0xDC00 + (c & 0x3FF))
            n += 2
        else:
            h = h * 31 + c
            n += 1
    units[0] = n
    return h


cdef inline uint32_t _pow31(Py_ssize_t n) noexcept:
    cdef uint32_t r = 1, b = 31
    while n > 0:
        if n & 1:
            r *= b
        b *= b
        n >>= 1
    return r


cdef inline int32_t _abs_java(uint32_t h) noexcept:
    cdef int32_t v = <int32_t>h
    if v < 0:
        return <int32_t>(<uint32_t>0 - h)       # -Integer.MIN_VALUE stays MIN_VALUE, as in Java
    return v


cdef inline bint _blank(str s):
    return s is None or len(s) == 0 or s.isspace()


def message_key_hashes(str topic, str keys, str uniq, object hashset_order):
    """The stored hashes of one message's index entries, in put order: the same result as
    ``[e.hash_code for e in layout.entries_of_message(topic, ..., keys, uniq, ...)]`` (the rule
    lives there; this is its fast path, tested equal). ``hashset_order`` is
    ``layout.java_hashset_order``, used for messages with more than 8 distinct keys."""
    cdef list seq = []
    cdef list parts
    if not _blank(uniq):
        seq.append(uniq)
    if not _blank(keys):
        parts = keys.split(" ")
        while parts and len(<str>parts[len(parts) - 1]) == 0:
            parts.pop()
        seq.extend(parts)
    if not seq:
        return ()
    seq = list(dict.fromkeys(seq))
    cdef Py_ssize_t n = len(seq), i, j, units
    cdef uint32_t hk
    cdef list order
    cdef list buckets
    if n > 8:
        order = hashset_order(seq)
    elif n == 1:
        order = seq
    else:
        buckets = []
        for i in range(n):
            hk = _hstr(seq[i], &units)
            buckets.append(((hk ^ (hk >> 16)) & 15, i))
        buckets.sort()
        order = [seq[b[1]] for b in buckets]
    cdef uint32_t th = _hstr(topic + "#", &units)
    out = []
    for k in order:
        hk = _hstr(k, &units)
        out.append(_abs_java(th * _pow31(units) + hk))
    return tuple(out)


def cq_units(list entries, Py_ssize_t count, int64_t base) -> bytes:
    """The tier's ConsumeQueue units for the first ``count`` local entries ``(phys, size, tags)``
    whose records were appended back to back from flat offset ``base``."""
    cdef bytearray out = bytearray(count * 20)
    cdef uint8_t* p = out
    cdef int64_t pos = base
    cdef Py_ssize_t i
    cdef int32_t size
    for i in range(count):
        e = entries[i]
        size = e[1]
        wr64(p + i * 20, pos)
        wr32(p + i * 20 + 8, size)
        wr64(p + i * 20 + 12, e[2])
        pos += size
    return bytes(out)


def index_batch(bytes body, str topic, int32_t topic_id, int32_t queue_id, int64_t base, object hashset_order,
                bint with_keys=True):
    """Walk records appended back to back (a group commit's flat CommitLog bytes, first at flat
    offset ``base``): ``(index messages for put_batch, min store time, max store time, first and
    last original CommitLog offset)``. Messages without keys are left out of the index list."""
    cdef const uint8_t* b = <const uint8_t*>body
    cdef Py_ssize_t n = len(body), p = 0
    cdef int32_t size
    cdef int64_t ts, min_ts = -1, max_ts = -1, first = -1, last = -1, phys
    msgs = []
    while p + 64 <= n:
        size = rd32(b + p)
        if size <= 0 or p + size > n:
            raise ValueError(f"malformed record at {p} of a batch of {n} bytes")
        phys = rd64(b + p + 28)
        ts, keys, uniq = _index_fields(b + p, size) if with_keys else (_ts_of(b + p), None, None)
        if first < 0:
            first = phys
        last = phys
        if min_ts < 0 or ts < min_ts:
            min_ts = ts
        if ts > max_ts:
            max_ts = ts
        if keys is not None or uniq is not None:
            hashes = message_key_hashes(topic, keys, uniq, hashset_order)
            if hashes:
                msgs.append((hashes, topic_id, queue_id, base + p, size, ts))
        p += size
    return msgs, min_ts, max_ts, first, last


cdef inline int64_t _ts_of(const uint8_t* r) noexcept:
    return rd64(r + 48 + (20 if rd32(r + 36) & 0x10 else 8))
