# Big-endian reads and writes on raw pointers (RocketMQ's on-disk and wire byte order), shared by the
# Cython modules that work on mapped store files.

cdef inline int rd32(const unsigned char* p) noexcept nogil:
    return <int>((<unsigned int>p[0] << 24) | (<unsigned int>p[1] << 16) |
                 (<unsigned int>p[2] << 8) | <unsigned int>p[3])


cdef inline long long rd64(const unsigned char* p) noexcept nogil:
    return <long long>((<unsigned long long><unsigned int>rd32(p) << 32) |
                       <unsigned long long><unsigned int>rd32(p + 4))


cdef inline void wr32(unsigned char* p, int v) noexcept nogil:
    cdef unsigned int u = <unsigned int>v
    p[0] = (u >> 24) & 0xFF
    p[1] = (u >> 16) & 0xFF
    p[2] = (u >> 8) & 0xFF
    p[3] = u & 0xFF


cdef inline void wr64(unsigned char* p, long long v) noexcept nogil:
    cdef unsigned long long u = <unsigned long long>v
    wr32(p, <int>(u >> 32))
    wr32(p + 4, <int>(<unsigned int>u))
