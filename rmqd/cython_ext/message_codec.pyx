# distutils: libraries = z
# cython: boundscheck=False, wraparound=False, cdivision=True, language_level=3
"""Hot paths of the stored-message codec (protocol README section 4.1).

All integers are big-endian.  Body copy and CRC32 run with the GIL released.
"""
from libc.string cimport memcpy, memset

cdef extern from "zlib.h" nogil:
    unsigned long crc32(unsigned long crc, const unsigned char* buf, unsigned int len)

DEF MAGIC_V1 = -626843481          # 0xDAA320A7
DEF BLANK_MAGIC = -875286124       # 0xCBD43194

MESSAGE_MAGIC_CODE = MAGIC_V1
BLANK_MAGIC_CODE = BLANK_MAGIC


cdef unsigned int masked_crc(const unsigned char* p, Py_ssize_t n) noexcept nogil:
    cdef unsigned long c = crc32(0, NULL, 0)
    cdef Py_ssize_t chunk
    while n > 0:
        chunk = n if n < 0x40000000 else 0x40000000
        c = crc32(c, p, <unsigned int>chunk)
        p += chunk
        n -= chunk
    return <unsigned int>(c & 0x7FFFFFFF)


cdef int read_i32(const unsigned char* p) noexcept nogil:
    return <int>((<unsigned int>p[0] << 24) | (<unsigned int>p[1] << 16) |
                 (<unsigned int>p[2] << 8) | <unsigned int>p[3])


cdef long long read_i64(const unsigned char* p) noexcept nogil:
    cdef unsigned long long v = 0
    cdef int i
    for i in range(8):
        v = (v << 8) | p[i]
    return <long long>v


cdef void write_i32(unsigned char* p, int v) noexcept nogil:
    cdef unsigned int u = <unsigned int>v
    p[0] = (u >> 24) & 0xFF
    p[1] = (u >> 16) & 0xFF
    p[2] = (u >> 8) & 0xFF
    p[3] = u & 0xFF


cdef void write_i64(unsigned char* p, long long v) noexcept nogil:
    cdef unsigned long long u = <unsigned long long>v
    cdef int i
    for i in range(7, -1, -1):
        p[i] = u & 0xFF
        u >>= 8


def body_crc(const unsigned char[::1] body) -> int:
    """CRC32 of ``body`` masked with 0x7FFFFFFF (section 4.4)."""
    cdef Py_ssize_t n = body.shape[0]
    cdef unsigned int r
    if n == 0:
        return 0
    with nogil:
        r = masked_crc(&body[0], n)
    return r


def record_size(Py_ssize_t body_len, Py_ssize_t topic_len, Py_ssize_t props_len,
                Py_ssize_t born_host_len, Py_ssize_t store_host_len) -> int:
    """Total stored length of a record (section 4.1)."""
    return (4 + 4 + 4 + 4 + 4 + 8 + 8 + 4 + 8 + born_host_len + 8 + store_host_len
            + 4 + 8 + 4 + body_len + 1 + topic_len + 2 + props_len)


def encode_record_into(unsigned char[::1] dest, Py_ssize_t pos, int total,
                       const unsigned char[::1] topic, int queue_id, int flag,
                       long long queue_offset, long long phys_offset, int sys_flag,
                       long long born_ts, const unsigned char[::1] born_host,
                       long long store_ts, const unsigned char[::1] store_host,
                       int reconsume_times, long long prepared_tx_offset,
                       const unsigned char[::1] body, const unsigned char[::1] props) -> int:
    """Write one complete record of ``total`` bytes at ``dest[pos]``; returns the body CRC.

    The caller has computed ``total`` with :func:`record_size` and checked it fits.
    """
    cdef Py_ssize_t blen = body.shape[0], tlen = topic.shape[0], plen = props.shape[0]
    cdef Py_ssize_t bh = born_host.shape[0], sh = store_host.shape[0]
    if pos < 0 or pos + total > dest.shape[0]:
        raise ValueError("record does not fit the destination buffer")
    if total != record_size(blen, tlen, plen, bh, sh):
        raise ValueError("total size mismatch")
    cdef unsigned char* p = &dest[pos]
    cdef const unsigned char* bp = &body[0] if blen > 0 else NULL
    cdef const unsigned char* tp = &topic[0] if tlen > 0 else NULL
    cdef const unsigned char* pp = &props[0] if plen > 0 else NULL
    cdef const unsigned char* bhp = &born_host[0]
    cdef const unsigned char* shp = &store_host[0]
    cdef unsigned int crc = 0
    with nogil:
        if blen > 0:
            crc = masked_crc(bp, blen)
        write_i32(p, total); p += 4
        write_i32(p, MAGIC_V1); p += 4
        write_i32(p, <int>crc); p += 4
        write_i32(p, queue_id); p += 4
        write_i32(p, flag); p += 4
        write_i64(p, queue_offset); p += 8
        write_i64(p, phys_offset); p += 8
        write_i32(p, sys_flag); p += 4
        write_i64(p, born_ts); p += 8
        memcpy(p, bhp, bh); p += bh
        write_i64(p, store_ts); p += 8
        memcpy(p, shp, sh); p += sh
        write_i32(p, reconsume_times); p += 4
        write_i64(p, prepared_tx_offset); p += 8
        write_i32(p, <int>blen); p += 4
        if blen > 0:
            memcpy(p, bp, blen)
        p += blen
        p[0] = <unsigned char>tlen; p += 1
        if tlen > 0:
            memcpy(p, tp, tlen)
        p += tlen
        p[0] = (plen >> 8) & 0xFF
        p[1] = plen & 0xFF
        p += 2
        if plen > 0:
            memcpy(p, pp, plen)
    return crc


def decode_record(const unsigned char[::1] buf, Py_ssize_t pos=0):
    """Decode the record at ``buf[pos]``.

    Returns ``(total, magic, body_crc, queue_id, flag, queue_offset, phys_offset, sys_flag,
    born_ts, born_host_bytes, store_ts, store_host_bytes, reconsume_times,
    prepared_tx_offset, body_start, body_len, topic_bytes, props_bytes)``; raises ValueError
    when the buffer is too short or the record is malformed.
    """
    cdef Py_ssize_t n = buf.shape[0]
    if pos < 0 or pos + 8 > n:
        raise ValueError("buffer too short for a record header")
    cdef const unsigned char* base = &buf[pos]
    cdef int total = read_i32(base)
    cdef int magic = read_i32(base + 4)
    if total < 8 or pos + total > n:
        raise ValueError(f"bad record size {total} at {pos} (buffer {n})")
    if magic != MAGIC_V1:
        raise ValueError(f"bad magic code {magic & 0xFFFFFFFF:#x} at {pos}")
    cdef int sys_flag = read_i32(base + 36)
    cdef Py_ssize_t bh = 20 if (sys_flag & 0x10) else 8
    cdef Py_ssize_t sh = 20 if (sys_flag & 0x20) else 8
    cdef Py_ssize_t q = 48
    if 48 + bh + 8 + sh + 16 > total:
        raise ValueError("record truncated in header")
    born_ts = read_i64(base + 40)
    born_host = bytes(base[q:q + bh]); q += bh
    store_ts = read_i64(base + q); q += 8
    store_host = bytes(base[q:q + sh]); q += sh
    reconsume = read_i32(base + q); q += 4
    prepared = read_i64(base + q); q += 8
    cdef int blen = read_i32(base + q)
    cdef int tlen, plen
    q += 4
    if blen < 0 or q + blen + 1 > total:
        raise ValueError("record truncated in body")
    body_start = pos + q
    q += blen
    tlen = base[q]
    q += 1
    if q + tlen + 2 > total:
        raise ValueError("record truncated in topic")
    topic = bytes(base[q:q + tlen]); q += tlen
    plen = (base[q] << 8) | base[q + 1]
    q += 2
    if q + plen != total:
        raise ValueError("record length does not match its fields")
    props = bytes(base[q:q + plen])
    return (total, magic, read_i32(base + 8) & 0xFFFFFFFF, read_i32(base + 12), read_i32(base + 16),
            read_i64(base + 20), read_i64(base + 28), sys_flag, born_ts, born_host, store_ts,
            store_host, reconsume, prepared, body_start, blen, topic, props)


def java_string_hash(str s) -> int:
    """Java ``String.hashCode`` (UTF-16 code units, signed 32-bit)."""
    return <int>hash_units(0, s, 0, len(s))


def decode_properties(str s) -> dict:
    """Lenient Java-compatible properties decoder (section 4.3)."""
    cdef dict out = {}
    cdef str seg
    cdef Py_ssize_t i, n
    if not s:
        return out
    for seg in s.split('\x02'):
        n = len(seg)
        if n < 3:
            continue
        i = seg.find('\x01')
        if i <= 0 or i >= n - 1:
            continue
        out[seg[:i]] = seg[i + 1:]
    return out


cdef object property_by_key(str s, str key):
    """Value of the property whose encoded prefix is ``key`` (``NAME\\x01``) in ``s``, or None."""
    cdef Py_ssize_t start = 0, i, j, n = len(s)
    while True:
        i = s.find(key, start)
        if i < 0:
            return None
        if i == 0 or s[i - 1] == '\x02':
            j = s.find('\x02', i)
            if j < 0:
                j = n
            v = s[i + len(key):j]
            return v if v else None
        start = i + 1


def find_property(str s, str name):
    """Value of property ``name`` in encoded string ``s`` or None, without building a dict."""
    return property_by_key(s, name + '\x01')
