# cython: boundscheck=False, wraparound=False, cdivision=True, language_level=3, initializedcheck=False
"""The store's put path in one C call: commit-log record, ConsumeQueue entry and IndexFile items.

:class:`PutEngine` appends straight into the mapped segments through raw pointers cached per
segment (:class:`MapPtr` holds one buffer export of the mmap, so the mapping cannot be closed
under it; ``release()`` nulls the pointer and the engine falls back to the Python slow path).
Slow paths (segment roll-over, first entry of a queue, CQ file full, index file full, SCHEDULE
tags) call back into the Python objects, which remain the source of truth for file lists and
``wrote_pos``; the engine re-reads its caches from them afterwards.

CRC32 + body copy run holding the GIL for bodies up to 256 KiB (cheaper than a GIL round trip)
and without it above.

:meth:`PutEngine.dispatch_range` is the other way in: it dispatches records already in the
CommitLog (ConsumeQueue entry, IndexFile items, dispatch listeners) without writing them, for
recovery and for a slave that appended a range replicated from its master.
"""
from cpython.buffer cimport PyObject_GetBuffer, PyBuffer_Release, PyBUF_WRITABLE, PyBUF_SIMPLE
from cpython.bytes cimport PyBytes_CheckExact, PyBytes_AS_STRING, PyBytes_GET_SIZE, PyBytes_FromStringAndSize
from libc.string cimport memcmp, memcpy, memset
from libc.stdlib cimport malloc, free
from rmqd.cython_ext.message_codec cimport hash_units, masked_crc
from rmqd.cython_ext.byteorder cimport rd32, rd64, wr32, wr64
from posix.time cimport clock_gettime, timespec, CLOCK_REALTIME, CLOCK_MONOTONIC
import logging

cdef extern from "Python.h":
    const char* PyUnicode_AsUTF8AndSize(object, Py_ssize_t*) except NULL
    object PyUnicode_DecodeUTF8(const char* s, Py_ssize_t size, const char* errors)

log = logging.getLogger("rmqd.store.message_store")

include "consts.pxi"

DEF MIN_RECORD = 91            # the smallest well-formed record (empty body, topic and properties)
DEF NOGIL_BODY = 262144
DEF HEADER_SIZE = 40           # IndexFile header

# The PutMessageStatus members (the cpdef enum of store_put.pxd) as Python objects, made once
cdef object ST_PUT_OK = PutMessageStatus.PUT_OK
cdef object ST_FLUSH_DISK_TIMEOUT = PutMessageStatus.FLUSH_DISK_TIMEOUT


cdef inline long long now_ms() noexcept nogil:
    cdef timespec ts
    clock_gettime(CLOCK_REALTIME, &ts)
    return <long long>ts.tv_sec * 1000 + ts.tv_nsec // 1000000


cdef inline double mono_ms() noexcept nogil:
    cdef timespec ts
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return <double>ts.tv_sec * 1000.0 + <double>ts.tv_nsec / 1e6


# ---------------------------------------------------------------------------------- hashing
cdef inline unsigned int index_key_hash(unsigned int h) noexcept nogil:
    """abs(hashCode) with Integer.MIN_VALUE mapped to 0."""
    cdef int s = <int>h
    if s == <int>0x80000000:
        return 0
    return <unsigned int>(-s if s < 0 else s)


# ---------------------------------------------------------------------------------- MapPtr
cdef class MapPtr:
    """One writable buffer export of a mapping and its raw address (NULL once released)."""

    def __cinit__(self, obj):
        PyObject_GetBuffer(obj, &self.buf, PyBUF_WRITABLE)
        self.p = <unsigned char*>self.buf.buf
        self.size = self.buf.len

    def release(self) -> None:
        if self.p != NULL:
            self.p = NULL
            PyBuffer_Release(&self.buf)

    @property
    def alive(self) -> bool:
        return self.p != NULL

    def __dealloc__(self):
        if self.p != NULL:
            self.p = NULL
            PyBuffer_Release(&self.buf)


# ---------------------------------------------------------------------------------- index file
cdef bint index_put(unsigned char* base, long long slots, long long max_index, unsigned int h,
                    long long phy, long long ts) noexcept nogil:
    """IndexFile.put_key on the mapped file (header, slot, item); False when full."""
    cdef int count = rd32(base + 36)
    if count >= max_index:
        return False
    cdef unsigned char* slot = base + HEADER_SIZE + (h % <unsigned long long>slots) * 4
    cdef int slot_value = rd32(slot)
    if slot_value <= 0 or slot_value > count:
        slot_value = 0
    cdef long long begin_ts = rd64(base)
    cdef long long diff = 0
    if begin_ts > 0:
        diff = ts - begin_ts
        diff = diff // 1000 if diff >= 0 else 0
        if diff > 0x7FFFFFFF:
            diff = 0x7FFFFFFF
    cdef unsigned char* item = base + HEADER_SIZE + slots * 4 + <long long>count * 20
    wr32(item, <int>h)
    wr64(item + 4, phy)
    wr32(item + 12, <int>diff)
    wr32(item + 16, slot_value)
    wr32(slot, count)
    if count <= 1:
        wr64(base + 16, phy)        # beginPhyOffset
        wr64(base, ts)              # beginTimestamp
    if slot_value == 0:
        wr32(base + 32, rd32(base + 32) + 1)
    wr32(base + 36, count + 1)
    wr64(base + 24, phy)            # endPhyOffset
    wr64(base + 8, ts)              # endTimestamp
    return True


def index_put_key(MapPtr ptr, long long slots, long long max_index, unsigned int key_hash,
                  long long phy, long long ts) -> bool:
    """Add one item with ``key_hash`` (already abs'ed) to the mapped IndexFile; False if full."""
    if ptr.p == NULL:
        raise ValueError("index file is closed")
    return index_put(ptr.p, slots, max_index, key_hash, phy, ts)



# ---------------------------------------------------------------------------------- record fields
cdef inline unsigned int hash_utf8(unsigned int h, const unsigned char* p, Py_ssize_t n):
    """Continue Java's String.hashCode over the UTF-8 text ``p[:n]`` (decoded with replacement when
    it is not ASCII, as the Python side decodes properties)."""
    cdef Py_ssize_t i
    for i in range(n):
        if p[i] >= 0x80:
            s = PyUnicode_DecodeUTF8(<const char*>p, n, "replace")
            return hash_units(h, <str>s, 0, len(<str>s))
        h = h * 31 + p[i]
    return h


cdef inline bint find_prop(const unsigned char* props, Py_ssize_t n, const char* key, Py_ssize_t klen,
                           Py_ssize_t* vstart, Py_ssize_t* vlen) noexcept nogil:
    """The non-empty value of property ``key`` (``NAME\\x01``) in encoded properties: the same rule as
    message_codec.find_property (first ``key`` at the start or after a \\x02, up to the next \\x02)."""
    cdef Py_ssize_t i = 0, j
    while i + klen <= n:
        if (i == 0 or props[i - 1] == 2) and memcmp(props + i, key, klen) == 0:
            j = i + klen
            while j < n and props[j] != 2:
                j += 1
            vstart[0] = i + klen
            vlen[0] = j - i - klen
            return vlen[0] > 0
        i += 1
    return False


# ---------------------------------------------------------------------------------- MessageToStore
cdef class MessageToStore:
    """A message handed to ``MessageStore.put_message(s)`` (fields are read by the engine in C)."""

    def __init__(self, topic, int queue_id, body, properties="", int flag=0, int sys_flag=0,
                 long long born_timestamp=0, born_host=("127.0.0.1", 0),
                 store_host=("127.0.0.1", 10911), int reconsume_times=0,
                 long long prepared_transaction_offset=0, long long tags_code=0, keys=None,
                 uniq_key=None):
        self.topic = topic
        self.queue_id = queue_id
        self.body = body
        self.properties = properties
        self.flag = flag
        self.sys_flag = sys_flag
        self.born_timestamp = born_timestamp
        self.born_host = born_host
        self.store_host = store_host
        self.reconsume_times = reconsume_times
        self.prepared_transaction_offset = prepared_transaction_offset
        self.tags_code = tags_code
        self.keys = keys
        self.uniq_key = uniq_key

    @classmethod
    def create(cls, topic, int queue_id, body, properties=None, **kw):
        """Convenience constructor: encodes ``properties`` and derives tags_code/keys/uniq_key."""
        from rmqd.cython_ext.message_codec import java_string_hash
        p = properties or {}
        props = "\x02".join(f"{k}\x01{v}" for k, v in p.items() if v is not None)
        kw.setdefault("tags_code", java_string_hash(p["TAGS"]) if p.get("TAGS") else 0)
        kw.setdefault("keys", p.get("KEYS"))
        kw.setdefault("uniq_key", p.get("UNIQ_KEY"))
        return cls(topic, queue_id, body, props, **kw)

    cdef tuple _fields(self):
        return (self.topic, self.queue_id, self.body, self.properties, self.flag, self.sys_flag,
                self.born_timestamp, self.born_host, self.store_host, self.reconsume_times,
                self.prepared_transaction_offset, self.tags_code, self.keys, self.uniq_key)

    def __eq__(self, other):
        if not isinstance(other, MessageToStore):
            return NotImplemented
        return self._fields() == (<MessageToStore>other)._fields()

    __hash__ = None

    def __repr__(self):
        return ("MessageToStore(topic=%r, queue_id=%d, body=<%d bytes>, properties=%r, flag=%d, "
                "sys_flag=%d, born_timestamp=%d, born_host=%r, store_host=%r, reconsume_times=%d, "
                "prepared_transaction_offset=%d, tags_code=%d, keys=%r, uniq_key=%r)" % (
                    self.topic, self.queue_id, len(self.body) if self.body is not None else 0,
                    self.properties, self.flag, self.sys_flag, self.born_timestamp, self.born_host,
                    self.store_host, self.reconsume_times, self.prepared_transaction_offset,
                    self.tags_code, self.keys, self.uniq_key))

# ---------------------------------------------------------------------------------- value types
cdef class DispatchRequest:
    """One appended message, as handed to dispatch listeners."""

    def __init__(self, topic, int queue_id, long long commitlog_offset, int size, long long tags_code,
                 long long store_timestamp, long long queue_offset, keys, uniq_key, int sys_flag,
                 properties):
        self.topic = topic
        self.queue_id = queue_id
        self.commitlog_offset = commitlog_offset
        self.size = size
        self.tags_code = tags_code
        self.store_timestamp = store_timestamp
        self.queue_offset = queue_offset
        self.keys = keys
        self.uniq_key = uniq_key
        self.sys_flag = sys_flag
        self.properties = properties

    def __repr__(self):
        return (f"DispatchRequest(topic={self.topic!r}, queue_id={self.queue_id}, "
                f"commitlog_offset={self.commitlog_offset}, size={self.size}, "
                f"tags_code={self.tags_code}, store_timestamp={self.store_timestamp}, "
                f"queue_offset={self.queue_offset}, keys={self.keys!r}, uniq_key={self.uniq_key!r}, "
                f"sys_flag={self.sys_flag}, properties={self.properties!r})")


cdef class PutMessageResult:
    """Outcome of a put (``ok``: stored, possibly not yet flushed)."""

    def __init__(self, status, wrote_offsets=None, long long queue_offset=0, int msg_count=0,
                 long long store_timestamp=0, long long wrote_bytes=0, str remark=""):
        self.status = status
        self.wrote_offsets = list(wrote_offsets) if wrote_offsets is not None else []
        self.queue_offset = queue_offset
        self.msg_count = msg_count
        self.store_timestamp = store_timestamp
        self.wrote_bytes = wrote_bytes
        self.remark = remark

    @property
    def ok(self) -> bool:
        """Stored (PUT_OK, or FLUSH_DISK_TIMEOUT where the message is stored but not yet flushed)."""
        return self.status is ST_PUT_OK or self.status is ST_FLUSH_DISK_TIMEOUT

    def __eq__(self, other):
        if not isinstance(other, PutMessageResult):
            return NotImplemented
        o = <PutMessageResult>other
        return (self.status == o.status and self.wrote_offsets == o.wrote_offsets and
                self.queue_offset == o.queue_offset and self.msg_count == o.msg_count and
                self.store_timestamp == o.store_timestamp and self.wrote_bytes == o.wrote_bytes and
                self.remark == o.remark)

    def __repr__(self):
        return (f"PutMessageResult(status={getattr(self.status, 'name', self.status)}, "
                f"wrote_offsets={self.wrote_offsets}, "
                f"queue_offset={self.queue_offset}, msg_count={self.msg_count}, "
                f"store_timestamp={self.store_timestamp}, wrote_bytes={self.wrote_bytes}, "
                f"remark={self.remark!r})")


# Upper bounds (exclusive, whole ms) of the first 12 put-latency buckets; the 13th is 10 s and over.
# Bucket 0 is "<=0ms": under 1 ms.
cdef long long DIST_BOUNDS[12]
DIST_BOUNDS[:] = [1, 10, 50, 100, 200, 500, 1000, 2000, 3000, 4000, 5000, 10000]


cdef PutMessageResult make_result(status, list offsets, long long qoff, int n, long long ts,
                                  long long wrote, str remark):
    cdef PutMessageResult r = PutMessageResult.__new__(PutMessageResult)
    r.status = status
    r.wrote_offsets = offsets
    r.queue_offset = qoff
    r.msg_count = n
    r.store_timestamp = ts
    r.wrote_bytes = wrote
    r.remark = remark
    return r


# ---------------------------------------------------------------------------------- engine
cdef class TopicPutCounter:
    """Messages and bytes stored for one topic since start (read by the broker's stats)."""


cdef class QueueState:
    """Write cursor of one consume queue (its last mapped file)."""

    cdef void refresh(self):
        mf = self.cq.mfq.last()
        self.mf = mf
        if mf is None:
            self.ptr = None
            return
        self.ptr = <MapPtr?>mf.ptr
        self.file_from = mf.file_from_offset
        self.file_size = mf.file_size
        self.wrote_pos = mf.wrote_pos




cdef inline bint _entry_wants(tuple entry, topic, int queue_id):
    """Listener filter: ``(topic, fn)`` matches one topic; ``(keys, fn)`` matches when
    ``(topic, queue_id) in keys`` (a live container, e.g. the long-poll holds)."""
    key = entry[0]
    if type(key) is str:
        return key == topic
    return (topic, queue_id) in key


cdef class PutEngine:
    """Appends messages for a MessageStore (see module docstring).

    It knows the store only through narrow collaborators: ``config`` (read for messageIndexEnable),
    the ``commitlog``, ``index`` and ``consume_queues`` (``find_or_create(topic, queue_id)`` when a
    queue gets its first message), the store's put ``lock``, ``delay_tags(topic, properties, store_ts)``
    (a SCHEDULE_TOPIC_XXXX message's tags code: its delivery time), ``pack_host((ip, port))`` and the
    ``listeners`` list the store keeps. ``clock`` None reads the wall clock in C; else a callable
    returning ms (settable)."""

    def __init__(self, config, commitlog, index, consume_queues, lock, delay_tags, pack_host,
                 list listeners, long long max_message_size, long long max_record_size, clock=None):
        self.config = config
        self.commitlog = commitlog
        self.index = index
        self.queues = consume_queues
        self.lock = lock
        self.clock = clock
        self.tags_code_fn = delay_tags
        self.pack_host_fn = pack_host
        self.listeners = listeners
        self.states = {}
        self.topic_counters = {}
        self.host_cache = {}
        self.max_message_size = max_message_size
        self.max_record_size = max_record_size
        self.dispatched_where = -1

    def reset(self) -> None:
        """Forget every cached cursor (after recovery, before shutdown)."""
        self.dispatched_where = -1          # recovery dispatched everything in the CommitLog
        self.states = {}
        self.cl_mf = None
        self.cl_ptr = None
        self.ix_file = None
        self.ix_ptr = None

    cdef bint _wanted(self, topic, int queue_id):
        """Does any listener want messages of (topic, queue_id)?  Builds no DispatchRequest otherwise."""
        for entry in self.listeners:
            if type(entry) is not tuple or _entry_wants(<tuple>entry, topic, queue_id):
                return True
        return False

    def drop_topic(self, topic) -> None:
        self.states = {k: v for k, v in self.states.items() if k[0] != topic}
        self.topic_counters.pop(topic, None)

    def queue_offset(self, topic, int queue_id) -> int:
        """Next queue offset of ``(topic, queue_id)`` if the engine tracks it, else -1."""
        st = self.states.get((topic, queue_id))
        return (<QueueState>st).next_qoff if st is not None else -1

    def active_cq_files(self) -> list:
        """Last mapped file of every consume queue written since the last reset."""
        return [(<QueueState>s).mf for s in list(self.states.values()) if (<QueueState>s).mf is not None]

    # -------------------------------------------------------------------------------- helpers
    cdef bytes _host(self, h):
        b = self.host_cache.get(h) if type(h) is tuple else None
        if b is None:
            b = self.pack_host_fn(tuple(h))
            if len(self.host_cache) < 4096:
                self.host_cache[tuple(h)] = b
        return <bytes>b

    cdef QueueState _state(self, topic, int queue_id):
        key = (topic, queue_id)
        st = self.states.get(key)
        if st is None:
            cq = self.queues.find_or_create(topic, queue_id)
            s = QueueState()
            s.cq = cq
            s.next_qoff = cq.max_offset
            s.max_phys = cq.max_phys_offset
            s.refresh()
            self.states[key] = s
            return s
        return <QueueState>st

    cdef int _cl_refresh(self, int total) except -1:
        mf, pos = self.commitlog.reserve(total)
        self.cl_mf = mf
        self.cl_ptr = <MapPtr?>mf.ptr
        self.cl_from = mf.file_from_offset
        self.cl_size = mf.file_size
        self.cl_pos = pos
        if self.cl_ptr.p == NULL:
            raise OSError("commit log segment is closed")
        return 0

    cdef int _cq_put(self, QueueState st, long long qoff, long long phys, int size,
                     long long tags) except -1:
        cdef unsigned char* e
        if (st.ptr is not None and st.ptr.p != NULL and st.wrote_pos + CQ_STORE_UNIT_SIZE <= st.file_size
                and st.file_from + st.wrote_pos == qoff * CQ_STORE_UNIT_SIZE):
            e = st.ptr.p + st.wrote_pos
            wr64(e, phys)
            wr32(e + 8, size)
            wr64(e + 12, tags)
            st.wrote_pos += CQ_STORE_UNIT_SIZE
            st.mf.wrote_pos = st.wrote_pos
        else:
            st.cq.max_phys_offset = st.max_phys
            st.cq.put(qoff, phys, size, tags)
            st.refresh()
        st.max_phys = phys + size
        return 0

    cdef int _index_key(self, unsigned int h, long long phys, long long ts) except -1:
        cdef int tries
        for tries in range(2):
            if self.ix_ptr is None or self.ix_ptr.p == NULL:
                f = self.index._writable()
                self.ix_file = f
                self.ix_ptr = <MapPtr?>f.mf.ptr
                self.ix_slots = f.slots
                self.ix_max = f.max_index
                if self.ix_ptr.p == NULL:
                    raise OSError("index file is closed")
            if index_put(self.ix_ptr.p, self.ix_slots, self.ix_max, index_key_hash(h), phys, ts):
                return 0
            self.ix_ptr = None      # full: roll to a new file
        log.error("index: cannot add key at %d", phys)
        return 0

    cdef int _indexed(self, long long phys) except -1:
        """1 when the record at ``phys`` is indexed already: below the open index file's end offset, or (none open)
        below the last file's."""
        if self.ix_ptr is not None and self.ix_ptr.p != NULL and phys < rd64(self.ix_ptr.p + 24):
            return 1
        if self.ix_ptr is None:
            files = self.index.files
            if files and phys < files[len(files) - 1].end_phy_offset:
                return 1
        return 0

    cdef int _index(self, str topic, keys, uniq, long long phys, long long ts) except -1:
        cdef unsigned int base
        cdef Py_ssize_t i, j, n
        cdef str ks
        cdef Py_UCS4 ch
        if self._indexed(phys):
            return 0
        base = hash_units(hash_units(0, topic, 0, len(topic)), "#", 0, 1)
        if uniq is not None and len(uniq) > 0:
            ks = <str?>uniq
            self._index_key(hash_units(base, ks, 0, len(ks)), phys, ts)
        if keys is not None and len(keys) > 0:
            ks = <str?>keys
            n = len(ks)
            i = 0
            while i < n:
                j = i
                while j < n:
                    ch = ks[j]
                    if ch == 32:
                        break
                    j += 1
                if j > i:
                    self._index_key(hash_units(base, ks, i, j), phys, ts)
                i = j + 1
        return 0

    # -------------------------------------------------------------------------------- dispatch
    cdef str _topic_of(self, const unsigned char* p, Py_ssize_t n):
        """The topic of a record as a str (the previous record's object when the bytes are the same)."""
        cdef bytes last = self.last_topic_b
        if last is not None and PyBytes_GET_SIZE(last) == n and memcmp(PyBytes_AS_STRING(last), p, n) == 0:
            return self.last_topic
        topic = PyUnicode_DecodeUTF8(<const char*>p, n, "replace")
        self.last_topic_b = PyBytes_FromStringAndSize(<const char*>p, n)
        self.last_topic = <str>topic
        return <str>topic

    cdef int _index_raw(self, str topic, const unsigned char* keys, Py_ssize_t klen,
                        const unsigned char* uniq, Py_ssize_t ulen, long long phys, long long ts) except -1:
        """:meth:`_index` on the UTF-8 KEYS / UNIQ_KEY values of a stored record (no str built for ASCII)."""
        cdef unsigned int base
        cdef Py_ssize_t i, j
        if self._indexed(phys):
            return 0
        base = hash_units(hash_units(0, topic, 0, len(topic)), "#", 0, 1)
        if ulen > 0:
            self._index_key(hash_utf8(base, uniq, ulen), phys, ts)
        i = 0
        while i < klen:
            j = i
            while j < klen and keys[j] != 32:
                j += 1
            if j > i:
                self._index_key(hash_utf8(base, keys + i, j - i), phys, ts)
            i = j + 1
        return 0

    cdef long long _dispatch_file(self, const unsigned char* base, long long file_from, long long pos,
                                  long long limit, bint index_on, list reqs, bint* bad) except -2:
        """Dispatch the whole records of one segment from ``pos`` up to ``limit`` (segment-relative);
        returns the position reached, or -1 at a BLANK marker (the rest of the segment is empty). Stops
        before a record that does not end by ``limit`` (the rest is yet to come), and at a record
        that is not well formed (then sets ``bad``)."""
        cdef const unsigned char* r
        cdef int total, magic, sys_flag, qid, blen, tlen, plen, tt
        cdef long long qoff, phys, store_ts, tags
        cdef Py_ssize_t q, bh, sh, tpos, ppos, kpos = 0, klen = 0, upos = 0, ulen = 0, vpos = 0, vlen = 0
        cdef QueueState st
        cdef DispatchRequest req
        while pos + 8 <= limit:
            r = base + pos
            total = rd32(r)
            magic = rd32(r + 4)
            if magic == BLANK_MAGIC_CODE:
                return -1
            if magic != MESSAGE_MAGIC_CODE or total < MIN_RECORD or total > self.max_record_size:
                bad[0] = True
                break
            if pos + total > limit:
                break                                    # not whole yet
            sys_flag = rd32(r + 36)
            bh = 20 if (sys_flag & BORNHOST_V6_FLAG) else 8
            sh = 20 if (sys_flag & STOREHOST_V6_FLAG) else 8
            q = 48 + bh
            store_ts = rd64(r + q)
            q += 8 + sh + 12
            blen = rd32(r + q)
            q += 4
            if blen < 0 or q + blen + 3 > total:
                bad[0] = True
                break
            q += blen
            tlen = r[q]
            tpos = q + 1
            q = tpos + tlen
            if q + 2 > total:
                bad[0] = True
                break
            plen = (r[q] << 8) | r[q + 1]
            ppos = q + 2
            if ppos + plen != total:
                bad[0] = True
                break
            qid = rd32(r + 12)
            qoff = rd64(r + 20)
            phys = file_from + pos
            topic = self._topic_of(r + tpos, tlen)
            if topic == SCHEDULE_TOPIC:
                tags = self.tags_code_fn(topic, PyUnicode_DecodeUTF8(<const char*>(r + ppos), plen, "replace"),
                                         store_ts)
            elif find_prop(r + ppos, plen, b"TAGS\x01", 5, &vpos, &vlen):
                tags = <int>hash_utf8(0, r + ppos + vpos, vlen)
            else:
                tags = 0
            tt = sys_flag & 0xC
            if tt != TRANSACTION_PREPARED_TYPE and tt != TRANSACTION_ROLLBACK_TYPE:
                st = self._state(topic, qid)
                if phys + total > st.max_phys:           # else dispatched before (ConsumeQueue.put's rule)
                    self._cq_put(st, qoff, phys, total, tags)
                if qoff >= st.next_qoff:
                    st.next_qoff = qoff + 1
            klen = ulen = 0
            if not find_prop(r + ppos, plen, b"KEYS\x01", 5, &kpos, &klen):
                klen = 0
            if not find_prop(r + ppos, plen, b"UNIQ_KEY\x01", 9, &upos, &ulen):
                ulen = 0
            if index_on and tt != TRANSACTION_ROLLBACK_TYPE and (klen > 0 or ulen > 0):
                self._index_raw(topic, r + ppos + kpos, klen, r + ppos + upos, ulen, phys, store_ts)
            if reqs is not None and self._wanted(topic, qid):
                req = DispatchRequest.__new__(DispatchRequest)
                req.topic = topic
                req.queue_id = qid
                req.commitlog_offset = phys
                req.size = total
                req.tags_code = tags
                req.store_timestamp = store_ts
                req.queue_offset = qoff
                req.keys = PyUnicode_DecodeUTF8(<const char*>(r + ppos + kpos), klen, "replace") if klen else None
                req.uniq_key = PyUnicode_DecodeUTF8(<const char*>(r + ppos + upos), ulen, "replace") if ulen else None
                req.sys_flag = sys_flag
                req.properties = PyUnicode_DecodeUTF8(<const char*>(r + ppos), plen, "replace")
                reqs.append(req)
            if store_ts > self.last_store_ts:
                self.last_store_ts = store_ts
            pos += total
        return pos

    def dispatch_range(self, long long start, long long end, bint notify=True) -> int:
        """Dispatch every whole record of the CommitLog in ``[start, end)`` to the consume queues, the
        index and (with ``notify``) the dispatch listeners, as if the engine had just appended them;
        the bytes are already written (recovery, or a slave's :meth:`CommitLog.append_raw`).

        ``start`` is the offset of a record, of a BLANK marker or of a segment. A record that does not
        end by ``end`` is left for a later call (a slave receives its master's bytes in pieces that cut
        records anywhere); entries already in a consume queue or the index are kept. A record that is
        not well formed stops the dispatch and is logged. Takes the put lock; listeners run after it
        is released, in the calling thread. The engine's append cursor is re-read on the next put,
        since the CommitLog grew outside it. Returns the offset reached (also in
        ``dispatched_where``): ``end``, or the first record not dispatched."""
        cdef long long phys = start, reached, file_from, limit
        cdef list reqs = [] if notify and len(self.listeners) > 0 else None
        cdef bint index_on = self.config.message_index_enable
        cdef bint bad = False
        cdef MapPtr ptr
        self.lock.acquire()
        try:
            self.cl_mf = None          # the CommitLog grew outside the engine: re-read its end
            self.cl_ptr = None
            while phys < end:
                mf = self.commitlog.mfq.find(phys)
                if mf is None:
                    break
                ptr = <MapPtr?>mf.ptr
                if ptr.p == NULL:
                    raise OSError(f"commit log segment {mf.path} is closed")
                file_from = mf.file_from_offset
                limit = min(end - file_from, <long long>mf.wrote_pos)
                reached = self._dispatch_file(ptr.p, file_from, phys - file_from, limit, index_on, reqs, &bad)
                if reached < 0:                          # BLANK marker: the next segment
                    phys = file_from + mf.file_size
                    continue
                phys = file_from + reached
                if reached < mf.file_size:
                    break
            if phys > end:
                phys = end
            self.dispatched_where = phys
        finally:
            self.lock.release()
        if bad:
            log.error("dispatch stopped at commit log offset %d: the record there is not well formed", phys)
        if reqs:
            self._notify(reqs)
        return phys

    cdef int _notify(self, list reqs) except -1:
        for r in reqs:
            for fn in self.listeners:
                if type(fn) is tuple:        # (topic or watched keys, fn): filtered in C
                    if not _entry_wants(<tuple>fn, (<DispatchRequest>r).topic, (<DispatchRequest>r).queue_id):
                        continue
                    fn = (<tuple>fn)[1]
                try:
                    fn(r)
                except Exception:
                    log.exception("dispatch listener %r failed for %s/%d@%d", fn,
                                  (<DispatchRequest>r).topic, (<DispatchRequest>r).queue_id,
                                  (<DispatchRequest>r).queue_offset)
        return 0

    # -------------------------------------------------------------------------------- put
    cdef object _prep(self, Prep* p, MessageToStore m, list keep):
        """Validate and gather one message; returns None or a failure PutMessageResult. The packed
        host bytes it points ``p`` at are appended to ``keep``, which the caller holds until the
        record is written (the host cache keeps only its first 4096 hosts: another host's bytes
        would otherwise be freed when this returns, and the record written from freed memory)."""
        cdef Py_ssize_t n
        cdef const char* s
        topic = m.topic
        s = PyUnicode_AsUTF8AndSize(topic, &n)
        if n == 0 or n > 127:
            return self._fail(PutMessageStatus.MESSAGE_ILLEGAL, f"topic length {n} must be 1..127 bytes")
        p.topic_p = <const unsigned char*>s
        p.topic_len = n
        body = m.body
        if body is None:
            p.body_p = <const unsigned char*>""
            p.body_len = 0
        elif PyBytes_CheckExact(body):
            p.body_p = <const unsigned char*>PyBytes_AS_STRING(body)
            p.body_len = PyBytes_GET_SIZE(body)
        else:
            PyObject_GetBuffer(body, &p.buf, PyBUF_SIMPLE)
            p.has_buf = True
            p.body_p = <const unsigned char*>p.buf.buf
            p.body_len = p.buf.len
        if p.body_len > self.max_message_size:
            return self._fail(PutMessageStatus.MESSAGE_ILLEGAL,
                                f"message body size {p.body_len} exceeds {self.max_message_size}")
        props = m.properties
        if props:
            s = PyUnicode_AsUTF8AndSize(props, &n)
            if n > 32767:
                return self._fail(PutMessageStatus.PROPERTIES_SIZE_EXCEEDED, f"properties size {n} exceeds 32767")
            p.props_p = <const unsigned char*>s
            p.props_len = n
        else:
            p.props_p = <const unsigned char*>""
            p.props_len = 0
        born = self._host(m.born_host)
        store = self._host(m.store_host)
        keep.append(born)
        keep.append(store)
        p.born_p = <const unsigned char*>PyBytes_AS_STRING(born)
        p.born_len = PyBytes_GET_SIZE(born)
        p.store_p = <const unsigned char*>PyBytes_AS_STRING(store)
        p.store_len = PyBytes_GET_SIZE(store)
        cdef int sys_flag = m.sys_flag
        sys_flag &= ~(BORNHOST_V6_FLAG | STOREHOST_V6_FLAG)
        if p.born_len == 20:
            sys_flag |= BORNHOST_V6_FLAG
        if p.store_len == 20:
            sys_flag |= STOREHOST_V6_FLAG
        p.sys_flag = sys_flag
        cdef long long total = (4 + 4 + 4 + 4 + 4 + 8 + 8 + 4 + 8 + p.born_len + 8 + p.store_len
                                + 4 + 8 + 4 + p.body_len + 1 + p.topic_len + 2 + p.props_len)
        if total > self.max_record_size:
            return self._fail(PutMessageStatus.MESSAGE_ILLEGAL,
                                f"record size {total} exceeds {self.max_record_size}")
        p.total = <int>total
        p.queue_id = m.queue_id
        p.flag = m.flag
        p.reconsume = m.reconsume_times
        p.born_ts = m.born_timestamp
        p.prepared = m.prepared_transaction_offset
        p.tags = m.tags_code
        return None

    cdef void _write_record(self, Prep* p, long long qoff, long long phys, long long store_ts):
        cdef unsigned char* r = self.cl_ptr.p + self.cl_pos
        cdef unsigned char* q = r
        cdef unsigned int crc = 0
        cdef Py_ssize_t blen = p.body_len
        wr32(q, p.total); q += 4
        wr32(q, MESSAGE_MAGIC_CODE); q += 4
        q += 4                                  # CRC below
        wr32(q, p.queue_id); q += 4
        wr32(q, p.flag); q += 4
        wr64(q, qoff); q += 8
        wr64(q, phys); q += 8
        wr32(q, p.sys_flag); q += 4
        wr64(q, p.born_ts); q += 8
        memcpy(q, p.born_p, p.born_len); q += p.born_len
        wr64(q, store_ts); q += 8
        memcpy(q, p.store_p, p.store_len); q += p.store_len
        wr32(q, p.reconsume); q += 4
        wr64(q, p.prepared); q += 8
        wr32(q, <int>blen); q += 4
        if blen > NOGIL_BODY:
            with nogil:
                crc = masked_crc(p.body_p, blen)
                memcpy(q, p.body_p, blen)
        elif blen > 0:
            crc = masked_crc(p.body_p, blen)
            memcpy(q, p.body_p, blen)
        q += blen
        q[0] = <unsigned char>p.topic_len; q += 1
        memcpy(q, p.topic_p, p.topic_len); q += p.topic_len
        q[0] = (p.props_len >> 8) & 0xFF
        q[1] = p.props_len & 0xFF
        q += 2
        if p.props_len > 0:
            memcpy(q, p.props_p, p.props_len)
        wr32(r + 8, <int>crc)

    cdef object _put(self, list msgs):
        cdef Py_ssize_t n = len(msgs), i
        cdef Prep one
        cdef Prep* preps = &one
        cdef double t0 = mono_ms()
        cdef long long store_ts, qoff, phys, first_qoff = 0, wrote = 0, tags, end_offset = 0
        cdef PutMessageResult res
        cdef int tt
        cdef bint dispatch_cq, want_reqs
        cdef QueueState st
        cdef list offsets, reqs = None
        cdef list keep = []                 # what the preps point into (see _prep)
        cdef DispatchRequest req
        cdef MessageToStore m
        if n == 0:
            return make_result(PutMessageStatus.MESSAGE_ILLEGAL, [], 0, 0, 0, 0, "empty batch")
        if not self.running:
            return self._fail(PutMessageStatus.SERVICE_NOT_AVAILABLE, "message store is not running")
        if self.disk_full:
            return self._fail(PutMessageStatus.SERVICE_NOT_AVAILABLE,
                                "disk is nearly full; message store refuses writes")
        if n > 1:
            preps = <Prep*>malloc(n * sizeof(Prep))
            if preps == NULL:
                raise MemoryError()
        for i in range(n):
            preps[i].has_buf = False
        try:
            for i in range(n):
                bad = self._prep(&preps[i], <MessageToStore?>msgs[i], keep)
                if bad is not None:
                    return bad
            offsets = []
            want_reqs = len(self.listeners) > 0
            if want_reqs:
                reqs = []
            self.lock.acquire()
            self.begin_time_in_lock = now_ms()
            try:
                if not self.running:
                    return self._fail(PutMessageStatus.SERVICE_NOT_AVAILABLE, "message store is shut down")
                store_ts = now_ms() if self.clock is None else self.clock()
                if store_ts < self.last_store_ts:
                    store_ts = self.last_store_ts      # keep store times monotonic
                for i in range(n):
                    m = <MessageToStore?>msgs[i]
                    topic = m.topic
                    tt = preps[i].sys_flag & 0xC
                    dispatch_cq = tt != TRANSACTION_PREPARED_TYPE and tt != TRANSACTION_ROLLBACK_TYPE
                    st = None
                    qoff = 0
                    if dispatch_cq:
                        st = self._state(topic, preps[i].queue_id)
                        qoff = st.next_qoff
                    if (self.cl_ptr is None or self.cl_ptr.p == NULL or
                            self.cl_pos + preps[i].total + 8 > self.cl_size):
                        try:
                            self._cl_refresh(preps[i].total)
                        except OSError as e:
                            log.exception("creating commit log segment failed")
                            return self._fail(PutMessageStatus.CREATE_MAPEDFILE_FAILED, str(e))
                    phys = self.cl_from + self.cl_pos
                    self._write_record(&preps[i], qoff, phys, store_ts)
                    self.cl_pos += preps[i].total
                    self.cl_mf.wrote_pos = self.cl_pos
                    tags = preps[i].tags
                    if topic == SCHEDULE_TOPIC:
                        tags = self.tags_code_fn(topic, m.properties, store_ts)
                    if dispatch_cq:
                        st.next_qoff = qoff + 1
                        self._cq_put(st, qoff, phys, preps[i].total, tags)
                    if i == 0:
                        first_qoff = qoff
                    if tt != TRANSACTION_ROLLBACK_TYPE and self.config.message_index_enable:
                        keys = m.keys
                        uniq = m.uniq_key
                        if keys or uniq:
                            self._index(topic, keys, uniq, phys, store_ts)
                    if want_reqs and self._wanted(topic, preps[i].queue_id):
                        req = DispatchRequest.__new__(DispatchRequest)
                        req.topic = topic
                        req.queue_id = preps[i].queue_id
                        req.commitlog_offset = phys
                        req.size = preps[i].total
                        req.tags_code = tags
                        req.store_timestamp = store_ts
                        req.queue_offset = qoff
                        req.keys = m.keys
                        req.uniq_key = m.uniq_key
                        req.sys_flag = preps[i].sys_flag
                        req.properties = m.properties
                        reqs.append(req)
                    self.dispatched_where = phys + preps[i].total
                    counter = self.topic_counters.get(topic)
                    if counter is None:
                        counter = self.topic_counters[topic] = TopicPutCounter()
                    (<TopicPutCounter>counter).nums += 1
                    (<TopicPutCounter>counter).size += preps[i].total
                    offsets.append(phys)
                    wrote += preps[i].total
                self.last_store_ts = store_ts
                end_offset = self.cl_from + self.cl_pos
            finally:
                self.begin_time_in_lock = 0
                self.lock.release()
        finally:
            for i in range(n):
                if preps[i].has_buf:
                    PyBuffer_Release(&preps[i].buf)
            if preps != &one:
                free(preps)
        if want_reqs and reqs:
            self._notify(reqs)
        self.put_times_total += n
        self.put_size_total += wrote
        if not self.latency_by_caller:
            self._note_latency(mono_ms() - t0)
        res = make_result(ST_PUT_OK, offsets, first_qoff, <int>n, store_ts, wrote, "")
        res.end_offset = end_offset
        return res

    cdef PutMessageResult _fail(self, PutMessageStatus status, str remark):
        """A refused put: counted, with Java's status and a remark."""
        self.put_failed_total += 1
        return make_result(status, [], 0, 0, 0, 0, remark)

    cdef void _note_latency(self, double ms) noexcept:
        cdef long long v = <long long>ms
        cdef int i = 0
        if ms > self.put_latency_max_ms:
            self.put_latency_max_ms = ms
        while i < 12 and v >= DIST_BOUNDS[i]:
            i += 1
        self.put_dist[i] += 1

    def lock_time_mills(self) -> int:
        """How long the put in progress has held the put lock (ms; 0 when none): CommitLog.lockTimeMills."""
        cdef long long begin = self.begin_time_in_lock
        if begin <= 0:
            return 0
        return max(0, now_ms() - begin)

    def record_latency(self, double ms) -> None:
        """Count one put that took ``ms`` (the caller measured it: SYNC_FLUSH waits included)."""
        self._note_latency(ms)

    def put_distribution(self) -> list:
        """Puts per latency bucket: <=0ms, 0~10ms, 10~50ms, 50~100ms, 100~200ms, 200~500ms,
        500ms~1s, 1~2s, 2~3s, 3~4s, 4~5s, 5~10s, 10s~ (whole milliseconds, as Java counts)."""
        return [self.put_dist[i] for i in range(13)]

    def put_messages(self, msgs) -> PutMessageResult:
        """Append a batch atomically w.r.t. other puts (validation before any byte is written)."""
        return self._put(msgs if type(msgs) is list else list(msgs))

    def put_message(self, msg) -> PutMessageResult:
        return self._put([msg])


# ---------------------------------------------------------------------------------- page warming
cdef extern from "sys/mman.h" nogil:
    int madvise(void* addr, size_t length, int advice)
cdef extern from "errno.h":
    int errno

DEF MADV_POPULATE_WRITE = 23
DEF PAGE = 4096


def populate(MapPtr ptr, Py_ssize_t start, Py_ssize_t end) -> int:
    """Pre-fault the pages of ``[start, end)`` writable (MADV_POPULATE_WRITE, GIL released).

    Never changes data, so it may overlap bytes being written concurrently.  Returns 0, or the
    errno (EINVAL: the kernel predates 5.14 and cannot populate; callers stop trying)."""
    cdef unsigned char* p = ptr.p
    if p == NULL:
        return 0
    if start < 0:
        start = 0
    if end > ptr.size:
        end = ptr.size
    start -= start % PAGE
    if end <= start:
        return 0
    cdef int rc
    with nogil:
        rc = madvise(<void*>(p + start), <size_t>(end - start), MADV_POPULATE_WRITE)
    return errno if rc != 0 else 0
