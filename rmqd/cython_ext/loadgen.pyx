# cython: language_level=3
"""Native sync-send load generator (benchmark tool, never imported by the server).

Each call drives one TCP connection in lockstep (write a request frame, read the whole response
frame) with the GIL released, so N Python threads give N truly concurrent synchronous senders,
like the Java benchmark producer's threads.  Latencies are recorded per request.
"""
from libc.stdint cimport uint8_t, uint32_t
from libc.stdlib cimport malloc, free
from libc.string cimport memcmp, memcpy, memmove

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


ctypedef ssize_t (*io_call)(int fd, void *buf, size_t count) noexcept nogil


cdef int _transfer_all(io_call op, int fd, uint8_t* p, Py_ssize_t n) noexcept nogil:
    """Repeat ``op`` (read or write) until all ``n`` bytes at ``p`` are moved: 0, or -1 on an error or end of
    stream."""
    cdef ssize_t k
    while n > 0:
        k = op(fd, p, n)
        if k <= 0:
            return -1
        p += k
        n -= k
    return 0


cdef inline int _write_all(int fd, const uint8_t* p, Py_ssize_t n) noexcept nogil:
    return _transfer_all(<io_call>write, fd, <uint8_t*>p, n)


cdef inline int _read_all(int fd, uint8_t* p, Py_ssize_t n) noexcept nogil:
    return _transfer_all(read, fd, p, n)


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


# -- many sender threads over one connection (how the Java and C++ clients send) -------------

cdef extern from "<pthread.h>" nogil:
    ctypedef struct pthread_mutex_t:
        pass
    int pthread_mutex_init(pthread_mutex_t* m, void* attr)
    int pthread_mutex_lock(pthread_mutex_t* m)
    int pthread_mutex_unlock(pthread_mutex_t* m)
    int pthread_mutex_destroy(pthread_mutex_t* m)

cdef extern from "<semaphore.h>" nogil:
    ctypedef struct sem_t:
        pass
    int sem_init(sem_t* s, int pshared, unsigned int value)
    int sem_wait(sem_t* s)
    int sem_post(sem_t* s)
    int sem_destroy(sem_t* s)

cdef extern from "<string.h>" nogil:
    void* memmem(const void* haystack, size_t hlen, const void* needle, size_t nlen)

cdef enum SlotState:
    SLOT_OK = 1
    SLOT_ERROR = 2
    SLOT_DEAD = 3


cdef long _json_int(const uint8_t* h, Py_ssize_t n, const char* key, Py_ssize_t klen, bint* found) noexcept nogil:
    """The integer after ``key`` (e.g. b'"opaque":') in a JSON header; ``found`` says whether it was there."""
    cdef const uint8_t* p = <const uint8_t*>memmem(h, n, key, klen)
    cdef const uint8_t* end = h + n
    cdef long v = 0
    cdef bint neg = False
    found[0] = False
    if p == NULL:
        return 0
    p += klen
    while p < end and (p[0] == 32 or p[0] == 34):     # spaces, a quoted number
        p += 1
    if p < end and p[0] == 45:
        neg = True
        p += 1
    while p < end and 48 <= p[0] <= 57:
        v = v * 10 + (p[0] - 48)
        found[0] = True
        p += 1
    return -v if neg else v


cdef inline int _next_frame(const uint8_t* p, Py_ssize_t avail, Py_ssize_t cap, uint32_t* length,
                            uint32_t* hlen) noexcept nogil:
    """Header of the frame at ``p`` (``avail`` bytes buffered, ``cap`` the buffer size):
    1 = complete (``length``/``hlen`` set), 0 = needs more bytes, -1 = malformed or too large."""
    length[0] = (<uint32_t>p[0] << 24) | (<uint32_t>p[1] << 16) | (<uint32_t>p[2] << 8) | p[3]
    hlen[0] = (<uint32_t>p[5] << 16) | (<uint32_t>p[6] << 8) | p[7]
    if length[0] < 4 or length[0] + 4 > <uint32_t>cap or hlen[0] > length[0] - 4:
        return -1
    if avail < <Py_ssize_t>length[0] + 4:
        return 0
    return 1


cdef struct FrameIn:
    uint8_t* buf             # received bytes: frames taken are before ``pos``, unread after ``have``
    Py_ssize_t cap
    Py_ssize_t have
    Py_ssize_t pos


cdef int _fill(int fd, FrameIn* f) noexcept nogil:
    """Drop the frames already taken and read more bytes: 0 when the peer closed or failed."""
    cdef ssize_t k
    if f.pos > 0:
        memmove(f.buf, f.buf + f.pos, f.have - f.pos)
        f.have -= f.pos
        f.pos = 0
    k = read(fd, f.buf + f.have, f.cap - f.have)
    if k <= 0:
        return 0
    f.have += k
    return 1


cdef bint _take_frame(FrameIn* f, uint8_t** frame, uint32_t* length, uint32_t* hlen,
                      bint* malformed) noexcept nogil:
    """Take the next whole frame (``frame`` points at it); False when more bytes are needed or the
    next frame is malformed (then ``malformed`` is set)."""
    cdef int st
    if f.have - f.pos < 8:
        return False
    st = _next_frame(f.buf + f.pos, f.have - f.pos, f.cap, length, hlen)
    if st < 0:
        malformed[0] = True
    if st <= 0:
        return False
    frame[0] = f.buf + f.pos
    f.pos += length[0] + 4
    return True


cdef class SharedConnectionSenders:
    """N synchronous sender threads multiplexed over one connection, each with its own opaque.

    Call ``worker(k, ...)`` from N Python threads and ``reader()`` from one more; every call
    releases the GIL.  Thread ``k`` writes its request (opaque ``k + 1``) under a write lock and
    waits for the reader to hand it the matching response, like a client's ResponseFuture.
    """
    cdef int fd
    cdef int n
    cdef list requests
    cdef pthread_mutex_t write_lock
    cdef sem_t* sems
    cdef int* state
    cdef bint dead

    def __cinit__(self, int fd, list requests):
        self.fd = fd
        self.n = len(requests)
        self.requests = requests
        self.sems = <sem_t*>malloc(sizeof(sem_t) * self.n)
        self.state = <int*>malloc(sizeof(int) * self.n)
        if self.sems == NULL or self.state == NULL:
            raise MemoryError()
        pthread_mutex_init(&self.write_lock, NULL)
        for k in range(self.n):
            sem_init(&self.sems[k], 0, 0)
            self.state[k] = 0
        self.dead = False

    def __dealloc__(self):
        if self.sems != NULL:
            for k in range(self.n):
                sem_destroy(&self.sems[k])
            free(self.sems)
        free(self.state)
        pthread_mutex_destroy(&self.write_lock)

    def worker(self, int k, double seconds, double[::1] latencies):
        """Send request ``k`` in lockstep for ``seconds``; returns (sent, errors, elapsed)."""
        cdef bytes request = self.requests[k]
        cdef const uint8_t* req = <const uint8_t*>request
        cdef Py_ssize_t req_len = len(request)
        cdef Py_ssize_t cap = latencies.shape[0]
        cdef Py_ssize_t sent = 0, errors = 0
        cdef double t0, t1, start, deadline
        cdef int rc, st
        with nogil:
            start = _now()
            deadline = start + seconds
            t1 = start
            while not self.dead:
                t0 = _now()
                if t0 >= deadline:
                    break
                pthread_mutex_lock(&self.write_lock)
                rc = _write_all(self.fd, req, req_len)
                pthread_mutex_unlock(&self.write_lock)
                if rc < 0:
                    errors += 1
                    break
                sem_wait(&self.sems[k])
                t1 = _now()
                st = self.state[k]
                if st == SLOT_OK:
                    if sent < cap:
                        latencies[sent] = t1 - t0
                    sent += 1
                elif st == SLOT_DEAD:
                    errors += 1
                    break
                else:
                    errors += 1
            t1 = _now()
        return sent, errors, t1 - start

    def reader(self):
        """Read responses until the connection closes and wake their senders; returns responses read."""
        cdef FrameIn f
        cdef Py_ssize_t got = 0
        cdef uint8_t* p
        cdef uint32_t length, hlen
        cdef long opaque, code
        cdef bint has_opaque, has_code, bad = False
        f.cap = 1 << 20
        f.have = f.pos = 0
        f.buf = <uint8_t*>malloc(f.cap)
        if f.buf == NULL:
            raise MemoryError()
        with nogil:
            while not bad and _fill(self.fd, &f):
                while _take_frame(&f, &p, &length, &hlen, &bad):
                    opaque = _json_int(p + 8, hlen, b'"opaque":', 9, &has_opaque)
                    code = _json_int(p + 8, hlen, b'"code":', 7, &has_code)
                    if has_opaque and 1 <= opaque <= self.n:
                        self.state[opaque - 1] = SLOT_OK if has_code and code == 0 else SLOT_ERROR
                        sem_post(&self.sems[opaque - 1])
                        got += 1
            self.dead = True
            for k in range(self.n):
                self.state[k] = SLOT_DEAD
                sem_post(&self.sems[k])
        free(f.buf)
        return got


def run_closed_loop(int fd, list requests, double seconds, double[::1] latencies):
    """N synchronous senders in one thread: ``len(requests)`` requests in flight on ``fd``.

    Request ``k`` must carry opaque ``k + 1``.  Each sender sends its next request as soon as the
    response to its previous one arrives (a closed loop of concurrency N, the load N lockstep
    threads put on one shared connection) for ``seconds``.  Responses that arrive together are
    answered with one write, so the generator costs a few syscalls per batch instead of a thread
    wake-up per message.  Returns (sent, errors, elapsed); a response counts as OK when its code
    is 0 and its latency (seconds) is recorded in ``latencies`` until that is full.
    """
    cdef Py_ssize_t n = len(requests)
    cdef Py_ssize_t cap = latencies.shape[0]
    cdef const uint8_t** reqs = <const uint8_t**>malloc(sizeof(uint8_t*) * n)
    cdef Py_ssize_t* lens = <Py_ssize_t*>malloc(sizeof(Py_ssize_t) * n)
    cdef double* sent_at = <double*>malloc(sizeof(double) * n)
    cdef FrameIn f
    cdef Py_ssize_t out_cap = 0, out_len
    cdef uint8_t* outb
    cdef Py_ssize_t k, sent = 0, errors = 0, outstanding = 0
    cdef uint8_t* p
    cdef uint32_t length, hlen
    cdef long opaque, code
    cdef bint has_opaque, has_code, failed = False
    cdef double start, deadline, now
    for k in range(n):
        out_cap += len(<bytes>requests[k])
    outb = <uint8_t*>malloc(out_cap)
    f.cap = 1 << 20
    f.have = f.pos = 0
    f.buf = <uint8_t*>malloc(f.cap)
    if reqs == NULL or lens == NULL or sent_at == NULL or f.buf == NULL or outb == NULL:
        free(reqs); free(lens); free(sent_at); free(f.buf); free(outb)
        raise MemoryError()
    for k in range(n):
        reqs[k] = <const uint8_t*><bytes>requests[k]
        lens[k] = len(<bytes>requests[k])
    with nogil:
        start = _now()
        deadline = start + seconds
        out_len = 0
        for k in range(n):
            memcpy(outb + out_len, reqs[k], lens[k])
            out_len += lens[k]
            sent_at[k] = start
        outstanding = n
        if _write_all(fd, outb, out_len) < 0:
            failed = True
        while outstanding > 0 and not failed:
            if not _fill(fd, &f):
                failed = True
                break
            now = _now()
            out_len = 0
            while _take_frame(&f, &p, &length, &hlen, &failed):
                opaque = _json_int(p + 8, hlen, b'"opaque":', 9, &has_opaque)
                code = _json_int(p + 8, hlen, b'"code":', 7, &has_code)
                if not has_opaque or opaque < 1 or opaque > n:
                    continue
                k = opaque - 1
                if has_code and code == 0:
                    if sent < cap:
                        latencies[sent] = now - sent_at[k]
                    sent += 1
                else:
                    errors += 1
                if now < deadline:
                    memcpy(outb + out_len, reqs[k], lens[k])
                    out_len += lens[k]
                    sent_at[k] = now
                else:
                    outstanding -= 1
            if out_len > 0 and _write_all(fd, outb, out_len) < 0:
                failed = True
        now = _now()
    free(reqs); free(lens); free(sent_at); free(f.buf); free(outb)
    if failed:
        errors += 1
    return sent, errors, now - start


# -- a native null broker: the load generator's own ceiling ----------------------------------

cdef extern from "<stdio.h>" nogil:
    int snprintf(char* buf, size_t n, const char* fmt, ...)


def serve_null_connection(int fd, bytes ext_json):
    """Answer every JSON request on ``fd`` with code 0 and ``ext_json`` as extFields, at once.

    The cheapest possible broker (no Python, no store, GIL released), so the load generator's
    throughput against it is the generator's own ceiling.  Returns when the peer closes.
    """
    cdef const char* ext = <const char*>ext_json
    cdef FrameIn f
    cdef Py_ssize_t out_cap = 1 << 20, out_len
    cdef uint8_t* outb = <uint8_t*>malloc(out_cap)
    cdef uint8_t* p
    cdef uint32_t length, hlen
    cdef long opaque
    cdef bint has_opaque, failed = False
    cdef int n
    f.cap = 1 << 20
    f.have = f.pos = 0
    f.buf = <uint8_t*>malloc(f.cap)
    if f.buf == NULL or outb == NULL:
        free(f.buf); free(outb)
        raise MemoryError()
    with nogil:
        while not failed and _fill(fd, &f):
            out_len = 0
            while _take_frame(&f, &p, &length, &hlen, &failed):
                opaque = _json_int(p + 8, hlen, b'"opaque":', 9, &has_opaque)
                if out_cap - out_len < 4096:            # flush a full output buffer mid-batch
                    if _write_all(fd, outb, out_len) < 0:
                        failed = True
                        break
                    out_len = 0
                n = snprintf(<char*>outb + out_len + 8, 4000,
                             '{"code":0,"extFields":%s,"flag":1,"language":"JAVA","opaque":%ld,'
                             '"serializeTypeCurrentRPC":"JSON","version":409}', ext, opaque)
                outb[out_len] = ((n + 4) >> 24) & 0xFF
                outb[out_len + 1] = ((n + 4) >> 16) & 0xFF
                outb[out_len + 2] = ((n + 4) >> 8) & 0xFF
                outb[out_len + 3] = (n + 4) & 0xFF
                outb[out_len + 4] = 0
                outb[out_len + 5] = (n >> 16) & 0xFF
                outb[out_len + 6] = (n >> 8) & 0xFF
                outb[out_len + 7] = n & 0xFF
                out_len += 8 + n
            if not failed and out_len > 0 and _write_all(fd, outb, out_len) < 0:
                failed = True
    free(f.buf)
    free(outb)
