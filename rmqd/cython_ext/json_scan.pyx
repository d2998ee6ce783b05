# cython: language_level=3
"""Scan a JSON remoting header in C, building no Python objects.

The send lane reads the few header fields it needs straight from the received bytes.  The
scanner accepts only what it fully understands: one object of scalar members plus an
``extFields`` object of scalars, ASCII only, integers without fraction or exponent, escapes that
decode to ASCII.  For anything else, including everything a strict JSON parser rejects,
``scan_header`` returns False and the caller decodes the header the ordinary way (orjson).  So a
header the scanner accepts means what orjson would make of it: duplicate keys keep the last
value, a null field is an absent one.
"""
from libc.string cimport memcmp


cdef inline Py_ssize_t _ws(const uint8_t* p, Py_ssize_t i, Py_ssize_t n) noexcept nogil:
    while i < n and (p[i] == 32 or p[i] == 9 or p[i] == 10 or p[i] == 13):
        i += 1
    return i


cdef inline int _hex(uint8_t c) noexcept nogil:
    if 48 <= c <= 57:
        return c - 48
    if 97 <= c <= 102:
        return c - 87
    if 65 <= c <= 70:
        return c - 55
    return -1


cdef Py_ssize_t _string(const uint8_t* p, Py_ssize_t i, Py_ssize_t n, Slice* out) noexcept nogil:
    """``p[i]`` is an opening quote: the index after the closing one, or -1."""
    cdef Py_ssize_t start = i + 1
    cdef int kind = V_STR, k, v, d
    cdef uint8_t c
    i += 1
    while i < n:
        c = p[i]
        if c == 34:                                # closing quote
            out.p = p + start
            out.n = i - start
            out.kind = kind
            return i + 1
        if c < 32 or c >= 128:                     # control character (invalid) or non-ASCII
            return -1
        if c != 92:
            i += 1
            continue
        kind = V_STR_ESC
        if i + 1 >= n:
            return -1
        c = p[i + 1]
        if c == 117:                               # \uXXXX
            if i + 5 >= n:
                return -1
            v = 0
            for k in range(4):
                d = _hex(p[i + 2 + k])
                if d < 0:
                    return -1
                v = v * 16 + d
            if v >= 128:                           # non-ASCII or a surrogate
                return -1
            i += 6
        elif c == 34 or c == 92 or c == 47 or c == 98 or c == 102 or c == 110 or c == 114 or c == 116:
            i += 2
        else:
            return -1
    return -1


cdef Py_ssize_t _number(const uint8_t* p, Py_ssize_t i, Py_ssize_t n, Slice* out) noexcept nogil:
    cdef Py_ssize_t start = i
    if p[i] == 45:                                 # -
        i += 1
    if i >= n:
        return -1
    if p[i] == 48:                                 # a leading 0 stands alone
        i += 1
    elif 49 <= p[i] <= 57:
        while i < n and 48 <= p[i] <= 57:
            i += 1
    else:
        return -1
    if i < n and (48 <= p[i] <= 57 or p[i] == 46 or p[i] == 101 or p[i] == 69):
        return -1                                  # leading zero, fraction or exponent
    if i - start > 19:
        return -1
    out.p = p + start
    out.n = i - start
    out.kind = V_NUM
    return i


cdef Py_ssize_t _scalar(const uint8_t* p, Py_ssize_t i, Py_ssize_t n, Slice* out) noexcept nogil:
    cdef uint8_t c = p[i]
    if c == 34:
        return _string(p, i, n, out)
    if c == 45 or 48 <= c <= 57:
        return _number(p, i, n, out)
    out.p = p + i
    if c == 116 and n - i >= 4 and memcmp(p + i, b"true", 4) == 0:
        out.n = 4
        out.kind = V_TRUE
        return i + 4
    if c == 102 and n - i >= 5 and memcmp(p + i, b"false", 5) == 0:
        out.n = 5
        out.kind = V_FALSE
        return i + 5
    if c == 110 and n - i >= 4 and memcmp(p + i, b"null", 4) == 0:
        out.n = 4
        out.kind = V_NULL
        return i + 4
    return -1


cdef inline bint _is(const Slice* s, const char* word, Py_ssize_t n) noexcept nogil:
    return s.n == n and memcmp(s.p, word, n) == 0


cdef Py_ssize_t _ext(const uint8_t* p, Py_ssize_t i, Py_ssize_t n, Header* h) noexcept nogil:
    """``p[i]`` opens the extFields object: read its members into ``h``."""
    h.n_ext = 0
    i = _ws(p, i + 1, n)
    if i < n and p[i] == 125:
        return i + 1
    while True:
        if i >= n or p[i] != 34 or h.n_ext >= MAX_EXT:
            return -1
        i = _string(p, i, n, &h.keys[h.n_ext])
        if i < 0 or h.keys[h.n_ext].kind != V_STR:
            return -1
        i = _ws(p, i, n)
        if i >= n or p[i] != 58:
            return -1
        i = _ws(p, i + 1, n)
        if i >= n:
            return -1
        i = _scalar(p, i, n, &h.vals[h.n_ext])
        if i < 0:
            return -1
        h.n_ext += 1
        i = _ws(p, i, n)
        if i >= n:
            return -1
        if p[i] == 125:
            return i + 1
        if p[i] != 44:
            return -1
        i = _ws(p, i + 1, n)


cdef bint scan_header(const uint8_t* p, Py_ssize_t n, Header* h) noexcept nogil:
    """Read ``code``, ``flag``, ``opaque`` and the extFields of a JSON header into ``h``;
    False when the header is not of the plain shape described in the module docstring."""
    cdef Slice key, val
    cdef Py_ssize_t i
    h.code.kind = h.flag.kind = h.opaque.kind = V_ABSENT
    h.has_ext = False
    h.n_ext = 0
    i = _ws(p, 0, n)
    if i >= n or p[i] != 123:
        return False
    i = _ws(p, i + 1, n)
    if i < n and p[i] == 125:
        return _ws(p, i + 1, n) == n
    while True:
        if i >= n or p[i] != 34:
            return False
        i = _string(p, i, n, &key)
        if i < 0 or key.kind != V_STR:
            return False
        i = _ws(p, i, n)
        if i >= n or p[i] != 58:
            return False
        i = _ws(p, i + 1, n)
        if i >= n:
            return False
        if _is(&key, b"extFields", 9) and p[i] == 123:
            i = _ext(p, i, n, h)
            h.has_ext = True
        else:
            i = _scalar(p, i, n, &val)
            if i < 0:
                return False
            if _is(&key, b"extFields", 9):
                if val.kind != V_NULL:
                    return False                   # not an object: the decoder words the error
                h.has_ext = False
                h.n_ext = 0
            elif _is(&key, b"code", 4):
                h.code = val
            elif _is(&key, b"flag", 4):
                h.flag = val
            elif _is(&key, b"opaque", 6):
                h.opaque = val
        if i < 0:
            return False
        i = _ws(p, i, n)
        if i >= n:
            return False
        if p[i] == 125:
            return _ws(p, i + 1, n) == n
        if p[i] != 44:
            return False
        i = _ws(p, i + 1, n)


cdef const Slice* ext_value(const Header* h, const char* key, Py_ssize_t klen) noexcept nogil:
    """The value of extFields member ``key`` (the last one if repeated), NULL if absent or null."""
    cdef int j = h.n_ext - 1
    while j >= 0:
        if h.keys[j].n == klen and memcmp(h.keys[j].p, key, klen) == 0:
            if h.vals[j].kind == V_NULL:
                return NULL
            return &h.vals[j]
        j -= 1
    return NULL


cdef bint slice_int(const Slice* s, long long* out) noexcept nogil:
    """A number, or a string of [-]digits (at most 18), as an integer; False for anything else."""
    cdef Py_ssize_t i = 0, n = s.n
    cdef long long r = 0
    if s.kind != V_NUM and s.kind != V_STR:
        return False
    if n > 0 and s.p[0] == 45:
        i = 1
    if n - i < 1 or n - i > 18:
        return False
    while i < n:
        if not 48 <= s.p[i] <= 57:
            return False
        r = r * 10 + (s.p[i] - 48)
        i += 1
    out[0] = -r if s.p[0] == 45 else r
    return True


cdef Py_ssize_t unescape(const Slice* s, uint8_t* out) noexcept nogil:
    """Write the string's characters (ASCII) to ``out`` (room for ``s.n`` bytes); their count."""
    cdef Py_ssize_t i = 0, o = 0, n = s.n
    cdef uint8_t c
    if s.kind == V_STR:
        while i < n:
            out[i] = s.p[i]
            i += 1
        return n
    while i < n:
        c = s.p[i]
        if c != 92:
            out[o] = c
            i += 1
        else:
            c = s.p[i + 1]
            if c == 117:
                out[o] = <uint8_t>((_hex(s.p[i + 2]) << 12) | (_hex(s.p[i + 3]) << 8)
                                   | (_hex(s.p[i + 4]) << 4) | _hex(s.p[i + 5]))
                i += 6
            else:
                if c == 98:
                    c = 8
                elif c == 102:
                    c = 12
                elif c == 110:
                    c = 10
                elif c == 114:
                    c = 13
                elif c == 116:
                    c = 9
                out[o] = c                         # \" \\ \/ stand for themselves
                i += 2
        o += 1
    return o


cdef object _value(const Slice* s):
    """A scanned value as the header decoder keeps it (scalars become strings)."""
    cdef bytearray out
    if s.kind == V_STR_ESC:
        out = bytearray(s.n)
        return bytes(out[:unescape(s, <uint8_t*><char*>out)]).decode("ascii")
    if s.kind == V_TRUE:
        return "true"
    if s.kind == V_FALSE:
        return "false"
    if s.kind == V_NUM:
        return str(int((<const char*>s.p)[:s.n]))
    return (<const char*>s.p)[:s.n].decode("ascii")


cdef object _top_int(const Slice* s):
    cdef long long v = 0
    if s.kind == V_ABSENT:
        return 0
    if s.kind != V_NUM or not slice_int(s, &v):
        return None
    return v


def scan(bytes header):
    """Python view of ``scan_header`` (tests): None if refused, else a dict of ``code``, ``flag``
    and ``opaque`` (ints, 0 when absent, None when not a plain integer) and ``extFields`` (the
    members as the decoder keeps them, or None)."""
    cdef Header h
    cdef int j
    if not scan_header(<const uint8_t*><const char*>header, len(header), &h):
        return None
    ext = None
    if h.has_ext:
        ext = {}
        for j in range(h.n_ext):
            key = (<const char*>h.keys[j].p)[:h.keys[j].n].decode("ascii")
            if h.vals[j].kind == V_NULL:
                ext.pop(key, None)
            else:
                ext[key] = _value(&h.vals[j])
    return {"code": _top_int(&h.code), "flag": _top_int(&h.flag), "opaque": _top_int(&h.opaque),
            "extFields": ext}
