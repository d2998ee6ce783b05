"""``migrateAuthFromV1Enabled``: ACL 1.0's accounts become 2.0 users and ACLs at start (5.x ``AuthMigrator``).

The accounts are read where ACL 1.0 reads them (``plain_acl.yml`` and ``conf/acl/*.yml``, the first definition of
an access key wins). An account whose user exists already is left alone (a restart migrates nothing twice); any
other becomes:

- a user named by its accessKey with its secretKey as password, Super when ``admin: true``, else Normal;
- a Custom policy with one entry per ``topicPerms`` / ``groupPerms`` item (``Topic:T`` / ``Group:G``), and a
  Default policy with ``Topic:*`` for ``defaultTopicPerm`` and ``Group:*`` for ``defaultGroupPerm`` when set.
  ``PUB`` is Pub, ``SUB`` Sub, ``PUB|SUB`` both, Allow; ``DENY`` is All, Deny; anything else All, Allow.

``whiteRemoteAddress`` and ``globalWhiteRemoteAddresses`` have no 2.0 counterpart and are not carried over (as in
5.x). A failing account is logged and the others still migrate.
"""
from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Optional

from rmqd.auth.errors import AuthError
from rmqd.auth.metadata import AuthMetadataManager
from rmqd.auth.model import (Acl, Action, Decision, Policy, PolicyEntry, PolicyType, Resource, ResourcePattern,
                             ResourceType, User, UserType)

log = logging.getLogger(__name__)


def _actions(perm: str) -> list[Action]:
    perm = perm.strip()
    if perm == "PUB":
        return [Action.PUB]
    if perm == "SUB":
        return [Action.SUB]
    if perm in ("PUB|SUB", "SUB|PUB"):
        return [Action.PUB, Action.SUB]
    return [Action.ALL]


def _decision(perm: str) -> Decision:
    return Decision.DENY if perm == "DENY" else Decision.ALLOW


def _entries(items: object, topics: bool) -> list[PolicyEntry]:
    """The entries of a ``topicPerms`` / ``groupPerms`` list (absent or empty: none; TypeError for no list)."""
    out: list[PolicyEntry] = []
    if not items:
        return out
    if not isinstance(items, Iterable):
        raise TypeError(f"a permission list is expected, not {type(items).__name__}")
    for item in items:
        parts = [p for p in str(item).split("=") if p]
        if len(parts) != 2:
            continue
        name, perm = parts[0].strip(), parts[1].strip()
        resource = Resource.topic(name) if topics else Resource.group(name)
        out.append(PolicyEntry(resource, _actions(perm), None, _decision(perm)))
    return out


def _truthy(value: object) -> bool:
    return value is True or str(value).strip().lower() == "true"


def acl_of_account(account: Mapping[str, object]) -> Optional[Acl]:
    """The ACL 5.x makes of one plain_acl.yml account (None when it has no permissions at all)."""
    policies: list[Policy] = []
    custom = _entries(account.get("topicPerms"), True) + _entries(account.get("groupPerms"), False)
    if custom:
        policies.append(Policy(PolicyType.CUSTOM, custom))
    defaults: list[PolicyEntry] = []
    for key, rtype in (("defaultTopicPerm", ResourceType.TOPIC), ("defaultGroupPerm", ResourceType.GROUP)):
        value = account.get(key)
        if value is not None and str(value).strip():
            perm = str(value).strip()
            defaults.append(PolicyEntry(Resource(rtype, None, ResourcePattern.ANY), _actions(perm), None,
                                        _decision(perm)))
    if defaults:
        policies.append(Policy(PolicyType.DEFAULT, defaults))
    if not policies:
        return None
    return Acl(User(str(account.get("accessKey"))), policies)


def migrate(manager: AuthMetadataManager, accounts: Iterable[Mapping[str, object]]) -> int:
    """Migrate the accounts (in order; a repeated access key after its first definition is skipped); returns
    how many became users."""
    seen: set[object] = set()
    done = 0
    for account in accounts:
        key = account.get("accessKey")
        if key is None or key in seen:
            continue
        seen.add(key)
        ak = str(key)
        try:
            if manager.store.state.users.get(ak) is not None:
                continue
            sk = account.get("secretKey")
            manager.create_user(User(ak, None if sk is None else str(sk),
                                     UserType.SUPER if _truthy(account.get("admin")) else UserType.NORMAL))
            acl = acl_of_account(account)
            if acl is not None:
                manager.put_acl(acl)
            done += 1
        except (AuthError, ValueError, TypeError) as exc:
            log.error("[ACL MIGRATE] An error occurred while migrating ACL configurations for AccessKey:%s: %s", ak,
                      getattr(exc, "message", exc))
    log.info("[ACL MIGRATE] %d plain_acl.yml account(s) became users", done)
    return done


def plain_acl_accounts(acl_file: Optional[str]) -> list[dict[str, object]]:
    """Every account of ACL 1.0's files, in the order ACL 1.0 reads them (``conf/acl/`` first, then the default
    file); a file that cannot be read is logged and skipped."""
    import os

    from rmqd.acl.setup import acl_locations
    from rmqd.common.yaml_files import YAMLError, load_yaml

    home, default_file = acl_locations(acl_file)
    acl_dir = os.path.join(home, "conf", "acl")
    files = []
    if os.path.isdir(acl_dir):
        for root, _dirs, names in os.walk(acl_dir):
            files += [os.path.join(root, n) for n in sorted(names) if n.endswith((".yml", ".yaml"))]
    if os.path.isfile(default_file) and default_file not in files:
        files.append(default_file)
    accounts: list[dict[str, object]] = []
    for path in files:
        try:
            with open(path, encoding="utf-8") as f:
                data = load_yaml(f) or {}
        except (OSError, YAMLError) as exc:
            log.error("[ACL MIGRATE] cannot read %s: %s", path, exc)
            continue
        if isinstance(data, dict):
            accounts += [a for a in data.get("accounts") or () if isinstance(a, dict)]
    return accounts
