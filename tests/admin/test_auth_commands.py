"""``rmqd admin``'s access control 2.0 write and copy sub-commands against a recording stand-in for the admin client:
which request goes to which broker, and what they print (5.5 mqadmin's lines)."""
from __future__ import annotations

import argparse
import json

from rmqd.admin import auth_commands
from rmqd.remoting.codes import RequestCode


class _Reply:
    body = None


class RecordingClient:
    """Answers AUTH_GET_* / AUTH_LIST_* from ``known`` (broker address -> name -> entry); records every call."""

    def __init__(self, known: dict[str, dict[str, dict]]) -> None:
        self.known = known
        self.calls: list[tuple[str, int, dict, object]] = []

    def call(self, addr, code, ext=None, body=None):
        self.calls.append((addr, code, dict(ext or {}), json.loads(body) if body else None))
        return _Reply()

    def call_json(self, addr, code, ext=None, body=None):
        entries = self.known.get(addr, {})
        if code in (RequestCode.AUTH_GET_USER, RequestCode.AUTH_GET_ACL):
            return entries.get((ext or {}).get("username") or (ext or {}).get("subject"))
        return list(entries.values())


def _args(**kw) -> argparse.Namespace:
    return argparse.Namespace(**{"brokerAddr": None, "clusterName": None, **kw})


def test_create_and_delete_user_go_to_the_named_broker(capsys) -> None:
    c = RecordingClient({})
    auth_commands.create_user(c, _args(brokerAddr=" b1:10911 ", username=" u1 ", password="p", userType=None))
    auth_commands.delete_acl(c, _args(brokerAddr="b1:10911", subject="User:u1", resources="Topic:t"))
    assert c.calls == [
        ("b1:10911", RequestCode.AUTH_CREATE_USER, {"username": "u1"}, {"username": "u1", "password": "p"}),
        ("b1:10911", RequestCode.AUTH_DELETE_ACL, {"subject": "User:u1", "resource": "Topic:t"}, None)]
    assert capsys.readouterr().out.splitlines() == ["create user to b1:10911 success.",
                                                   "delete acl to b1:10911 success."]


def test_copy_user_creates_the_missing_and_updates_the_present(capsys) -> None:
    c = RecordingClient({"src": {"a": {"username": "a", "password": "x"}, "b": {"username": "b", "password": "y"}},
                         "dst": {"b": {"username": "b", "password": "old"}}})
    auth_commands.copy_user(c, _args(fromBroker="src", toBroker="dst", usernames=None))
    assert [(addr, code, ext) for addr, code, ext, _ in c.calls] == [
        ("dst", RequestCode.AUTH_CREATE_USER, {"username": "a"}), ("dst", RequestCode.AUTH_UPDATE_USER, {"username": "b"})]
    assert capsys.readouterr().out.splitlines() == ["copy user of a from src to dst success.",
                                                   "copy user of b from src to dst success."]


def test_copy_acl_of_named_subjects(capsys) -> None:
    acl = {"subject": "User:a", "policies": [{"entries": [{"resource": "Topic:t", "actions": ["Pub"]}]}]}
    c = RecordingClient({"src": {"User:a": acl}, "dst": {}})
    auth_commands.copy_acl(c, _args(fromBroker="src", toBroker="dst", subjects="User:a,User:none"))
    assert c.calls == [("dst", RequestCode.AUTH_CREATE_ACL, {"subject": "User:a"}, acl)]
    assert capsys.readouterr().out.splitlines() == ["copy acl of User:a from src to dst success."]
