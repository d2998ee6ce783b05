# Interface of the remoting codec: the RemotingCommand type and the frame reader.

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

    cdef list _parse(self, object buf)
