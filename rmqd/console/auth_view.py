"""The console's access control 2.0 pages (``/access``): users and ACLs seen and edited through the admin codes
3001-3010, as 5.5's mqadmin does with ``-c``: reads from the first master that answers, changes to every broker
(masters and slaves) of every cluster. Passwords are never shown (only whether a user has one).

The console signs these requests with its view's credentials (an in-process console: its broker's
``innerClientAuthenticationCredentials``; ``rmqd console -n``: ``$ROCKETMQ_HOME/conf/tools.yml``); a refusal is
the broker's, shown as such.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Optional, TypeVar

from rmqd.admin import auth_commands as A
from rmqd.admin.client import AdminClient
from rmqd.console.view import ViewError
from rmqd.console.view_base import JsonObject
from rmqd.remoting.codes import RequestCode

if TYPE_CHECKING:
    from rmqd.console.remote_cluster import RemoteCluster

USER_TYPES = ("Normal", "Super")
USER_STATUSES = ("enable", "disable")


def _clusters(admin: AdminClient) -> list[str]:
    return sorted((admin.cluster_info().get("clusterAddrTable") or {}).keys())


def _masters(admin: AdminClient) -> list[str]:
    return [a for c in _clusters(admin) for a in A.cluster_addrs(admin, c, masters_only=True)]


def _everyone(admin: AdminClient) -> list[str]:
    return [a for c in _clusters(admin) for a in A.cluster_addrs(admin, c, masters_only=False)]


T = TypeVar("T")


def _first_answer(view: "RemoteCluster", read: Callable[[AdminClient, str], T]) -> T:
    def run(admin: AdminClient) -> T:
        masters = _masters(admin)
        if not masters:
            raise ViewError("no broker is registered with the name server", 503)
        return read(admin, masters[0])
    return view.call(run)


def users(view: "RemoteCluster", filter_text: str = "") -> JsonObject:
    listed = _first_answer(view, lambda a, addr: A.list_users_at(a, addr, filter_text or None))
    return {"users": [{"username": u.get("username"), "userType": u.get("userType"),
                       "userStatus": u.get("userStatus"), "hasPassword": bool(u.get("password"))}
                      for u in listed]}


def acls(view: "RemoteCluster", subject: str = "", resource: str = "") -> JsonObject:
    listed = _first_answer(view, lambda a, addr: A.list_acls_at(a, addr, subject or None, resource or None))
    rows = []
    for acl in listed:
        for p in acl.get("policies") or ():
            for e in p.get("entries") or ():
                rows.append({"subject": acl.get("subject"), "policyType": p.get("policyType"),
                             "resource": e.get("resource"), "actions": e.get("actions") or [],
                             "sourceIps": e.get("sourceIps") or [], "decision": e.get("decision")})
    return {"entries": rows}


def _each(view: "RemoteCluster", change: Callable[[AdminClient, str], object]) -> JsonObject:
    def run(admin: AdminClient) -> JsonObject:
        addrs = _everyone(admin)
        if not addrs:
            raise ViewError("no broker is registered with the name server", 503)
        for addr in addrs:
            change(admin, addr)
        return {"brokers": addrs}
    return view.call(run)


def _text(body: JsonObject, key: str) -> Optional[str]:
    v = body.get(key)
    return None if v is None or str(v).strip() == "" else str(v).strip()


def _list(body: JsonObject, key: str) -> Optional[list[str]]:
    v = body.get(key)
    if v is None:
        return None
    items = v if isinstance(v, list) else str(v).split(",")
    return [str(i).strip() for i in items if str(i).strip()] or None


def save_user(view: "RemoteCluster", body: JsonObject) -> JsonObject:
    """Create (``create: true``) or update a user; only the fields given change on update."""
    name = _text(body, "username")
    if not name:
        raise ViewError("username is empty")
    info = {"username": name, "password": _text(body, "password"), "userType": _text(body, "userType"),
            "userStatus": _text(body, "userStatus")}
    if info["userType"] is not None and info["userType"] not in USER_TYPES:
        raise ViewError(f"userType must be one of {', '.join(USER_TYPES)}")
    if info["userStatus"] is not None and info["userStatus"] not in USER_STATUSES:
        raise ViewError(f"userStatus must be one of {', '.join(USER_STATUSES)}")
    if body.get("create"):
        if not info["password"]:
            raise ViewError("a new user needs a password")
        return _each(view, lambda a, addr: A.create_user_at(a, addr, info))
    return _each(view, lambda a, addr: A.update_user_at(a, addr, info))


def delete_user(view: "RemoteCluster", name: str) -> JsonObject:
    return _each(view, lambda a, addr: a.call(addr, RequestCode.AUTH_DELETE_USER, {"username": name}))


def save_acl(view: "RemoteCluster", body: JsonObject) -> JsonObject:
    """One policy (Custom unless ``policyType`` says Default) with an entry per resource, merged into the
    subject's ACL (an entry of the same resource is replaced)."""
    subject = _text(body, "subject")
    resources, actions = _list(body, "resources"), _list(body, "actions")
    if not subject or not resources or not actions or not _text(body, "decision"):
        raise ViewError("subject, resources, actions and decision are needed")
    info = A.acl_info(subject, resources, actions, _list(body, "sourceIps"), _text(body, "decision"))
    if _text(body, "policyType"):
        info["policies"][0]["policyType"] = _text(body, "policyType")
    return _each(view, lambda a, addr: A.create_acl_at(a, addr, info))


def delete_acl(view: "RemoteCluster", body: JsonObject) -> JsonObject:
    """One entry (``resource``, of ``policyType``) or, without a resource, the subject's whole ACL."""
    subject = _text(body, "subject")
    if not subject:
        raise ViewError("subject is empty")
    ext = {"subject": subject, "resource": _text(body, "resource"), "policyType": _text(body, "policyType")}
    return _each(view, lambda a, addr: a.call(addr, RequestCode.AUTH_DELETE_ACL, ext))
