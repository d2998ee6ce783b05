# RocketMQ names the Cython modules share; mirrors rmqd/constants.py (tests/test_constants.py checks they agree).
# Use with: include "consts.pxi"

cdef enum:
    PERM_READ = 0x4
    PERM_WRITE = 0x2

cdef str RETRY_GROUP_TOPIC_PREFIX = "%RETRY%"
cdef str DLQ_GROUP_TOPIC_PREFIX = "%DLQ%"
cdef str SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX"
cdef str NAME_VALUE_SEPARATOR = "\x01"
cdef str PROPERTY_SEPARATOR = "\x02"
