"""The request checks of the 5.x proxy's gRPC layer, with its codes and texts (5.5.0 ``GrpcValidator``,
``SendMessageActivity``, the client's ``Validators`` it calls).

Every check raises :class:`rmqd.grpc.errors.RpcError`. Limits are the proxy's settings, read from the broker
config (``maxMessageSize`` is the broker's own, 4 MiB as the proxy's): ``maxUserPropertySize`` (16 KiB),
``userPropertyMaxNum`` (128), ``maxMessageGroupSize`` (64), ``maxDelayTimeMills`` (1 day),
``maxTransactionRecoverySecond`` (1 h), ``maxInvisibleTimeMills`` (12 h), ``enableMessageBodyEmptyCheck``.
"""
from __future__ import annotations

import time
from typing import TYPE_CHECKING, Optional

from rmqd.grpc.convert import JAVA_SYSTEM_PROPERTIES
from rmqd.grpc.errors import RpcError, proxy_error
from rmqd.grpc.pb import definition_pb2 as d
from rmqd.pop.extra_info import ReceiptHandle
from rmqd.processors.admin_common import is_system_topic
from rmqd.store.lite.names import check_name

if TYPE_CHECKING:
    from rmqd.config import BrokerConfig

C = d.Code
TOPIC_MAX_LENGTH, GROUP_MAX_LENGTH = 127, 120
_LEGAL = frozenset("%|-_0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
# 5.x system topics beyond 4.9.8's (TopicValidator.SYSTEM_TOPIC_SET)
_SYSTEM_TOPICS_5X = frozenset({"CHECKPOINT_TOPIC", "RMQ_SYS_ROCKSDB_TRANS_HALF_TOPIC",
                               "RMQ_SYS_ROCKSDB_TRANS_OP_HALF_TOPIC"})
SYS_GROUP_PREFIX = "CID_RMQ_SYS_"
def _illegal(name: str) -> bool:
    return any(ch not in _LEGAL for ch in name)


def has_control_character(text: str) -> bool:
    """Guava's ``CharMatcher.javaIsoControl``: U+0000..U+001F and U+007F..U+009F."""
    return any(ord(ch) <= 0x1F or 0x7F <= ord(ch) <= 0x9F for ch in text)


def check_topic(name: str) -> None:
    if not name or not name.strip():
        raise RpcError(C.ILLEGAL_TOPIC, "The specified topic is blank")
    if len(name) > TOPIC_MAX_LENGTH:
        raise RpcError(C.ILLEGAL_TOPIC, f"The specified topic is longer than topic max length {TOPIC_MAX_LENGTH}.")
    if _illegal(name):
        raise RpcError(C.ILLEGAL_TOPIC, f"The specified topic[{name}] contains illegal characters, allowing only "
                                        "^[%|a-zA-Z0-9_-]+$")
    if is_system_topic(name) or name in _SYSTEM_TOPICS_5X:
        raise RpcError(C.ILLEGAL_TOPIC, "cannot access system topic")


def check_group(name: str) -> None:
    if not name or not name.strip():
        raise RpcError(C.ILLEGAL_CONSUMER_GROUP, "the specified group is blank")
    if len(name) > GROUP_MAX_LENGTH:
        raise RpcError(C.ILLEGAL_CONSUMER_GROUP,
                       f"the specified group[{name}] is longer than group max length: {GROUP_MAX_LENGTH}.")
    if _illegal(name):
        raise RpcError(C.ILLEGAL_CONSUMER_GROUP, f"the specified group[{name}] contains illegal characters, "
                                                 "allowing only ^[%|a-zA-Z0-9_-]+$")
    if name.startswith(SYS_GROUP_PREFIX):
        raise RpcError(C.ILLEGAL_CONSUMER_GROUP, "cannot use system consumer group")


LANGUAGES = frozenset({"JAVA", "CPP", "DOTNET", "PYTHON", "DELPHI", "ERLANG", "RUBY", "OTHER", "HTTP", "GO", "PHP",
                       "OMS", "RUST", "NODE_JS"})


def language_error(language: str) -> Optional[str]:
    """What ``LanguageCode.valueOf(x-mq-language)`` throws where the proxy registers or unregisters a client
    (its message), or None for a language it knows."""
    if language in LANGUAGES:
        return None
    return f"No enum constant org.apache.rocketmq.remoting.protocol.LanguageCode.{language}"


def check_invisible_time(ms: int, minimum: int, maximum: int) -> None:
    if ms < minimum:
        raise RpcError(C.ILLEGAL_INVISIBLE_TIME, f"the invisibleTime is too small. min is {minimum}")
    if 0 < maximum < ms:
        raise RpcError(C.ILLEGAL_INVISIBLE_TIME, f"the invisibleTime is too large. max is {maximum}")


def check_lite_topic(name: str, max_size: int) -> None:
    reason = check_name(name, max_size)
    if reason:
        raise RpcError(C.ILLEGAL_LITE_TOPIC, reason)


def check_message(m: d.Message, config: BrokerConfig, max_lite_topic_size: int) -> None:
    """What ``SendMessageActivity.buildMessage`` refuses in one message, in its order."""
    body_empty_check = str(getattr(config, "enableMessageBodyEmptyCheck", True)).lower() == "true"
    if body_empty_check and not m.body:
        raise RpcError(C.MESSAGE_BODY_EMPTY, "message body cannot be empty")
    max_size = int(config.maxMessageSize)
    if 0 < max_size < len(m.body):
        raise RpcError(C.MESSAGE_BODY_TOO_LARGE, f"message body cannot exceed the max {max_size}")
    max_num = int(getattr(config, "userPropertyMaxNum", 128))
    if len(m.user_properties) > max_num:
        raise RpcError(C.MESSAGE_PROPERTIES_TOO_LARGE, f"too many user properties, max is {max_num}")
    size = 0
    for k, v in m.user_properties.items():
        if k in JAVA_SYSTEM_PROPERTIES:
            raise RpcError(C.ILLEGAL_MESSAGE_PROPERTY_KEY, f"property is used by system: {k}")
        if has_control_character(k):
            raise RpcError(C.ILLEGAL_MESSAGE_PROPERTY_KEY, "the key of property cannot contain control character")
        if has_control_character(v):
            raise RpcError(C.ILLEGAL_MESSAGE_PROPERTY_KEY, "the value of property cannot contain control character")
        size += len(k.encode("utf-8")) + len(v.encode("utf-8"))
    sp = m.system_properties
    tag = sp.tag
    if tag:
        if not tag.strip():
            raise RpcError(C.ILLEGAL_MESSAGE_TAG, "tag cannot be the char sequence of whitespace")
        if "|" in tag:
            raise RpcError(C.ILLEGAL_MESSAGE_TAG, "tag cannot contain '|'")
        if has_control_character(tag):
            raise RpcError(C.ILLEGAL_MESSAGE_TAG, "tag cannot contain control character")
    size += len(tag.encode("utf-8"))
    for key in sp.keys:
        if key and not key.strip():
            raise RpcError(C.ILLEGAL_MESSAGE_KEY, "key cannot be the char sequence of whitespace")
        if has_control_character(key):
            raise RpcError(C.ILLEGAL_MESSAGE_KEY, "key cannot contain control character")
        size += len(key.encode("utf-8"))
    max_prop_size = int(getattr(config, "maxUserPropertySize", 16 * 1024))
    if size > max_prop_size:
        raise RpcError(C.MESSAGE_PROPERTIES_TOO_LARGE,
                       f"the total size of user property is too large, max is {max_prop_size}")
    if not sp.message_id or not sp.message_id.strip():
        raise RpcError(C.ILLEGAL_MESSAGE_ID, "message id cannot be empty")
    if sp.message_type == d.TRANSACTION and sp.HasField("orphaned_transaction_recovery_duration"):
        seconds = sp.orphaned_transaction_recovery_duration.seconds
        limit = int(getattr(config, "maxTransactionRecoverySecond", 3600))
        if 0 < limit < seconds:
            raise RpcError(C.BAD_REQUEST,
                           f"the max transaction recovery time of message is too large, max is {limit}")
    if sp.HasField("delivery_timestamp"):
        deliver = sp.delivery_timestamp.seconds * 1000 + sp.delivery_timestamp.nanos // 1_000_000
        limit = int(getattr(config, "maxDelayTimeMills", 86_400_000))
        if 0 < limit < deliver - int(time.time() * 1000):
            raise RpcError(C.ILLEGAL_DELIVERY_TIME, f"the max delay time of message is too large, max is {limit}")
    if sp.HasField("priority") and sp.priority < 0:      # Message.setPriority throws; the proxy prints where
        raise RpcError(C.INTERNAL_SERVER_ERROR,
                       "The priority must be greater than or equal to 0. IllegalArgumentException. "
                       "org.apache.rocketmq.common.message.Message.setPriority(Message.java:161)")
    group = sp.message_group
    if group:
        if not group.strip():
            raise RpcError(C.ILLEGAL_MESSAGE_GROUP, "message group cannot be the char sequence of whitespace")
        limit = int(getattr(config, "maxMessageGroupSize", 64))
        if 0 < limit <= len(group.encode("utf-8")):
            raise RpcError(C.ILLEGAL_MESSAGE_GROUP, f"message group exceed the max size {limit}")
        if has_control_character(group):
            raise RpcError(C.ILLEGAL_MESSAGE_GROUP, "message group cannot contain control character")
    if sp.lite_topic:
        check_lite_topic(sp.lite_topic, max_lite_topic_size)



def parse_receipt_handle(text: str) -> ReceiptHandle:
    """A receipt handle, or the refusal the proxy answers for one it cannot decode: INTERNAL_SERVER_ERROR with
    the text of ``ReceiptHandle.decode``'s exception as ``ExceptionUtils.getErrorDetailMessage`` prints it
    (message, exception class, first stack frame: Java's words, verbatim)."""
    fields = (text or "").split(" ")
    while fields and fields[-1] == "":          # String.split drops trailing empty strings
        fields.pop()
    if len(fields) < 8:
        raise RpcError(C.INTERNAL_SERVER_ERROR,
                       f"Parse failed, dataList size {len(fields)}. IllegalArgumentException. "
                       "org.apache.rocketmq.common.consumer.ReceiptHandle.decode(ReceiptHandle.java:56)")
    try:
        return ReceiptHandle.parse(text)
    except ValueError:
        bad = next((f for f in fields[:4] + fields[6:8] if not f.lstrip("-").isdigit()), fields[-1])
        raise RpcError(C.INTERNAL_SERVER_ERROR, f'For input string: "{bad}". NumberFormatException. '
                       "java.base/java.lang.NumberFormatException.forInputString(NumberFormatException.java:67)"
                       ) from None


def check_not_expired(handle: ReceiptHandle, now_ms: int) -> None:
    """``AbstractProcessor.validateReceiptHandle``: a handle past its pop time + invisible time is refused."""
    if handle.extra.pop_time + handle.extra.invisible_time <= now_ms:
        raise proxy_error(C.INVALID_RECEIPT_HANDLE, "receipt handle is expired")
