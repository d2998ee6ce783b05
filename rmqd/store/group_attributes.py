"""Consumer-group attributes of RocketMQ 5.4/5.5 (Java ``SubscriptionGroupAttributes``).

Set with ``updateSubGroup --attributes "+k=v,-k2"`` and merged by the broker like topic attributes
(:func:`rmqd.store.topic_attributes.alter`), so they are stored with bare keys:

- ``lite.bind.topic``: the one LITE parent topic the group consumes; its presence makes a *lite group*;
- ``lite.sub.model``: ``Shared`` (default) or ``Exclusive`` (a new subscriber of a lite topic evicts the
  group's other clients, which get NotifyUnsubscribeLite);
- ``lite.sub.reset.offset.exclusive`` / ``lite.sub.reset.offset.unsubscribe``: reset the offset to MIN on
  eviction / on PARTIAL_REMOVE (default false);
- ``lite.sub.client.quota``: lite subscriptions per client (default 2000), pushed to clients in Settings;
- ``lite.sub.client.max.event.cnt``: capacity of a client's pending-event set (default 400, at least 10);
- ``priority.factor``: percentage of POP requests served in priority order (0…100, default 100).
"""
from __future__ import annotations

from typing import Mapping, Optional

from rmqd.store.topic_attributes import Attribute, Attributed, AttributeValueError, parse  # noqa: F401 (re-exported)
from rmqd.store import topic_attributes

LITE_BIND_TOPIC = "lite.bind.topic"
LITE_SUB_MODEL = "lite.sub.model"
LITE_RESET_EXCLUSIVE = "lite.sub.reset.offset.exclusive"
LITE_RESET_UNSUBSCRIBE = "lite.sub.reset.offset.unsubscribe"
LITE_CLIENT_QUOTA = "lite.sub.client.quota"
LITE_MAX_EVENTS = "lite.sub.client.max.event.cnt"
PRIORITY_FACTOR = "priority.factor"

_INT_MAX = 2 ** 31 - 1
ALL = {a.name: a for a in (
    Attribute(LITE_BIND_TOPIC, True),
    Attribute(LITE_SUB_MODEL, True, ("Shared", "Exclusive")),
    Attribute(LITE_RESET_EXCLUSIVE, True, ("true", "false")),
    Attribute(LITE_RESET_UNSUBSCRIBE, True, ("true", "false")),
    Attribute(LITE_CLIENT_QUOTA, True, value_range=(-1, _INT_MAX)),
    Attribute(LITE_MAX_EVENTS, True, value_range=(10, _INT_MAX)),
    Attribute(PRIORITY_FACTOR, True, value_range=(0, 100)),
)}
DEFAULTS = {LITE_SUB_MODEL: "Shared", LITE_RESET_EXCLUSIVE: "false", LITE_RESET_UNSUBSCRIBE: "false",
            LITE_CLIENT_QUOTA: "2000", LITE_MAX_EVENTS: "400", PRIORITY_FACTOR: "100"}


def alter(create: bool, current: dict[str, str], new: dict[str, str]) -> dict[str, str]:
    """The group's attributes after the change set ``new`` (``{"+k": v, "-k2": ""}``); bare keys in
    ``new`` (a body written by a 4.x tool, or the broker's own read-back) count as ``+k``. Raises
    AttributeValueError with the Java remark."""
    changes = {(k if k[:1] in "+-" else "+" + k): v for k, v in new.items()}
    return topic_attributes.alter(create and not current, current, changes, ALL)


def get(group_config: Optional[Attributed], name: str) -> Optional[str]:
    """The attribute's value (bare or ``+``-prefixed key), else its default (None for lite.bind.topic)."""
    attrs: Mapping[str, str] = getattr(group_config, "attributes", None) or {}
    value = attrs.get(name)
    if value is None:
        value = attrs.get("+" + name)
    return DEFAULTS.get(name) if value is None else value


def get_int(group_config: Optional[Attributed], name: str) -> int:
    try:
        return int(get(group_config, name) or DEFAULTS[name])
    except ValueError:
        return int(DEFAULTS[name])


def get_bool(group_config: Optional[Attributed], name: str) -> bool:
    return str(get(group_config, name)).lower() == "true"


def bind_topic(group_config: Optional[Attributed]) -> Optional[str]:
    """The lite parent topic of a lite group, or None for any other group."""
    value = get(group_config, LITE_BIND_TOPIC) if group_config is not None else None
    return value.strip() if value and value.strip() else None
