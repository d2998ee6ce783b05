"""5.x topic message types (``TopicMessageType``) and the check a 5.x proxy makes before a send or a recall.

Java: ``TopicMessageType.parseFromMessageProperty`` (a message's type from its properties: ``TRAN_MSG=true`` is
TRANSACTION; ``DELAY`` or a ``TIMER_*`` time is DELAY; ``__SHARDINGKEY`` is FIFO; ``_SYS_MSG_PRIORITY_`` is
PRIORITY; ``__LITE_TOPIC`` is LITE; else NORMAL), ``TopicConfig.getTopicMessageType`` (its ``message.type``
attribute, NORMAL when unset) and the proxy's ``DefaultTopicMessageTypeValidator``: the two must be equal unless the
topic is MIXED. With ``enableTopicMessageTypeCheck`` (ProxyConfig, on by default) the 5.x proxy refuses a send
whose type is not its topic's (MESSAGE_PROPERTY_CONFLICT_WITH_TYPE) and a recall on a topic that is not DELAY;
retry and DLQ topics and messages carrying ``TRANSFER_FLAG`` are not checked. The 5.5 *broker* checks nothing of
this on a remoting send, so neither does rmqd's remoting path.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Mapping, Optional

from rmqd.common.constants import DLQ_GROUP_TOPIC_PREFIX, RETRY_GROUP_TOPIC_PREFIX
from rmqd.store.topic_attributes import message_type_of

if TYPE_CHECKING:
    from rmqd.store.metadata import TopicConfig

TRANSFER_FLAG = "TRANSFER_FLAG"


def message_type_of_properties(props: Mapping[str, str]) -> str:
    """TopicMessageType.parseFromMessageProperty."""
    if props.get("TRAN_MSG") == "true":
        return "TRANSACTION"
    if any(props.get(k) is not None for k in ("DELAY", "TIMER_DELIVER_MS", "TIMER_DELAY_SEC", "TIMER_DELAY_MS")):
        return "DELAY"
    if props.get("__SHARDINGKEY") is not None:
        return "FIFO"
    if props.get("_SYS_MSG_PRIORITY_") is not None:
        return "PRIORITY"
    if props.get("__LITE_TOPIC") is not None:
        return "LITE"
    return "NORMAL"


def type_conflict(expected: str, actual: str) -> Optional[str]:
    """DefaultTopicMessageTypeValidator: its message when ``actual`` may not go to a topic of type ``expected``."""
    if actual == "UNSPECIFIED" or (actual != expected and expected != "MIXED"):
        return f"TopicMessageType validate failed, the expected type is {expected}, but actual type is {actual}"
    return None


def send_conflict(enabled: bool, topic_config: Optional["TopicConfig"], props: Mapping[str, str]) -> Optional[str]:
    """The proxy's send check (``enabled``: enableTopicMessageTypeCheck): a message of ``props`` sent to the topic
    of ``topic_config`` (None: a topic that does not exist, UNSPECIFIED). None when it may go."""
    if not enabled or TRANSFER_FLAG in props:
        return None
    topic = (topic_config.topic_name if topic_config is not None else "") or ""
    if topic.startswith((RETRY_GROUP_TOPIC_PREFIX, DLQ_GROUP_TOPIC_PREFIX)):
        return None
    expected = message_type_of(topic_config) if topic_config is not None else "UNSPECIFIED"
    return type_conflict(expected, message_type_of_properties(props))


def recall_conflict(enabled: bool, topic_config: Optional["TopicConfig"]) -> Optional[str]:
    """The proxy's recall check: only a DELAY (or MIXED) topic's messages can be recalled."""
    if not enabled:
        return None
    expected = message_type_of(topic_config) if topic_config is not None else "UNSPECIFIED"
    return type_conflict(expected, "DELAY")
