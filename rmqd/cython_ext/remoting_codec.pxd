# Interface of the remoting codec: the RemotingCommand type and the frame reader.
from libc.stdint cimport uint8_t, uint32_t


cdef inline uint32_t be32(const uint8_t* p) noexcept nogil:
    """A big-endian 32-bit word (frame length, header word)."""
    return (<uint32_t>p[0] << 24) | (<uint32_t>p[1] << 16) | (<uint32_t>p[2] << 8) | <uint32_t>p[3]

cdef class RemotingCommand:
    cdef public int code
    cdef public object language
    cdef public int version
    cdef public int opaque
    cdef public int flag
    cdef public object remark
    cdef public object ext_fields
    cdef public object body
    cdef public int serialize_type


cdef class FrameReader:
    cdef list _chunks
    cdef Py_ssize_t _buffered
    cdef Py_ssize_t _need
    cdef Py_ssize_t max_frame_length

    cdef bytes _take(self, object data)
    cdef list _decode_all(self, bytes buf)


cdef RemotingCommand decode_frame_at(bytes buf, object mv, Py_ssize_t pos)
