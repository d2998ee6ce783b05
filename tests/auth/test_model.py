"""Access control 2.0's model: resource keys, matching and ranking, subjects, the AclInfo conversion, source IPs."""
from __future__ import annotations

import pytest

from rmqd.auth.model import (Action, Decision, PolicyType, Resource, ResourcePattern, ResourceType, User, UserStatus,
                             UserType, acl_from_info, acl_from_store, acl_to_store, subject_of)
from rmqd.auth.source_ip import ip_in_range, is_valid_ip_or_cidr


@pytest.mark.parametrize("key,parsed,back", [
    ("Topic:orders", (ResourceType.TOPIC, "orders", ResourcePattern.LITERAL), "Topic:orders"),
    ("topic:orders", (ResourceType.TOPIC, "orders", ResourcePattern.LITERAL), "Topic:orders"),
    ("Group:g*", (ResourceType.GROUP, "g", ResourcePattern.PREFIXED), "Group:g*"),
    ("Group:a*b*", (ResourceType.GROUP, "a", ResourcePattern.PREFIXED), "Group:a*"),     # before the first *
    ("Topic:*", (ResourceType.TOPIC, None, ResourcePattern.ANY), "Topic:*"),
    ("*", (ResourceType.ANY, None, ResourcePattern.ANY), "*"),
    ("Cluster:DefaultCluster", (ResourceType.CLUSTER, "DefaultCluster", ResourcePattern.LITERAL),
     "Cluster:DefaultCluster"),
    ("Topic", (ResourceType.TOPIC, "", ResourcePattern.LITERAL), "Topic:"),
])
def test_resource_keys_parse_and_print_as_5x(key, parsed, back) -> None:
    r = Resource.parse(key)
    assert (r.type, r.name, r.pattern) == parsed and r.key == back


@pytest.mark.parametrize("key", [None, "", "  ", "Queue:x", "Bogus"])
def test_unknown_or_blank_resources_parse_to_none(key) -> None:
    assert Resource.parse(key) is None


def test_matching_and_the_specificity_order() -> None:
    t = Resource.topic("orders-eu")
    assert Resource.parse("Topic:orders-eu").matches(t) and not Resource.parse("Topic:orders").matches(t)
    assert Resource.parse("Topic:orders*").matches(t) and Resource.parse("Topic:*").matches(t)
    assert Resource.parse("*").matches(t) and not Resource.parse("Group:*").matches(t)
    assert not Resource.parse("Topic:x").matches(Resource.topic(None))
    ranked = sorted(["*", "Topic:*", "Topic:o*", "Topic:orders*", "Topic:orders-eu"],
                    key=lambda k: Resource.parse(k).specificity())
    assert ranked == ["Topic:orders-eu", "Topic:orders*", "Topic:o*", "Topic:*", "*"]


def test_a_retry_topic_names_its_group() -> None:
    assert Resource.group("%RETRY%g1") == Resource.group("g1")
    assert Resource.group("%DLQ%g1").name == "%DLQ%g1"          # 5.x strips only when it is a retry topic


def test_subjects() -> None:
    assert subject_of("User:alice").subject_key == "User:alice"
    assert subject_of("user:alice").subject_key == "User:alice"
    assert subject_of("Role:x") is None and subject_of("alice") is None and subject_of(None) is None


def test_user_info_round_trip_and_unknown_names() -> None:
    u = User.from_info({"username": "a", "password": "p", "userType": "super", "userStatus": "DISABLE"})
    assert (u.user_type, u.user_status) == (UserType.SUPER, UserStatus.DISABLE)
    assert u.to_info() == {"password": "p", "userStatus": "disable", "userType": "Super", "username": "a"}
    assert User.from_info({"username": "a", "userType": "Boss"}).user_type is None


def test_acl_info_conversion_drops_what_5x_drops() -> None:
    acl = acl_from_info({"subject": "User:a", "policies": [
        {"entries": []},                                                   # no entries: the policy is dropped
        {"policyType": "default", "entries": [
            {"resource": "Topic:t", "actions": ["pub", "Nonsense", "Sub"], "sourceIps": ["10.0.0.0/8"],
             "decision": "allow"},
            {"resource": "Bogus:x", "actions": ["Get"], "decision": "maybe"}]}]})
    (policy,) = acl.policies
    assert policy.policy_type is PolicyType.DEFAULT
    first, second = policy.entries
    assert first.actions == [Action.PUB, Action.SUB] and first.decision is Decision.ALLOW
    assert second.resource is None and second.decision is None            # the manager refuses these
    assert acl.to_info() == {"policies": [{"entries": [
        {"actions": ["Pub", "Sub"], "decision": "Allow", "resource": "Topic:t", "sourceIps": ["10.0.0.0/8"]},
        {"actions": ["Get"]}], "policyType": "Default"}], "subject": "User:a"}
    with pytest.raises(TypeError):
        acl_from_info({"policies": [{"entries": [{"resource": "Topic:t", "decision": "Allow"}]}]})


def test_storage_form_keeps_every_resource_field() -> None:
    acl = acl_from_info({"subject": "User:a", "policies": [{"entries": [
        {"resource": "Any:x", "actions": ["All"], "decision": "Deny"}]}]})
    again = acl_from_store(acl_to_store(acl))
    assert again.policies[0].entries[0].resource == acl.policies[0].entries[0].resource


@pytest.mark.parametrize("text,ok", [
    ("10.0.0.1", True), ("10.0.0.0/24", True), ("::1", True), ("fd00::/8", True), ("10.0.0.01", False),
    ("10.0.0.0/33", False), ("10.0.0.0/", False), ("host/8", False), ("", False), ("1.2.3", False)])
def test_source_ip_validation(text, ok) -> None:
    assert is_valid_ip_or_cidr(text) is ok


def test_source_ip_ranges() -> None:
    assert ip_in_range("10.1.2.3", "10.0.0.0/8") and not ip_in_range("11.1.2.3", "10.0.0.0/8")
    assert ip_in_range("127.0.0.1", "127.0.0.1") and not ip_in_range("127.0.0.2", "127.0.0.1")
    assert not ip_in_range("::1", "127.0.0.0/8")
