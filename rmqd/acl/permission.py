"""Permission bits and the resource-permission strings of plain_acl.yml (Java ``acl.common.Permission``)."""
from __future__ import annotations

from typing import Iterable, Optional

from rmqd.common.constants import RETRY_GROUP_TOPIC_PREFIX

DENY = 1
ANY = 1 << 1
PUB = 1 << 2
SUB = 1 << 3

# Request codes that need ``admin: true``: UPDATE_AND_CREATE_TOPIC, UPDATE_BROKER_CONFIG,
# DELETE_TOPIC_IN_BROKER, UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, DELETE_SUBSCRIPTIONGROUP.
ADMIN_CODES = frozenset({17, 25, 215, 200, 207})

RETRY_PREFIX = RETRY_GROUP_TOPIC_PREFIX
_NAMES = {"PUB": PUB, "SUB": SUB, "PUB|SUB": PUB | SUB, "SUB|PUB": PUB | SUB, "DENY": DENY}


class AclError(Exception):
    """A refused request or a bad ACL setting; ``frame`` is the Java stack frame the 4.9.8 broker names
    in its remark for the same refusal (see rmqd.acl.validator.remark)."""

    def __init__(self, message: str, frame: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.frame = frame


def check_permission(needed: int, owned: int) -> bool:
    """DENY always wins; ANY needs PUB or SUB; otherwise a shared bit."""
    if owned & DENY:
        return False
    if needed & ANY:
        return bool(owned & (PUB | SUB))
    return bool(needed & owned)


def parse_perm(text: object) -> int:
    """``PUB``, ``SUB``, ``PUB|SUB``/``SUB|PUB`` or ``DENY``; anything else (or nothing) is DENY."""
    if text is None:
        return DENY
    return _NAMES.get(str(text).strip(), DENY)


def retry_topic(group: Optional[str]) -> Optional[str]:
    return None if group is None else RETRY_PREFIX + group


def is_retry_topic(resource: Optional[str]) -> bool:
    return resource is not None and resource.startswith(RETRY_PREFIX)


def describe_resource(resource: str) -> str:
    """``topic:T`` or ``group:G`` (a group is checked under its retry topic)."""
    if is_retry_topic(resource):
        return "group:" + resource[len(RETRY_PREFIX):]
    return "topic:" + resource


def _split_resource(item: str) -> list[str]:
    """``StringUtils.split(item, "=")``: separators collapse and empty parts are dropped."""
    return [part for part in item.split("=") if part]


def resource_perms(items: Optional[Iterable[object]], topics: bool) -> dict[str, int]:
    """``["topicA=PUB|SUB", ...]`` -> ``{resource: perm}``; groups are keyed by their retry topic."""
    out: dict[str, int] = {}
    for item in items or ():
        parts = _split_resource(str(item))
        if len(parts) != 2:
            raise AclError(f"Parse resource permission failed for {'topic' if topics else 'group'}:{item}")
        name = parts[0].strip()
        out[name if topics else RETRY_PREFIX + name] = parse_perm(parts[1].strip())
    return out


def check_resource_perms(items: Optional[Iterable[object]]) -> None:
    """The admin codes' check of ``Res=Perm`` lists (Java ``Permission.checkResourcePerms``)."""
    for item in items or ():
        parts = _split_resource(str(item))
        if len(parts) != 2:
            raise AclError(f"Parse Resource format error for {item}.\n"
                           "The expected resource format is 'Res=Perm'. For example: topicA=SUB")
        if parts[1].strip() != "DENY" and parse_perm(parts[1].strip()) == DENY:
            raise AclError(f"Parse resource permission error for {item}.\n"
                           "The expected permissions are 'SUB' or 'PUB' or 'SUB|PUB' or 'PUB|SUB'.")
