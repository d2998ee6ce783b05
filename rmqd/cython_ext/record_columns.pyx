# cython: language_level=3
"""Message records -> Arrow-ready column buffers, in one C pass (the Spark connector's decoder).

``decode(buf, lo, hi)`` walks CommitLog-format records (a PULL body, or slices of CommitLog files)
and keeps those whose queue offset is in ``[lo, hi)``. It returns a dict of plain buffers that
:mod:`rmqd.spark.arrow` wraps as Arrow arrays without copying: int32 offsets + data (+ validity
bitmap) for the binary/string columns, little-endian int32/int64 arrays for the numbers, and for
``headers`` (the user properties) a list offset array over key/value child arrays.
"""
from cpython.bytearray cimport PyByteArray_AS_STRING
from libc.stdint cimport int32_t, int64_t, uint8_t, uint64_t
from libc.string cimport memcpy, memset

DEF BORNHOST_V6 = 0x10
DEF STOREHOST_V6 = 0x20
DEF MAGIC_V1 = -626843481      # 0xDAA320A7
DEF MAGIC_V2 = -626843477      # 0xDAA320A7 + 4 (v2: topic length is 2 bytes)

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


cdef inline int64_t _g64(const uint8_t* p) noexcept nogil:
    cdef uint64_t v = 0
    cdef int i
    for i in range(8):
        v = (v << 8) | p[i]
    return <int64_t>v


cdef inline int32_t _g32(const uint8_t* p) noexcept nogil:
    return <int32_t>((<uint64_t>p[0] << 24) | (<uint64_t>p[1] << 16) | (<uint64_t>p[2] << 8) | p[3])


cdef class _Var:
    """A growing variable-width column: int32 offsets, data, validity bitmap."""
    cdef bytearray data
    cdef bytearray offsets
    cdef bytearray valid
    cdef Py_ssize_t n, used, nulls

    def __cinit__(self, Py_ssize_t data_cap, Py_ssize_t rows_cap):
        self.data = bytearray(max(data_cap, 8))
        self.offsets = bytearray(4 * (rows_cap + 1))
        self.valid = bytearray((rows_cap + 7) // 8 + 1)
        self.n = 0
        self.used = 0
        self.nulls = 0

    cdef inline void add(self, const uint8_t* p, Py_ssize_t k, bint present):
        cdef char* d
        cdef int32_t* o
        if self.used + k > len(self.data):
            self.data.extend(bytearray(max(k, len(self.data))))
        d = PyByteArray_AS_STRING(self.data)
        if present and k:
            memcpy(d + self.used, p, k)
            self.used += k
        o = <int32_t*>PyByteArray_AS_STRING(self.offsets)
        o[self.n + 1] = <int32_t>self.used
        if present:
            (<uint8_t*>PyByteArray_AS_STRING(self.valid))[self.n >> 3] |= (1 << (self.n & 7))
        else:
            self.nulls += 1
        self.n += 1

    cdef void grow_rows(self, Py_ssize_t rows_cap):
        if 4 * (rows_cap + 1) > len(self.offsets):
            self.offsets.extend(bytearray(4 * (rows_cap + 1) - len(self.offsets)))
            self.valid.extend(bytearray((rows_cap + 7) // 8 + 1 - len(self.valid)))

    def result(self):
        return (self.n, self.nulls, memoryview(self.valid)[:(self.n + 7) // 8],
                memoryview(self.offsets)[:4 * (self.n + 1)], memoryview(self.data)[:self.used])


cdef class _Fixed:
    cdef bytearray data
    cdef Py_ssize_t n, width

    def __cinit__(self, Py_ssize_t width, Py_ssize_t rows_cap):
        self.width = width
        self.data = bytearray(width * max(rows_cap, 1))
        self.n = 0

    cdef inline void add64(self, int64_t v):
        if (self.n + 1) * 8 > len(self.data):
            self.data.extend(bytearray(len(self.data)))
        (<int64_t*>PyByteArray_AS_STRING(self.data))[self.n] = v
        self.n += 1

    cdef inline void add32(self, int32_t v):
        if (self.n + 1) * 4 > len(self.data):
            self.data.extend(bytearray(len(self.data)))
        (<int32_t*>PyByteArray_AS_STRING(self.data))[self.n] = v
        self.n += 1

    def result(self):
        return memoryview(self.data)[:self.n * self.width]


def decode(const uint8_t[::1] buf, int64_t lo=-1, int64_t hi=-1, Py_ssize_t max_rows=-1):
    """Columns of the records in ``buf`` with queue offset in ``[lo, hi)`` (``hi`` < 0: no upper
    bound), at most ``max_rows``. Returns ``(columns dict, bytes consumed)``; stops at a blank or
    truncated record."""
    cdef Py_ssize_t n = buf.shape[0], pos = 0, rows_cap = 64, count = 0
    cdef const uint8_t* b = &buf[0] if n else NULL
    cdef const uint8_t* r
    cdef int32_t total, magic, sys_flag, body_len, qid, reconsume, flag
    cdef int64_t qoff, phys, born_ts, store_ts
    cdef Py_ssize_t p, born_len, store_len, topic_len, props_len, pend, i, j, kstart, kend
    cdef const uint8_t* store_host
    cdef const uint8_t* uniq_p
    cdef Py_ssize_t uniq_len
    cdef const uint8_t* key_p
    cdef Py_ssize_t key_len
    cdef const uint8_t* tag_p
    cdef Py_ssize_t tag_len
    cdef uint8_t idbuf[64]
    cdef int k
    cdef bytes name
    cdef Py_ssize_t hdr_count = 0
    cdef _Var key = _Var(1024, rows_cap), value = _Var(n, rows_cap), topic = _Var(1024, rows_cap)
    cdef _Var tags = _Var(1024, rows_cap), msgid = _Var(1024, rows_cap)
    cdef _Var hkey = _Var(1024, rows_cap), hval = _Var(1024, rows_cap)
    cdef _Fixed c_qid = _Fixed(4, rows_cap), c_off = _Fixed(8, rows_cap), c_ts = _Fixed(8, rows_cap)
    cdef _Fixed c_born = _Fixed(8, rows_cap), c_phys = _Fixed(8, rows_cap), c_recon = _Fixed(4, rows_cap)
    cdef _Fixed c_flag = _Fixed(4, rows_cap), c_hoff = _Fixed(4, rows_cap), c_sys = _Fixed(4, rows_cap)
    c_hoff.add32(0)
    while pos + 8 <= n:
        r = b + pos
        total = _g32(r)
        magic = _g32(r + 4)
        if magic != MAGIC_V1 and magic != MAGIC_V2:
            break
        if total < 60 or pos + total > n:
            break
        if max_rows >= 0 and count >= max_rows:
            break
        qid = _g32(r + 12)
        flag = _g32(r + 16)
        qoff = _g64(r + 20)
        if qoff < lo or (hi >= 0 and qoff >= hi):
            pos += total
            continue
        phys = _g64(r + 28)
        sys_flag = _g32(r + 36)
        born_ts = _g64(r + 40)
        born_len = 20 if sys_flag & BORNHOST_V6 else 8
        store_len = 20 if sys_flag & STOREHOST_V6 else 8
        p = 48 + born_len
        store_ts = _g64(r + p)
        store_host = r + p + 8
        p += 8 + store_len
        reconsume = _g32(r + p)
        p += 4 + 8
        body_len = _g32(r + p)
        p += 4
        if body_len < 0 or p + body_len > total:
            break
        if count + 1 > rows_cap:
            rows_cap *= 2
            for v in (key, value, topic, tags, msgid):
                (<_Var>v).grow_rows(rows_cap)
        value.add(r + p, body_len, True)
        p += body_len
        if magic == MAGIC_V2:
            topic_len = (r[p] << 8) | r[p + 1]
            p += 2
        else:
            topic_len = r[p]
            p += 1
        topic.add(r + p, topic_len, True)
        p += topic_len
        props_len = (r[p] << 8) | r[p + 1]
        p += 2
        pend = p + props_len
        if pend > total:
            break
        key_p = NULL; key_len = 0; tag_p = NULL; tag_len = 0; uniq_p = NULL; uniq_len = 0
        i = p
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
                uniq_p = r + kstart; uniq_len = kend - kstart
            else:
                name = (<char*>(r + i))[:j - i]
                if name not in _SYSTEM_B:
                    hkey.grow_rows(hkey.n + 1)
                    hval.grow_rows(hval.n + 1)
                    hkey.add(r + i, j - i, True)
                    hval.add(r + kstart, kend - kstart, True)
                    hdr_count += 1
            i = kend + 1
        key.add(key_p, key_len, key_p != NULL)
        tags.add(tag_p, tag_len, tag_p != NULL)
        if uniq_p != NULL:
            msgid.add(uniq_p, uniq_len, True)
        else:                       # the offset msgId: store host (ip + port) and phys offset, hex
            k = 0
            for i in range(store_len):
                idbuf[k] = HEX[store_host[i] >> 4]; idbuf[k + 1] = HEX[store_host[i] & 15]; k += 2
            for i in range(8):
                idbuf[k] = HEX[(phys >> (56 - 8 * i) >> 4) & 15]
                idbuf[k + 1] = HEX[(phys >> (56 - 8 * i)) & 15]
                k += 2
            msgid.add(idbuf, k, True)
        c_qid.add32(qid)
        c_off.add64(qoff)
        c_ts.add64(store_ts * 1000)          # Arrow/Spark timestamps are microseconds
        c_born.add64(born_ts * 1000)
        c_phys.add64(phys)
        c_recon.add32(reconsume)
        c_flag.add32(flag)
        c_sys.add32(sys_flag)
        c_hoff.add32(<int32_t>hdr_count)
        count += 1
        pos += total
    return {
        "rows": count, "key": key.result(), "value": value.result(), "topic": topic.result(),
        "tags": tags.result(), "msgId": msgid.result(), "header_key": hkey.result(),
        "header_value": hval.result(), "header_offsets": c_hoff.result(), "partition": c_qid.result(),
        "offset": c_off.result(), "timestamp": c_ts.result(), "bornTimestamp": c_born.result(),
        "commitLogOffset": c_phys.result(), "reconsumeTimes": c_recon.result(), "flag": c_flag.result(),
        "sysFlag": c_sys.result(),
    }, pos


cdef inline bint memcmp4(const uint8_t* a, const char* b) noexcept:
    return a[0] == b[0] and a[1] == b[1] and a[2] == b[2] and a[3] == b[3]


cdef inline bint memcmp8(const uint8_t* a, const char* b) noexcept:
    cdef int i
    for i in range(8):
        if a[i] != <uint8_t>b[i]:
            return False
    return True


def gather(const uint8_t[::1] cq, Py_ssize_t pos, Py_ssize_t stop, int64_t cl_base,
           const uint8_t[::1] cl, bytearray out, Py_ssize_t max_bytes):
    """Copy the records that ConsumeQueue units ``cq[pos:stop]`` (20 bytes: phys, size, tagsCode) point
    at inside one CommitLog file ``cl`` (starting at ``cl_base``) to the end of ``out``.

    Returns ``(pos, why)``: where it stopped and why: 0 the range is done, 1 the next record is in another
    CommitLog file (or missing), 2 ``out`` reached ``max_bytes``, 3 an empty unit (the queue's end).
    Blank units (size 0x7FFFFFFF) are skipped."""
    cdef int64_t phys
    cdef int32_t size
    cdef Py_ssize_t start = len(out), n = 0, total = 0, p = pos, q
    cdef Py_ssize_t cl_len = cl.shape[0]
    cdef char* w
    # first pass: how much fits
    while p + 20 <= stop:
        phys = _g64(&cq[p])
        size = _g32(&cq[p + 8])
        if size == 0:
            break
        if size != 0x7FFFFFFF:
            if phys < cl_base or phys - cl_base + size > cl_len:
                break
            if total and total + size > max_bytes:
                break
            total += size
        p += 20
    out.extend(bytearray(total))
    w = PyByteArray_AS_STRING(out) + start
    q = pos
    with nogil:
        while q < p:
            phys = _g64(&cq[q])
            size = _g32(&cq[q + 8])
            if size != 0x7FFFFFFF:
                memcpy(w, &cl[phys - cl_base], size)
                w += size
            q += 20
    if p + 20 > stop:
        return p, 0
    size = _g32(&cq[p + 8])
    if size == 0:
        return p, 3
    phys = _g64(&cq[p])
    if phys < cl_base or phys - cl_base + size > cl_len:
        return p, 1
    return p, 2
