# cython: language_level=3
"""Native sync-send load generator (benchmark tool, never imported by the server).

Each call drives one TCP connection in lockstep (write a request frame, read the whole response
frame) with the GIL released, so N Python threads give N truly concurrent synchronous senders,
like the Java benchmark producer's threads.  Latencies are recorded per request.
"""
from libc.stdint cimport uint8_t, uint32_t
from libc.stdlib cimport malloc, free
from libc.string cimport memcmp

cdef extern from "<time.h>" nogil:
    ctypedef long time_t
    struct timespec:
        time_t tv_sec
        long tv_nsec
    int clock_gettime(int clk_id, timespec *tp)
    int CLOCK_MONOTONIC

cdef extern from "<unistd.h>" nogil:
    ssize_t read(int fd, void *buf, size_t count)
    ssize_t write(int fd, const void *buf, size_t count)


cdef inline double _now() noexcept nogil:
    cdef timespec ts
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return ts.tv_sec + ts.tv_nsec * 1e-9


cdef int _write_all(int fd, const uint8_t* p, Py_ssize_t n) noexcept nogil:
    cdef ssize_t k
    while n > 0:
        k = write(fd, p, n)
        if k <= 0:
            return -1
        p += k
        n -= k
    return 0


cdef int _read_all(int fd, uint8_t* p, Py_ssize_t n) noexcept nogil:
    cdef ssize_t k
    while n > 0:
        k = read(fd, p, n)
        if k <= 0:
            return -1
        p += k
        n -= k
    return 0


def run_sync_sender(int fd, bytes request, double seconds, double[::1] latencies, bytes ok_prefix):
    """Send ``request`` repeatedly on ``fd`` for ``seconds``; returns (sent, errors, elapsed).

    A response counts as OK when its header starts with ``ok_prefix`` (e.g. b'{"code":0,').
    Latency (seconds) of each OK request is written to ``latencies`` until it is full.
    """
    cdef const uint8_t* req = <const uint8_t*>request
    cdef Py_ssize_t req_len = len(request)
    cdef const uint8_t* okp = <const uint8_t*>ok_prefix
    cdef Py_ssize_t ok_len = len(ok_prefix)
    cdef Py_ssize_t cap = latencies.shape[0]
    cdef Py_ssize_t sent = 0, errors = 0
    cdef uint8_t head[8]
    cdef Py_ssize_t buf_cap = 1 << 16
    cdef uint8_t* buf = <uint8_t*>malloc(buf_cap)
    cdef uint32_t length, hlen
    cdef double t0, t1, start, deadline
    cdef int failed = 0
    if buf == NULL:
        raise MemoryError()
    with nogil:
        start = _now()
        deadline = start + seconds
        while True:
            t0 = _now()
            if t0 >= deadline:
                break
            if _write_all(fd, req, req_len) < 0 or _read_all(fd, head, 8) < 0:
                failed = 1
                break
            length = (<uint32_t>head[0] << 24) | (<uint32_t>head[1] << 16) | (<uint32_t>head[2] << 8) | head[3]
            hlen = ((<uint32_t>head[5] << 16) | (<uint32_t>head[6] << 8) | head[7])
            if length < 4 or length - 4 > buf_cap or _read_all(fd, buf, length - 4) < 0:
                failed = 1
                break
            t1 = _now()
            if hlen >= ok_len and memcmp(buf, okp, ok_len) == 0:
                if sent < cap:
                    latencies[sent] = t1 - t0
                sent += 1
            else:
                errors += 1
        t1 = _now()
    free(buf)
    if failed:
        errors += 1
    return sent, errors, t1 - start
