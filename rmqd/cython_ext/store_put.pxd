# Interface of the put engine: the types other Cython modules (the send lane) use directly.

# Java's PutMessageStatus; a Python IntEnum as well (rmqd.store.results re-exports it)
cpdef enum PutMessageStatus:
    PUT_OK = 0
    FLUSH_DISK_TIMEOUT = 1
    FLUSH_SLAVE_TIMEOUT = 2
    SLAVE_NOT_AVAILABLE = 3
    SERVICE_NOT_AVAILABLE = 4
    CREATE_MAPEDFILE_FAILED = 5
    MESSAGE_ILLEGAL = 6
    PROPERTIES_SIZE_EXCEEDED = 7
    OS_PAGECACHE_BUSY = 8
    UNKNOWN_ERROR = 9

cdef struct Prep:
    const unsigned char* topic_p
    Py_ssize_t topic_len
    const unsigned char* body_p
    Py_ssize_t body_len
    const unsigned char* props_p
    Py_ssize_t props_len
    const unsigned char* born_p
    Py_ssize_t born_len
    const unsigned char* store_p
    Py_ssize_t store_len
    int sys_flag
    int total
    int queue_id
    int flag
    int reconsume
    long long born_ts
    long long prepared
    long long tags
    bint has_buf
    Py_buffer buf


cdef class MapPtr:
    cdef Py_buffer buf
    cdef unsigned char* p
    cdef Py_ssize_t size

cdef class MessageToStore:
    cdef public object topic
    cdef public int queue_id
    cdef public object body
    cdef public object properties
    cdef public int flag
    cdef public int sys_flag
    cdef public long long born_timestamp
    cdef public object born_host
    cdef public object store_host
    cdef public int reconsume_times
    cdef public long long prepared_transaction_offset
    cdef public long long tags_code
    cdef public object keys
    cdef public object uniq_key
    cdef tuple _fields(self)

cdef class DispatchRequest:
    cdef public object topic
    cdef public int queue_id
    cdef public long long commitlog_offset
    cdef public int size
    cdef public long long tags_code
    cdef public long long store_timestamp
    cdef public long long queue_offset
    cdef public object keys
    cdef public object uniq_key
    cdef public int sys_flag
    cdef public object properties

cdef class PutMessageResult:
    cdef public object status
    cdef public list wrote_offsets
    cdef public long long queue_offset
    cdef public int msg_count
    cdef public long long store_timestamp
    cdef public long long wrote_bytes
    cdef public str remark
    cdef readonly long long end_offset      # commit-log offset just past the last record

cdef class TopicPutCounter:
    cdef public long long nums
    cdef public long long size

cdef class QueueState:
    cdef public object cq
    cdef public long long next_qoff
    cdef long long max_phys        # phys + size of the last entry written by the engine
    cdef object mf
    cdef MapPtr ptr
    cdef long long file_from, file_size, wrote_pos
    cdef void refresh(self)

cdef class PutEngine:
    cdef object config, commitlog, index, queues, lock, tags_code_fn, pack_host_fn
    cdef public object clock          # None = wall clock read in C; else a callable returning ms
    cdef public list listeners
    cdef public dict states
    cdef public dict topic_counters   # topic -> TopicPutCounter (never reset but by drop_topic)
    cdef dict host_cache
    cdef public bint running, disk_full
    cdef public long long last_store_ts
    cdef public long long put_times_total, put_size_total, put_failed_total
    cdef public long long begin_time_in_lock   # wall ms when the running put took the lock; 0 = none (Java's)
    cdef public long long dispatched_where     # CommitLog offset up to which ConsumeQueue/index are written; -1 = all
    cdef public double put_latency_max_ms
    cdef public bint latency_by_caller   # SYNC_FLUSH: the store records put + flush wait instead
    cdef long long put_dist[13]          # puts per latency bucket (StoreStatsService's buckets)
    cdef long long max_message_size, max_record_size
    cdef object cl_mf
    cdef MapPtr cl_ptr
    cdef long long cl_from, cl_size, cl_pos
    cdef object ix_file
    cdef MapPtr ix_ptr
    cdef long long ix_slots, ix_max
    cdef bytes last_topic_b              # dispatch_range: the last record's topic bytes and str
    cdef str last_topic

    cdef bint _wanted(self, topic, int queue_id)
    cdef bytes _host(self, h)
    cdef QueueState _state(self, topic, int queue_id)
    cdef int _cl_refresh(self, int total) except -1
    cdef int _cq_put(self, QueueState st, long long qoff, long long phys, int size,
                     long long tags) except -1
    cdef int _index_key(self, unsigned int h, long long phys, long long ts) except -1
    cdef int _indexed(self, long long phys) except -1
    cdef int _index(self, str topic, keys, uniq, long long phys, long long ts) except -1
    cdef object _prep(self, Prep* p, MessageToStore m, list keep)
    cdef void _write_record(self, Prep* p, long long qoff, long long phys, long long store_ts)
    cdef object _put(self, list msgs)
    cdef void _note_latency(self, double ms) noexcept
    cdef PutMessageResult _fail(self, PutMessageStatus status, str remark)
    cdef int _notify(self, list reqs) except -1
    cdef str _topic_of(self, const unsigned char* p, Py_ssize_t n)
    cdef int _index_raw(self, str topic, const unsigned char* keys, Py_ssize_t klen,
                        const unsigned char* uniq, Py_ssize_t ulen, long long phys, long long ts) except -1
    cdef long long _dispatch_file(self, const unsigned char* base, long long file_from, long long pos,
                                  long long limit, bint index_on, list reqs, bint* bad) except -2
