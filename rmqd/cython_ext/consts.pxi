# RocketMQ names the Cython modules share; mirrors rmqd/common/constants.py (tests/test_constants.py checks they agree).
# Use with: include "consts.pxi"

cdef enum:
    PERM_READ = 0x4
    PERM_WRITE = 0x2

# The CommitLog record and ConsumeQueue unit formats (MessageDecoder, MessageSysFlag, ConsumeQueue)
cdef enum:
    MESSAGE_MAGIC_CODE = -626843481          # 0xDAA320A7 as a Java int
    BLANK_MAGIC_CODE = -875286124            # 0xCBD43194: the end-of-file marker
    TRANSACTION_PREPARED_TYPE = 0x4
    TRANSACTION_ROLLBACK_TYPE = 0xC
    BORNHOST_V6_FLAG = 0x10
    STOREHOST_V6_FLAG = 0x20
    CQ_STORE_UNIT_SIZE = 20
    CQ_BLANK_SIZE = 0x7FFFFFFF               # a ConsumeQueue unit's size field for a blank (filler) unit

cdef str RETRY_GROUP_TOPIC_PREFIX = "%RETRY%"
cdef str DLQ_GROUP_TOPIC_PREFIX = "%DLQ%"
cdef str SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX"
cdef str NAME_VALUE_SEPARATOR = "\x01"
cdef str PROPERTY_SEPARATOR = "\x02"
