"""``rmqd admin`` access control 2.0 sub-commands, 5.5 mqadmin's names, options and output: createUser, updateUser,
deleteUser, getUser, listUser, createAcl, updateAcl, deleteAcl, getAcl, listAcl, copyUser, copyAcl (also under
copyUsers / copyAcls). Request codes 3001-3010.

``-b`` names one broker; ``-c`` a cluster: the changes go to every broker of it, masters and slaves (5.x's
``fetchMasterAndSlaveAddrByClusterName``), the reads to its masters.
"""
from __future__ import annotations

import argparse
import json
from typing import Callable, Mapping, Optional, TypeVar, cast

from rmqd.admin.bodies import AclEntry, AclInfo, UserInfo
from rmqd.admin.client import AdminClient, AdminError, broker_addr_of
from rmqd.admin.options import BROKER as _B, CLUSTER as _C, SpecEntry, SpecTable
from rmqd.remoting.codes import RequestCode, ResponseCode

T = TypeVar("T")

USER_FORMAT = "%-16s  %-22s  %-22s  %-22s"
ACL_FORMAT = "%-16s  %-10s  %-22s  %-20s  %-24s  %-10s"


def _split(text: Optional[str]) -> Optional[list[str]]:
    """``StringUtils.split(text, ',')`` with each part trimmed; None stays None."""
    if text is None:
        return None
    return [p.strip() for p in text.split(",") if p]


def cluster_addrs(c: AdminClient, cluster: str, masters_only: bool) -> list[str]:
    """The brokers of ``cluster``: masters (and slaves), in the name server's order."""
    info = c.cluster_info()
    out: list[str] = []
    for name in sorted(info.get("clusterAddrTable", {}).get(cluster, [])):
        bd = info.get("brokerAddrTable", {}).get(name) or {}
        if masters_only:
            a = broker_addr_of(bd, 0)
            if a:
                out.append(a)
        else:
            out += [a for _bid, a in sorted((bd.get("brokerAddrs") or {}).items(), key=lambda kv: int(kv[0]))]
    return out


def _targets(c: AdminClient, a: argparse.Namespace, masters_only: bool) -> list[str]:
    if a.brokerAddr:
        return [a.brokerAddr.strip()]
    if a.clusterName:
        addrs = cluster_addrs(c, a.clusterName.strip(), masters_only)
        if masters_only and not addrs:
            raise AdminError(ResponseCode.SYSTEM_ERROR, "there is no broker in cluster.")
        return addrs
    raise AdminError(ResponseCode.SYSTEM_ERROR, "one of -b (broker address) or -c (cluster name) is required")


def _body(d: Mapping[str, object]) -> bytes:
    return json.dumps({k: v for k, v in d.items() if v is not None}, separators=(",", ":")).encode()


def _java_list(items: Optional[list[str]]) -> str:
    return "null" if items is None else "[" + ", ".join(str(i) for i in items) + "]"


# ---------------------------------------------------------------------------------------------- client calls
def create_user_at(c: AdminClient, addr: str, info: Mapping[str, object]) -> None:
    c.call(addr, RequestCode.AUTH_CREATE_USER, {"username": info.get("username")}, _body(info))


def update_user_at(c: AdminClient, addr: str, info: Mapping[str, object]) -> None:
    c.call(addr, RequestCode.AUTH_UPDATE_USER, {"username": info.get("username")}, _body(info))


def get_user_at(c: AdminClient, addr: str, username: Optional[str]) -> Optional[UserInfo]:
    # the JSON decode boundary: the user, or no body for none
    return cast("Optional[UserInfo]", c.call_json(addr, RequestCode.AUTH_GET_USER, {"username": username}))


def list_users_at(c: AdminClient, addr: str, filter_text: Optional[str]) -> list[UserInfo]:
    # the JSON decode boundary: a list of users
    return cast("list[UserInfo]", c.call_json(addr, RequestCode.AUTH_LIST_USER, {"filter": filter_text}) or [])


def create_acl_at(c: AdminClient, addr: str, info: AclInfo) -> None:
    c.call(addr, RequestCode.AUTH_CREATE_ACL, {"subject": info.get("subject")}, _body(info))


def update_acl_at(c: AdminClient, addr: str, info: AclInfo) -> None:
    c.call(addr, RequestCode.AUTH_UPDATE_ACL, {"subject": info.get("subject")}, _body(info))


def get_acl_at(c: AdminClient, addr: str, subject: Optional[str]) -> Optional[AclInfo]:
    # the JSON decode boundary: the subject's ACL, or no body for none
    return cast("Optional[AclInfo]", c.call_json(addr, RequestCode.AUTH_GET_ACL, {"subject": subject}))


def list_acls_at(c: AdminClient, addr: str, subject_filter: Optional[str],
                 resource_filter: Optional[str]) -> list[AclInfo]:
    # the JSON decode boundary: a list of ACLs
    return cast("list[AclInfo]", c.call_json(addr, RequestCode.AUTH_LIST_ACL, {
        "subjectFilter": subject_filter, "resourceFilter": resource_filter}) or [])


def _acl_entry(resource: str, actions: Optional[list[str]], source_ips: Optional[list[str]],
               decision: Optional[str]) -> AclEntry:
    """One entry, its absent (None) parts left out."""
    entry: AclEntry = {"resource": resource}
    if actions is not None:
        entry["actions"] = actions
    if source_ips is not None:
        entry["sourceIps"] = source_ips
    if decision is not None:
        entry["decision"] = decision
    return entry


def acl_info(subject: Optional[str], resources: Optional[list[str]], actions: Optional[list[str]],
             source_ips: Optional[list[str]], decision: Optional[str]) -> AclInfo:
    """5.x ``AclInfo.of``: one policy (no type: Custom), one entry per resource with the same actions, source IPs
    and decision."""
    return {"subject": subject,
            "policies": [{"entries": [_acl_entry(r, actions, source_ips, decision) for r in resources or ()]}]}


# ---------------------------------------------------------------------------------------------- printing
def _print_users(users: list[UserInfo]) -> None:
    print(USER_FORMAT % ("#UserName", "#Password", "#UserType", "#UserStatus"))
    for u in users:
        print(USER_FORMAT % tuple("null" if u.get(k) is None else u.get(k)
                                  for k in ("username", "password", "userType", "userStatus")))


def _print_acls(acls: list[AclInfo]) -> None:
    print(ACL_FORMAT % ("#Subject", "#PolicyType", "#Resource", "#Actions", "#SourceIp", "#Decision"))
    for acl in acls:
        policies = acl.get("policies") or []
        if not policies:
            print(ACL_FORMAT % (acl.get("subject"), "", "", "", "", ""))
        for p in policies:
            for e in p.get("entries") or ():
                print(ACL_FORMAT % (acl.get("subject"), p.get("policyType"), e.get("resource"),
                                    _java_list(e.get("actions")), _java_list(e.get("sourceIps")), e.get("decision")))


# ---------------------------------------------------------------------------------------------- users
def _change_each(c: AdminClient, a: argparse.Namespace, done: str, change: Callable[[str], object]) -> None:
    """``change(addr)`` at every target broker (masters and slaves), printing "<done> to <addr> success." each."""
    for addr in _targets(c, a, masters_only=False):
        change(addr)
        print(f"{done} to {addr} success.")


def _copy(source: str, target: str, items: list[T], what: str, name: Callable[[T], Optional[str]],
          get: Callable[[str, Optional[str]], Optional[T]], create: Callable[[str, T], None],
          update: Callable[[str, T], None]) -> None:
    """copyUser / copyAcl: each item created at ``target``, or updated where ``target`` has it already."""
    for item in items:
        if get(target, name(item)) is None:
            create(target, item)
        else:
            update(target, item)
        print(f"copy {what} of {name(item)} from {source} to {target} success.")


def create_user(c: AdminClient, a: argparse.Namespace) -> None:
    info = {"username": _trim(a.username), "password": _trim(a.password), "userType": _trim(a.userType)}
    _change_each(c, a, "create user", lambda addr: create_user_at(c, addr, info))


def update_user(c: AdminClient, a: argparse.Namespace) -> None:
    info = {"username": _trim(a.username), "password": _trim(a.password), "userType": _trim(a.userType),
            "userStatus": _trim(a.userStatus)}
    _change_each(c, a, "update user", lambda addr: update_user_at(c, addr, info))


def delete_user(c: AdminClient, a: argparse.Namespace) -> None:
    _change_each(c, a, "delete user",
                 lambda addr: c.call(addr, RequestCode.AUTH_DELETE_USER, {"username": _trim(a.username)}))


def get_user(c: AdminClient, a: argparse.Namespace) -> None:
    for addr in _targets(c, a, masters_only=True):
        user = get_user_at(c, addr, _trim(a.username))
        if user:
            _print_users([user])
            if not a.brokerAddr:
                break


def list_user(c: AdminClient, a: argparse.Namespace) -> None:
    for addr in _targets(c, a, masters_only=True):
        users = list_users_at(c, addr, _trim(a.filter))
        if users:
            _print_users(users)
            if not a.brokerAddr:
                print(f"get user from {addr} success.")
                break


def copy_user(c: AdminClient, a: argparse.Namespace) -> None:
    source, target = a.fromBroker.strip(), a.toBroker.strip()
    names = _split(a.usernames)
    users = [u for u in (get_user_at(c, source, n) for n in names) if u] if names else \
        list_users_at(c, source, None)
    _copy(source, target, users, "user", lambda u: u.get("username"), lambda addr, n: get_user_at(c, addr, n),
          lambda addr, u: create_user_at(c, addr, u), lambda addr, u: update_user_at(c, addr, u))


# ---------------------------------------------------------------------------------------------- ACLs
def create_acl(c: AdminClient, a: argparse.Namespace) -> None:
    info = acl_info(_trim(a.subject), _split(a.resources), _split(a.actions), _split(a.sourceIp), _trim(a.decision))
    _change_each(c, a, "create acl", lambda addr: create_acl_at(c, addr, info))


def update_acl(c: AdminClient, a: argparse.Namespace) -> None:
    info = acl_info(_trim(a.subject), _split(a.resources), _split(a.actions), _split(a.sourceIp), _trim(a.decision))
    _change_each(c, a, "update acl", lambda addr: update_acl_at(c, addr, info))


def delete_acl(c: AdminClient, a: argparse.Namespace) -> None:
    _change_each(c, a, "delete acl", lambda addr: c.call(
        addr, RequestCode.AUTH_DELETE_ACL, {"subject": _trim(a.subject), "resource": _trim(a.resources)}))


def get_acl(c: AdminClient, a: argparse.Namespace) -> None:
    for addr in _targets(c, a, masters_only=True):
        acl = get_acl_at(c, addr, _trim(a.subject))
        if acl:
            _print_acls([acl])


def list_acl(c: AdminClient, a: argparse.Namespace) -> None:
    for addr in _targets(c, a, masters_only=True):
        acls = list_acls_at(c, addr, _trim(a.subject), _trim(a.resource))
        if acls:
            _print_acls(acls)


def copy_acl(c: AdminClient, a: argparse.Namespace) -> None:
    source, target = a.fromBroker.strip(), a.toBroker.strip()
    subjects = _split(a.subjects)
    acls = [x for x in (get_acl_at(c, source, s) for s in subjects) if x] if subjects else \
        list_acls_at(c, source, None, None)
    _copy(source, target, acls, "acl", lambda x: x.get("subject"), lambda addr, s: get_acl_at(c, addr, s),
          lambda addr, x: create_acl_at(c, addr, x), lambda addr, x: update_acl_at(c, addr, x))


def _trim(v: Optional[str]) -> Optional[str]:
    return None if v is None else v.strip()


_COPY_USER: SpecEntry = (copy_user, "Copy user to cluster.", [
    (("-f", "--fromBroker"), {"required": True}), (("-t", "--toBroker"), {"required": True}),
    (("-u", "--usernames"), {})])
_COPY_ACL: SpecEntry = (copy_acl, "Copy acl to cluster.", [
    (("-f", "--fromBroker"), {"required": True}), (("-t", "--toBroker"), {"required": True}),
    (("-s", "--subjects"), {})])

SPEC: SpecTable = {
    "createUser": (create_user, "Create user to cluster.", [
        (_C, {}), (_B, {}), (("-u", "--username"), {"required": True}), (("-p", "--password"), {"required": True}),
        (("-t", "--userType"), {})]),
    "updateUser": (update_user, "Update user to cluster.", [
        (_C, {}), (_B, {}), (("-u", "--username"), {"required": True}), (("-p", "--password"), {}),
        (("-t", "--userType"), {}), (("-s", "--userStatus"), {})]),
    "deleteUser": (delete_user, "Delete user from cluster.", [
        (_C, {}), (_B, {}), (("-u", "--username"), {"required": True})]),
    "getUser": (get_user, "Get user from cluster.", [(_B, {}), (_C, {}), (("-u", "--username"), {})]),
    "listUser": (list_user, "List user from cluster.", [(_B, {}), (_C, {}), (("-f", "--filter"), {})]),
    "createAcl": (create_acl, "Create acl to cluster.", [
        (_C, {}), (_B, {}), (("-s", "--subject"), {"required": True}), (("-r", "--resources"), {"required": True}),
        (("-a", "--actions"), {"required": True}), (("-i", "--sourceIp"), {}),
        (("-d", "--decision"), {"required": True})]),
    "updateAcl": (update_acl, "Update acl to cluster.", [
        (_C, {}), (_B, {}), (("-s", "--subject"), {"required": True}), (("-r", "--resources"), {"required": True}),
        (("-a", "--actions"), {"required": True}), (("-d", "--decision"), {"required": True}),
        (("-i", "--sourceIp"), {})]),
    "deleteAcl": (delete_acl, "Delete acl from cluster.", [
        (_C, {}), (_B, {}), (("-s", "--subject"), {"required": True}), (("-r", "--resources"), {})]),
    "getAcl": (get_acl, "Get acl from cluster.", [(_B, {}), (_C, {}), (("-s", "--subject"), {})]),
    "listAcl": (list_acl, "List acl from cluster.", [
        (_B, {}), (_C, {}), (("-s", "--subject"), {}), (("-r", "--resource"), {})]),
    "copyUser": _COPY_USER,
    "copyUsers": _COPY_USER,
    "copyAcl": _COPY_ACL,
    "copyAcls": _COPY_ACL,
}
