# cython: language_level=3
"""RocketMQ remoting frames: RemotingCommand, a sans-IO FrameReader and frame encoding.

Frame = int32 length | int32 header word (high byte serialize type, low 24 bits header length)
| header | body.  Both serialize types are handled: JSON (0) and the ROCKETMQ binary header (1).
The reader yields whole frames whose bodies are memoryview slices of the received bytes (no copy).
"""
from cpython.bytes cimport PyBytes_FromStringAndSize, PyBytes_AS_STRING
from libc.string cimport memcpy
from libc.stdint cimport uint8_t, int16_t, int32_t, uint32_t

import orjson

JSON = 0
ROCKETMQ = 1
DEFAULT_MAX_FRAME_LENGTH = 16 * 1024 * 1024
SERVER_VERSION = 409  # MQVersion.V4_9_8 ordinal, stamped on everything we send

LANGUAGE_NAMES = ("JAVA", "CPP", "DOTNET", "PYTHON", "DELPHI", "ERLANG", "RUBY", "OTHER",
                  "HTTP", "GO", "PHP", "OMS", "RUST")
cdef dict _LANGUAGE_CODES = {name: i for i, name in enumerate(LANGUAGE_NAMES)}

cdef int RPC_TYPE_RESPONSE = 1
cdef int RPC_ONEWAY = 2


class FrameError(ValueError):
    """A frame that cannot be decoded; the connection that sent it must be closed."""


cdef class RemotingCommand:
    """One remoting request or response (the RocketMQ RemotingCommand).

    ``ext_fields`` maps header field names to strings (decoding coerces JSON scalars to strings).
    ``body`` is None, a bytes-like object (a memoryview of the receive buffer on decode) or, when
    encoding, a list/tuple of bytes-like parts written back to back (e.g. records from the
    CommitLog).
    """

    def __init__(self, int code=0, object ext_fields=None, object body=None, object remark=None,
                 int opaque=0, int flag=0, object language="JAVA", int version=SERVER_VERSION,
                 int serialize_type=JSON):
        self.code = code
        self.ext_fields = ext_fields
        self.body = body
        self.remark = remark
        self.opaque = opaque
        self.flag = flag
        self.language = language
        self.version = version
        self.serialize_type = serialize_type

    @property
    def is_response(self):
        return (self.flag & RPC_TYPE_RESPONSE) != 0

    @property
    def is_oneway(self):
        return (self.flag & RPC_ONEWAY) != 0

    def ext(self, str name, default=None):
        """Return ext field ``name`` (a string) or ``default``."""
        if self.ext_fields is None:
            return default
        return self.ext_fields.get(name, default)

    def body_bytes(self):
        """The body as ``bytes`` (b'' when absent); joins multi-part bodies."""
        b = self.body
        if b is None:
            return b""
        if isinstance(b, (list, tuple)):
            return b"".join(b)
        return bytes(b)

    def __repr__(self):
        return ("RemotingCommand(code=%d, opaque=%d, flag=%d, remark=%r, ext_fields=%r, body=%d bytes)"
                % (self.code, self.opaque, self.flag, self.remark, self.ext_fields, _body_len(self.body)))


cdef Py_ssize_t _body_len(object body) except -1:
    cdef Py_ssize_t n = 0
    if body is None:
        return 0
    if isinstance(body, (list, tuple)):
        for part in body:
            n += len(part)
        return n
    return len(body)


cdef inline int _be16(const uint8_t* p) noexcept nogil:
    return <int16_t>((p[0] << 8) | p[1])


cdef inline void _put32(uint8_t* p, uint32_t v) noexcept nogil:
    p[0] = (v >> 24) & 0xFF
    p[1] = (v >> 16) & 0xFF
    p[2] = (v >> 8) & 0xFF
    p[3] = v & 0xFF


cdef inline void _put16(uint8_t* p, int v) noexcept nogil:
    p[0] = (v >> 8) & 0xFF
    p[1] = v & 0xFF


cdef str _scalar_to_str(object v):
    if isinstance(v, str):
        return <str>v
    if v is True:
        return "true"
    if v is False:
        return "false"
    return str(v)


cdef int _as_int(object v, str name) except? -1:
    if v is None:
        return 0
    try:
        return int(v)
    except (TypeError, ValueError, OverflowError):
        raise FrameError("header field %s is not an int: %r" % (name, v))


cdef RemotingCommand _decode_json_header(object header):
    try:
        obj = orjson.loads(header)
    except orjson.JSONDecodeError as exc:
        raise FrameError("bad JSON header: %s" % exc)
    if not isinstance(obj, dict):
        raise FrameError("JSON header is not an object")
    cdef RemotingCommand cmd = RemotingCommand.__new__(RemotingCommand)
    try:
        cmd.code = _as_int(obj.get("code"), "code")
        cmd.version = _as_int(obj.get("version"), "version")
        cmd.opaque = _as_int(obj.get("opaque"), "opaque")
        cmd.flag = _as_int(obj.get("flag"), "flag")
    except OverflowError:
        raise FrameError("header int field out of range")
    lang = obj.get("language")
    if isinstance(lang, int) and 0 <= lang < len(LANGUAGE_NAMES):
        lang = LANGUAGE_NAMES[lang]
    cmd.language = lang if isinstance(lang, str) else "OTHER"
    remark = obj.get("remark")
    cmd.remark = None if remark is None else _scalar_to_str(remark)
    ext = obj.get("extFields")
    if ext is None:
        cmd.ext_fields = None
    elif isinstance(ext, dict):
        # Java/Go send only strings: keep orjson's dict as is.  C++ sends numbers and booleans
        # for some fields: only then build a coerced copy.
        for v in (<dict>ext).values():
            if type(v) is not str:
                break
        else:
            cmd.ext_fields = ext
            ext = None
        if ext is not None:
            fields = {}
            for k, v in (<dict>ext).items():
                if v is not None:
                    fields[k] = _scalar_to_str(v)
            cmd.ext_fields = fields
    else:
        raise FrameError("extFields is not an object")
    cmd.serialize_type = JSON
    cmd.body = None
    return cmd


cdef RemotingCommand _decode_rocketmq_header(const uint8_t* p, Py_ssize_t n):
    if n < 21:
        raise FrameError("ROCKETMQ header shorter than 21 bytes")
    cdef RemotingCommand cmd = RemotingCommand.__new__(RemotingCommand)
    cdef int lang
    cdef Py_ssize_t pos, remark_len, ext_len, end, klen, vlen
    cmd.code = _be16(p)
    lang = p[2]
    cmd.language = LANGUAGE_NAMES[lang] if lang < len(LANGUAGE_NAMES) else "OTHER"
    cmd.version = _be16(p + 3)
    cmd.opaque = <int32_t>be32(p + 5)
    cmd.flag = <int32_t>be32(p + 9)
    remark_len = <int32_t>be32(p + 13)
    pos = 17
    if remark_len < 0 or remark_len > n - pos - 4:
        raise FrameError("ROCKETMQ remark length %d out of range" % remark_len)
    cmd.remark = (p + pos)[:remark_len].decode("utf-8", "replace") if remark_len > 0 else None
    pos += remark_len
    ext_len = <int32_t>be32(p + pos)
    pos += 4
    if ext_len < 0 or ext_len > n - pos:
        raise FrameError("ROCKETMQ extFields length %d out of range" % ext_len)
    if ext_len > 0:
        fields = {}
        end = pos + ext_len
        while pos < end:
            if end - pos < 2:
                raise FrameError("truncated ext key length")
            klen = <unsigned short>((p[pos] << 8) | p[pos + 1])
            pos += 2
            if klen > end - pos - 4:
                raise FrameError("ext key overruns header")
            key = (p + pos)[:klen].decode("utf-8", "replace")
            pos += klen
            vlen = <int32_t>be32(p + pos)
            pos += 4
            if vlen < 0 or vlen > end - pos:
                raise FrameError("ext value overruns header")
            fields[key] = (p + pos)[:vlen].decode("utf-8", "replace")
            pos += vlen
        cmd.ext_fields = fields
    else:
        cmd.ext_fields = None
    cmd.serialize_type = ROCKETMQ
    cmd.body = None
    return cmd


def decode_header(int serialize_type, header):
    """Decode a header of the given serialize type into a RemotingCommand (body unset)."""
    cdef const uint8_t[::1] view
    if serialize_type == JSON:
        return _decode_json_header(header)
    if serialize_type == ROCKETMQ:
        view = header
        return _decode_rocketmq_header(&view[0] if len(view) else <const uint8_t*>b"", len(view))
    raise FrameError("unknown serialize type %d" % serialize_type)


cdef class FrameReader:
    """Sans-IO incremental frame reader: ``feed(bytes)`` returns the complete commands.

    Partial frames are kept as a list of chunks and joined once the whole frame has arrived, so a
    large frame delivered in many reads is copied once.  Raises FrameError on a malformed frame.
    """

    def __init__(self, Py_ssize_t max_frame_length=DEFAULT_MAX_FRAME_LENGTH):
        self._chunks = []
        self._buffered = 0
        self._need = 4
        self.max_frame_length = max_frame_length

    @property
    def buffered(self):
        return self._buffered

    def feed(self, data):
        """Decode every complete frame of ``data`` (and of what earlier calls buffered)."""
        return self._decode_all(self._take(data))

    cdef bytes _take(self, object data):
        """Add ``data`` and return the complete frames as one bytes object (b"" if none yet),
        keeping any partial frame for the next call.  Every returned frame's length, header
        length and serialize type are checked (FrameError otherwise)."""
        if type(data) is not bytes:
            data = bytes(data)
        if self._chunks:
            self._chunks.append(data)
            self._buffered += len(<bytes>data)
            if self._buffered < self._need:
                return b""
            data = b"".join(self._chunks)
            self._chunks = []
            self._buffered = 0
        cdef bytes buf = <bytes>data
        cdef const uint8_t* p = <const uint8_t*>PyBytes_AS_STRING(buf)
        cdef Py_ssize_t n = len(buf)
        cdef Py_ssize_t pos = 0
        cdef int32_t length
        cdef uint32_t word
        cdef int stype
        while n - pos >= 4:
            length = <int32_t>be32(p + pos)
            if length < 4:
                raise FrameError("frame length %d < 4" % length)
            if length > self.max_frame_length:
                raise FrameError("frame length %d over max %d" % (length, self.max_frame_length))
            if n - pos - 4 < length:
                break
            word = be32(p + pos + 4)
            stype = (word >> 24) & 0xFF
            if <Py_ssize_t>(word & 0xFFFFFF) > length - 4:
                raise FrameError("header length %d larger than frame %d" % (word & 0xFFFFFF, length))
            if stype != JSON and stype != ROCKETMQ:
                raise FrameError("unknown serialize type %d" % stype)
            pos += 4 + length
        if pos < n:
            self._chunks = [buf[pos:] if pos else buf]
            self._buffered = n - pos
            self._need = 4 + <int32_t>be32(p + pos) if self._buffered >= 4 else 4
            return buf[:pos] if pos else b""
        self._need = 4
        return buf

    cdef list _decode_all(self, bytes buf):
        cdef list out = []
        cdef Py_ssize_t pos = 0, n = len(buf)
        mv = memoryview(buf) if n else None
        while pos < n:
            out.append(decode_frame_at(buf, mv, pos))
            pos += 4 + <int32_t>be32(<const uint8_t*>PyBytes_AS_STRING(buf) + pos)
        return out


cdef RemotingCommand decode_frame_at(bytes buf, object mv, Py_ssize_t pos):
    """Decode the frame at ``pos`` of ``buf`` (already checked by ``FrameReader._take``); its
    body is a slice of ``mv``, a memoryview of ``buf``."""
    cdef const uint8_t* p = <const uint8_t*>PyBytes_AS_STRING(buf) + pos
    cdef Py_ssize_t end = pos + 4 + <int32_t>be32(p)
    cdef uint32_t word = be32(p + 4)
    cdef Py_ssize_t hstart = pos + 8
    cdef Py_ssize_t bstart = hstart + (word & 0xFFFFFF)
    cdef RemotingCommand cmd
    if (word >> 24) & 0xFF == JSON:
        cmd = _decode_json_header(mv[hstart:bstart])
    else:
        cmd = _decode_rocketmq_header(p + 8, bstart - hstart)
    if end > bstart:
        cmd.body = mv[bstart:end]
    return cmd


cdef bytes _json_header(RemotingCommand cmd):
    cdef dict hdr = {"code": cmd.code}
    cdef dict ext
    if cmd.ext_fields is not None:
        ext = {}
        for k, v in cmd.ext_fields.items():
            if v is not None:
                ext[k] = _scalar_to_str(v)
        hdr["extFields"] = ext
    hdr["flag"] = cmd.flag
    hdr["language"] = cmd.language if cmd.language is not None else "JAVA"
    hdr["opaque"] = cmd.opaque
    if cmd.remark is not None:
        hdr["remark"] = cmd.remark
    hdr["serializeTypeCurrentRPC"] = "JSON"
    hdr["version"] = cmd.version
    return orjson.dumps(hdr)


cdef bytes _rocketmq_header(RemotingCommand cmd):
    cdef bytes remark = cmd.remark.encode("utf-8") if cmd.remark else b""
    cdef list entries = []
    cdef Py_ssize_t ext_len = 0, total, pos
    cdef bytes kb, vb
    if cmd.ext_fields:
        for k, v in cmd.ext_fields.items():
            if k is None or v is None:
                continue
            kb = (<str>k).encode("utf-8")
            vb = _scalar_to_str(v).encode("utf-8")
            entries.append((kb, vb))
            ext_len += 2 + len(kb) + 4 + len(vb)
    total = 21 + len(remark) + ext_len
    cdef bytes out = PyBytes_FromStringAndSize(NULL, total)
    cdef uint8_t* p = <uint8_t*>PyBytes_AS_STRING(out)
    lang = _LANGUAGE_CODES.get(cmd.language, 7)
    _put16(p, cmd.code)
    p[2] = <uint8_t>lang
    _put16(p + 3, cmd.version)
    _put32(p + 5, <uint32_t>cmd.opaque)
    _put32(p + 9, <uint32_t>cmd.flag)
    _put32(p + 13, <uint32_t>len(remark))
    pos = 17
    if remark:
        memcpy(p + pos, PyBytes_AS_STRING(remark), len(remark))
        pos += len(remark)
    _put32(p + pos, <uint32_t>ext_len)
    pos += 4
    for kb, vb in entries:
        _put16(p + pos, len(kb))
        pos += 2
        memcpy(p + pos, PyBytes_AS_STRING(kb), len(kb))
        pos += len(kb)
        _put32(p + pos, <uint32_t>len(vb))
        pos += 4
        memcpy(p + pos, PyBytes_AS_STRING(vb), len(vb))
        pos += len(vb)
    return out


def encode_header(RemotingCommand cmd):
    """Encode the header of ``cmd`` in its serialize type (JSON or ROCKETMQ)."""
    if cmd.serialize_type == ROCKETMQ:
        return _rocketmq_header(cmd)
    if cmd.serialize_type == JSON:
        return _json_header(cmd)
    raise ValueError("unknown serialize type %d" % cmd.serialize_type)


def encode_frame(RemotingCommand cmd):
    """Encode ``cmd`` as a list of buffers: [length + header word + header, *body parts].

    The body parts are passed through unchanged, so ``transport.writelines()`` sends a pull
    response straight from the CommitLog buffers.
    """
    cdef bytes header = encode_header(cmd)
    cdef Py_ssize_t hlen = len(header)
    if hlen > 0xFFFFFF:
        raise ValueError("header too large: %d bytes" % hlen)
    cdef object body = cmd.body
    cdef Py_ssize_t blen = _body_len(body)
    cdef bytes head = PyBytes_FromStringAndSize(NULL, 8 + hlen)
    cdef uint8_t* p = <uint8_t*>PyBytes_AS_STRING(head)
    _put32(p, <uint32_t>(4 + hlen + blen))
    _put32(p + 4, (<uint32_t>(cmd.serialize_type & 0xFF) << 24) | <uint32_t>hlen)
    memcpy(p + 8, PyBytes_AS_STRING(header), hlen)
    if blen == 0:
        return [head]
    if isinstance(body, (list, tuple)):
        return [head] + [part for part in body if len(part)]
    return [head, body]


def encode_frame_bytes(RemotingCommand cmd):
    """Encode ``cmd`` as one bytes object (tests, small control frames)."""
    return b"".join(encode_frame(cmd))
