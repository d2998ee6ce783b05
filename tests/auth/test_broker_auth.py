"""Access control 2.0 in a running broker: the admin codes 3001-3010 (answers as the 5.5.0 broker gives them, read off
it), authentication and authorization of remoting requests, the send lane's raw path, bad input."""
from __future__ import annotations

import json
import os
import time
from typing import Iterator, Optional

import pytest

from rmqd.acl.signer import sign_request
from rmqd.remoting.client import BlockingClient
from rmqd.remoting.command import ROCKETMQ, encode_frame_bytes, new_request
from rmqd.testing import EmbeddedServer

SU = ("rocketmq", "12345678")
AUTH = {"authenticationEnabled": "true", "authorizationEnabled": "true",
        "initAuthenticationUser": '{"username":"rocketmq","password":"12345678"}',
        "innerClientAuthenticationCredentials": '{"accessKey":"inner01","secretKey":"innerSecret"}'}
OK = "not set any response code"


@pytest.fixture(scope="module")
def server() -> Iterator[EmbeddedServer]:
    with EmbeddedServer(broker_properties=AUTH) as s:
        yield s


def call(server: EmbeddedServer, code: int, ext: Optional[dict] = None, body=None, cred=SU, serialize=None):
    ext = dict(ext or {})
    if isinstance(body, (dict, list)):
        body = json.dumps(body).encode()
    if cred:
        sign_request(ext, body, *cred)
    with BlockingClient(server.broker_addr) as c:
        req = new_request(code, ext, body)
        if serialize is not None:
            req.serialize_type = serialize
        r = c.invoke(req, 10)
    return r.code, r.remark, (bytes(r.body).decode() if r.body is not None else None)


def send(server, topic: str, cred, group: str = "PG", serialize=None):
    ext = {"a": group, "b": topic, "c": "TBW102", "d": "4", "e": "0", "f": "0", "g": str(int(time.time() * 1000)),
           "h": "0", "i": "WAIT\x01true", "j": "0", "k": "false", "m": "false"}
    return call(server, 310, ext, b"hello", cred, serialize)[:2]


def topic_ext(topic: str) -> dict:
    return {"topic": topic, "defaultTopic": "TBW102", "readQueueNums": "4", "writeQueueNums": "4", "perm": "6",
            "topicFilterType": "SINGLE_TAG", "topicSysFlag": "0", "order": "false"}


def stored(server) -> str:
    with open(os.path.join(server.store_dir, "config", "auth.json"), "rb") as f:
        return f.read().decode()


def test_start_up_users_are_super(server) -> None:
    code, remark, body = call(server, 3005)
    users = {u["username"]: u for u in json.loads(body)}
    assert (code, remark) == (0, OK)
    assert users["rocketmq"]["userType"] == users["inner01"]["userType"] == "Super"


def test_authentication_refusals_are_5x_words(server) -> None:
    assert call(server, 17, topic_ext("authT"), cred=None)[:2] == (16, "username cannot be null.")
    assert call(server, 17, topic_ext("authT"), cred=("ghost", "x"))[:2] == (16, "User:ghost is not found.")
    assert call(server, 17, topic_ext("authT"), cred=("rocketmq", "wrong"))[:2] == (16, "check signature failed.")
    assert call(server, 17, topic_ext("authT"))[0] == 0


def test_users_and_acls_decide_sends(server) -> None:
    assert call(server, 17, topic_ext("authPub"))[0] == 0
    assert call(server, 3001, {"username": "alice"}, {"password": "alicePw1"})[:2] == (0, OK)
    alice = ("alice", "alicePw1")
    assert send(server, "authPub", alice) == (
        16, "User:alice has no permission to access Topic:authPub from 127.0.0.1, no matched policies.")
    acl = {"subject": "User:alice", "policies": [{"entries": [
        {"resource": "Topic:authPub", "actions": ["Pub"], "sourceIps": ["127.0.0.1"], "decision": "Allow"},
        {"resource": "Group:g*", "actions": ["Sub"], "decision": "Allow"}]}]}
    assert call(server, 3006, {"subject": "User:alice"}, acl)[:2] == (0, OK)
    lane = server.broker.send_processor.lane
    assert send(server, "authPub", SU) == (0, None)            # the lane serves a topic's sends after its first
    raw_before = lane.served_raw
    assert send(server, "authPub", alice) == (0, None)                                # the raw lane path
    assert lane.served_raw == raw_before + 1                 # checked and served from the bytes, not decoded
    assert send(server, "authPub", alice, serialize=ROCKETMQ) == (0, None)            # the decoded path
    assert send(server, "%RETRY%g1", alice, group="g1")[0] in (0, 17)                 # group Sub: authorized
    assert send(server, "%RETRY%x1", alice, group="x1") == (
        16, "User:alice has no permission to access Group:x1 from 127.0.0.1, no matched policies.")
    assert send(server, "authPub", ("alice", "nope")) == (16, "check signature failed.")
    assert call(server, 3002, {"username": "alice"}, {"userStatus": "disable"})[:2] == (0, OK)
    assert send(server, "authPub", alice) == (16, "User:alice is disabled.")
    assert call(server, 3002, {"username": "alice"}, {"userStatus": "enable"})[:2] == (0, OK)
    assert send(server, "authPub", alice) == (0, None)
    # a normal user may not make a super user; the ACL goes with the user
    assert call(server, 3001, {"username": "bob"}, {"password": "b", "userType": "Super"}, cred=alice)[:2] == (
        16, "User:alice has no permission to access Cluster:DefaultCluster from 127.0.0.1, no matched policies.")
    assert call(server, 3003, {"username": "alice"})[:2] == (0, OK)
    assert call(server, 3009, {"subject": "User:alice"})[:2] == (16, "The subject is not exist.")


def test_admin_reads(server) -> None:
    call(server, 3001, {"username": "carol"}, {"password": "c1", "userType": "Boss"})
    code, remark, body = call(server, 3004, {"username": "carol"})
    assert json.loads(body) == {"password": "c1", "userStatus": "enable", "userType": "Normal", "username": "carol"}
    assert call(server, 3004, {"username": "nobody"}) == (0, OK, None)
    call(server, 3006, {"subject": "User:carol"}, {"policies": [{"entries": [
        {"resource": "Topic:c1", "actions": ["Pub"], "decision": "Allow"},
        {"resource": "Group:cg", "actions": ["Sub", "Get"], "decision": "Deny"}]}]})
    call(server, 3007, {"subject": "User:carol"}, {"policies": [{"entries": [
        {"resource": "Topic:c1", "actions": ["Sub"], "decision": "Allow"}]}]})           # replaces the entry
    body = json.loads(call(server, 3009, {"subject": "User:carol"})[2])
    assert body == {"policies": [{"entries": [
        {"actions": ["Sub"], "decision": "Allow", "resource": "Topic:c1"},
        {"actions": ["Sub", "Get"], "decision": "Deny", "resource": "Group:cg"}], "policyType": "Custom"}],
        "subject": "User:carol"}
    listed = json.loads(call(server, 3010, {"subjectFilter": "car", "resourceFilter": "Group"})[2])
    assert listed == [{"policies": [{"entries": [
        {"actions": ["Sub", "Get"], "decision": "Deny", "resource": "Group:cg"}], "policyType": "Custom"}],
        "subject": "User:carol"}]
    assert call(server, 3010, {"subjectFilter": "zzz"}) == (0, OK, None)
    assert call(server, 3008, {"subject": "User:carol", "resource": "Group:cg"})[:2] == (0, OK)
    assert [e["resource"] for e in json.loads(call(server, 3009, {"subject": "User:carol"})[2])
            ["policies"][0]["entries"]] == ["Topic:c1"]
    assert call(server, 3008, {"subject": "User:carol"})[:2] == (0, OK)
    assert call(server, 3008, {"subject": "User:carol"})[:2] == (16, "The acl is not exist.")


# (code, ext, body) -> the 5.5.0 broker's (code, remark)
BAD = [
    (3001, {"username": "bx"}, None, (1, 'java.lang.NullPointerException: Cannot invoke "org.apache.rocketmq.remoting'
     '.protocol.body.UserInfo.setUsername(String)" because "userInfo" is null, org.apache.rocketmq.broker.processor'
     '.AdminBrokerProcessor.createUser(AdminBrokerProcessor.java:3097)')),
    (3001, {}, {"username": "bx", "password": "p"}, (29, "The username is blank")),
    (3001, {"username": "bx"}, {"username": "bx"}, (16, "password can not be blank")),
    (3001, {"username": "bx"}, {"password": "  "}, (16, "password can not be blank")),
    (3002, {"username": "zzz"}, {"password": "x"}, (16, "The user is not exist")),
    (3003, {}, None, (16, "username can not be blank")),
    (3004, {}, None, (29, "The username is blank")),
    (3006, {"subject": "User:rocketmq"}, None, (1, "org.apache.rocketmq.auth.authorization.exception."
     "AuthorizationException: The body of acl is null, org.apache.rocketmq.broker.processor.AdminBrokerProcessor"
     ".createAcl(AdminBrokerProcessor.java:3241)")),
    (3006, {"subject": "User:rocketmq"}, {"policies": [{"entries": [{"resource": "Topic:a", "decision": "Allow"}]}]},
     (1, 'java.lang.NullPointerException: Cannot invoke "java.util.List.iterator()" because the return value of '
      '"org.apache.rocketmq.remoting.protocol.body.AclInfo$PolicyEntryInfo.getActions()" is null, '
      'org.apache.rocketmq.broker.auth.converter.AclConverter.convertAcl(AclConverter.java:54)')),
    (3006, {}, {"policies": [{"entries": [{"resource": "Topic:a", "actions": ["Pub"], "decision": "Allow"}]}]},
     (1, "An system error occurred, please try again later.")),
    (3006, {"subject": "User:nobody"}, {"policies": [{"entries": [
        {"resource": "Topic:a", "actions": ["Pub"], "decision": "Allow"}]}]},
     (16, "The subject of User:nobody is not exist.")),
    (3006, {"subject": "User:rocketmq"}, {"policies": [{"entries": []}]}, (16, "The policies is empty.")),
    (3006, {"subject": "User:rocketmq"}, {"policies": [{"entries": [
        {"resource": "Topic:X", "actions": ["Any"], "decision": "Allow"}]}]}, (16, "The actions can not be Any.")),
    (3006, {"subject": "User:rocketmq"}, {"policies": [{"entries": [
        {"resource": "Bogus:X", "actions": ["Pub"], "decision": "Allow"}]}]}, (16, "The resource is null.")),
    (3006, {"subject": "User:rocketmq"}, {"policies": [{"entries": [
        {"resource": "Topic:X", "actions": ["Pub"], "decision": "Maybe"}]}]}, (16, "The decision is null or illegal.")),
    (3006, {"subject": "User:rocketmq"}, {"policies": [{"entries": [
        {"resource": "Topic:X", "actions": ["Pub"], "sourceIps": ["300.1.1.1"], "decision": "Allow"}]}]},
     (16, "The source ip is invalid.")),
    (3006, {"subject": "User:rocketmq"}, {"policies": [{"entries": [
        {"resource": "Topic:X", "actions": ["Pub"], "sourceIps": [" "], "decision": "Allow"}]}]},
     (16, "The source ip is empty.")),
    (3006, {"subject": "User:rocketmq"}, {"policies": [{"entries": [
        {"resource": "Topic:X", "actions": ["Bogus"], "decision": "Allow"}]}]}, (16, "The actions is empty.")),
    (3007, {"subject": "User:rocketmq"}, None, (1, "org.apache.rocketmq.auth.authorization.exception."
     "AuthorizationException: The body of acl is null, org.apache.rocketmq.broker.processor.AdminBrokerProcessor"
     ".updateAcl(AdminBrokerProcessor.java:3268)")),
    (3008, {}, None, (16, "The subject is null.")),
    (3008, {"subject": "User:zzz"}, None, (16, "The subject is not exist.")),
    (3009, {}, None, (16, "The subject is null.")),
    (3009, {"subject": "Role:x"}, None, (16, "The subject is null.")),
]


@pytest.mark.parametrize("code,ext,body,answer", BAD, ids=[f"{b[0]}-{i}" for i, b in enumerate(BAD)])
def test_bad_admin_input_is_refused_as_5x_and_changes_nothing(server, code, ext, body, answer) -> None:
    before = stored(server)
    assert call(server, code, ext, body)[:2] == answer
    assert stored(server) == before
    assert call(server, 3005)[0] == 0                         # still serving


@pytest.mark.parametrize("raw", [b"{xx", b"[1,2]", b'{"policies": 5}'])
def test_unreadable_bodies_are_a_json_exception(server, raw) -> None:
    before = stored(server)
    for code, ext in ((3001, {"username": "bx"}), (3006, {"subject": "User:rocketmq"})):
        if code == 3001 and raw.startswith(b'{"'):
            continue                        # a UserInfo with an unknown field: fastjson2 reads it
        c, remark, _ = call(server, code, ext, raw)
        assert c == 1 and remark.startswith("com.alibaba.fastjson2.JSONException"), (code, raw, remark)
    assert stored(server) == before


def test_a_frame_over_the_limit_is_dropped_and_nothing_changes(server) -> None:
    """5.x closes a connection whose frame is over its limit (16 MB); so does rmqd, and goes on serving."""
    before = stored(server)
    entries = [{"resource": f"Topic:big{i:07d}", "actions": ["Pub"], "decision": "Allow"} for i in range(260000)]
    body = json.dumps({"subject": "User:rocketmq", "policies": [{"entries": entries}]}).encode()
    assert len(body) > 16 * 1024 * 1024
    ext = sign_request({"subject": "User:rocketmq"}, body, *SU)
    with BlockingClient(server.broker_addr) as c:
        with pytest.raises((OSError, TimeoutError, ConnectionError)):
            c.send_raw(encode_frame_bytes(new_request(3006, ext, body)))
            c.wait_response(1, 10)
    assert stored(server) == before
    assert call(server, 3005)[0] == 0


def test_whitelisted_codes_and_the_acl1_chain(tmp_path) -> None:
    home = tmp_path / "home"
    (home / "conf").mkdir(parents=True)
    (home / "conf" / "plain_acl.yml").write_text(
        "accounts:\n  - {accessKey: rocketmq, secretKey: '12345678', admin: true}\n")
    props = dict(AUTH, authenticationWhitelist="26, 28", aclEnable="true",
                 aclFile=str(home / "conf" / "plain_acl.yml"))
    with EmbeddedServer(broker_properties=props) as s:
        code, remark, _ = call(s, 28, cred=None)          # passes 2.0 (whitelisted), then ACL 1.0 refuses it
        assert code == 1 and "No accessKey is configured" in remark
        assert call(s, 28, cred=("ghost", "x"))[:2][0] == 1    # 2.0 does not look; 1.0 knows no such account
        assert call(s, 17, topic_ext("chainT"), cred=None)[:2] == (16, "username cannot be null.")
        assert call(s, 17, topic_ext("chainT"))[0] == 0
