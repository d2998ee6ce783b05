# cdef interface of the message codec, shared with store_commitlog.pyx and send_lane.pyx.
cdef unsigned int masked_crc(const unsigned char* p, Py_ssize_t n) noexcept nogil
cdef int read_i32(const unsigned char* p) noexcept nogil
cdef long long read_i64(const unsigned char* p) noexcept nogil
cdef void write_i32(unsigned char* p, int v) noexcept nogil
cdef void write_i64(unsigned char* p, long long v) noexcept nogil
cdef object property_by_key(str s, str key)


cdef inline unsigned int hash_units(unsigned int h, str s, Py_ssize_t start, Py_ssize_t end):
    """Continue Java's String.hashCode over the UTF-16 units of ``s[start:end]`` (inline: the put path hashes
    every key with it)."""
    cdef Py_ssize_t i
    cdef unsigned int c
    for i in range(start, end):
        c = <unsigned int>(<Py_UCS4>s[i])
        if c >= 0x10000:
            c -= 0x10000
            h = h * 31 + (0xD800 + (c >> 10))
            h = h * 31 + (0xDC00 + (c & 0x3FF))
        else:
            h = h * 31 + c
    return h
