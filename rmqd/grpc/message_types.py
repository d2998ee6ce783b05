"""The topic message-type check of the 5.x proxy for gRPC sends and recalls (``enableTopicMessageTypeCheck``, on by
default), with the proxy's answer: the rules are :mod:`rmqd.broker.message_type`'s (a message's type from its
properties, TRANSACTION > DELAY > FIFO > PRIORITY > LITE > NORMAL; its topic's ``message.type``, NORMAL when unset,
UNSPECIFIED when the topic does not exist; equal unless the topic is MIXED). A refusal is the proxy's
MESSAGE_PROPERTY_CONFLICT_WITH_TYPE for the whole request, its text wrapped as a ``ProxyException``'s. The route's
``accept_message_types`` and the ``validate_message_type`` of a producer's Settings say the same, so the 5.x
clients check it themselves first.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Optional

from rmqd.broker.message_type import recall_conflict, send_conflict
from rmqd.grpc.convert import to_properties
from rmqd.grpc.errors import proxy_error
from rmqd.grpc.pb import definition_pb2 as d
from rmqd.store.topic_attributes import message_type_of

if TYPE_CHECKING:
    from rmqd.config import BrokerConfig
    from rmqd.store.metadata import TopicConfig

# the route's accept_message_types of a topic type (RouteActivity.parseTopicMessageType)
ACCEPT_TYPES: dict[str, list[d.MessageType.ValueType]] = {
    "NORMAL": [d.NORMAL], "FIFO": [d.FIFO], "DELAY": [d.DELAY], "TRANSACTION": [d.TRANSACTION],
    "PRIORITY": [d.PRIORITY], "LITE": [d.LITE], "MIXED": [d.NORMAL, d.FIFO, d.DELAY, d.TRANSACTION]}


def enabled(config: BrokerConfig) -> bool:
    return str(getattr(config, "enableTopicMessageTypeCheck", True)).lower() == "true"


def topic_type(topic_config: Optional[TopicConfig]) -> str:
    return "UNSPECIFIED" if topic_config is None else message_type_of(topic_config)


def accept_types(topic_config: Optional[TopicConfig]) -> list[d.MessageType.ValueType]:
    return ACCEPT_TYPES.get(topic_type(topic_config), [d.MESSAGE_TYPE_UNSPECIFIED])


def check_send(config: BrokerConfig, topic_config: Optional[TopicConfig], message: d.Message) -> None:
    """Raise the proxy's refusal when ``message`` may not go to the topic of ``topic_config`` (None: unknown)."""
    conflict = send_conflict(enabled(config), topic_config, to_properties(message, None))
    if conflict:
        raise proxy_error(d.Code.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE, conflict)


def check_recall(config: BrokerConfig, topic_config: Optional[TopicConfig]) -> None:
    """Only a DELAY (or MIXED) topic's messages can be recalled."""
    conflict = recall_conflict(enabled(config), topic_config)
    if conflict:
        raise proxy_error(d.Code.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE, conflict)
