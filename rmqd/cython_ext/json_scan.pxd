# Interface of the JSON remoting-header scanner (see json_scan.pyx).
from libc.stdint cimport uint8_t

cdef enum:
    MAX_EXT = 32        # more extFields than this: the scanner gives up
    V_ABSENT = 0
    V_STR = 1           # a string without escapes: the bytes between the quotes
    V_STR_ESC = 2       # a string with escapes: read it with unescape()
    V_NUM = 3           # an integer (no fraction, no exponent)
    V_TRUE = 4
    V_FALSE = 5
    V_NULL = 6

cdef struct Slice:
    const uint8_t* p
    Py_ssize_t n
    int kind

cdef struct Header:
    Slice code
    Slice flag
    Slice opaque
    bint has_ext
    int n_ext
    Slice keys[MAX_EXT]
    Slice vals[MAX_EXT]

cdef bint scan_header(const uint8_t* p, Py_ssize_t n, Header* h) noexcept nogil
cdef const Slice* ext_value(const Header* h, const char* key, Py_ssize_t klen) noexcept nogil
cdef bint slice_int(const Slice* s, long long* out) noexcept nogil
cdef Py_ssize_t unescape(const Slice* s, uint8_t* out) noexcept nogil
