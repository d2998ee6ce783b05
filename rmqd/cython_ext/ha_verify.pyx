# cython: language_level=3
"""A slave's check of the CommitLog bytes its master sent (rmqd.store.ha.slave_append), in C without the GIL.

``verify_range`` walks the records of one mapped CommitLog file from ``start`` to ``limit`` as the recovery scan
does (magic, lengths, optional body CRC, size bound) and also counts them: the slave's put statistics are the
records it received (Java's ReputMessageService counts them on a slave too).
"""
from rmqd.cython_ext.message_codec cimport masked_crc, read_i32

include "consts.pxi"
include "commitlog_walk.pxi"

cdef enum:
    C_LIMIT = 0        # reached ``limit`` exactly: every record up to there is whole and well formed
    C_BLANK = 1        # a BLANK end-of-file marker; ``end`` is past it (the file's end if it fits)
    C_PARTIAL = 2      # the record at ``end`` is not all there yet
    C_BAD = 3          # the bytes at ``end`` are not a well-formed record
    L_IN_RECORD = 0
    L_AT_BOUNDARY = 1
    L_IN_PADDING = 2
    L_UNREADABLE = -1

VERIFY_LIMIT = C_LIMIT
VERIFY_BLANK = C_BLANK
VERIFY_PARTIAL = C_PARTIAL
VERIFY_BAD = C_BAD


def verify_range(const unsigned char[::1] buf, Py_ssize_t start, Py_ssize_t limit, bint check_crc,
                 int max_record_size):
    """``(end, code, records, record_bytes)``: how far whole, well-formed records reach from ``start``, why it
    stopped (VERIFY_*), and how many records (and bytes) that is, BLANK markers not counted."""
    if limit > buf.shape[0]:
        limit = buf.shape[0]
    cdef Py_ssize_t pos
    cdef int total = 0, code
    cdef RecordKind kind
    cdef long long count = 0, nbytes = 0
    with nogil:
        pos = walk_records(&buf[0], start, limit, check_crc, max_record_size, -1, &kind, &total, &count, &nbytes)
    if kind == REC_SHORT and pos == limit:
        code = C_LIMIT
    elif kind == REC_BLANK:
        pos += total
        code = C_BLANK
    elif kind == REC_SHORT or kind == REC_PARTIAL:
        code = C_PARTIAL
    else:
        code = C_BAD
    return pos, code, count, nbytes


AT_BOUNDARY = L_AT_BOUNDARY     # a record (or the BLANK marker, or the written end) starts exactly there
IN_PADDING = L_IN_PADDING       # inside the BLANK end-of-file region: a slave that got part of the padding
IN_RECORD = L_IN_RECORD         # inside a record
UNREADABLE = L_UNREADABLE       # the records before it do not parse


def locate(const unsigned char[::1] buf, Py_ssize_t pos, Py_ssize_t limit, int max_record_size):
    """Where ``pos`` falls among the records of one mapped CommitLog file written up to ``limit``, walking the
    record sizes from the file's start: AT_BOUNDARY, IN_PADDING, IN_RECORD or UNREADABLE (a master checks a
    slave's first offset report with it)."""
    cdef Py_ssize_t n = buf.shape[0], cur = 0
    cdef const unsigned char* base = &buf[0]
    cdef int total, magic, where = L_UNREADABLE
    if limit > n:
        limit = n
    with nogil:
        while True:
            if cur == pos:
                where = L_AT_BOUNDARY
                break
            if cur + 8 > limit or cur > pos:
                where = L_UNREADABLE
                break
            total = read_i32(base + cur)
            magic = read_i32(base + cur + 4)
            if magic == BLANK_MAGIC_CODE and total >= 8:
                where = L_IN_PADDING if pos < cur + total else L_UNREADABLE
                break
            if magic != MESSAGE_MAGIC_CODE or total < MIN_RECORD or total > max_record_size:
                where = L_UNREADABLE
                break
            if pos < cur + total:
                where = L_IN_RECORD
                break
            cur += total
    return where
