# cdef interface of the message codec, shared with store_commitlog.pyx and send_lane.pyx.
cdef unsigned int masked_crc(const unsigned char* p, Py_ssize_t n) noexcept nogil
cdef int read_i32(const unsigned char* p) noexcept nogil
cdef long long read_i64(const unsigned char* p) noexcept nogil
cdef void write_i32(unsigned char* p, int v) noexcept nogil
cdef void write_i64(unsigned char* p, long long v) noexcept nogil
cdef object property_by_key(str s, str key)
