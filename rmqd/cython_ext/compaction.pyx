# cython: language_level=3
"""Compaction hot paths: the OffsetMap and the per-record scans of a compaction log segment.

A segment is a CommitLog-format log file plus its 46-byte CQ units (Java's bcq layout):
phys i64, size i32, tagsCode i64, storeTime i64, queueOffset i64, batchSize i16, compactOffset i32,
reserved i32, big-endian. The scans walk the units, find each record in the log buffer, read the
record's KEYS property in C, and hash the key with MD5 (hashlib's OpenSSL one-shot) only when the
OffsetMap needs it. The copies of kept records run without the GIL.
"""
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize
from libc.stdint cimport int16_t, int32_t, int64_t, uint8_t, uint64_t
from libc.stdlib cimport free, malloc
from libc.string cimport memcmp, memcpy, memset
from rmqd.cython_ext.byteorder cimport rd32, rd64, wr32, wr64

import hashlib

cdef object _md5 = hashlib.md5

ctypedef unsigned int uint32_t_

DEF UNIT = 46
DEF ENTRY = 24
DEF BORNHOST_V6 = 0x10
DEF STOREHOST_V6 = 0x20

CQ_UNIT_SIZE = UNIT
OFFSET_MAP_ENTRY_SIZE = ENTRY
BLANK_MAGIC = -875286124      # 0xCBD43194, CommitLog BLANK_MAGIC_CODE


cdef inline void _put16(uint8_t* p, int16_t v) noexcept nogil:
    p[0] = (<uint32_t_>v >> 8) & 0xFF
    p[1] = <uint32_t_>v & 0xFF


cdef int _record_key(const uint8_t* rec, Py_ssize_t size, Py_ssize_t* kstart, Py_ssize_t* klen,
                     int32_t* body_len, int64_t* store_ts) noexcept nogil:
    """Locate KEYS in a record: 1 found, 0 keyless, -1 malformed. Also the body length and store time."""
    cdef int32_t sys_flag
    cdef Py_ssize_t p, born_len, store_len, props_len, end, i, j
    if size < 60:
        return -1
    sys_flag = rd32(rec + 36)
    born_len = 20 if sys_flag & BORNHOST_V6 else 8
    store_len = 20 if sys_flag & STOREHOST_V6 else 8
    p = 48 + born_len
    if p + 8 > size:
        return -1
    store_ts[0] = rd64(rec + p)
    p += 8 + store_len + 4 + 8
    if p + 4 > size:
        return -1
    body_len[0] = rd32(rec + p)
    if body_len[0] < 0:
        return -1
    p += 4 + body_len[0]
    if p + 1 > size:
        return -1
    p += 1 + rec[p]
    if p + 2 > size:
        return -1
    props_len = (rec[p] << 8) | rec[p + 1]
    p += 2
    end = p + props_len
    if end > size:
        return -1
    # properties: name \x01 value \x02 ...; find the entry named KEYS
    i = p
    while i < end:
        j = i
        while j < end and rec[j] != 1:
            j += 1
        if j >= end:
            return 0
        if j - i == 4 and rec[i] == 75 and rec[i + 1] == 69 and rec[i + 2] == 89 and rec[i + 3] == 83:
            kstart[0] = j + 1
            j += 1
            while j < end and rec[j] != 2:
                j += 1
            klen[0] = j - kstart[0]
            return 1 if klen[0] > 0 else 0
        while j < end and rec[j] != 2:
            j += 1
        i = j + 1
    return 0


def record_info(const uint8_t[::1] rec):
    """``(key bytes or None, body length, store timestamp)`` of one CommitLog-format record."""
    cdef Py_ssize_t ks = 0, kl = 0
    cdef int32_t body_len = 0
    cdef int64_t ts = 0
    cdef int r = _record_key(&rec[0], rec.shape[0], &ks, &kl, &body_len, &ts)
    if r < 0:
        raise ValueError("malformed message record")
    key = PyBytes_FromStringAndSize(<char*>&rec[ks], kl) if r == 1 else None
    return key, body_len, ts


cdef class OffsetMap:
    """MD5(key) -> newest queue offset, open addressing in one C buffer of 24-byte entries
    (16-byte digest + 8-byte offset), like Java's OffsetMap. ``put`` answers False once the map
    holds ``capacity`` keys and the key is new: the caller compacts what it has and continues."""
    cdef uint8_t* table
    cdef readonly Py_ssize_t slots
    cdef readonly Py_ssize_t capacity
    cdef readonly Py_ssize_t size
    cdef public int64_t last_offset

    def __cinit__(self, Py_ssize_t memory_bytes):
        self.slots = max(memory_bytes // ENTRY, 128)
        self.capacity = self.slots * 3 // 4
        self.table = <uint8_t*>malloc(self.slots * ENTRY)
        if self.table == NULL:
            raise MemoryError()
        memset(self.table, 0xFF, self.slots * ENTRY)
        self.size = 0
        self.last_offset = -1

    def __dealloc__(self):
        free(self.table)

    cdef inline Py_ssize_t _slot(self, const uint8_t* digest) noexcept nogil:
        cdef uint64_t h = <uint64_t>rd64(digest)
        cdef Py_ssize_t i = <Py_ssize_t>(h % <uint64_t>self.slots)
        cdef uint8_t* e
        while True:
            e = self.table + i * ENTRY
            if rd64(e + 16) == -1 or memcmp(e, digest, 16) == 0:
                return i
            i += 1
            if i == self.slots:
                i = 0

    cdef int _put(self, const uint8_t* digest, int64_t offset) noexcept nogil:
        cdef Py_ssize_t i = self._slot(digest)
        cdef uint8_t* e = self.table + i * ENTRY
        if rd64(e + 16) == -1:
            if self.size >= self.capacity:
                return 0
            memcpy(e, digest, 16)
            self.size += 1
        wr64(e + 16, offset)
        if offset > self.last_offset:
            self.last_offset = offset
        return 1

    cdef int64_t _get(self, const uint8_t* digest) noexcept nogil:
        return rd64(self.table + self._slot(digest) * ENTRY + 16)

    def put(self, bytes digest, int64_t offset) -> bool:
        return self._put(<const uint8_t*>PyBytes_AS_STRING(digest), offset) == 1

    def get(self, bytes digest) -> int:
        return self._get(<const uint8_t*>PyBytes_AS_STRING(digest))


cdef inline bytes _digest(const uint8_t* rec, Py_ssize_t ks, Py_ssize_t kl):
    return _md5(PyBytes_FromStringAndSize(<const char*>rec + ks, kl)).digest()


cdef const uint8_t* _unit_record(const uint8_t[::1] log, int64_t log_base, const uint8_t* u, Py_ssize_t i) except? NULL:
    """The record ConsumeQueue unit ``u`` (the ``i``-th of its segment) points to in ``log``, the CommitLog window
    that starts at ``log_base``; ValueError when it lies outside."""
    cdef int64_t phys = rd64(u)
    cdef int32_t size = rd32(u + 8)
    if size < 0 or phys < log_base or phys - log_base + size > log.shape[0]:
        raise ValueError(f"cq unit {i} points outside its log file ({phys}, {size})")
    return &log[phys - log_base]


cdef bytes _key_digest(const uint8_t* rec, int32_t size, int32_t* body_len):
    """MD5 of a record's KEYS (``body_len[0]`` its body length); None when it is keyless or malformed (the
    compaction rule never drops those)."""
    cdef Py_ssize_t ks = 0, kl = 0
    cdef int64_t ts = 0
    if _record_key(rec, size, &ks, &kl, body_len, &ts) != 1:
        return None
    return _digest(rec, ks, kl)


def build_map(OffsetMap m, const uint8_t[::1] log, int64_t log_base, const uint8_t[::1] cq,
              int64_t after_offset):
    """Add the keys of the records above ``after_offset`` (in unit order) to ``m``.

    Returns ``(units_done, full)``: how many units were consumed; ``full`` when the map could not
    take a new key (``m.last_offset`` is then the last offset whose key went in)."""
    cdef Py_ssize_t n = cq.shape[0] // UNIT, i
    cdef const uint8_t* u
    cdef int64_t qoff
    cdef int32_t body_len = 0
    cdef bytes d
    for i in range(n):
        u = &cq[i * UNIT]
        qoff = rd64(u + 28)
        if qoff <= after_offset:
            continue
        d = _key_digest(_unit_record(log, log_base, u, i), rd32(u + 8), &body_len)
        if d is not None and m._put(<const uint8_t*>PyBytes_AS_STRING(d), qoff) == 0:
            return i, True
    return n, False


cdef inline bint _superseded(int64_t newest, int64_t qoff, int32_t body_len) noexcept nogil:
    """The compaction rule, for a keyed record inside the OffsetMap's range: it is dropped when its key
    maps to a newer offset, or when it is the newest and its body is empty (a tombstone)."""
    return newest != -1 and (qoff < newest or body_len == 0)


def rewrite(OffsetMap m, const uint8_t[::1] log, int64_t log_base, const uint8_t[::1] cq,
            int64_t upto_offset, bytearray out_log, bytearray out_cq, int64_t out_base):
    """Append the records of one segment that survive ``m`` to ``out_log``/``out_cq``.

    A record at or below ``upto_offset`` (the map's range) is dropped by the rule (``_superseded``).
    Everything else is kept with its queue offset; PHYSICALOFFSET (byte 28) is set to its new position
    ``out_base + len``. Returns the number of records kept."""
    cdef Py_ssize_t n = cq.shape[0] // UNIT, i
    cdef const uint8_t* u
    cdef const uint8_t* rec
    cdef int64_t qoff
    cdef int32_t body_len = 0
    cdef bytes d
    cdef bytearray keep = bytearray(n)
    for i in range(n):
        u = &cq[i * UNIT]
        qoff = rd64(u + 28)
        rec = _unit_record(log, log_base, u, i)
        if qoff <= upto_offset:
            d = _key_digest(rec, rd32(u + 8), &body_len)
            if d is not None and _superseded(m._get(<const uint8_t*>PyBytes_AS_STRING(d)), qoff, body_len):
                continue
        keep[i] = 1
    return copy_units(log, log_base, cq, keep, out_log, out_cq, out_base)


def copy_units(const uint8_t[::1] log, int64_t log_base, const uint8_t[::1] cq, const uint8_t[::1] keep,
               bytearray out_log, bytearray out_cq, int64_t out_base):
    """The compacted-file writer's inner step: append the records of the units whose ``keep`` byte is
    set to ``out_log``/``out_cq``, keeping their queue offsets, with PHYSICALOFFSET (byte 28 of the
    record, the first 8 bytes of the unit) set to the new position ``out_base + len(out_log)``.
    Returns the number of records kept."""
    cdef Py_ssize_t n = cq.shape[0] // UNIT, i, pos, kept = 0, total = 0
    cdef Py_ssize_t cq_n = len(out_cq)
    cdef const uint8_t* u
    cdef uint8_t* w
    cdef uint8_t* wu
    cdef int64_t phys
    cdef int32_t size
    if keep.shape[0] < n:
        raise ValueError("keep mask shorter than the units")
    for i in range(n):
        if keep[i]:
            u = &cq[i * UNIT]
            phys = rd64(u)
            size = rd32(u + 8)
            if size < 0 or phys < log_base or phys - log_base + size > log.shape[0]:
                raise ValueError(f"cq unit {i} points outside its log file ({phys}, {size})")
            total += size
            kept += 1
    if not kept:
        return 0
    pos = len(out_log)
    out_log.extend(b"\0" * total)
    out_cq.extend(b"\0" * (kept * UNIT))
    w = <uint8_t*><char*>out_log
    wu = <uint8_t*><char*>out_cq
    with nogil:
        for i in range(n):
            if not keep[i]:
                continue
            u = &cq[i * UNIT]
            phys = rd64(u)
            size = rd32(u + 8)
            memcpy(w + pos, &log[phys - log_base], size)
            wr64(w + pos + 28, out_base + pos)
            memcpy(wu + cq_n, u, UNIT)
            wr64(wu + cq_n, out_base + pos)
            pos += size
            cq_n += UNIT
    return kept


def key_digests(const uint8_t[::1] log, int64_t log_base, const uint8_t[::1] cq):
    """Per unit of one segment window: ``(offsets, digests, body_lens, keyed)`` as native-endian int64,
    16-byte MD5 digests (zeros when keyless), int32 body lengths and 0/1 bytes (1: a keyed record the
    rule applies to; malformed and keyless records are never dropped, as in ``rewrite``). This is what a
    distributed job shards by digest to build its OffsetMaps (``put_all`` / ``survivors``)."""
    cdef Py_ssize_t n = cq.shape[0] // UNIT, i
    cdef const uint8_t* u
    cdef int32_t body_len = 0
    cdef bytes d
    cdef bytearray offs = bytearray(8 * n), digs = bytearray(16 * n), lens = bytearray(4 * n)
    cdef bytearray keyed = bytearray(n)
    cdef int64_t* po = <int64_t*><char*>offs
    cdef int32_t* pl = <int32_t*><char*>lens
    cdef uint8_t* pd = <uint8_t*><char*>digs
    cdef uint8_t* pk = <uint8_t*><char*>keyed
    for i in range(n):
        u = &cq[i * UNIT]
        po[i] = rd64(u + 28)
        body_len = 0
        d = _key_digest(_unit_record(log, log_base, u, i), rd32(u + 8), &body_len)
        pl[i] = body_len
        if d is not None:
            memcpy(pd + 16 * i, PyBytes_AS_STRING(d), 16)
            pk[i] = 1
    return offs, digs, lens, keyed


def put_all(OffsetMap m, const uint8_t[::1] digests, const int64_t[::1] offsets,
            const uint8_t[::1] keyed) -> bool:
    """``m.put`` every keyed row, in the given (ascending offset) order; False once the map is full."""
    cdef Py_ssize_t n = offsets.shape[0], i
    cdef bint full = False
    if digests.shape[0] < 16 * n or keyed.shape[0] < n:
        raise ValueError("digests/keyed shorter than the offsets")
    with nogil:
        for i in range(n):
            if keyed[i] and m._put(&digests[16 * i], offsets[i]) == 0:
                full = True
                break
    return not full


def survivors(OffsetMap m, const uint8_t[::1] digests, const int64_t[::1] offsets,
              const int32_t[::1] body_lens, const uint8_t[::1] keyed) -> bytearray:
    """0/1 per row: whether it survives ``m`` by the compaction rule (keyless rows always do)."""
    cdef Py_ssize_t n = offsets.shape[0], i
    cdef bytearray out = bytearray(n)
    cdef uint8_t* po = <uint8_t*><char*>out
    if digests.shape[0] < 16 * n or keyed.shape[0] < n or body_lens.shape[0] < n:
        raise ValueError("digests/keyed/body_lens shorter than the offsets")
    with nogil:
        for i in range(n):
            po[i] = 1 if not keyed[i] else (0 if _superseded(m._get(&digests[16 * i]), offsets[i],
                                                             body_lens[i]) else 1)
    return out


def pack_unit(int64_t phys, int32_t size, int64_t tags_code, int64_t store_ts, int64_t queue_offset) -> bytes:
    """One 46-byte CQ unit (batchSize 1, compactOffset -1, reserved 0)."""
    cdef uint8_t buf[UNIT]
    wr64(buf, phys)
    wr32(buf + 8, size)
    wr64(buf + 12, tags_code)
    wr64(buf + 20, store_ts)
    wr64(buf + 28, queue_offset)
    _put16(buf + 36, 1)
    wr32(buf + 38, -1)
    wr32(buf + 42, 0)
    return PyBytes_FromStringAndSize(<char*>buf, UNIT)


def set_phys_offset(bytearray rec, int64_t phys) -> None:
    """Rewrite PHYSICALOFFSET (byte 28) of a record in place."""
    wr64(<uint8_t*><char*>rec + 28, phys)


def scan_cq(const uint8_t[::1] cq, int64_t base, int64_t log_len):
    """Validate a segment's CQ units against its log: units are taken up to the first end marker (phys < 0)
    or the first that does not fit the log or goes backwards. Returns ``(good units, log bytes they cover,
    first store time or -1, their queue offsets as native int64 bytes)``."""
    cdef Py_ssize_t n = cq.shape[0] // UNIT, i, good = 0
    cdef int64_t end = 0, phys, first_ts = -1
    cdef int32_t size
    cdef bytearray offs = bytearray(8 * n)
    cdef int64_t* po = <int64_t*><char*>offs
    cdef const uint8_t* u
    with nogil:
        for i in range(n):
            u = &cq[i * UNIT]
            phys = rd64(u)
            size = rd32(u + 8)
            if phys < 0 or size < 0:
                break
            if phys - base + size > log_len or phys - base < end:
                break
            po[i] = rd64(u + 28)
            if first_ts < 0:
                first_ts = rd64(u + 20)
            end = phys - base + size
            good += 1
    return good, end, first_ts, bytes(offs[:8 * good])


def window_bounds(const uint8_t[::1] cq, int64_t window):
    """Split CQ units into windows of about ``window`` log bytes (at least one unit each):
    ``[(first unit, end unit, first phys, end phys), ...]``."""
    cdef Py_ssize_t n = cq.shape[0] // UNIT, i = 0, j
    cdef int64_t first_phys, end, phys
    cdef int32_t size
    out = []
    while i < n:
        first_phys = rd64(&cq[i * UNIT])
        j = i
        end = first_phys
        while j < n:
            phys = rd64(&cq[j * UNIT])
            size = rd32(&cq[j * UNIT + 8])
            if j > i and phys + size - first_phys > window:
                break
            end = phys + size
            j += 1
        out.append((i, j, first_phys, end))
        i = j
    return out
