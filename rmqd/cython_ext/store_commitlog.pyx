# cython: boundscheck=False, wraparound=False, cdivision=True, language_level=3
"""Commit-log hot paths: segment scanning/verification, BLANK markers, msync, tail zeroing.

Everything that touches many bytes runs with the GIL released.
"""
from libc.string cimport memcpy, memset
from rmqd.cython_ext.message_codec cimport masked_crc, read_i32, read_i64, write_i32

cdef extern from "sys/mman.h" nogil:
    int msync(void* addr, size_t length, int flags)
    int MS_SYNC
cdef extern from "unistd.h" nogil:
    long sysconf(int name)
    int _SC_PAGESIZE
cdef extern from "errno.h":
    int errno

include "consts.pxi"
include "commitlog_walk.pxi"

cdef enum:
    C_END = 0        # zero/garbage size: end of the log
    C_BLANK = 1      # BLANK marker: continue in the next segment
    C_CORRUPT = 2    # bad magic, impossible size or CRC mismatch
    C_LIMIT = 3      # reached the scan limit exactly

SCAN_END = C_END
SCAN_BLANK = C_BLANK
SCAN_CORRUPT = C_CORRUPT
SCAN_LIMIT = C_LIMIT

cdef long PAGE = sysconf(_SC_PAGESIZE)


def write_blank(unsigned char[::1] dest not None, Py_ssize_t pos, int remaining) -> None:
    """Write the end-of-file marker ``[remaining][BLANK_MAGIC_CODE]`` at ``pos``."""
    if pos < 0 or pos + 8 > dest.shape[0]:
        raise ValueError("blank marker does not fit")
    write_i32(&dest[pos], remaining)
    write_i32(&dest[pos + 4], BLANK_MAGIC_CODE)


def msync_range(unsigned char[::1] buf not None, Py_ssize_t start, Py_ssize_t end) -> None:
    """msync(MS_SYNC) the bytes [start, end) of a mapped buffer (page-aligned), GIL released."""
    cdef Py_ssize_t n = buf.shape[0]
    if end > n:
        end = n
    if start < 0:
        start = 0
    if end <= start:
        return
    cdef Py_ssize_t aligned = start - (start % PAGE)
    cdef unsigned char* p = &buf[0]
    cdef int rc
    with nogil:
        rc = msync(<void*>(p + aligned), <size_t>(end - aligned), MS_SYNC)
    if rc != 0:
        raise OSError(errno, "msync failed")


def scan_records(const unsigned char[::1] buf not None, Py_ssize_t start, Py_ssize_t limit,
                 bint check_crc, int max_record_size, bint collect=False):
    """Walk and verify records from ``start`` up to ``limit``.

    Returns ``(end_pos, code, positions)`` where ``end_pos`` is the offset just past the last
    valid record (or past the BLANK marker), ``code`` one of SCAN_* and ``positions`` a list of
    ``(pos, size)`` of valid records when ``collect`` (else None).  A record is valid when its
    size is sane, magic is V1, its internal lengths add up and (optionally) its body CRC matches.
    """
    cdef Py_ssize_t n = buf.shape[0], pos = start, end
    if limit > n:
        limit = n
    cdef int total = 0, code
    cdef RecordKind kind
    cdef long long count = 0, nbytes = 0
    out = [] if collect else None
    while True:
        with nogil:         # collecting: one record a step, handed to Python below
            end = walk_records(&buf[0], pos, limit, check_crc, max_record_size, 1 if collect else -1, &kind, &total,
                               &count, &nbytes)
        if kind != REC_OK:
            pos = end
            break
        out.append((pos, total))
        pos = end
    if kind == REC_SHORT:
        code = C_LIMIT if pos == limit else C_END
    elif kind == REC_ZERO:
        code = C_END
    elif kind == REC_BLANK and pos + total <= n:
        pos += total
        code = C_BLANK
    else:
        code = C_CORRUPT
    return pos, code, out


def zero_tail(unsigned char[::1] buf not None, Py_ssize_t start, Py_ssize_t stop_after_zero_run) -> int:
    """Zero garbage after ``start``: walk 64 KiB chunks, clearing non-zero ones, until a run of
    ``stop_after_zero_run`` zero bytes (or the end of the buffer).  Returns bytes cleared up to."""
    cdef Py_ssize_t n = buf.shape[0]
    cdef Py_ssize_t pos = start, end, i, zero_run = 0
    cdef unsigned char* p = &buf[0]
    cdef bint nonzero
    if start >= n:
        return start
    with nogil:
        while pos < n and zero_run < stop_after_zero_run:
            end = pos + 65536 - ((pos) % 65536)
            if end > n:
                end = n
            nonzero = False
            for i in range(pos, end):
                if p[i] != 0:
                    nonzero = True
                    break
            if nonzero:
                memset(p + pos, 0, end - pos)
                zero_run = 0
            else:
                zero_run += end - pos
            pos = end
    return pos


def read_header(const unsigned char[::1] buf not None, Py_ssize_t pos):
    """``(total_size, magic)`` of the record at ``pos`` or ``(0, 0)`` if out of range."""
    if pos < 0 or pos + 8 > buf.shape[0]:
        return 0, 0
    return read_i32(&buf[pos]), read_i32(&buf[pos + 4])


def record_dispatch_fields(const unsigned char[::1] buf not None, Py_ssize_t pos):
    """Fields of the (already validated) record at ``pos`` that a re-dispatch needs:
    ``(total, queue_id, queue_offset, phys_offset, sys_flag, store_ts, topic_bytes, props_bytes)``."""
    cdef const unsigned char* r = &buf[pos]
    cdef int total = read_i32(r)
    cdef int sys_flag = read_i32(r + 36)
    cdef Py_ssize_t bh = 20 if (sys_flag & BORNHOST_V6_FLAG) else 8
    cdef Py_ssize_t sh = 20 if (sys_flag & STOREHOST_V6_FLAG) else 8
    cdef Py_ssize_t q = 48 + bh
    cdef long long store_ts = read_i64(r + q)
    q += 8 + sh + 12
    cdef int blen = read_i32(r + q)
    q += 4 + blen
    cdef int tlen = r[q]
    q += 1
    topic = bytes(r[q:q + tlen])
    q += tlen
    cdef int plen = (r[q] << 8) | r[q + 1]
    q += 2
    props = bytes(r[q:q + plen])
    return total, read_i32(r + 12), read_i64(r + 20), read_i64(r + 28), sys_flag, store_ts, topic, props


def copy_in(unsigned char[::1] dest not None, Py_ssize_t pos, const unsigned char[::1] data not None) -> None:
    """Copy ``data`` into the mapped buffer at ``pos`` (GIL released): a slave's raw CommitLog append."""
    cdef Py_ssize_t n = data.shape[0]
    if pos < 0 or pos + n > dest.shape[0]:
        raise ValueError(f"{n} bytes at {pos} do not fit in a buffer of {dest.shape[0]}")
    if n == 0:
        return
    with nogil:
        memcpy(&dest[pos], &data[0], n)


def record_boundary(const unsigned char[::1] buf not None, Py_ssize_t target, Py_ssize_t limit,
                    int max_record_size) -> int:
    """Position of the first record (or BLANK marker) at or after ``target``, walking the record sizes
    from the start of the segment ``buf`` up to ``limit``; ``limit`` when the data ends first, and the
    segment's size when ``target`` lies in the space a BLANK marker covers."""
    cdef Py_ssize_t n = buf.shape[0]
    cdef Py_ssize_t pos = 0
    cdef const unsigned char* base = &buf[0]
    cdef int total, magic
    if limit > n:
        limit = n
    with nogil:
        while pos < target:
            if pos + 8 > limit:
                pos = limit
                break
            total = read_i32(base + pos)
            magic = read_i32(base + pos + 4)
            if magic == BLANK_MAGIC_CODE:
                pos = n
                break
            if magic != MESSAGE_MAGIC_CODE or total < MIN_RECORD or total > max_record_size or pos + total > limit:
                pos = limit
                break
            pos += total
    return pos
