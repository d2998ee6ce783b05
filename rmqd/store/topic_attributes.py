"""Topic attributes of RocketMQ 5.x (``TopicAttributes``, ``AttributeUtil``), with the Java texts.

``cleanup.policy`` (DELETE | COMPACTION) and ``queue.type`` cannot change after creation;
``message.type`` (5.4 adds PRIORITY, 5.5 LITE), ``reserve.time`` and ``lite.topic.expiration`` (5.5, minutes,
-1 = never, at most 30 days) can. Unknown keys are refused. Set contents print in Java
HashSet order, as the Java broker's error remarks show them.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Optional, Protocol

CLEANUP_POLICY = "cleanup.policy"
COMPACTION = "COMPACTION"
MESSAGE_TYPE = "message.type"
LITE_EXPIRATION = "lite.topic.expiration"


@dataclass(frozen=True)
class Attribute:
    name: str
    changeable: bool
    universe: Optional[tuple[str, ...]] = None        # enum values, in Java HashSet iteration order
    value_range: Optional[tuple[int, int]] = None     # (min, max) of a long attribute

    def verify(self, value: str) -> None:
        if self.universe is None and self.value_range is None:     # a string attribute: anything not blank
            if not value.strip():
                raise AttributeValueError(f"attribute {self.name} cannot be blank")
            return
        if self.universe is not None:
            if value not in self.universe:
                raise AttributeValueError(f"value is not in set: [{', '.join(self.universe)}]")
            return
        assert self.value_range is not None       # neither a string nor an enum attribute: a long one
        try:
            v = int(value)
        except ValueError:
            raise AttributeValueError(f'For input string: "{value}"') from None
        lo, hi = self.value_range
        if v < lo or v > hi:
            raise AttributeValueError(f"value is not in range({lo}, {hi})")


class AttributeValueError(ValueError):
    """An attribute change the Java broker refuses (its message is the remark)."""


class Attributed(Protocol):
    """A topic or group config: what the readers below use of it."""

    @property
    def attributes(self) -> Mapping[str, str]: ...


ALL = {a.name: a for a in (
    Attribute("queue.type", False, ("SimpleCQ", "BatchCQ")),
    Attribute(CLEANUP_POLICY, False, ("DELETE", COMPACTION)),
    Attribute(MESSAGE_TYPE, True, ("UNSPECIFIED", "MIXED", "TRANSACTION", "PRIORITY", "FIFO", "DELAY", "LITE",
                                   "NORMAL")),
    Attribute("reserve.time", True, value_range=(-1, 2 ** 63 - 1)),
    Attribute(LITE_EXPIRATION, True, value_range=(-1, 30 * 24 * 60)),
)}


def parse(spec: Optional[str]) -> dict[str, str]:
    """``"+k=v,+k2=v2,-k3"`` -> ``{"+k": "v", "+k2": "v2", "-k3": ""}`` (AttributeParser.parseToMap)."""
    out: dict[str, str] = {}
    if not spec or not spec.strip():
        return out
    for item in spec.split(","):
        item = item.strip()
        if not item:
            continue
        if item[0] not in "+-":
            raise AttributeValueError(f"attribute format is wrong: {item}")
        if item[0] == "+":
            if "=" not in item:
                raise AttributeValueError(f"add/alter attribute format is wrong: {item}")
            k, v = item.split("=", 1)
            out[k] = v
        else:
            if "=" in item:
                raise AttributeValueError(f"delete attribute format is wrong: {item}")
            out[item] = ""
    return out


def alter(create: bool, current: dict[str, str], new: dict[str, str],
          known: Optional[dict[str, Attribute]] = None) -> dict[str, str]:
    """AttributeUtil.alterCurrentAttributes: the topic's attributes after ``new`` (keys bare); ``known``:
    the attribute table (the topic attributes unless given, e.g. the group attributes)."""
    known = ALL if known is None else known
    init: dict[str, str] = {}
    add: dict[str, str] = {}
    update: dict[str, str] = {}
    delete: dict[str, str] = {}
    seen: set[str] = set()
    for key, value in new.items():
        real = key[1:]
        if not real or "+" in real or "-" in real:
            raise AttributeValueError("kv string format wrong.")
        if real in seen:
            raise AttributeValueError(f"alter duplication key. key: {real}")
        seen.add(real)
        if create:
            if not key.startswith("+"):
                raise AttributeValueError(f"only add attribute is supported while creating topic. key: {real}")
            init[real] = value
        elif key.startswith("+"):
            (update if real in current else add)[real] = value
        else:
            if real not in current:
                raise AttributeValueError(f"attempt to delete a nonexistent key: {real}")
            delete[real] = value
    for group, is_init, is_delete in ((init, True, False), (add, False, False), (update, False, False),
                                      (delete, False, True)):
        for real, value in group.items():
            attr = known.get(real)
            if attr is None:
                raise AttributeValueError(f"unsupported key: {real}")
            if not is_init and not attr.changeable:
                raise AttributeValueError(f"attempt to update an unchangeable attribute. key: {real}")
            if not is_delete:
                attr.verify(value)
    if create:
        return init
    result = dict(current)
    result.update(add)
    result.update(update)
    for real in delete:
        result.pop(real, None)
    return result


def is_compaction_topic(topic_config: Optional[Attributed]) -> bool:
    attrs: Optional[Mapping[str, str]] = getattr(topic_config, "attributes", None)
    return attrs.get(CLEANUP_POLICY) == COMPACTION if attrs else False


def attribute_of(topic_config: Optional[Attributed], name: str) -> Optional[str]:
    """A topic attribute's value (stored bare, or with the ``+`` of an update request), or None."""
    attrs: Mapping[str, str] = getattr(topic_config, "attributes", None) or {}
    value = attrs.get(name)
    return attrs.get("+" + name) if value is None else value


def message_type_of(topic_config: Optional[Attributed]) -> str:
    """The topic's ``message.type`` (Java ``TopicConfig.getTopicMessageType``): NORMAL when unset."""
    return str(attribute_of(topic_config, MESSAGE_TYPE) or "NORMAL").upper()


def is_priority_topic(topic_config: Optional[Attributed]) -> bool:
    return topic_config is not None and message_type_of(topic_config) == "PRIORITY"


def is_lite_topic(topic_config: Optional[Attributed]) -> bool:
    """A LITE parent topic (5.5 Lite Mode): its messages carry a lite topic each."""
    return topic_config is not None and message_type_of(topic_config) == "LITE"


def lite_expiration_minutes(topic_config: Optional[Attributed]) -> int:
    """``lite.topic.expiration`` of a LITE topic (-1 = never; TopicConfig answers -1 for other topics)."""
    if not is_lite_topic(topic_config):
        return -1
    try:
        return int(attribute_of(topic_config, LITE_EXPIRATION) or -1)
    except ValueError:
        return -1
