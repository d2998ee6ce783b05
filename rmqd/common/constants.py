"""RocketMQ names shared across packages: system topics, prefixes, permissions, property separators.

One source for the Python side; ``rmqd/cython_ext/consts.pxi`` mirrors the values the Cython modules need
(keep the two in step; ``tests/test_constants.py`` checks they agree).  Names follow Java's ``MixAll``,
``TopicValidator``, ``PermName`` and ``MessageDecoder``.
"""
from __future__ import annotations

# MixAll: group-derived topic prefixes
RETRY_GROUP_TOPIC_PREFIX = "%RETRY%"
DLQ_GROUP_TOPIC_PREFIX = "%DLQ%"

# TopicValidator: system topics
AUTO_CREATE_TOPIC_KEY_TOPIC = "TBW102"
SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX"
TRANS_HALF_TOPIC = "RMQ_SYS_TRANS_HALF_TOPIC"
TRANS_OP_HALF_TOPIC = "RMQ_SYS_TRANS_OP_HALF_TOPIC"
TRANS_CHECK_MAX_TIME_TOPIC = "TRANS_CHECK_MAX_TIME_TOPIC"
TRACE_TOPIC = "RMQ_SYS_TRACE_TOPIC"
OFFSET_MOVED_EVENT = "OFFSET_MOVED_EVENT"
SELF_TEST_TOPIC = "SELF_TEST_TOPIC"
BENCHMARK_TOPIC = "BenchmarkTest"

# MixAll: system consumer groups
TRANS_SYS_GROUP = "CID_RMQ_SYS_TRANS"

# PermName
PERM_PRIORITY = 0x8
PERM_READ = 0x4
PERM_WRITE = 0x2
PERM_INHERIT = 0x1

# MessageDecoder: the properties string's separators
NAME_VALUE_SEPARATOR = "\x01"
PROPERTY_SEPARATOR = "\x02"

# MixAll.MASTER_ID
MASTER_ID = 0

# The CommitLog record and ConsumeQueue unit formats (MessageDecoder, MessageSysFlag, ConsumeQueue)
MESSAGE_MAGIC_CODE = -626843481          # 0xDAA320A7 as a Java int
BLANK_MAGIC_CODE = -875286124            # 0xCBD43194: the end-of-file marker
TRANSACTION_PREPARED_TYPE = 0x4
TRANSACTION_ROLLBACK_TYPE = 0xC
BORNHOST_V6_FLAG = 0x10
STOREHOST_V6_FLAG = 0x20
CQ_STORE_UNIT_SIZE = 20
CQ_BLANK_SIZE = 0x7FFFFFFF               # a ConsumeQueue unit's size field for a blank (filler) unit


def is_retry_topic(topic: str) -> bool:
    """True for a consumer group's retry topic (``%RETRY%...``)."""
    return topic.startswith(RETRY_GROUP_TOPIC_PREFIX)


def is_dlq_topic(topic: str) -> bool:
    """True for a consumer group's dead-letter topic (``%DLQ%...``)."""
    return topic.startswith(DLQ_GROUP_TOPIC_PREFIX)


def retry_topic(group: str) -> str:
    """The 4.x retry topic of ``group``."""
    return RETRY_GROUP_TOPIC_PREFIX + group


def dlq_topic(group: str) -> str:
    """The dead-letter topic of ``group``."""
    return DLQ_GROUP_TOPIC_PREFIX + group
