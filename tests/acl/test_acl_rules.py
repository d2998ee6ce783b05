"""Plain ACL rules: signatures (hand-computed vectors), address patterns, permissions, the check order."""
from __future__ import annotations

import logging

import pytest

from rmqd.acl import permission as P
from rmqd.acl.address import address_matcher, expand_ipv6
from rmqd.acl.permission import AclError
from rmqd.acl.plain_acl import PlainAclManager
from rmqd.acl.signer import request_content, sign_request, signature
from rmqd.acl.validator import AclValidator, remark, resources_of

# Expected signatures computed outside Python: printf CONTENT | openssl dgst -sha1 -hmac KEY -binary | base64
VECTORS = [
    (b"akGThi", "sk1234567", "V7rqChe5aEGdlNmyDPsFCN7iCtI="),
    (b"appUser01", "appSecret01", "EufyM9Mg4i+oljPN5rD+Ye9rQ4M="),
]


@pytest.mark.parametrize("content,key,expected", VECTORS)
def test_signature_vectors(content, key, expected):
    assert signature(content, key) == expected


def test_content_is_values_in_key_order_then_body():
    ext = {"b": "T", "a": "G", "AccessKey": "ak", "Signature": "ignored"}
    assert request_content(ext, b"hi") == b"akGThi"           # 'AccessKey' < 'a' < 'b' (byte order)
    signed = sign_request({"b": "T", "a": "G"}, b"hi", "ak", "sk1234567")
    assert signed["Signature"] == "V7rqChe5aEGdlNmyDPsFCN7iCtI="


@pytest.mark.parametrize("pattern,yes,no", [
    ("*", ["1.2.3.4", "::1"], []),
    ("", [], ["127.0.0.1"]),
    ("192.168.0.*", ["192.168.0.1", "192.168.0.255"], ["192.168.1.1"]),
    ("192.168.*.*", ["192.168.7.9"], ["192.169.0.1"]),
    ("192.168.1-10.*", ["192.168.1.3", "192.168.10.0"], ["192.168.11.1", "192.168.0.9"]),
    ("10.0.0.1-10", ["10.0.0.10"], ["10.0.0.11"]),
    ("10.0.0.{1,2}", ["10.0.0.1", "10.0.0.2"], ["10.0.0.3"]),
    ("1.1.1.1,2.2.2.2", ["2.2.2.2"], ["3.3.3.3"]),
    ("127.0.0.1", ["127.0.0.1"], ["127.0.0.2"]),
    ("::1", ["0:0:0:0:0:0:0:1"], ["::2"]),
])
def test_address_patterns(pattern, yes, no):
    m = address_matcher(pattern)
    assert all(m(a) for a in yes) and not any(m(a) for a in no)


@pytest.mark.parametrize("bad", ["300.1.1.1", "1.2.3", "a.b.c.d", "1.2.3.-1", "192.168.*"])   # Java: 4 parts
def test_bad_address_patterns_are_refused(bad):
    with pytest.raises(AclError):
        address_matcher(bad)


def test_expand_ipv6():
    assert expand_ipv6("::1") == "0000:0000:0000:0000:0000:0000:0000:0001"
    assert expand_ipv6("fe80::1:2") == "FE80:0000:0000:0000:0000:0000:0001:0002"


def test_permission_bits():
    assert P.check_permission(P.PUB, P.PUB | P.SUB) and not P.check_permission(P.SUB, P.PUB)
    assert not P.check_permission(P.PUB, P.DENY | P.PUB)                   # DENY wins
    assert P.check_permission(P.ANY, P.SUB) and not P.check_permission(P.ANY, P.DENY)
    assert [P.parse_perm(s) for s in ("PUB", "SUB", "PUB|SUB", "SUB|PUB", "DENY", "junk", None)] == \
        [P.PUB, P.SUB, P.PUB | P.SUB, P.PUB | P.SUB, P.DENY, P.DENY, P.DENY]
    assert P.resource_perms(["g1=SUB"], topics=False) == {"%RETRY%g1": P.SUB}
    with pytest.raises(AclError):
        P.check_resource_perms(["t=READ"])


def test_resources_of_requests():
    assert resources_of(310, {"a": "G", "b": "T"}, None) == {"T": P.PUB}
    assert resources_of(310, {"a": "G", "b": "%RETRY%G"}, None) == {"%RETRY%G": P.SUB}   # send-back by retry topic
    assert resources_of(11, {"topic": "T", "consumerGroup": "G"}, None) == {"T": P.SUB, "%RETRY%G": P.SUB}
    hb = b'{"consumerDataSet":[{"groupName":"G","subscriptionDataSet":[{"topic":"T1"},{"topic":"T2"}]}]}'
    assert resources_of(34, {}, hb) == {"%RETRY%G": P.SUB, "T1": P.SUB, "T2": P.SUB}
    assert resources_of(320, {"b": "T"}, None) == {}                          # batches: account check only
    with pytest.raises(AclError):
        resources_of(34, {}, b"{bad")


YAML = """\
globalWhiteRemoteAddresses: ["10.0.0.*"]
accounts:
  - {accessKey: appUser01, secretKey: appSecret01, admin: false, defaultTopicPerm: DENY,
     defaultGroupPerm: SUB, topicPerms: ["t1=PUB", "t2=SUB"], groupPerms: ["g1=DENY"]}
  - {accessKey: adminUser01, secretKey: adminSecret01, admin: true}
  - {accessKey: whiteUser01, secretKey: whiteSecret01, whiteRemoteAddress: "192.168.1.*"}
"""


@pytest.fixture
def manager(tmp_path):
    (tmp_path / "conf").mkdir()
    (tmp_path / "conf" / "plain_acl.yml").write_text(YAML)
    return PlainAclManager(str(tmp_path))


def _check(manager, host, code, ext, body=None, ak="appUser01", sk="appSecret01"):
    if ak is not None:
        ext = sign_request(dict(ext), body, ak, sk)
    AclValidator(manager).check(host, code, ext, body)


def test_check_order_and_texts(manager):
    _check(manager, "10.0.0.5", 310, {"a": "G", "b": "t2"}, ak=None)        # global white list: no checks
    _check(manager, "192.168.1.9", 310, {"a": "G", "b": "t2"}, ak="whiteUser01", sk="wrong")  # account white
    cases = [
        (dict(ak=None), 310, {"b": "t1"}, "No accessKey is configured"),
        (dict(ak="nobody001", sk="x" * 8), 310, {"b": "t1"}, "No acl config for nobody001"),
        (dict(sk="wrongSecret"), 310, {"b": "t1"}, "Check signature failed for accessKey=appUser01"),
        ({}, 310, {"a": "G", "b": "t2"}, "No default permission for topic:t2"),
        ({}, 310, {"a": "G", "b": "other"}, "No default permission for topic:other"),
        ({}, 11, {"topic": "t2", "consumerGroup": "g1"}, "No default permission for group:g1"),
        ({}, 17, {"topic": "t1"}, "Need admin permission for request code=17, but accessKey=appUser01 is not"),
    ]
    for kw, code, ext, text in cases:
        with pytest.raises(AclError) as info:
            _check(manager, "127.0.0.1", code, ext, **kw)
        assert info.value.message == text
        assert remark(info.value).startswith(f"org.apache.rocketmq.acl.common.AclException: {text}, org.apache.")
    _check(manager, "127.0.0.1", 310, {"a": "G", "b": "t1"})
    _check(manager, "127.0.0.1", 11, {"topic": "t2", "consumerGroup": "gOther"})      # default group SUB
    _check(manager, "127.0.0.1", 17, {"topic": "x"}, ak="adminUser01", sk="adminSecret01")
    _check(manager, "127.0.0.1", 310, {"a": "G", "b": "RMQ_SYS_TRACE_TOPIC"})          # trace PUB always


@pytest.mark.parametrize("code,ext", [
    (17, {"topic": "t1"}),                                  # UPDATE_AND_CREATE_TOPIC
    (25, {}),                                               # UPDATE_BROKER_CONFIG
    (215, {"topic": "t1"}),                                 # DELETE_TOPIC_IN_BROKER
    (200, {}),                                              # UPDATE_AND_CREATE_SUBSCRIPTIONGROUP
    (207, {"groupName": "g1", "removeOffset": "true"}),    # DELETE_SUBSCRIPTIONGROUP
])
def test_admin_codes_need_an_admin_account(manager, code, ext):
    with pytest.raises(AclError) as info:
        _check(manager, "127.0.0.1", code, ext, b"{}" if code == 200 else None)
    assert info.value.message == f"Need admin permission for request code={code}, but accessKey=appUser01 is not"
    assert remark(info.value).endswith("PlainPermissionManager.checkPerm(PlainPermissionManager.java:581)")
    _check(manager, "127.0.0.1", code, ext, b"{}" if code == 200 else None, ak="adminUser01", sk="adminSecret01")


def test_unique_key_query_signed_either_way(manager):
    ext = {"topic": "t2", "key": "k", "_UNIQUE_KEY_QUERY": "true"}
    signed_with = sign_request(dict(ext), None, "appUser01", "appSecret01")            # a later client
    AclValidator(manager).check("127.0.0.1", 12, signed_with, None)
    without = dict(ext, AccessKey="appUser01")
    without["Signature"] = signature(request_content(without, None, ("Signature", "_UNIQUE_KEY_QUERY")),
                                     "appSecret01")                                    # 4.9.8's rule
    AclValidator(manager).check("127.0.0.1", 12, without, None)


def test_updates_rewrite_the_file_and_apply_at_once(manager, tmp_path, caplog):
    path = tmp_path / "conf" / "plain_acl.yml"
    with caplog.at_level(logging.DEBUG):
        manager.update_account({"accessKey": "newUser001", "secretKey": "newSecret001", "topicPerms": ["t9=PUB"]})
    assert "newUser001" in path.read_text() and "dataVersion" in path.read_text()
    _check(manager, "127.0.0.1", 310, {"a": "G", "b": "t9"}, ak="newUser001", sk="newSecret001")
    assert "newSecret001" not in caplog.text and "appSecret01" not in caplog.text   # secrets never logged
    with pytest.raises(AclError):
        manager.update_account({"accessKey": "short", "secretKey": "newSecret001"})
    assert manager.delete_account("newUser001") and not manager.delete_account("newUser001")
    with pytest.raises(AclError):
        _check(manager, "127.0.0.1", 310, {"b": "t9"}, ak="newUser001", sk="newSecret001")
    assert manager.update_global_white(["127.0.0.1"])
    _check(manager, "127.0.0.1", 310, {"b": "anything"}, ak=None)
    assert not manager.update_global_white(["1.1.1.1"], "/etc/passwd")                 # only ACL files
    version, all_versions = manager.version_info()
    assert '"counter":3' in version and str(path) in all_versions


def test_hand_edits_reload_and_a_broken_file_keeps_the_old_rules(manager, tmp_path):
    path = tmp_path / "conf" / "plain_acl.yml"
    path.write_text(YAML.replace('"t2=SUB"', '"t2=PUB"'))
    assert manager.reload()
    _check(manager, "127.0.0.1", 310, {"a": "G", "b": "t2"})
    path.write_text("accounts: [ {accessKey: x")                                        # broken YAML
    assert not manager.reload()
    _check(manager, "127.0.0.1", 310, {"a": "G", "b": "t2"})                            # old rules hold
    (tmp_path / "conf" / "acl").mkdir()
    (tmp_path / "conf" / "acl" / "more.yml").write_text(
        "accounts:\n  - {accessKey: extraUser01, secretKey: extraSecret01, admin: true}\n")
    path.write_text(YAML)
    assert manager.reload()
    _check(manager, "127.0.0.1", 17, {"topic": "x"}, ak="extraUser01", sk="extraSecret01")
