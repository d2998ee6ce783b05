"""The topic message-type check of the 5.x proxy (``enableTopicMessageTypeCheck``, on by default).

A message's type is what its properties make it, first match wins (``TopicMessageType.parseFromMessageProperty``):
TRANSACTION > DELAY (a delivery time) > FIFO (a message group) > PRIORITY > LITE (a lite topic) > NORMAL. A topic's
type is its ``message.type`` (NORMAL when unset; UNSPECIFIED when the topic does not exist). A send is refused
unless the two agree or the topic is MIXED; a message of an unknown topic is always refused
(``DefaultTopicMessageTypeValidator``), with MESSAGE_PROPERTY_CONFLICT_WITH_TYPE and the proxy's text. The
Settings a producer gets say ``validate_message_type`` accordingly, so the 5.x clients check it themselves first.
"""
from __future__ import annotations

from typing import Any, Optional

from rmqd.grpc.errors import proxy_error
from rmqd.grpc.pb import definition_pb2 as d
from rmqd.store.topic_attributes import message_type_of

# the route's accept_message_types of a topic type (RouteActivity.parseTopicMessageType)
ACCEPT_TYPES = {"NORMAL": [d.NORMAL], "FIFO": [d.FIFO], "DELAY": [d.DELAY], "TRANSACTION": [d.TRANSACTION],
                "PRIORITY": [d.PRIORITY], "LITE": [d.LITE], "MIXED": [d.NORMAL, d.FIFO, d.DELAY, d.TRANSACTION]}


def enabled(config: Any) -> bool:
    return str(getattr(config, "enableTopicMessageTypeCheck", True)).lower() == "true"


def topic_type(topic_config: Optional[Any]) -> str:
    return "UNSPECIFIED" if topic_config is None else message_type_of(topic_config)


def accept_types(topic_config: Any) -> list[int]:
    return ACCEPT_TYPES.get(topic_type(topic_config), [d.MESSAGE_TYPE_UNSPECIFIED])


def message_type(message: Any) -> str:
    sp = message.system_properties
    if sp.message_type == d.TRANSACTION:
        return "TRANSACTION"
    if sp.HasField("delivery_timestamp"):
        return "DELAY"
    if sp.message_group:
        return "FIFO"
    if sp.HasField("priority"):
        return "PRIORITY"
    if sp.lite_topic:
        return "LITE"
    return "NORMAL"


def check(topic_config: Optional[Any], message: Any) -> None:
    """Raise the proxy's refusal when ``message`` may not go to the topic of ``topic_config`` (None: unknown)."""
    expected, actual = topic_type(topic_config), message_type(message)
    if actual == "UNSPECIFIED" or (actual != expected and expected != "MIXED"):
        raise proxy_error(d.Code.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE,
                          f"TopicMessageType validate failed, the expected type is {expected}, "
                          f"but actual type is {actual}")

