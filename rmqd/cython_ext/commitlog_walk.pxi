# The CommitLog record walk, shared by the recovery scan (store_commitlog.pyx) and a slave's check of
# the bytes its master sent (ha_verify.pyx): each maps the kinds below onto its own answer codes.
# Use with: include "consts.pxi" then include "commitlog_walk.pxi" (after cimporting masked_crc, read_i32).

DEF MIN_RECORD = 91            # the smallest well-formed record (empty body, topic and properties)

cdef enum RecordKind:
    REC_OK = 0          # a whole, well-formed message record of ``total`` bytes
    REC_BLANK = 1       # a BLANK end-of-file marker covering ``total`` (>= 8) bytes
    REC_SHORT = 2       # fewer than 8 bytes (a record header) before the limit
    REC_ZERO = 3        # size and magic are 0: nothing written here
    REC_PARTIAL = 4     # a sane header whose record does not fit before the limit
    REC_BAD = 5         # not a well-formed record (magic, sizes, internal lengths or body CRC)


cdef inline RecordKind next_record(const unsigned char* r, Py_ssize_t room, bint check_crc,
                                   int max_record_size, int* total) noexcept nogil:
    """What the ``room`` bytes at ``r`` start with; ``total[0]`` is its size (set once the header is read)."""
    cdef int magic, sys_flag, blen, tlen, plen
    cdef Py_ssize_t q
    if room < 8:
        return REC_SHORT
    total[0] = read_i32(r)
    magic = read_i32(r + 4)
    if magic == BLANK_MAGIC_CODE:
        return REC_BLANK if total[0] >= 8 else REC_BAD
    if total[0] == 0 and magic == 0:
        return REC_ZERO
    if magic != MESSAGE_MAGIC_CODE or total[0] < MIN_RECORD or total[0] > max_record_size:
        return REC_BAD
    if total[0] > room:
        return REC_PARTIAL
    sys_flag = read_i32(r + 36)
    q = 48 + (20 if (sys_flag & BORNHOST_V6_FLAG) else 8) + 8 + (20 if (sys_flag & STOREHOST_V6_FLAG) else 8) + 12
    blen = read_i32(r + q)
    q += 4
    if blen < 0 or q + blen + 3 > total[0]:
        return REC_BAD
    if check_crc and blen > 0 and masked_crc(r + q, blen) != <unsigned int>read_i32(r + 8):
        return REC_BAD
    q += blen
    tlen = r[q]
    q += 1 + tlen
    if q + 2 > total[0]:
        return REC_BAD
    plen = (r[q] << 8) | r[q + 1]
    return REC_OK if q + 2 + plen == total[0] else REC_BAD


cdef inline Py_ssize_t walk_records(const unsigned char* base, Py_ssize_t pos, Py_ssize_t limit, bint check_crc,
                                    int max_record_size, long long stop_after, RecordKind* kind, int* total,
                                    long long* count, long long* nbytes) noexcept nogil:
    """Step over the whole records from ``pos`` towards ``limit`` and return where it stopped: at the first that is
    not one (``kind[0]`` / ``total[0]`` say what is there), or once ``stop_after`` records are passed (-1: no such
    stop) after the last, with ``kind[0] == REC_OK`` and ``total[0]`` its size. ``count[0]`` and ``nbytes[0]`` add
    up the records passed and their bytes."""
    cdef long long passed = 0
    while True:
        kind[0] = next_record(base + pos, limit - pos, check_crc, max_record_size, total)
        if kind[0] != REC_OK:
            return pos
        pos += total[0]
        count[0] += 1
        nbytes[0] += total[0]
        passed += 1
        if passed == stop_after:
            return pos
