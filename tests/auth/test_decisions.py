"""Authorization decisions (5.x's matching, ranking, Custom before Default, source IPs) and what requests touch."""
from __future__ import annotations

from types import MappingProxyType

import pytest

from rmqd.auth.authorization import AUTHORIZATION_FAILED, AuthContext, Authorizer
from rmqd.auth.errors import AuthorizationError
from rmqd.auth.model import Action, Resource, User, UserType, acl_from_info
from rmqd.auth.remoting_contexts import ANNOTATED, contexts_of
from rmqd.auth.store import AuthState

PUB, SUB = (Action.PUB,), (Action.SUB,)


def state(*entries: dict, policy_type: str = "Custom", more: tuple = ()) -> AuthState:
    policies = [{"policyType": policy_type, "entries": list(entries)}, *more]
    acl = acl_from_info({"subject": "User:u", "policies": policies})
    users = {"u": User("u", "pw", UserType.NORMAL), "root": User("root", "pw", UserType.SUPER)}
    return AuthState(MappingProxyType(users), MappingProxyType({"User:u": acl}))


def e(resource: str, actions: list, decision: str = "Allow", ips: list | None = None) -> dict:
    d = {"resource": resource, "actions": actions, "decision": decision}
    if ips:
        d["sourceIps"] = ips
    return d


def check(st: AuthState, resource: str, actions: tuple, ip: str = "127.0.0.1", user: str | None = "u") -> str:
    try:
        Authorizer().check(st, user, [AuthContext(Resource.parse(resource), actions)], ip, "310")
        return "allow"
    except AuthorizationError as exc:
        return exc.message


def test_no_match_and_deny_messages_are_5x_words() -> None:
    st = state(e("Topic:t1", ["Pub"]), e("Topic:t2", ["Pub"], "Deny"))
    assert check(st, "Topic:t1", PUB) == "allow"
    assert check(st, "Topic:t1", SUB) == \
        "User:u has no permission to access Topic:t1 from 127.0.0.1, no matched policies."
    assert check(st, "Topic:t2", PUB) == \
        "User:u has no permission to access Topic:t2 from 127.0.0.1, the decision is deny."


def test_the_most_specific_entry_decides() -> None:
    st = state(e("Topic:*", ["All"], "Deny"), e("Topic:ord*", ["Pub"]), e("Topic:orders", ["Pub"], "Deny"),
               e("*", ["Pub"]))
    assert check(st, "Topic:orders", PUB).endswith("the decision is deny.")     # literal beats prefixed
    assert check(st, "Topic:ordinal", PUB) == "allow"                          # prefixed beats Topic:*
    assert check(st, "Topic:other", PUB).endswith("the decision is deny.")     # Topic:* beats *
    assert check(st, "Group:g", PUB) == "allow"                                # only * matches


def test_a_deny_wins_among_equally_specific_entries() -> None:
    """Two entries of one resource (one createAcl body may carry both): 5.5's comparator ranks the Deny first."""
    st = state(e("Topic:t", ["Pub"], "Allow"), e("Topic:t", ["Pub"], "Deny"))
    assert check(st, "Topic:t", PUB).endswith("the decision is deny.")
    st = state(e("Topic:t", ["Pub"], "Allow"), e("Topic:t", ["All"], "Allow"))
    assert check(st, "Topic:t", PUB) == "allow"


def test_default_policy_only_when_no_custom_entry_matches() -> None:
    st = state(e("Topic:t", ["Pub"], "Deny"),
               more=({"policyType": "Default", "entries": [e("Topic:*", ["All"])]},))
    assert check(st, "Topic:t", PUB).endswith("the decision is deny.")
    assert check(st, "Topic:other", SUB) == "allow"


def test_source_ips_and_actions() -> None:
    st = state(e("Topic:t", ["Pub", "Sub"], ips=["10.0.0.0/8", "127.0.0.1"]))
    assert check(st, "Topic:t", SUB, "10.9.9.9") == "allow" and check(st, "Topic:t", SUB) == "allow"
    assert check(st, "Topic:t", SUB, "192.168.0.1").endswith("from 192.168.0.1, no matched policies.")
    assert check(st, "Topic:t", (Action.SUB, Action.GET)) == "allow"             # one of the actions will do
    assert check(st, "Topic:t", (Action.ANY,)) == "allow"


def test_users() -> None:
    st = state()
    assert check(st, "Topic:t", PUB, user="root") == "allow"
    assert check(st, "Topic:t", PUB, user="ghost") == "User:ghost not found."
    assert check(st, "Topic:t", PUB, user=None) == AUTHORIZATION_FAILED
    assert check(AuthState(st.users, MappingProxyType({})), "Topic:t", PUB).endswith("no matched policies.")


def keys(code: int, ext: dict, body: bytes | None = None) -> list:
    return [(c.resource.key, tuple(a.value for a in c.actions)) for c in contexts_of(code, ext, body, "C1")]


def test_request_contexts() -> None:
    assert keys(310, {"a": "pg", "b": "t"}) == [("Topic:t", ("Pub",))]
    assert keys(310, {"a": "g", "b": "%RETRY%g"}) == [("Group:g", ("Sub",))]
    assert keys(11, {"consumerGroup": "g", "topic": "%RETRY%g"}) == [("Group:g", ("Sub",))]
    assert keys(15, {"consumerGroup": "g", "topic": "t"}) == [("Topic:t", ("Sub", "Update")),
                                                             ("Group:g", ("Sub", "Update"))]
    assert keys(3001, {"username": "x"}) == [("Cluster:C1", ("Update",))]
    assert keys(208, {"consumerGroup": "g", "topicList": "a;;b"}) == [
        ("Group:g", ("Get",)), ("Topic:a", ("Get",)), ("Topic:b", ("Get",))]
    assert keys(25, {"AccessKey": "u"}) == []                   # no annotation in 5.5: nothing to decide
    assert keys(17, {}) == []                                   # no ext fields: nothing (5.x's MapUtils.isEmpty)
    assert keys(41, {"x": "y"}, b'{"consumerGroup":"g","mqSet":[{"topic":"t"},{"topic":"%RETRY%g"}]}') == [
        ("Group:g", ("Sub",)), ("Topic:t", ("Sub",))]
    with pytest.raises(AuthorizationError, match="parse authorization context error."):
        contexts_of(34, {"x": "y"}, b"not json", "C1")
    assert 3010 in ANNOTATED and len(ANNOTATED) == 97
