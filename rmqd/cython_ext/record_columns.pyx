# cython: language_level=3
"""Message records -> Arrow-ready column buffers, in one C pass (the Spark connector's decoder).

``decode(buf, lo, hi)`` walks CommitLog-format records laid end to end (a PULL body, a segment) and
``decode_units(...)`` decodes the records that ConsumeQueue units point at straight out of a mapped
CommitLog file (no copy of the records first); both keep the records whose queue offset is in
``[lo, hi)``, appending them to a :class:`Columns`. ``Columns.result()`` is a dict of plain buffers that
:mod:`rmqd.spark.arrow` wraps as Arrow arrays without copying: int32 offsets + data (+ validity
bitmap) for the binary/string columns, little-endian int32/int64 arrays for the numbers, and for
``headers`` (the user properties) a list offset array over key/value child arrays.
"""
from cpython.bytearray cimport PyByteArray_AS_STRING, PyByteArray_FromStringAndSize, PyByteArray_Resize
from libc.stdint cimport int32_t, int64_t, uint8_t, uint64_t
from libc.string cimport memcpy, memset
from rmqd.cython_ext.byteorder cimport rd32, rd64

DEF BORNHOST_V6 = 0x10
DEF STOREHOST_V6 = 0x20
DEF MAGIC_V1 = -626843481      # 0xDAA320A7
DEF MAGIC_V2 = -626843477      # 0xDAA320A7 + 4 (v2: topic length is 2 bytes)
DEF BLANK_UNIT = 0x7FFFFFFF    # a ConsumeQueue unit's size for a blank (skipped) unit

# Properties that are RocketMQ's own, not the user's (Java MessageConst system keys): not in ``headers``.
SYSTEM_PROPERTIES = frozenset((
    "KEYS", "TAGS", "WAIT", "DELAY", "RETRY_TOPIC", "REAL_TOPIC", "REAL_QID", "TRAN_MSG", "PGROUP",
    "MIN_OFFSET", "MAX_OFFSET", "BUYER_ID", "ORIGIN_MESSAGE_ID", "TRANSFER_FLAG", "CORRECTION_FLAG",
    "MQ2_FLAG", "RECONSUME_TIME", "MSG_REGION", "TRACE_ON", "UNIQ_KEY", "MAX_RECONSUME_TIMES",
    "CONSUME_START_TIME", "__STARTDELIVERTIME", "CLUSTER", "TRAN_PREPARED_QUEUE_OFFSET",
    "TRANSACTION_CHECK_TIMES", "CHECK_IMMUNITY_TIME_IN_SECONDS", "INSTANCE_ID", "CORRELATION_ID",
    "REPLY_TO_CLIENT", "TTL", "ARRIVE_TIME", "PUSH_REPLY_TIME", "__SHARDINGKEY", "TIMER_DELIVER_MS",
    "TIMER_DELAY_SEC", "TIMER_DELAY_MS", "TIMER_OUT_MS", "TIMER_ENQUEUE_MS", "TIMER_DEQUEUE_MS",
    "TIMER_ROLL_TIMES", "TIMER_DEL_UNIQKEY", "TIMER_DELAY_LEVEL", "TIMER_DELAY_UNIQKEY", "INNER_BASE",
    "INNER_NUM", "INNER_MULTI_QUEUE_OFFSET", "INNER_MULTI_DISPATCH", "__BORNHOST", "__TRANSACTIONID__",
    "__RMQ.TRANSACTIONID__",
))

cdef set _SYSTEM_B = {s.encode() for s in SYSTEM_PROPERTIES}
cdef const char* HEX = b"0123456789ABCDEF"


cdef inline bytearray _raw(Py_ssize_t n):
    """A bytearray of ``n`` bytes left uninitialised (every byte that is read is written first)."""
    return PyByteArray_FromStringAndSize(NULL, n)


cdef inline void _ensure(bytearray a, Py_ssize_t need) except *:
    """Grow ``a`` (amortised doubling, no zero fill) so that it holds at least ``need`` bytes."""
    cdef Py_ssize_t have = len(a)
    if need > have:
        PyByteArray_Resize(a, max(need, 2 * have))


cdef class _Var:
    """A growing variable-width column: int32 offsets, data, validity bitmap."""
    cdef bytearray data
    cdef bytearray offsets
    cdef bytearray valid
    cdef Py_ssize_t n, used, nulls

    def __cinit__(self, Py_ssize_t data_cap, Py_ssize_t rows_cap):
        self.data = _raw(max(data_cap, 8))
        self.offsets = _raw(4 * (max(rows_cap, 1) + 1))
        (<int32_t*>PyByteArray_AS_STRING(self.offsets))[0] = 0
        self.valid = bytearray((max(rows_cap, 1) + 7) // 8)
        self.n = 0
        self.used = 0
        self.nulls = 0

    cdef inline void add(self, const uint8_t* p, Py_ssize_t k, bint present) except *:
        cdef Py_ssize_t had
        if present and k:
            _ensure(self.data, self.used + k)
            memcpy(PyByteArray_AS_STRING(self.data) + self.used, p, k)
            self.used += k
        _ensure(self.offsets, 4 * (self.n + 2))
        (<int32_t*>PyByteArray_AS_STRING(self.offsets))[self.n + 1] = <int32_t>self.used
        had = len(self.valid)
        if (self.n >> 3) >= had:                 # the bitmap's new bytes start all-null
            PyByteArray_Resize(self.valid, 2 * had)
            memset(PyByteArray_AS_STRING(self.valid) + had, 0, had)
        if present:
            (<uint8_t*>PyByteArray_AS_STRING(self.valid))[self.n >> 3] |= (1 << (self.n & 7))
        else:
            self.nulls += 1
        self.n += 1

    def result(self):
        return (self.n, self.nulls, memoryview(self.valid)[:(self.n + 7) // 8],
                memoryview(self.offsets)[:4 * (self.n + 1)], memoryview(self.data)[:self.used])


cdef class _Fixed:
    """A growing fixed-width column of int32 or int64 values."""
    cdef bytearray data
    cdef Py_ssize_t n, width

    def __cinit__(self, Py_ssize_t width, Py_ssize_t rows_cap):
        self.width = width
        self.data = _raw(width * max(rows_cap, 1))
        self.n = 0

    cdef inline void add64(self, int64_t v) except *:
        _ensure(self.data, (self.n + 1) * 8)
        (<int64_t*>PyByteArray_AS_STRING(self.data))[self.n] = v
        self.n += 1

    cdef inline void add32(self, int32_t v) except *:
        _ensure(self.data, (self.n + 1) * 4)
        (<int32_t*>PyByteArray_AS_STRING(self.data))[self.n] = v
        self.n += 1

    def result(self):
        return memoryview(self.data)[:self.n * self.width]


# One checked record: its numbers, and where its fields are (pointers into the record).
cdef struct _Rec:
    int32_t qid, flag, sys_flag, reconsume, body_len
    int64_t qoff, phys, born_ts, store_ts
    const uint8_t* store_host
    Py_ssize_t store_len
    const uint8_t* body
    const uint8_t* topic
    Py_ssize_t topic_len
    const uint8_t* props
    Py_ssize_t props_len


cdef int _parse(const uint8_t* r, Py_ssize_t total, _Rec* out) noexcept nogil:
    """Check the record of ``total`` bytes at ``r`` and locate its fields: 0, or -1 when it is not one."""
    cdef Py_ssize_t p, born_len
    cdef int32_t magic
    if total < 60:
        return -1
    magic = rd32(r + 4)
    if magic != MAGIC_V1 and magic != MAGIC_V2:
        return -1
    out.qid = rd32(r + 12)
    out.flag = rd32(r + 16)
    out.qoff = rd64(r + 20)
    out.phys = rd64(r + 28)
    out.sys_flag = rd32(r + 36)
    out.born_ts = rd64(r + 40)
    born_len = 20 if out.sys_flag & BORNHOST_V6 else 8
    out.store_len = 20 if out.sys_flag & STOREHOST_V6 else 8
    p = 48 + born_len
    if p + 8 + out.store_len + 4 + 8 + 4 > total:
        return -1
    out.store_ts = rd64(r + p)
    out.store_host = r + p + 8
    p += 8 + out.store_len
    out.reconsume = rd32(r + p)
    p += 4 + 8
    out.body_len = rd32(r + p)
    p += 4
    if out.body_len < 0 or p + out.body_len > total:
        return -1
    out.body = r + p
    p += out.body_len
    if magic == MAGIC_V2:
        if p + 2 > total:
            return -1
        out.topic_len = (r[p] << 8) | r[p + 1]
        p += 2
    else:
        if p + 1 > total:
            return -1
        out.topic_len = r[p]
        p += 1
    out.topic = r + p
    p += out.topic_len
    if p + 2 > total:
        return -1
    out.props_len = (r[p] << 8) | r[p + 1]
    out.props = r + p + 2
    if p + 2 + out.props_len > total:
        return -1
    return 0


cdef class Columns:
    """The Arrow-ready column buffers of one batch: records are appended one at a time (those whose queue
    offset is outside ``[lo, hi)`` are left out; ``hi`` < 0: no upper bound) and ``result()`` hands the
    buffers over. ``record_bytes`` counts every record looked at, kept or not."""
    cdef readonly Py_ssize_t rows, record_bytes
    cdef int64_t lo, hi
    cdef Py_ssize_t hdr_count
    cdef const uint8_t* _uniq           # the current record's UNIQ_KEY (NULL: none), set by _properties
    cdef Py_ssize_t _uniq_len
    cdef _Var key, value, topic, tags, msgid, hkey, hval
    cdef _Fixed c_qid, c_off, c_ts, c_born, c_phys, c_recon, c_flag, c_hoff, c_sys

    def __cinit__(self, int64_t lo=-1, int64_t hi=-1, Py_ssize_t data_cap=1 << 20, Py_ssize_t rows_cap=1024):
        self.lo, self.hi = lo, hi
        self.rows = self.record_bytes = self.hdr_count = 0
        self.key, self.value, self.topic = _Var(1024, rows_cap), _Var(data_cap, rows_cap), _Var(1024, rows_cap)
        self.tags, self.msgid = _Var(1024, rows_cap), _Var(32 * rows_cap, rows_cap)
        self.hkey, self.hval = _Var(1024, 64), _Var(1024, 64)
        self.c_qid, self.c_off, self.c_ts = _Fixed(4, rows_cap), _Fixed(8, rows_cap), _Fixed(8, rows_cap)
        self.c_born, self.c_phys, self.c_recon = _Fixed(8, rows_cap), _Fixed(8, rows_cap), _Fixed(4, rows_cap)
        self.c_flag, self.c_hoff, self.c_sys = _Fixed(4, rows_cap), _Fixed(4, rows_cap + 1), _Fixed(4, rows_cap)
        self.c_hoff.add32(0)

    cdef int add(self, const uint8_t* r, Py_ssize_t total) except -2:
        """Append the record of ``total`` bytes at ``r``: 1 kept, 0 outside [lo, hi), -1 not a record."""
        cdef _Rec rec
        if _parse(r, total, &rec) < 0:
            return -1
        self.record_bytes += total
        if rec.qoff < self.lo or (self.hi >= 0 and rec.qoff >= self.hi):
            return 0
        self.value.add(rec.body, rec.body_len, True)
        self.topic.add(rec.topic, rec.topic_len, True)
        self._properties(rec.props, rec.props_len)
        self._msg_id(&rec)
        self.c_qid.add32(rec.qid)
        self.c_off.add64(rec.qoff)
        self.c_ts.add64(rec.store_ts * 1000)          # Arrow/Spark timestamps are microseconds
        self.c_born.add64(rec.born_ts * 1000)
        self.c_phys.add64(rec.phys)
        self.c_recon.add32(rec.reconsume)
        self.c_flag.add32(rec.flag)
        self.c_sys.add32(rec.sys_flag)
        self.c_hoff.add32(<int32_t>self.hdr_count)
        self.rows += 1
        return 1

    cdef void _properties(self, const uint8_t* r, Py_ssize_t pend) except *:
        """``name\\x01value\\x02`` pairs: KEYS -> key, TAGS -> tags, UNIQ_KEY kept for msgId (this row's
        ``_uniq``), the user's own -> headers; the other system properties are dropped."""
        cdef Py_ssize_t i = 0, j, kstart, kend
        cdef const uint8_t* key_p = NULL
        cdef const uint8_t* tag_p = NULL
        cdef Py_ssize_t key_len = 0, tag_len = 0
        cdef bytes name
        self._uniq = NULL
        self._uniq_len = 0
        while i < pend:
            j = i
            while j < pend and r[j] != 1:
                j += 1
            if j >= pend:
                break
            kstart = j + 1
            kend = kstart
            while kend < pend and r[kend] != 2:
                kend += 1
            if j - i == 4 and memcmp4(r + i, b"KEYS"):
                key_p = r + kstart; key_len = kend - kstart
            elif j - i == 4 and memcmp4(r + i, b"TAGS"):
                tag_p = r + kstart; tag_len = kend - kstart
            elif j - i == 8 and memcmp8(r + i, b"UNIQ_KEY"):
                self._uniq = r + kstart; self._uniq_len = kend - kstart
            else:
                name = (<char*>(r + i))[:j - i]
                if name not in _SYSTEM_B:
                    self.hkey.add(r + i, j - i, True)
                    self.hval.add(r + kstart, kend - kstart, True)
                    self.hdr_count += 1
            i = kend + 1
        self.key.add(key_p, key_len, key_p != NULL)
        self.tags.add(tag_p, tag_len, tag_p != NULL)

    cdef void _msg_id(self, const _Rec* rec) except *:
        """UNIQ_KEY when the producer set one, else the offset msgId: store host (ip + port) and phys
        offset, in hex."""
        cdef uint8_t idbuf[64]
        cdef int k = 0, i
        if self._uniq != NULL:
            self.msgid.add(self._uniq, self._uniq_len, True)
            return
        for i in range(rec.store_len):
            idbuf[k] = HEX[rec.store_host[i] >> 4]; idbuf[k + 1] = HEX[rec.store_host[i] & 15]; k += 2
        for i in range(8):
            idbuf[k] = HEX[(rec.phys >> (56 - 8 * i) >> 4) & 15]
            idbuf[k + 1] = HEX[(rec.phys >> (56 - 8 * i)) & 15]
            k += 2
        self.msgid.add(idbuf, k, True)

    def result(self):
        """The buffers as a dict (see the module's docstring)."""
        return {
            "rows": self.rows, "key": self.key.result(), "value": self.value.result(),
            "topic": self.topic.result(), "tags": self.tags.result(), "msgId": self.msgid.result(),
            "header_key": self.hkey.result(), "header_value": self.hval.result(),
            "header_offsets": self.c_hoff.result(), "partition": self.c_qid.result(),
            "offset": self.c_off.result(), "timestamp": self.c_ts.result(),
            "bornTimestamp": self.c_born.result(), "commitLogOffset": self.c_phys.result(),
            "reconsumeTimes": self.c_recon.result(), "flag": self.c_flag.result(), "sysFlag": self.c_sys.result(),
        }


def decode(const uint8_t[::1] buf, int64_t lo=-1, int64_t hi=-1, Py_ssize_t max_rows=-1):
    """Columns of the records in ``buf`` with queue offset in ``[lo, hi)`` (``hi`` < 0: no upper
    bound), at most ``max_rows``. Returns ``(columns dict, bytes consumed)``; stops at a blank,
    truncated or damaged record."""
    cdef Py_ssize_t n = buf.shape[0], pos = 0
    cdef const uint8_t* b = &buf[0] if n else NULL
    cdef int32_t total, magic
    cdef Columns cols = Columns(lo, hi, n, 64)
    while pos + 8 <= n:
        total = rd32(b + pos)
        magic = rd32(b + pos + 4)
        if magic != MAGIC_V1 and magic != MAGIC_V2:
            break
        if total < 60 or pos + total > n:
            break
        if max_rows >= 0 and cols.rows >= max_rows:
            break
        if cols.add(b + pos, total) < 0:
            break
        pos += total
    return cols.result(), pos


cdef inline bint memcmp4(const uint8_t* a, const char* b) noexcept:
    return a[0] == b[0] and a[1] == b[1] and a[2] == b[2] and a[3] == b[3]


cdef inline bint memcmp8(const uint8_t* a, const char* b) noexcept:
    cdef int i
    for i in range(8):
        if a[i] != <uint8_t>b[i]:
            return False
    return True


def decode_units(const uint8_t[::1] cq, Py_ssize_t pos, Py_ssize_t stop, int64_t cl_base,
                 const uint8_t[::1] cl, Columns cols, Py_ssize_t max_bytes):
    """Decode into ``cols`` the records that ConsumeQueue units ``cq[pos:stop]`` (20 bytes: phys, size,
    tagsCode) point at inside one mapped CommitLog file ``cl`` (starting at ``cl_base``), in place.

    Returns ``(pos, why, damaged)``: where it stopped and why: 0 the range is done, 1 the next record is
    in another CommitLog file (or missing), 2 ``cols.record_bytes`` reached ``max_bytes``, 3 an empty unit
    (the queue's end); ``damaged`` counts units whose bytes are not a record of the unit's size (skipped).
    Blank units (size 0x7FFFFFFF) are skipped."""
    cdef int64_t phys
    cdef int32_t size
    cdef Py_ssize_t cl_len = cl.shape[0], damaged = 0
    while pos + 20 <= stop:
        phys = rd64(&cq[pos])
        size = rd32(&cq[pos + 8])
        if size == 0:
            return pos, 3, damaged
        if size != BLANK_UNIT and size < 60:           # no record is this short
            damaged += 1
        elif size != BLANK_UNIT:
            if phys < cl_base or phys - cl_base + size > cl_len:
                return pos, 1, damaged
            if cols.record_bytes and cols.record_bytes + size > max_bytes:
                return pos, 2, damaged
            if rd32(&cl[phys - cl_base]) != size or cols.add(&cl[phys - cl_base], size) < 0:
                damaged += 1
        pos += 20
    return pos, 0, damaged

