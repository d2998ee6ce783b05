"""Users, subjects, resources, actions, policy entries and ACLs of access control 2.0 (5.x ``auth`` models).

Names are parsed case-insensitively and written in 5.x's spelling (``Super``/``Normal``, ``enable``/``disable``,
``Pub``/``Sub``/..., ``Allow``/``Deny``, ``Custom``/``Default``); an unknown name parses to None, as 5.x's
``getByName``. A resource is written ``Type:name`` (``Topic:orders``), ``Type:prefix*`` (prefixed), ``Type:*``
(any name of the type) or ``*`` (anything).

The wire shapes are 5.x's ``UserInfo`` and ``AclInfo`` JSON (the bodies of request codes 3001-3010), written with
sorted keys and without null fields, as the 5.x broker writes them.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Iterable, Mapping, Optional, TypeGuard, TypeVar

from rmqd.common.constants import RETRY_GROUP_TOPIC_PREFIX

DLQ_PREFIX = "%DLQ%"

_N = TypeVar("_N", bound="_Named")


class _Named(Enum):
    """An enum whose value is 5.x's name, looked up case-insensitively."""

    @classmethod
    def by_name(cls: type[_N], name: object) -> Optional[_N]:
        if not isinstance(name, str):
            return None
        low = name.lower()
        for member in cls:
            if member.value.lower() == low:
                return member
        return None


class UserType(_Named):
    SUPER = "Super"
    NORMAL = "Normal"


class UserStatus(_Named):
    ENABLE = "enable"
    DISABLE = "disable"


class Action(_Named):
    UNKNOWN = "Unknown"
    ALL = "All"
    ANY = "Any"
    PUB = "Pub"
    SUB = "Sub"
    CREATE = "Create"
    UPDATE = "Update"
    DELETE = "Delete"
    GET = "Get"
    LIST = "List"


class ResourceType(_Named):
    UNKNOWN = "Unknown"
    ANY = "Any"
    CLUSTER = "Cluster"
    NAMESPACE = "Namespace"
    TOPIC = "Topic"
    GROUP = "Group"


class ResourcePattern(Enum):
    ANY = "ANY"
    LITERAL = "LITERAL"
    PREFIXED = "PREFIXED"


class Decision(_Named):
    ALLOW = "Allow"
    DENY = "Deny"


class PolicyType(_Named):
    CUSTOM = "Custom"
    DEFAULT = "Default"


# ---------------------------------------------------------------------------------------------- users
@dataclass
class User:
    username: Optional[str]
    password: Optional[str] = field(default=None, repr=False)
    user_type: Optional[UserType] = None
    user_status: Optional[UserStatus] = None

    @property
    def subject_key(self) -> str:
        return f"User:{self.username}"

    def to_info(self) -> dict[str, str]:
        """5.x ``UserInfo`` (what getUser / listUser answer; the password included, as 5.x sends it)."""
        info = {"password": self.password, "userStatus": self.user_status.value if self.user_status else None,
                "userType": self.user_type.value if self.user_type else None, "username": self.username}
        return {k: v for k, v in info.items() if v is not None}

    @classmethod
    def from_info(cls, info: Mapping[str, object]) -> "User":
        """5.x ``UserConverter.convertUser``: unknown type or status names become None."""
        return cls(_str_or_none(info.get("username")), _str_or_none(info.get("password")),
                   UserType.by_name(info.get("userType")), UserStatus.by_name(info.get("userStatus")))

    def to_store(self) -> dict[str, str]:
        return self.to_info()

    @classmethod
    def from_store(cls, d: Mapping[str, object]) -> "User":
        return cls.from_info(d)


def subject_of(key: Optional[str]) -> Optional[User]:
    """5.x ``Subject.of``: ``User:<name>`` (the type case-insensitively) is a user; anything else None."""
    if key is None:
        return None
    kind, _, name = key.partition(":")
    if kind.lower() != "user":
        return None
    return User(name)


def _str_or_none(v: object) -> Optional[str]:
    return None if v is None else (v if isinstance(v, str) else str(v))


# ---------------------------------------------------------------------------------------------- resources
def is_retry_topic(name: Optional[str]) -> TypeGuard[str]:
    if not name:
        return False
    return not name.isspace() and name.startswith(RETRY_GROUP_TOPIC_PREFIX)


def without_retry_and_dlq(name: str) -> str:
    if name.startswith(RETRY_GROUP_TOPIC_PREFIX):
        return name[len(RETRY_GROUP_TOPIC_PREFIX):]
    if name.startswith(DLQ_PREFIX):
        return name[len(DLQ_PREFIX):]
    return name


@dataclass(frozen=True)
class Resource:
    type: ResourceType
    name: Optional[str]
    pattern: ResourcePattern

    @classmethod
    def topic(cls, name: Optional[str]) -> "Resource":
        return cls(ResourceType.TOPIC, name, ResourcePattern.LITERAL)

    @classmethod
    def group(cls, name: Optional[str]) -> "Resource":
        """A group; a retry topic names its group (``%RETRY%G`` is ``Group:G``)."""
        if is_retry_topic(name):
            name = without_retry_and_dlq(name)
        return cls(ResourceType.GROUP, name, ResourcePattern.LITERAL)

    @classmethod
    def cluster(cls, name: Optional[str]) -> "Resource":
        return cls(ResourceType.CLUSTER, name, ResourcePattern.LITERAL)

    @classmethod
    def parse(cls, key: object) -> Optional["Resource"]:
        """5.x ``Resource.of(String)``: None for a blank key or an unknown type."""
        if not isinstance(key, str) or not key.strip():
            return None
        if key == "*":
            return cls(ResourceType.ANY, None, ResourcePattern.ANY)
        kind, _, name = key.partition(":")
        rtype = ResourceType.by_name(kind)
        if rtype is None:
            return None
        if name == "*":
            return cls(rtype, None, ResourcePattern.ANY)
        if name.endswith("*"):
            return cls(rtype, name[:name.index("*")], ResourcePattern.PREFIXED)
        return cls(rtype, name, ResourcePattern.LITERAL)

    @property
    def key(self) -> str:
        if self.type is ResourceType.ANY:
            return "*"
        if self.pattern is ResourcePattern.ANY:
            return f"{self.type.value}:*"
        if self.pattern is ResourcePattern.PREFIXED:
            return f"{self.type.value}:{self.name}*"
        return f"{self.type.value}:{'null' if self.name is None else self.name}"

    def matches(self, target: "Resource") -> bool:
        """Does this (a policy entry's resource) cover ``target`` (a request's literal resource)?"""
        if self.type is ResourceType.ANY:
            return True
        if self.type is not target.type:
            return False
        if self.pattern is ResourcePattern.ANY:
            return True
        if target.name is None or self.name is None:
            return False
        if self.pattern is ResourcePattern.LITERAL:
            return target.name == self.name
        return target.name.startswith(self.name)

    def specificity(self) -> tuple[bool, int, int]:
        """Order of 5.x's policy-entry comparator (smaller decides first): a resource of a type before ``*``; then
        literal, prefixed (the longer prefix first), any name."""
        rank = {ResourcePattern.LITERAL: 0, ResourcePattern.PREFIXED: 1, ResourcePattern.ANY: 2}[self.pattern]
        return (self.type is ResourceType.ANY, rank,
                -len(self.name or "") if self.pattern is ResourcePattern.PREFIXED else 0)


# ---------------------------------------------------------------------------------------------- policies
@dataclass
class PolicyEntry:
    resource: Optional[Resource]
    actions: list[Action]
    source_ips: Optional[list[Optional[str]]] = None        # None or empty: any source (None items: refused)
    decision: Optional[Decision] = None

    def matches_action(self, wanted: Iterable[Action]) -> bool:
        if not self.actions:
            return False
        wanted = list(wanted)
        if Action.ANY in wanted:
            return True
        return Action.ALL in self.actions or any(a in self.actions for a in wanted)

    def matches_source(self, ip: Optional[str]) -> bool:
        from rmqd.auth.source_ip import ip_in_range
        if not self.source_ips:
            return True
        if not ip:
            return False
        return any(rule is not None and ip_in_range(ip, rule) for rule in self.source_ips)

    def to_info(self) -> dict[str, object]:
        info: dict[str, object] = {"actions": [a.value for a in self.actions] or None,
                      "decision": self.decision.value if self.decision else None,
                      "resource": self.resource.key if self.resource else None}
        if self.source_ips:
            info["sourceIps"] = list(self.source_ips)
        return {k: info[k] for k in sorted(info) if info[k] is not None}


@dataclass
class Policy:
    policy_type: Optional[PolicyType]
    entries: list[PolicyEntry]

    def entry_for(self, resource: Optional[Resource]) -> Optional[PolicyEntry]:
        for e in self.entries:
            if e.resource == resource:
                return e
        return None

    def update_entries(self, new_entries: list[PolicyEntry]) -> None:
        """5.x ``Policy.updateEntry``: an entry of the same resource is replaced in place, a new one appended."""
        index = {e.resource: e for e in self.entries}
        for new in new_entries:
            old = index.get(new.resource)
            if old is None:
                self.entries.append(new)
                index[new.resource] = new
            else:
                old.actions, old.source_ips, old.decision = new.actions, new.source_ips, new.decision

    def delete_entry(self, resource: Resource) -> None:
        e = self.entry_for(resource)
        if e is not None:
            self.entries.remove(e)

    def to_info(self) -> dict[str, object]:
        info: dict[str, object] = {}
        if self.entries:
            info["entries"] = [e.to_info() for e in self.entries]
        if self.policy_type is not None:
            info["policyType"] = self.policy_type.value
        return info


@dataclass
class Acl:
    subject: Optional[User]
    policies: list[Policy]

    def policy(self, policy_type: Optional[PolicyType]) -> Optional[Policy]:
        for p in self.policies or ():
            if p.policy_type is policy_type:
                return p
        return None

    def update_policies(self, new_policies: list[Policy]) -> None:
        """5.x ``Acl.updatePolicy``: per policy type, merge the entries (or add the policy)."""
        for new in new_policies:
            old = self.policy(new.policy_type)
            if old is None:
                self.policies.append(new)
            else:
                old.update_entries(new.entries)

    def delete_policy(self, policy_type: PolicyType, resource: Resource) -> None:
        p = self.policy(policy_type)
        if p is None:
            return
        p.delete_entry(resource)
        if not p.entries:
            self.policies.remove(p)

    def to_info(self) -> dict[str, object]:
        info: dict[str, object] = {}
        if self.policies:
            info["policies"] = [p.to_info() for p in self.policies]
        if self.subject is not None:
            info["subject"] = self.subject.subject_key
        return info


def acl_from_info(info: Mapping[str, object]) -> Acl:
    """5.x ``AclConverter.convertAcl(AclInfo)``. A policy without entries is dropped; an unknown action name is
    dropped; an unknown resource, decision or policy type becomes None (the manager's checks refuse the first two).
    Raises TypeError where 5.x fails with a NullPointerException (an entry without ``actions``)."""
    subject = subject_of(_str_or_none(info.get("subject")))
    policies: list[Policy] = []
    for p in _list(info.get("policies")):
        if not isinstance(p, dict):
            raise TypeError("a policy is not a JSON object")
        entry_infos = _list(p.get("entries"))
        if not entry_infos:
            continue
        entries: list[PolicyEntry] = []
        for e in entry_infos:
            if not isinstance(e, dict):
                raise TypeError("a policy entry is not a JSON object")
            if e.get("actions") is None:
                raise TypeError("entry.getActions() is null")
            actions = [a for a in (Action.by_name(x) for x in _list(e.get("actions"))) if a is not None]
            entries.append(PolicyEntry(Resource.parse(e.get("resource")), actions, _ips(e.get("sourceIps")) or None,
                                       Decision.by_name(e.get("decision"))))
        policies.append(Policy(PolicyType.by_name(p.get("policyType")), entries))
    return Acl(subject, policies)


def _list(v: object) -> list[object]:
    if v is None:
        return []
    if isinstance(v, list):
        return v
    raise TypeError(f"expected a JSON array, got {type(v).__name__}")


def json_objects(v: object) -> list[Mapping[str, object]]:
    """A JSON array of objects (null or empty: none); TypeError for anything else."""
    if not v:
        return []
    out: list[Mapping[str, object]] = []
    for item in _list(v):
        if not isinstance(item, dict):
            raise TypeError(f"expected a JSON object, got {type(item).__name__}")
        out.append(item)
    return out


def _ips(v: object) -> Optional[list[Optional[str]]]:
    """An entry's ``sourceIps`` (None stays None; a null item stays None, for the manager's check to refuse)."""
    return None if v is None else [None if x is None else str(x) for x in _list(v)]


# ---------------------------------------------------------------------------------------------- storage form
def _resource_to_store(r: Optional[Resource]) -> Optional[list[Optional[str]]]:
    return None if r is None else [r.type.value, r.name, r.pattern.value]


def _resource_from_store(v: object) -> Optional[Resource]:
    """``[type, name, pattern]`` as :func:`_resource_to_store` writes it; TypeError / ValueError for anything else."""
    if v is None:
        return None
    if not isinstance(v, list) or len(v) != 3:
        raise TypeError(f"a stored resource is [type, name, pattern], not {v!r}")
    rtype, name, pattern = v
    resource_type = ResourceType.by_name(rtype)
    if resource_type is None:
        raise ValueError(f"a stored resource of an unknown type: {v!r}")
    if name is not None and not isinstance(name, str):
        raise TypeError(f"a stored resource name is a string or null, not {name!r}")
    return Resource(resource_type, name, ResourcePattern(pattern))


def acl_to_store(acl: Acl) -> dict[str, object]:
    return {"subject": acl.subject.subject_key if acl.subject else None,
            "policies": [{"policyType": p.policy_type.value if p.policy_type else None,
                          "entries": [{"resource": _resource_to_store(e.resource),
                                       "actions": [a.value for a in e.actions],
                                       "sourceIps": None if e.source_ips is None else list(e.source_ips),
                                       "decision": e.decision.value if e.decision else None}
                                      for e in p.entries]}
                         for p in acl.policies]}


def acl_from_store(d: Mapping[str, object]) -> Acl:
    """The inverse of :func:`acl_to_store` (TypeError / ValueError for a damaged one)."""
    policies: list[Policy] = []
    for p in json_objects(d.get("policies")):
        entries = [PolicyEntry(_resource_from_store(e.get("resource")),
                               [a for a in (Action.by_name(x) for x in _list(e.get("actions"))) if a is not None],
                               _ips(e.get("sourceIps")), Decision.by_name(e.get("decision")))
                   for e in json_objects(p.get("entries"))]
        policies.append(Policy(PolicyType.by_name(p.get("policyType")), entries))
    return Acl(subject_of(_str_or_none(d.get("subject"))), policies)
