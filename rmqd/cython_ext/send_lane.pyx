# cython: language_level=3
"""The send fast lane: one small message to a known topic, answered in one C call on the loop.

SEND_MESSAGE (10) and SEND_MESSAGE_V2 (310) of a single message make up nearly all of a broker's
traffic.  Under ASYNC_FLUSH the store write is a memory copy, so the request costs what the code
around it costs.  ``SendLane.handle`` reads the header fields, edits the properties, appends
through the store's put engine and encodes the response frame without going through the Python
processor.  It serves only the plain case and declines (returns None) everything else: unknown,
retry or forbidden topics, batches, large bodies, properties a ``before_store`` hook acts on
(delay levels, timers, transactions), bad or missing header fields and failed puts.  A declined
request goes to ``SendMessageProcessor`` unchanged, which answers it exactly as before, so
the lane never decides an error response.

``SendLane.serve_data`` takes the bytes of one read: a send with a JSON header (what Java, Go
and C++ clients write) is read by ``json_scan`` straight from those bytes, so no header dict,
no field strings and no RemotingCommand are made for it.  A header the scanner does not fully
understand, and every other frame, is decoded as usual and goes through ``handle`` or the
dispatcher.
"""
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize
from libc.stdint cimport uint8_t, uint32_t
from libc.stdlib cimport free, malloc, rand
from libc.string cimport memcmp, memcpy
from posix.time cimport CLOCK_MONOTONIC, clock_gettime, timespec

from rmqd.cython_ext.json_scan cimport (MAX_EXT, V_ABSENT, V_FALSE, V_NUM, V_STR, V_STR_ESC, V_TRUE, Header, Slice,
                                        ext_value, scan_header, slice_int, unescape)
from rmqd.cython_ext.remoting_codec cimport FrameReader, RemotingCommand, be32, decode_frame_at

from rmqd.cython_ext.message_codec cimport property_by_key
from rmqd.cython_ext.store_put cimport MessageToStore, PutEngine, PutMessageResult

from rmqd.cython_ext.message_codec import java_string_hash
from rmqd.cython_ext.remoting_codec import SERVER_VERSION, encode_frame
from rmqd.remoting.command import prepare_reply

# Send header field names: SEND_MESSAGE (10) full names, SEND_MESSAGE_V2 (310) compact ones.
# The first F_REQUIRED are mandatory (present, not parsed by the lane).
cdef tuple V1_FIELDS = ("producerGroup", "defaultTopic", "defaultTopicQueueNums", "topic", "queueId",
                        "sysFlag", "bornTimestamp", "flag", "reconsumeTimes", "properties", "batch")
cdef tuple V2_FIELDS = ("a", "c", "d", "b", "e", "f", "g", "h", "j", "i", "m")
cdef tuple V1_FIELDS_B = tuple(name.encode("ascii") for name in V1_FIELDS)
cdef tuple V2_FIELDS_B = tuple(name.encode("ascii") for name in V2_FIELDS)
cdef enum:
    F_REQUIRED = 3
    F_TOPIC = 3
    F_QUEUE_ID = 4
    F_SYS_FLAG = 5
    F_BORN_TS = 6
    F_FLAG = 7
    F_RECONSUME = 8
    F_PROPERTIES = 9
    F_BATCH = 10

cdef object DECLINED = object()             # _serve_raw: read in full, not for the lane
cdef bytes ACCESS_KEY_B = b"AccessKey"
cdef bytes SIGNATURE_B = b"Signature"
cdef int SERVER_VERSION_C = SERVER_VERSION
cdef int MULTI_TAGS_FLAG = 0x2
cdef int RPC_TYPE_RESPONSE = 1
cdef int RPC_ONEWAY = 2
include "consts.pxi"            # PERM_WRITE, RETRY_GROUP_TOPIC_PREFIX, the property separators
cdef str RETRY_PREFIX = RETRY_GROUP_TOPIC_PREFIX
cdef str PROP_SEP = PROPERTY_SEPARATOR
cdef str NV_SEP = NAME_VALUE_SEPARATOR

cdef extern from "Python.h":
    void* PyUnicode_DATA(object s)
    Py_ssize_t PyUnicode_GET_LENGTH(object s)
    str PyUnicode_DecodeASCII(const char* s, Py_ssize_t size, const char* errors)


cdef str _strip_wait(str props):
    """``props`` without WAIT and without empty segments, as the full processor writes it
    (``"\x02".join(p for p in props.split("\x02") if p and not p.startswith("WAIT\x01"))``)."""
    cdef Py_ssize_t i = -1, j, n = len(props)
    cdef list kept
    cdef str part, out
    # Common shapes (Java: "...\x02WAIT\x01true\x02...\x02", C++: no trailing separator):
    # exactly one WAIT segment and no empty segment but a trailing one.
    if props.find("WAIT\x01") == props.rfind("WAIT\x01") and "\x02\x02" not in props \
            and not props.startswith(PROP_SEP):
        i = props.find("WAIT\x01")
        if i > 0 and props[i - 1] != "\x02":
            i = -1                                  # "xWAIT\x01" inside another segment
    if i >= 0:
        j = props.find(PROP_SEP, i)
        out = props[:i] + props[j + 1:] if j >= 0 else props[:i]
        if out.endswith(PROP_SEP):
            out = out[:len(out) - 1]
        return out
    kept = []
    for part in props.split(PROP_SEP):
        if part and not part.startswith("WAIT\x01"):
            kept.append(part)
    return PROP_SEP.join(kept)


cdef inline void _put32(uint8_t* p, uint32_t v) noexcept nogil:
    p[0] = (v >> 24) & 0xFF
    p[1] = (v >> 16) & 0xFF
    p[2] = (v >> 8) & 0xFF
    p[3] = v & 0xFF


cdef inline bint _json_plain(str s):
    """True when ``s`` needs no escaping inside a JSON string."""
    cdef Py_UCS4 ch
    for ch in s:
        if ch < 0x20 or ch == 0x22 or ch == 0x5C:
            return False
    return True


# Pieces of the JSON response header (fixed key order: the codec's, i.e. orjson's of our dict).
cdef bytes J_CODE = b'{"code":'
cdef bytes J_HEAD = b',"extFields":{"msgId":"'
cdef bytes J_QID = b'","queueId":"'
cdef bytes J_QOFF = b'","queueOffset":"'
cdef bytes J_REGION = b'","MSG_REGION":"'
cdef bytes J_TRACE_T = b'","TRACE_ON":"true"},"flag":1,"language":"JAVA","opaque":'
cdef bytes J_TRACE_F = b'","TRACE_ON":"false"},"flag":1,"language":"JAVA","opaque":'
cdef bytes J_TAIL = b',"serializeTypeCurrentRPC":"JSON","version":'


cdef inline char* _cat(char* p, const char* s, Py_ssize_t n) noexcept nogil:
    memcpy(p, s, n)
    return p + n


cdef inline char* _dec(char* p, long long v) noexcept nogil:
    """Decimal digits of ``v`` at ``p``; returns the end."""
    cdef char tmp[24]
    cdef int k = 0
    cdef unsigned long long u
    if v < 0:
        p[0] = 45
        p += 1
        u = <unsigned long long>(-(v + 1)) + 1
    else:
        u = <unsigned long long>v
    while True:
        tmp[k] = <char>(48 + u % 10)
        k += 1
        u //= 10
        if u == 0:
            break
    while k > 0:
        k -= 1
        p[0] = tmp[k]
        p += 1
    return p


cdef inline char* _hex16(char* p, long long v) noexcept nogil:
    """``v`` as 16 upper-case hex digits (Java's %016X of a long)."""
    cdef unsigned long long u = <unsigned long long>v
    cdef int k
    for k in range(15, -1, -1):
        p[k] = b"0123456789ABCDEF"[u & 0xF]
        u >>= 4
    return p + 16


cdef bytes _ok_frame(bytes prefix, long long phys, int queue_id, long long queue_offset, bytes region,
                     bint trace_on, int opaque, int code=0):
    """The whole SEND response frame with a JSON header, byte for byte what the codec writes
    (``code`` 0 SUCCESS, or 10 FLUSH_DISK_TIMEOUT: stored, flush not confirmed in time).
    ``prefix`` and ``region`` are short (the caller checks), so it is built on the stack."""
    cdef char buf[640]
    cdef char* p = buf + 8
    p = _cat(p, <const char*>J_CODE, len(J_CODE))
    p = _dec(p, code)
    p = _cat(p, <const char*>J_HEAD, len(J_HEAD))
    p = _cat(p, <const char*>prefix, len(prefix))
    p = _hex16(p, phys)
    p = _cat(p, <const char*>J_QID, len(J_QID))
    p = _dec(p, queue_id)
    p = _cat(p, <const char*>J_QOFF, len(J_QOFF))
    p = _dec(p, queue_offset)
    p = _cat(p, <const char*>J_REGION, len(J_REGION))
    p = _cat(p, <const char*>region, len(region))
    if trace_on:
        p = _cat(p, <const char*>J_TRACE_T, len(J_TRACE_T))
    else:
        p = _cat(p, <const char*>J_TRACE_F, len(J_TRACE_F))
    p = _dec(p, opaque)
    p = _cat(p, <const char*>J_TAIL, len(J_TAIL))
    p = _dec(p, SERVER_VERSION_C)
    p = _cat(p, b'}', 1)
    cdef int hlen = <int>(p - buf - 8)
    _put32(<uint8_t*>buf, <uint32_t>(4 + hlen))
    _put32(<uint8_t*>buf + 4, <uint32_t>hlen)     # serialize type JSON (0) in the high byte
    return PyBytes_FromStringAndSize(buf, 8 + hlen)


cdef inline bint _ascii_slice(Slice* s, const uint8_t* p, Py_ssize_t n) noexcept nogil:
    """Point ``s`` at the ``n`` bytes at ``p`` as a V_STR; False (``s`` untouched) when one is not ASCII."""
    cdef Py_ssize_t i
    for i in range(n):
        if p[i] >= 0x80:
            return False
    s.p = p
    s.n = n
    s.kind = V_STR
    return True


cdef inline Py_ssize_t _length_at(const uint8_t* p, Py_ssize_t* pos, Py_ssize_t end) noexcept nogil:
    """The big-endian int32 length at ``p + pos``, ``pos`` moved past it: -1 when it is negative or more than the
    bytes left before ``end``."""
    cdef Py_ssize_t length = <int>be32(p + pos[0])
    pos[0] += 4
    return length if 0 <= length <= end - pos[0] else -1


cdef bint _scan_binary(const uint8_t* p, Py_ssize_t n, Header* h, long long* code, long long* flag,
                       long long* opaque) noexcept nogil:
    """Read a ROCKETMQ (binary) request header into ``h`` the way the JSON scanner fills it: every
    extFields value a V_STR slice of the received bytes.  False (the decoder reads it) for a header
    the decoder would refuse, one with more than MAX_EXT fields, or any non-ASCII byte in a name or
    value (the decoder turns those into str through UTF-8)."""
    cdef Py_ssize_t pos, end, remark_len, ext_len, klen, vlen
    if n < 21:
        return False
    code[0] = (p[0] << 8) | p[1]
    opaque[0] = <int>be32(p + 5)
    flag[0] = <int>be32(p + 9)
    pos = 13
    remark_len = _length_at(p, &pos, n - 4)             # the extFields length follows the remark
    if remark_len < 0:
        return False
    pos += remark_len
    ext_len = _length_at(p, &pos, n)
    if ext_len < 0:
        return False
    h.code.kind = h.flag.kind = h.opaque.kind = V_ABSENT
    h.has_ext = ext_len > 0
    h.n_ext = 0
    end = pos + ext_len
    while pos < end:
        if end - pos < 2:
            return False
        klen = (p[pos] << 8) | p[pos + 1]
        pos += 2
        if klen > end - pos - 4 or h.n_ext == MAX_EXT:
            return False
        if not _ascii_slice(&h.keys[h.n_ext], p + pos, klen):
            return False
        pos += klen
        vlen = _length_at(p, &pos, end)
        if vlen < 0:
            return False
        if not _ascii_slice(&h.vals[h.n_ext], p + pos, vlen):
            return False
        h.n_ext += 1
        pos += vlen
    return True


cdef inline uint8_t* _ext_entry(uint8_t* p, const char* key, Py_ssize_t klen, const char* val,
                                Py_ssize_t vlen) noexcept nogil:
    p[0] = (klen >> 8) & 0xFF
    p[1] = klen & 0xFF
    memcpy(p + 2, key, klen)
    p += 2 + klen
    _put32(p, <uint32_t>vlen)
    memcpy(p + 4, val, vlen)
    return p + 4 + vlen


cdef bytes _ok_frame_binary(bytes prefix, long long phys, int queue_id, long long queue_offset, bytes region,
                            bint trace_on, int opaque, int code=0):
    """``_ok_frame`` with a ROCKETMQ (binary) header: byte for byte what the codec writes for the
    same response (extFields msgId, queueId, queueOffset, MSG_REGION, TRACE_ON, in that order)."""
    cdef char buf[640]
    cdef char num[96]
    cdef uint8_t* h = <uint8_t*>buf + 8
    cdef uint8_t* q
    cdef char* e
    h[0] = (code >> 8) & 0xFF
    h[1] = code & 0xFF
    h[2] = 0                                        # LanguageCode JAVA
    h[3] = (SERVER_VERSION_C >> 8) & 0xFF
    h[4] = SERVER_VERSION_C & 0xFF
    _put32(h + 5, <uint32_t>opaque)
    _put32(h + 9, 1)                                # flag: response
    _put32(h + 13, 0)                               # no remark
    q = h + 21
    e = _hex16(_cat(num, <const char*>prefix, len(prefix)), phys)
    q = _ext_entry(q, b"msgId", 5, num, e - num)
    e = _dec(num, queue_id)
    q = _ext_entry(q, b"queueId", 7, num, e - num)
    e = _dec(num, queue_offset)
    q = _ext_entry(q, b"queueOffset", 11, num, e - num)
    q = _ext_entry(q, b"MSG_REGION", 10, <const char*>region, len(region))
    if trace_on:
        q = _ext_entry(q, b"TRACE_ON", 8, b"true", 4)
    else:
        q = _ext_entry(q, b"TRACE_ON", 8, b"false", 5)
    _put32(h + 17, <uint32_t>(q - h - 21))
    cdef int hlen = <int>(q - h)
    _put32(<uint8_t*>buf, <uint32_t>(4 + hlen))
    _put32(<uint8_t*>buf + 4, (<uint32_t>1 << 24) | <uint32_t>hlen)     # serialize type ROCKETMQ (1)
    return PyBytes_FromStringAndSize(buf, 8 + hlen)


cdef inline int _int32(object v) except? -1:
    """``_int`` limited to a Java int (OverflowError otherwise, as assigning ``int()`` did)."""
    cdef long long r = _int(v)
    if r < -2147483648 or r > 2147483647:
        raise OverflowError("value out of int range")
    return <int>r


cdef long long _int(object v) except? -1:
    """Java-style integer field: plain [-]digits are read in C, anything else as ``int()`` does
    (which raises for what the full processor would reject too)."""
    cdef Py_ssize_t i, n, start = 0
    cdef long long r = 0
    cdef long d
    if type(v) is str:
        n = len(<str>v)
        if n > 0 and (<str>v)[0] == u"-":
            start = 1
        if 0 < n - start <= 18:
            i = start
            while i < n:
                d = <long>(<Py_UCS4>(<str>v)[i]) - 48
                if d < 0 or d > 9:
                    break
                r = r * 10 + d
                i += 1
            if i == n:
                return -r if start else r
    return int(v)


cdef inline bint _fits_int(long long v) noexcept nogil:
    return -2147483648 <= v <= 2147483647


cdef inline tuple _send_fields(long long code, tuple v2_names, tuple v1_names):
    """The extFields names of a send of ``code``: SEND_MESSAGE_V2 (310) or SEND_MESSAGE (10); None for another code."""
    if code == 310:
        return v2_names
    if code == 10:
        return v1_names
    return None


cdef inline const Slice* _field(const Header* h, tuple names, int i):
    """The scanned value of send header field ``i`` (names: V1_FIELDS_B or V2_FIELDS_B)."""
    cdef bytes name = <bytes>names[i]
    return ext_value(h, PyBytes_AS_STRING(name), len(name))


cdef inline bint _int_field(const Header* h, tuple names, int i, long long* out):
    cdef const Slice* v = _field(h, names, i)
    return v != NULL and slice_int(v, out)


cdef int _slice_truthy(const Slice* v) noexcept:
    """``_truthy`` of the value the decoder would make of ``v``: 1, 0, or -1 (escaped: not read)."""
    if v.kind == V_TRUE:
        return 1
    if v.kind == V_STR or v.kind == V_NUM:
        if v.n == 1 and v.p[0] == 49:
            return 1
        return 1 if (v.kind == V_STR and v.n == 4 and (v.p[0] | 32) == 116 and (v.p[1] | 32) == 114
                     and (v.p[2] | 32) == 117 and (v.p[3] | 32) == 101) else 0
    if v.kind == V_STR_ESC:
        return -1
    return 0


cdef inline int _key_cmp(const Slice* a, const Slice* b) noexcept nogil:
    """Byte order of two names (ASCII: the order of Java's String.compareTo)."""
    cdef Py_ssize_t n = a.n if a.n < b.n else b.n
    cdef int c = memcmp(a.p, b.p, n)
    if c != 0:
        return c
    return <int>(a.n - b.n)


cdef inline bint _truthy(object v):
    return v is not None and (v == "1" or (<str>v).lower() == "true")


# ----------------------------------------------------------------------------- metrics
# What the lane serves never reaches the processors, so it counts for rmqd.metrics itself:
# per topic (messages, bytes, message-size buckets) and, per read, the time the read took for
# every send it served (rpc latency).  A few C increments per send; read at scrape time.
DEF N_SIZE_BUCKETS = 7             # <= 1 KiB, 4 KiB, 512 KiB, 1 MiB, 2 MiB, 4 MiB, +Inf
DEF N_LAT_BUCKETS = 10             # <= 1, 3, 5, 7, 10, 100, 1000, 2000, 3000 ms, +Inf
cdef long long SIZE_BOUNDS[6]
SIZE_BOUNDS[:] = [1024, 4096, 512 * 1024, 1024 * 1024, 2 * 1024 * 1024, 4 * 1024 * 1024]
cdef double LAT_BOUNDS[9]
LAT_BOUNDS[:] = [1.0, 3.0, 5.0, 7.0, 10.0, 100.0, 1000.0, 2000.0, 3000.0]


cdef class LaneTopicCounter:
    """Messages and bytes the lane stored for one topic, with message-size bucket counts."""
    cdef public long long nums
    cdef public long long size
    cdef long long buckets[N_SIZE_BUCKETS]

    cdef inline void add(self, long long n) noexcept:
        cdef int i = 0
        self.nums += 1
        self.size += n
        while i < 6 and n > SIZE_BOUNDS[i]:
            i += 1
        self.buckets[i] += 1

    def bucket_counts(self) -> tuple:
        """Non-cumulative counts per size bucket (last = above 4 MiB)."""
        return tuple(self.buckets[i] for i in range(N_SIZE_BUCKETS))


cdef class LaneMetrics:
    """Counters of the sends the lane served (see rmqd.metrics)."""
    cdef public dict topics                      # topic -> LaneTopicCounter
    cdef long long pending[4]                    # served in the current read, by (v2, oneway)
    cdef long long lat[4][N_LAT_BUCKETS]
    cdef double lat_sum[4]

    def __init__(self):
        self.topics = {}

    cdef inline void on_put(self, str topic, long long body_len, bint v2, bint oneway):
        c = self.topics.get(topic)
        if c is None:
            c = LaneTopicCounter()
            self.topics[topic] = c
        (<LaneTopicCounter>c).add(body_len)
        self.pending[(2 if v2 else 0) + (1 if oneway else 0)] += 1

    cdef void end_read(self, double elapsed_ms) noexcept:
        cdef int slot, i
        cdef long long n
        for slot in range(4):
            n = self.pending[slot]
            if n:
                i = 0
                while i < 9 and elapsed_ms > LAT_BOUNDS[i]:
                    i += 1
                self.lat[slot][i] += n
                self.lat_sum[slot] += elapsed_ms * n
                self.pending[slot] = 0

    def rpc_latency(self) -> list:
        """[(request code, oneway, bucket counts (non-cumulative), sum in ms)] of served sends."""
        self.end_read(0.0)                       # sends served through handle() outside a read
        out = []
        for slot in range(4):
            counts = tuple(self.lat[slot][i] for i in range(N_LAT_BUCKETS))
            if any(counts):
                out.append((310 if slot >= 2 else 10, bool(slot & 1), counts, self.lat_sum[slot]))
        return out


cdef inline double _now_ms() noexcept nogil:
    cdef timespec ts
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return ts.tv_sec * 1000.0 + ts.tv_nsec / 1e6


cdef class SendLane:
    """Fast path for single-message sends; see the module docstring.

    The owner (``SendMessageProcessor``) fills the fields and keeps them current: ``topics`` is
    the live topic table, ``valid_topics`` the names that passed the topic-name checks,
    ``markers`` the property substrings that need the full processor.
    """
    cdef public bint enabled
    cdef public object engine            # PutEngine: put_message(MessageToStore) -> PutMessageResult
    cdef public object ok_status         # PutMessageStatus.PUT_OK
    cdef public object topic_manager     # .table: topic -> TopicConfig
    cdef public object broker_config     # .brokerPermission, .regionId, .traceOn (read per request)
    cdef public set valid_topics
    cdef public tuple markers
    cdef public object store_host        # (ip, port)
    cdef str cluster_name                # broker_config.brokerClusterName when cluster_property was made
    cdef str cluster_property            # "CLUSTER\x01<cluster>"
    cdef str _prefix                     # msgId prefix: store host as hex
    cdef bytes _prefix_b
    cdef str region                      # last broker_config.regionId seen, and its JSON-safe bytes
    cdef bytes region_json
    cdef public Py_ssize_t max_body
    cdef public bint sync_flush          # SYNC_FLUSH store: answers wait for the group commit
    cdef public object flush_waiter      # (conn, end_offset, ok_frame, timeout_frame) -> None
    cdef public object request_hook      # the dispatcher's request hook (ACL): checked before serving
    cdef public long long served
    cdef public long long served_raw     # of which served from the bytes (header not decoded)
    cdef str _last_topic                 # the str made for the last raw topic (reused when equal)
    cdef uint8_t* _scratch               # unescaped properties of a raw request
    cdef uint8_t* _acl_buf               # the signed content of a raw request (ACL on)
    cdef Py_ssize_t _acl_cap
    cdef public LaneMetrics metrics      # what the served sends count for rmqd.metrics
    cdef bint _v2                        # the send being served is SEND_MESSAGE_V2
    cdef Py_ssize_t _scratch_cap

    def __init__(self):
        self.enabled = False
        self.valid_topics = set()
        self.markers = ()
        self.served = 0
        self.served_raw = 0
        self.metrics = LaneMetrics()

    @property
    def msg_id_prefix(self) -> str:
        return self._prefix

    @msg_id_prefix.setter
    def msg_id_prefix(self, str value) -> None:
        self._prefix = value
        self._prefix_b = value.encode("ascii")

    def __dealloc__(self):
        free(self._scratch)
        free(self._acl_buf)

    def handle(self, tuple peer, RemotingCommand cmd):
        """Serve ``cmd`` and return its encoded response frame (b"" for oneway), or None to decline.
        Under ``sync_flush`` an answer that must wait for the flush is returned as
        ``(end_offset, ok_frame, timeout_frame)`` for ``flush_waiter``."""
        return self._handle(peer, cmd)

    def serve_data(self, conn, data, list out) -> None:
        """Handle the frames of one read for ``conn`` (fed through ``conn.reader``), in order.

        A plain JSON send is served from the received bytes without decoding its header into
        Python objects.  Every other frame is decoded: responses complete ``conn``'s calls,
        sends the lane serves append their response frame to ``out``, the rest go to
        ``conn.dispatcher`` (whose replies on this thread land in ``out`` too, keeping the order).
        A failure inside the lane is answered by ``conn.lane_failed(cmd, exc)``.  Raises
        FrameError for a malformed frame (frames before it have been handled)."""
        cdef FrameReader reader = <FrameReader?>conn.reader
        cdef bytes buf = reader._take(data)
        cdef Py_ssize_t n = len(buf), pos = 0, end
        if n == 0:
            return
        cdef const uint8_t* p = <const uint8_t*>PyBytes_AS_STRING(buf)
        cdef tuple peer = conn.peer
        cdef double t0 = _now_ms()
        dispatcher = conn.dispatcher
        mv = memoryview(buf)
        # a hook needs the decoded request, unless it checks raw sends itself (the ACL's signed_send)
        cdef bint raw = self.request_hook is None or hasattr(self.request_hook, "signed_send")
        while pos < n:
            end = pos + 4 + <Py_ssize_t>be32(p + pos)
            frame = None
            if raw and self.enabled and p[pos + 4] <= 1:      # JSON (0) or ROCKETMQ (1) header
                try:
                    frame = self._serve_raw(peer, buf, mv, pos)
                except Exception as exc:
                    frame = conn.lane_failed(decode_frame_at(buf, mv, pos), exc)
            if frame is None:
                self._serve_cmd(conn, peer, dispatcher, decode_frame_at(buf, mv, pos), out)
            elif frame is DECLINED:                  # read in full (and checked) but not plain: the processor's
                dispatcher.dispatch_checked(conn, decode_frame_at(buf, mv, pos))
            elif type(frame) is tuple:               # SYNC_FLUSH: answered once flushed
                self.flush_waiter(conn, *frame)
            elif len(<bytes>frame):
                out.append(frame)
            pos = end
        self.metrics.end_read(_now_ms() - t0)

    cdef _serve_cmd(self, conn, tuple peer, dispatcher, RemotingCommand cmd, list out):
        if cmd.flag & RPC_TYPE_RESPONSE:
            conn._complete(cmd)
            return
        hook = self.request_hook
        if hook is not None:
            refusal = hook(conn, cmd)
            if refusal is not None:
                if not cmd.flag & RPC_ONEWAY:
                    out.extend(encode_frame(prepare_reply(cmd, refusal)))
                return
        try:
            frame = self._handle(peer, cmd)
        except Exception as exc:
            frame = conn.lane_failed(cmd, exc)
        if frame is None:
            if hook is not None:
                dispatcher.dispatch_checked(conn, cmd)
            else:
                dispatcher.dispatch(conn, cmd)
        elif type(frame) is tuple:
            self.flush_waiter(conn, *frame)
        elif len(<bytes>frame):
            out.append(frame)

    cdef object _serve_raw(self, tuple peer, bytes buf, object mv, Py_ssize_t pos):
        """Serve the JSON frame at ``pos`` of ``buf`` from its bytes: its response frame, None when
        the header needs the decoder, DECLINED when it was read in full but is not a plain send."""
        cdef const uint8_t* p = <const uint8_t*>PyBytes_AS_STRING(buf) + pos
        cdef Py_ssize_t end = pos + 4 + <Py_ssize_t>be32(p)
        cdef Py_ssize_t hlen = be32(p + 4) & 0xFFFFFF
        cdef Py_ssize_t bstart = pos + 8 + hlen
        cdef Header h
        cdef long long code, rpc_flag = 0, opaque = 0, queue_id, sys_flag, born_ts, flag, reconsume = 0
        cdef const Slice* v
        cdef tuple names
        cdef int stype = p[4]
        if stype == 1:
            if not _scan_binary(p + 8, hlen, &h, &code, &rpc_flag, &opaque) or not h.has_ext:
                return None
        elif not scan_header(p + 8, hlen, &h) or not h.has_ext or not slice_int(&h.code, &code):
            return None
        names = _send_fields(code, V2_FIELDS_B, V1_FIELDS_B)
        if names is None:
            return None
        self._v2 = code == 310
        if stype == 0 and h.flag.kind != V_ABSENT and (h.flag.kind != V_NUM or not slice_int(&h.flag, &rpc_flag)):
            return None
        if stype == 0 and h.opaque.kind != V_ABSENT and (
                h.opaque.kind != V_NUM or not slice_int(&h.opaque, &opaque)):
            return None
        if rpc_flag & RPC_TYPE_RESPONSE or not _fits_int(rpc_flag) or not _fits_int(opaque):
            return None
        v = _field(&h, names, F_BATCH)
        if v != NULL and _slice_truthy(v) != 0:
            return None                         # a batch, or a value the dict path must read
        for i in range(F_REQUIRED):
            if _field(&h, names, i) == NULL:
                return None
        v = _field(&h, names, F_TOPIC)
        if v == NULL or v.kind != V_STR:
            return None
        topic = self._topic_str(v)
        if (not _int_field(&h, names, F_QUEUE_ID, &queue_id) or not _int_field(&h, names, F_SYS_FLAG, &sys_flag)
                or not _int_field(&h, names, F_BORN_TS, &born_ts) or not _int_field(&h, names, F_FLAG, &flag)):
            return None
        if not (_fits_int(queue_id) and _fits_int(sys_flag) and _fits_int(flag)):
            return None
        v = _field(&h, names, F_RECONSUME)
        if v != NULL and not (v.kind == V_STR and v.n == 0):
            if not slice_int(v, &reconsume) or not _fits_int(reconsume):
                return None
        v = _field(&h, names, F_PROPERTIES)
        if v == NULL:
            props = ""
        elif v.kind == V_STR or v.kind == V_STR_ESC:
            props = self._ascii_str(v)
        else:
            return None
        body = mv[bstart:end] if end > bstart else None
        if self.request_hook is not None:
            refusal = self._acl_raw(peer, &h, <int>code, names, topic, body)
            if refusal is None:
                return None                      # the dict path and the hook decide
            if refusal is not True:
                if rpc_flag & RPC_ONEWAY:
                    return b""
                return b"".join(encode_frame(prepare_reply(decode_frame_at(buf, mv, pos), refusal)))
        frame = self._serve(peer, topic, <int>queue_id, <int>sys_flag, born_ts, <int>flag, <int>reconsume,
                            props, body, <int>opaque, <int>rpc_flag, stype)
        if frame is None:
            return DECLINED                  # the dict path would read the same fields and decline too
        self.served_raw += 1
        return frame

    cdef object _acl_raw(self, tuple peer, const Header* h, int code, tuple names, str topic, object body):
        """ACL check of a raw send: True (allowed), the refusal to answer with, or None when the header
        is not one this path reads (non-string values): the hook decides. A repeated name counts
        with its last value, as the decoder keeps it."""
        cdef int idx[MAX_EXT]
        cdef int n = 0, i, j, t, lo, hi, mid
        cdef const Slice* ak = ext_value(h, <const char*>ACCESS_KEY_B, len(ACCESS_KEY_B))
        cdef const Slice* sig = ext_value(h, <const char*>SIGNATURE_B, len(SIGNATURE_B))
        cdef const Slice* grp = _field(h, names, 0)
        cdef Py_ssize_t total = 0, o = 0
        if ak == NULL or sig == NULL or ak.kind != V_STR or sig.kind != V_STR:
            return None
        if grp != NULL and grp.kind != V_STR:
            return None
        for i in range(h.n_ext):                   # the signed fields, sorted by name (Java TreeMap order)
            if h.keys[i].n == 9 and memcmp(h.keys[i].p, <const char*>SIGNATURE_B, 9) == 0:
                continue
            if h.vals[i].kind != V_STR and h.vals[i].kind != V_STR_ESC:
                return None
            lo, hi = 0, n
            t = 1
            while lo < hi:                         # binary search of idx[0:n] (sorted by name)
                mid = (lo + hi) >> 1
                t = _key_cmp(&h.keys[idx[mid]], &h.keys[i])
                if t == 0:
                    break
                if t < 0:
                    lo = mid + 1
                else:
                    hi = mid
            if t == 0:
                # A repeated name: the last one counts, as in the decoder (the Java client's ACL hook
                # makes ROCKETMQ headers carry every field twice).
                total += h.vals[i].n - h.vals[idx[mid]].n
                idx[mid] = i
                continue
            j = n
            while j > lo:
                idx[j] = idx[j - 1]
                j -= 1
            idx[lo] = i
            n += 1
            total += h.vals[i].n
        if total > self._acl_cap:
            free(self._acl_buf)
            self._acl_buf = <uint8_t*>malloc(total + 256)
            self._acl_cap = 0 if self._acl_buf == NULL else total + 256
            if self._acl_buf == NULL:
                raise MemoryError()
        for i in range(n):
            o += unescape(&h.vals[idx[i]], self._acl_buf + o)
        content = PyBytes_FromStringAndSize(<const char*>self._acl_buf, o)
        refusal = self.request_hook.signed_send(
            peer[0], code, PyUnicode_DecodeASCII(<const char*>ak.p, ak.n, NULL),
            PyUnicode_DecodeASCII(<const char*>sig.p, sig.n, NULL), content, body, topic,
            None if grp == NULL else PyUnicode_DecodeASCII(<const char*>grp.p, grp.n, NULL))
        return True if refusal is None else refusal

    cdef str _topic_str(self, const Slice* v):
        """The topic as a str, reusing the last one when the bytes are the same (its hash too)."""
        cdef str last = self._last_topic
        if (last is not None and PyUnicode_GET_LENGTH(last) == v.n
                and memcmp(PyUnicode_DATA(last), v.p, v.n) == 0):
            return last
        self._last_topic = PyUnicode_DecodeASCII(<const char*>v.p, v.n, NULL)
        return self._last_topic

    cdef str _ascii_str(self, const Slice* v):
        cdef Py_ssize_t n
        if v.kind == V_STR:
            return PyUnicode_DecodeASCII(<const char*>v.p, v.n, NULL)
        if v.n > self._scratch_cap:
            free(self._scratch)
            self._scratch = <uint8_t*>malloc(v.n)
            self._scratch_cap = 0 if self._scratch == NULL else v.n
            if self._scratch == NULL:
                raise MemoryError()
        n = unescape(v, self._scratch)
        return PyUnicode_DecodeASCII(<const char*>self._scratch, n, NULL)

    cdef object _handle(self, tuple peer, RemotingCommand cmd):
        """The lane for a decoded command (ROCKETMQ headers, JSON the scanner leaves alone)."""
        cdef int code = cmd.code
        cdef object ext = cmd.ext_fields
        cdef object v
        cdef tuple names
        cdef int queue_id, sys_flag, flag, reconsume
        cdef long long born_ts
        if not self.enabled or type(ext) is not dict:
            return None
        names = _send_fields(code, V2_FIELDS, V1_FIELDS)
        if names is None:
            return None
        self._v2 = code == 310
        v = (<dict>ext).get(names[F_TOPIC])
        if v is None or _truthy((<dict>ext).get(names[F_BATCH])):
            return None
        for name in names[:F_REQUIRED]:           # the full processor words a missing field
            if name not in <dict>ext:
                return None
        topic = <str?>v
        try:
            queue_id = _int32((<dict>ext)[names[F_QUEUE_ID]])
            sys_flag = _int32((<dict>ext)[names[F_SYS_FLAG]])
            born_ts = _int((<dict>ext)[names[F_BORN_TS]])
            flag = _int32((<dict>ext)[names[F_FLAG]])
            v = (<dict>ext).get(names[F_RECONSUME])
            reconsume = _int32(v) if v else 0
            v = (<dict>ext).get(names[F_PROPERTIES])
        except (KeyError, ValueError, TypeError, OverflowError):
            return None                      # the full processor words the error
        return self._serve(peer, topic, queue_id, sys_flag, born_ts, flag, reconsume,
                           <str?>v if v else "", cmd.body, cmd.opaque, cmd.flag, cmd.serialize_type)

    cdef object _serve(self, tuple peer, str topic, int queue_id, int sys_flag, long long born_ts, int flag,
                       int reconsume, str props, object body, int opaque, int rpc_flag, int serialize_type):
        """Store one plain send and build its response frame, or None when it is not plain."""
        cdef str stored, marker
        cdef object tc, v
        cdef int id_valid
        cdef Py_ssize_t body_len
        if topic not in self.valid_topics or topic.startswith(RETRY_PREFIX):
            return None
        if not (self.broker_config.brokerPermission & PERM_WRITE):
            return None
        tc = self.topic_manager.table.get(topic)
        if tc is None or not (tc.perm & PERM_WRITE):
            return None
        body_len = 0 if body is None else len(body)
        if body_len > self.max_body:
            return None
        id_valid = max(<int>tc.write_queue_nums, <int>tc.read_queue_nums)
        if queue_id >= id_valid:
            return None
        if queue_id < 0:                     # "any queue", as the full processor picks it
            queue_id = rand() % max(1, <int>tc.write_queue_nums)
        if tc.topic_filter_type == "MULTI_TAG":
            sys_flag |= MULTI_TAGS_FLAG
        config = self.broker_config
        if config.brokerClusterName is not self.cluster_name:
            self.cluster_name = config.brokerClusterName
            self.cluster_property = "CLUSTER\x01" + self.cluster_name
        for marker in self.markers:
            if marker in props:
                return None
        wait_flush = self.sync_flush and "WAIT\x01false" not in props
        if props:
            v = property_by_key(props, "TAGS\x01")
            tags_code = java_string_hash(v) if v is not None else 0
            keys = property_by_key(props, "KEYS\x01")
            uniq = property_by_key(props, "UNIQ_KEY\x01")
            if "WAIT\x01true" in props:
                props = _strip_wait(props)
            if not props:
                stored = self.cluster_property
            elif props.endswith(PROP_SEP):
                stored = props + self.cluster_property
            else:
                stored = props + PROP_SEP + self.cluster_property
        else:
            tags_code = 0
            keys = uniq = None
            stored = self.cluster_property
        cdef MessageToStore msg = MessageToStore.__new__(MessageToStore)
        msg.topic = topic
        msg.queue_id = queue_id
        msg.body = body if body is not None else b""
        msg.properties = stored
        msg.flag = flag
        msg.sys_flag = sys_flag
        msg.born_timestamp = born_ts
        msg.born_host = peer
        msg.store_host = self.store_host
        msg.reconsume_times = reconsume
        msg.prepared_transaction_offset = 0
        msg.tags_code = tags_code
        msg.keys = keys
        msg.uniq_key = uniq
        engine = self.engine
        cdef PutMessageResult result
        if type(engine) is PutEngine:
            result = <PutMessageResult?>(<PutEngine>engine)._put([msg])
        else:
            result = <PutMessageResult?>engine.put_message(msg)
        if result.status is not self.ok_status:
            return None                      # nothing stored; the full processor retries and answers
        self.served += 1
        self.metrics.on_put(topic, body_len, self._v2, rpc_flag & RPC_ONEWAY)
        if rpc_flag & RPC_ONEWAY:
            return b""
        frame = self._response(queue_id, result, opaque, serialize_type, 0)
        if wait_flush:
            return (result.end_offset, frame, self._response(queue_id, result, opaque, serialize_type, 10))
        return frame

    cdef bytes _response(self, int queue_id, PutMessageResult result, int opaque, int serialize_type, int code):
        """The response frame of a stored send (code 0, or 10 FLUSH_DISK_TIMEOUT)."""
        config = self.broker_config
        region = config.regionId
        if region is not self.region:
            self.region = region
            self.region_json = (<str>region).encode("utf-8") if _json_plain(region) else None
            if self.region_json is not None and len(self.region_json) > 128:
                self.region_json = None             # too long for the stack frame: codec path
        if serialize_type == 0 and self.region_json is not None and len(self._prefix_b) <= 64:
            return _ok_frame(self._prefix_b, result.wrote_offsets[0], queue_id, result.queue_offset,
                             self.region_json, config.traceOn, opaque, code)
        if serialize_type == 1 and self.region_json is not None and len(self._prefix_b) <= 64:
            return _ok_frame_binary(self._prefix_b, result.wrote_offsets[0], queue_id, result.queue_offset,
                                    self.region_json, config.traceOn, opaque, code)
        resp = RemotingCommand.__new__(RemotingCommand)
        resp.code = code
        resp.ext_fields = {
            "msgId": "%s%016X" % (self._prefix, result.wrote_offsets[0]),
            "queueId": str(queue_id),
            "queueOffset": str(result.queue_offset),
            "MSG_REGION": config.regionId,
            "TRACE_ON": "true" if config.traceOn else "false",
        }
        resp.language = "JAVA"
        resp.version = SERVER_VERSION
        resp.opaque = opaque
        resp.flag = RPC_TYPE_RESPONSE
        resp.serialize_type = serialize_type
        return encode_frame(resp)[0]
