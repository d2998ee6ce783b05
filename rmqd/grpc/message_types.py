"""The checks a 5.x proxy makes on a message's new fields before sending it (priority, lite topic).

- ``priority`` with a message group, a delivery time, a lite topic or on a transactional message, and
  ``lite_topic`` with any of those: MESSAGE_PROPERTY_CONFLICT_WITH_TYPE (the clients refuse these
  themselves; a raw request gets the same answer the proxy's message-type validation gives);
- a priority below 0: BAD_REQUEST; a lite topic name that is blank, too long or not ``[A-Za-z0-9_-]``:
  ILLEGAL_LITE_TOPIC (``GrpcValidator.validateLiteTopic``);
- a priority on a topic whose ``message.type`` is not PRIORITY, a lite topic on a topic that is not LITE,
  or a message without a lite topic sent to a LITE topic: MESSAGE_PROPERTY_CONFLICT_WITH_TYPE, with the
  proxy's ``DefaultTopicMessageTypeValidator`` text. A message without a priority on a PRIORITY topic is a NORMAL
  one: refused by the general check that follows (rmqd.broker.message_type, ``enableTopicMessageTypeCheck``);
  over remoting the broker takes it, on a random queue.
"""
from __future__ import annotations

from typing import Any, Optional

from rmqd.grpc.pb import definition_pb2 as d
from rmqd.store.lite.names import check_name
from rmqd.store.topic_attributes import message_type_of

C = d.Code


def _conflict(expected: str, actual: str) -> tuple[int, str]:
    return C.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE, (
        f"TopicMessageType validate failed, the expected type is {expected}, but actual type is {actual}")


def check(topic_config: Any, message: Any, max_lite_topic_size: int) -> Optional[tuple[int, str]]:
    """(code, message) refusing ``message`` for ``topic_config``, or None when it may be sent."""
    sp = message.system_properties
    has_priority, has_lite = sp.HasField("priority"), sp.HasField("lite_topic")
    others = [name for name, present in (
        ("message_group", sp.HasField("message_group") and bool(sp.message_group)),
        ("delivery_timestamp", sp.HasField("delivery_timestamp")),
        ("transaction", sp.message_type == d.TRANSACTION)) if present]
    topic_type = message_type_of(topic_config)
    if has_priority:
        if has_lite or others:
            return C.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE, (
                f"priority should not be set together with {(['lite_topic'] + others)[0 if has_lite else 1]}")
        if sp.priority < 0:
            return C.BAD_REQUEST, f"priority must be greater than or equal to 0, but is {sp.priority}"
        if topic_type != "PRIORITY":
            return _conflict(topic_type, "PRIORITY")
    if has_lite:
        if others:
            return C.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE, f"lite_topic should not be set together with {others[0]}"
        reason = check_name(sp.lite_topic, max_lite_topic_size)
        if reason:
            return C.ILLEGAL_LITE_TOPIC, reason
        if topic_type != "LITE":
            return _conflict(topic_type, "LITE")
    elif topic_type == "LITE":
        actual = d.MessageType.Name(sp.message_type) if sp.message_type else "NORMAL"
        return _conflict("LITE", actual)
    return None
