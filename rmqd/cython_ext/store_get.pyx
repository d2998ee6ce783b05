# cython: boundscheck=False, wraparound=False, cdivision=True, language_level=3, initializedcheck=False
"""The pull read path in one C call: ConsumeQueue scan, tag filter, residency check, body copy.

:func:`read_resident` serves what a PULL of an ordinary queue usually asks for, on the event loop:
up to ``max_count`` messages from ``offset``, filtered by tag hash codes, copied out of the mapped
CommitLog into one ``bytes`` (one Python object per pull, not one per message). It gives up
(returns None) whenever the answer needs more than that, and the caller then runs the full
Python path in a pool thread: a page of the ConsumeQueue or CommitLog range that is not resident
in memory (``mincore``: a page fault would block the loop), data beyond Java's "hot" distance from
the CommitLog head, a missing file, a blank entry, an offset outside [min, max).

Each mapping is read through a buffer export held for the duration of the copy, so a segment
deleted meanwhile by retention stays mapped until the export is released.
"""
from cpython.buffer cimport PyObject_GetBuffer, PyBuffer_Release, PyBUF_SIMPLE
from cpython.bytes cimport PyBytes_FromStringAndSize, PyBytes_AS_STRING
from libc.string cimport memcpy
from libc.stdlib cimport malloc, free
from posix.unistd cimport sysconf
from rmqd.cython_ext.byteorder cimport rd32, rd64

cdef extern from "sys/mman.h" nogil:
    int mincore(void* addr, size_t length, unsigned char* vec)

cdef extern from "unistd.h" nogil:
    enum: _SC_PAGESIZE

include "consts.pxi"

DEF MAX_CODES = 64
DEF MAX_BATCH = 1024
DEF MINCORE_VEC = 1024          # pages checked per mincore call (4 MiB with 4 KiB pages)


cdef long long PAGE = sysconf(_SC_PAGESIZE)


cdef bint resident(const unsigned char* base, long long start, long long end) noexcept nogil:
    """Every page of [start, end) of the mapping at ``base`` is in memory (mincore)."""
    cdef unsigned char vec[MINCORE_VEC]
    cdef long long a = (start // PAGE) * PAGE
    cdef long long n, i, chunk
    while a < end:
        n = (end - a + PAGE - 1) // PAGE
        chunk = n if n < MINCORE_VEC else MINCORE_VEC
        if mincore(<void*>(base + a), <size_t>(chunk * PAGE), vec) != 0:
            return False
        for i in range(chunk):
            if not (vec[i] & 1):
                return False
        a += chunk * PAGE
    return True


cdef bint _group_resident(const unsigned char* base, long long start, long long* physs, int* sizes,
                          long long k, long long j) noexcept nogil:
    """Messages k..j-1 (increasing offsets in one mapping) lie in resident pages: one mincore call
    over their span when it is at most MINCORE_VEC pages, else one call per message."""
    cdef unsigned char vec[MINCORE_VEC]
    cdef long long lo = ((physs[k] - start) // PAGE) * PAGE
    cdef long long hi = physs[j - 1] + sizes[j - 1] - start
    cdef long long npages = (hi - lo + PAGE - 1) // PAGE, i, pg, pg_end
    if npages > MINCORE_VEC:
        for i in range(k, j):
            if not resident(base, physs[i] - start, physs[i] - start + sizes[i]):
                return False
        return True
    if mincore(<void*>(base + lo), <size_t>(npages * PAGE), vec) != 0:
        return False
    for i in range(k, j):
        pg_end = (physs[i] - start + sizes[i] - 1 - lo) // PAGE
        pg = (physs[i] - start - lo) // PAGE
        while pg <= pg_end:
            if not (vec[pg] & 1):
                return False
            pg += 1
    return True


cdef class _Mapping:
    """A buffer export of one MappedFile's mmap and its offsets, held while reading it."""
    cdef Py_buffer buf
    cdef bint held
    cdef long long start, wrote_end

    cdef int hold(self, mf) except -1:
        PyObject_GetBuffer(mf.mm, &self.buf, PyBUF_SIMPLE)
        self.held = True
        self.start = mf.file_from_offset
        self.wrote_end = self.start + mf.wrote_pos
        return 0

    cdef void drop(self) noexcept:
        if self.held:
            self.held = False
            PyBuffer_Release(&self.buf)

    def __dealloc__(self):
        self.drop()


cdef object _find(list files, long long file_size, long long offset):
    """The MappedFile holding ``offset`` (files are named by their first offset), or None."""
    cdef Py_ssize_t n = len(files), idx
    if n == 0:
        return None
    cdef long long first = files[0].file_from_offset
    if offset < first:
        return None
    idx = <Py_ssize_t>((offset - first) // file_size)
    if idx < n:
        mf = files[idx]
        if mf.file_from_offset <= offset < mf.file_from_offset + file_size:
            return mf
    for mf in files:                    # tolerate holes
        if mf.file_from_offset <= offset < mf.file_from_offset + file_size:
            return mf
    return None


def read_resident(cq, commitlog, long long offset, int max_count, long long max_bytes, codes,
                  long long hot_limit, long long scan_bytes=16000):
    """``(status, next_begin_offset, count, body)`` for a pull from ``offset`` of ``cq``, or None
    when this fast path cannot serve it (see the module docstring). ``codes`` is None (every tag
    matches) or a sequence of at most 64 tag hash codes."""
    cdef long long mn = cq.min_offset, mx = cq.max_offset
    if offset < mn or offset >= mx or max_count <= 0:
        return None
    cdef long long ncodes = 0, i
    cdef long long code_arr[MAX_CODES]
    if codes is not None:
        ncodes = len(codes)
        if ncodes > MAX_CODES:
            return None
        i = 0
        for c in codes:
            code_arr[i] = c
            i += 1
    if max_count > MAX_BATCH:
        max_count = MAX_BATCH
    cdef list cq_files = cq.mfq.files
    cdef long long cq_file_size = cq.file_size
    cq_mf = _find(cq_files, cq_file_size, offset * CQ_STORE_UNIT_SIZE)
    if cq_mf is None:
        return None
    cdef long long cl_max = commitlog.max_offset()
    cdef list cl_files = commitlog.mfq.files
    cdef long long cl_file_size = commitlog.file_size
    cdef _Mapping cqm = _Mapping()
    cdef _Mapping clm = _Mapping()
    cdef long long pos, end, phys, tags, total = 0, scanned = 0, k, p, j
    cdef int size, count = 0
    cdef const unsigned char* cqp
    cdef long long* physs = <long long*>malloc(MAX_BATCH * sizeof(long long))
    cdef int* sizes = <int*>malloc(MAX_BATCH * sizeof(int))
    cdef bint match
    cdef char* out
    if physs == NULL or sizes == NULL:
        free(physs)
        free(sizes)
        raise MemoryError()
    try:
        cqm.hold(cq_mf)
        pos = offset * CQ_STORE_UNIT_SIZE - cqm.start
        end = cqm.wrote_end - cqm.start
        if end > pos + scan_bytes:
            end = pos + scan_bytes
        if pos >= end or not resident(<const unsigned char*>cqm.buf.buf, pos, end):
            return None
        cqp = <const unsigned char*>cqm.buf.buf
        while pos < end:
            phys = rd64(cqp + pos)
            size = rd32(cqp + pos + 8)
            tags = rd64(cqp + pos + 12)
            if count > 0 and (count >= max_count or total + size > max_bytes):
                break
            if size == CQ_BLANK_SIZE or size <= 0:
                return None
            pos += CQ_STORE_UNIT_SIZE
            scanned += 1
            if ncodes > 0:
                match = False
                for k in range(ncodes):
                    if code_arr[k] == tags:
                        match = True
                        break
                if not match:
                    continue
            if cl_max - phys > hot_limit or phys + size > cl_max:
                return None
            physs[count] = phys
            sizes[count] = size
            count += 1
            total += size
        if count == 0:
            return (GetMessageStatus.NO_MATCHED_MESSAGE, offset + scanned, 0, b"")
        body = PyBytes_FromStringAndSize(NULL, total)
        out = PyBytes_AS_STRING(body)
        p = 0
        k = 0
        while k < count:                    # one group of messages per CommitLog segment
            cl_mf = _find(cl_files, cl_file_size, physs[k])
            if cl_mf is None:
                return None
            clm.drop()
            clm.hold(cl_mf)
            j = k
            while j < count and physs[j] >= clm.start and physs[j] + sizes[j] <= clm.wrote_end:
                j += 1
            if j == k or not _group_resident(<const unsigned char*>clm.buf.buf, clm.start, physs, sizes, k, j):
                return None
            for i in range(k, j):
                memcpy(out + p, <const char*>clm.buf.buf + (physs[i] - clm.start), sizes[i])
                p += sizes[i]
            k = j
        return (GetMessageStatus.FOUND, offset + scanned, count, body)
    finally:
        cqm.drop()
        clm.drop()
        free(physs)
        free(sizes)
