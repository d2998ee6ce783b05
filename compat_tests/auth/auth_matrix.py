"""The access control 2.0 differential: one set of users and ACLs, the operations each client probes, and how
an answer is compared.

The same setup goes to the Java 5.5.0 broker and to rmqd through the admin codes (signed by the initial super
user). Every cell is (identity, operation, source address): the identity is a user (super, normal with ACLs that
allow, deny, prefix, rank and restrict by source IP, one with a Default policy, one without an ACL), a disabled user,
an unknown one, a wrong secret, or nobody; the operation is a request the client sends and the resource and action
it needs. A cell's outcome is what the client sees: allowed, or refused with a code and a remark.

Adding a client (as was done for the Go gRPC client, compat_tests/go/cmd/grpcauth): write a probe that runs
:data:`GRPC_OPS`-style cells (``send:TOPIC``, ``receive:TOPIC:GROUP`` per identity) against an endpoint and returns
``{"<ak>:<sk>/<op>": {"ok": bool, "code": int, "error": str}}``, and compare it for the two endpoints of the
``auth_pair`` fixture as test_auth_matrix.py does for the Java and Python gRPC clients.
"""
from __future__ import annotations

import json
import re
import time
from typing import Any, Optional

from rmqd.acl.signer import sign_request
from rmqd.remoting.client import BlockingClient
from rmqd.remoting.command import new_request

CLUSTER = "DefaultCluster"
# the Java reference's start on a loaded 2-core machine (several other JVMs running) takes minutes
JAVA_START_TIMEOUT = 300.0
SUPER = ("rocketmq", "12345678")
INNER = ("rmqInner01", "innerSecret1")

AUTH_SETTINGS = {
    "authenticationEnabled": "true",
    "authenticationProvider": "org.apache.rocketmq.auth.authentication.provider.DefaultAuthenticationProvider",
    "authenticationMetadataProvider":
        "org.apache.rocketmq.auth.authentication.provider.LocalAuthenticationMetadataProvider",
    "authorizationEnabled": "true",
    "authorizationProvider": "org.apache.rocketmq.auth.authorization.provider.DefaultAuthorizationProvider",
    "authorizationMetadataProvider":
        "org.apache.rocketmq.auth.authorization.provider.LocalAuthorizationMetadataProvider",
    "initAuthenticationUser": json.dumps({"username": SUPER[0], "password": SUPER[1]}, separators=(",", ":")),
    "innerClientAuthenticationCredentials": json.dumps({"accessKey": INNER[0], "secretKey": INNER[1]},
                                                       separators=(",", ":")),
    "migrateAuthFromV1Enabled": "true",
}
# the proxy (gRPC) of the 5.x reference reads the broker's users through its metadata service (local mode)
PROXY_AUTH_SETTINGS = {
    **{k: v == "true" if v in ("true", "false") else v for k, v in AUTH_SETTINGS.items()
       if k != "migrateAuthFromV1Enabled"},
    "authenticationMetadataProvider": "org.apache.rocketmq.proxy.auth.ProxyAuthenticationMetadataProvider",
    "authorizationMetadataProvider": "org.apache.rocketmq.proxy.auth.ProxyAuthorizationMetadataProvider",
}

# ACL 1.0 accounts both brokers migrate at start (migrateAuthFromV1Enabled)
PLAIN_ACL_YML = """\
globalWhiteRemoteAddresses:
  - 10.10.103.*
accounts:
  - accessKey: v1Admin01
    secretKey: v1AdminSecret
    admin: true
  - accessKey: v1User001
    secretKey: v1UserSecret
    whiteRemoteAddress: 192.168.0.*
    admin: false
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms:
      - mx-pub=PUB
      - mx-sub=PUB|SUB
      - mx-other=DENY
    groupPerms:
      - mx-g1=SUB
      - mx-g2=DENY
  - accessKey: rocketmq
    secretKey: notTheInitPassword
    admin: false
"""

TOPICS = ("mx-pub", "mx-pub-deny", "mx-sub", "mx-sub-10", "mx-other")
GROUPS = ("mx-g1", "mx-g2", "zz-grp")


def entry(resource: str, actions: list, decision: str = "Allow", ips: Optional[list] = None) -> dict:
    e = {"resource": resource, "actions": actions, "decision": decision}
    if ips:
        e["sourceIps"] = ips
    return e


# name -> (password, userType, userStatus, policies (AclInfo) or None)
USERS: dict[str, tuple] = {
    "uPub": ("uPubPass01", None, None, [{"entries": [
        entry("Topic:mx-pub*", ["Pub"]), entry("Topic:mx-pub-deny", ["Pub"], "Deny"),
        entry("Group:mx-g*", ["Sub"])]}]),
    "uSub": ("uSubPass01", None, None, [{"entries": [
        entry("Topic:mx-*", ["Sub", "Get"], ips=["127.0.0.1"]), entry("Topic:mx-sub-10", ["Sub"], ips=["10.0.0.0/8"]),
        entry("Group:mx-g1", ["Sub", "Update"]), entry("Group:mx-g2", ["Sub"], "Deny")]}]),
    "uMix": ("uMixPass01", "Normal", None, [{"entries": [
        entry("*", ["All"], "Deny"), entry("Topic:*", ["Pub"]), entry("Group:*", ["Sub"]),
        entry("Cluster:DefaultCluster", ["Get"]), entry("Topic:mx-sub", ["Sub", "Get"], ips=["127.0.0.2"])]}]),
    "uDef": ("uDefPass01", None, None, [
        {"policyType": "Default", "entries": [entry("Topic:*", ["Pub", "Sub"]), entry("Group:*", ["Sub"])]},
        {"policyType": "Custom", "entries": [entry("Topic:mx-pub", ["Pub"], "Deny")]}]),
    "uTie": ("uTiePass01", None, None, [{"entries": [
        entry("Topic:mx-pub", ["Pub"], "Deny"), entry("Topic:mx-pub", ["Pub"], "Allow"),
        entry("Topic:mx-other", ["Pub"], "Deny"), entry("Topic:mx-other", ["All"], "Deny")]}]),
    "uAdmin": ("uAdminPass1", None, None, [{"entries": [
        entry("Cluster:DefaultCluster", ["Update", "Get"]), entry("Topic:*", ["Create", "Delete", "Get"]),
        entry("Group:*", ["Get", "Delete"])]}]),
    "uNoAcl": ("uNoAclPass1", None, None, None),
    "uOff": ("uOffPass01", None, "disable", [{"entries": [entry("*", ["All"])]}]),
}

# (accessKey, secretKey) of every identity probed; "-" is nobody
IDENTITIES = [SUPER] + [(n, USERS[n][0]) for n in USERS] + [("uPub", "wrongSecret1"), ("ghost", "ghostPass1"),
                                                            ("-", "-")]
SIGNED_IN = [i for i in IDENTITIES if i[0] in USERS and i[1] == USERS[i[0]][0] and USERS[i[0]][2] != "disable"]
REFUSED_AT_THE_DOOR = [i for i in IDENTITIES if i not in SIGNED_IN and i != SUPER]


def key(identity: tuple, op: str) -> str:
    return f"{identity[0]}:{identity[1]}/{op}"


# ---------------------------------------------------------------------------------------------- setup
def signed_call(addr: str, code: int, ext: Optional[dict] = None, body: Any = None, cred: Optional[tuple] = SUPER,
                source_host: Optional[str] = None, client: Optional[BlockingClient] = None) -> tuple:
    """(code, remark, body) of one request, signed with ``cred`` (unsigned for None or ("-", "-"))."""
    ext = dict(ext or {})
    if isinstance(body, (dict, list)):
        body = json.dumps(body).encode()
    if cred and cred[0] != "-":
        sign_request(ext, body, *cred)
    own = client is None
    c = client or BlockingClient(addr, 10, source_host=source_host)
    try:
        r = c.invoke(new_request(code, ext, body), 15)
    finally:
        if own:
            c.close()
    return r.code, r.remark, (bytes(r.body).decode("utf-8", "replace") if r.body is not None else None)


def topic_ext(topic: str) -> dict:
    return {"topic": topic, "defaultTopic": "TBW102", "readQueueNums": "1", "writeQueueNums": "1", "perm": "6",
            "topicFilterType": "SINGLE_TAG", "topicSysFlag": "0", "order": "false"}


def setup_broker(addr: str) -> None:
    """Topics, groups, users and ACLs, through the admin codes as the initial super user."""
    for t in TOPICS:
        assert signed_call(addr, 17, topic_ext(t))[0] == 0, t
    for g in GROUPS:
        body = {"groupName": g, "consumeEnable": True, "consumeFromMinEnable": True, "consumeBroadcastEnable": True,
                "retryQueueNums": 1, "retryMaxTimes": 16, "brokerId": 0, "whichBrokerWhenConsumeSlowly": 1}
        assert signed_call(addr, 200, None, body)[0] == 0, g
    for name, (pw, utype, status, policies) in USERS.items():
        info = {"username": name, "password": pw, "userType": utype}
        code, remark, _ = signed_call(addr, 3001, {"username": name}, {k: v for k, v in info.items() if v})
        assert code == 0, (name, remark)
        if policies:
            code, remark, _ = signed_call(addr, 3006, {"subject": f"User:{name}"},
                                          {"subject": f"User:{name}", "policies": policies})
            assert code == 0, (name, remark)
        if status:
            assert signed_call(addr, 3002, {"username": name}, {"username": name, "userStatus": status})[0] == 0


# ---------------------------------------------------------------------------------------------- raw remoting cells
def _send_ext(topic: str, group: str = "mx-pg") -> dict:
    return {"a": group, "b": topic, "c": "TBW102", "d": "4", "e": "0", "f": "0", "g": str(int(time.time() * 1000)),
            "h": "0", "i": "", "j": "0", "k": "false", "m": "false"}


def _heartbeat(group: str, topic: str) -> bytes:
    return json.dumps({"clientID": "auth-matrix", "producerDataSet": [], "consumerDataSet": [{
        "groupName": group, "consumeType": "CONSUME_PASSIVELY", "messageModel": "CLUSTERING",
        "consumeFromWhere": "CONSUME_FROM_LAST_OFFSET", "unitMode": False, "subscriptionDataSet": [
            {"topic": topic, "subString": "*", "classFilterMode": False, "tagsSet": [], "codeSet": [],
             "subVersion": 0, "expressionType": "TAG"}]}]}).encode()


# op -> (code, ext, body): every action on every resource type the broker decides
RAW_OPS: dict[str, tuple] = {}
for _t in TOPICS:
    RAW_OPS[f"pub:{_t}"] = (310, _send_ext(_t), b"auth")
for _g in GROUPS:
    RAW_OPS[f"retry:{_g}"] = (310, _send_ext(f"%RETRY%{_g}", _g), b"auth")
RAW_OPS["dlq:mx-g1"] = (310, _send_ext("%DLQ%mx-g1", "mx-g1"), b"auth")                  # a DLQ topic is a topic
RAW_OPS["trace"] = (310, _send_ext("RMQ_SYS_TRACE_TOPIC"), b"auth")                      # no exemption in 5.5
for _t, _g in (("mx-sub", "mx-g1"), ("mx-sub", "mx-g2"), ("mx-pub", "zz-grp"), ("mx-sub-10", "mx-g1")):
    RAW_OPS[f"pull:{_t}:{_g}"] = (11, {"consumerGroup": _g, "topic": _t, "queueId": "0", "queueOffset": "0",
                                      "maxMsgNums": "1", "sysFlag": "0", "commitOffset": "0",
                                      "suspendTimeoutMillis": "0", "subscription": "*", "subVersion": "0",
                                      "expressionType": "TAG"}, None)
RAW_OPS.update({
    "get:mx-sub": (30, {"topic": "mx-sub", "queueId": "0"}, None),
    "get:mx-other": (30, {"topic": "mx-other", "queueId": "0"}, None),
    "update:mx-sub:mx-g1": (15, {"consumerGroup": "mx-g1", "topic": "mx-sub", "queueId": "0", "commitOffset": "0"},
                            None),
    "create:mx-new": (17, topic_ext("mx-new"), None),
    "delete-group:zz-del": (207, {"groupName": "zz-del", "cleanOffset": "false"}, None),
    "hb:mx-g1:mx-sub": (34, {}, _heartbeat("mx-g1", "mx-sub")),
    "cluster-get": (3005, {"filter": "zzz-nobody"}, None),
    "cluster-update": (3001, {"username": "uNoAcl"}, {"username": "uNoAcl", "password": "x"}),
    "list-topics": (224, {"cluster": CLUSTER}, None),
})
SOURCES = ("127.0.0.1", "127.0.0.2")
BUSY_RETRIES = 4


def raw_matrix(addr: str) -> dict[str, tuple]:
    """Every (identity, op, source) cell's (code, remark): the remark kept for NO_PERMISSION (16) only, the
    answers that are not about access differing in wording between brokers."""
    out = {}
    for source in SOURCES:
        with BlockingClient(addr, 10, source_host=source) as c:
            for ident in IDENTITIES:
                for op, (code, ext, body) in RAW_OPS.items():
                    for attempt in range(BUSY_RETRIES):
                        got, remark, _ = signed_call(addr, code, ext, body, ident, client=c)
                        if got != 2:                   # SYSTEM_BUSY: a loaded broker's answer, not an access one
                            break
                        time.sleep(0.2 * (attempt + 1))
                    out[f"{source}|{key(ident, op)}"] = (got, remark if got == 16 else None)
    return out


# ---------------------------------------------------------------------------------------------- client cells
# the real clients' cells: each kind of request a client sends, against an allowing, a denying and an unmatched
# entry (the raw matrix above covers every action and resource exhaustively)
REMOTING5_OPS = ["send:mx-pub", "send:mx-pub-deny", "send:mx-other", "pull:mx-sub:mx-g2", "maxoffset:mx-sub",
                 "create:mx-made", "getuser:rocketmq"]
REMOTING5_IDENTITIES = [SUPER, ("uPub", "uPubPass01"), ("uSub", "uSubPass01"), ("uDef", "uDefPass01"),
                        ("uAdmin", "uAdminPass1"), ("uOff", "uOffPass01"), ("uPub", "wrongSecret1"),
                        ("ghost", "ghostPass1"), ("-", "-")]
REMOTING4_OPS = ["send:mx-pub", "send:mx-pub-deny", "pull:mx-sub:mx-g1"]
REMOTING4_IDENTITIES = [SUPER, ("uPub", "uPubPass01"), ("uSub", "uSubPass01"), ("uDef", "uDefPass01"),
                        ("uOff", "uOffPass01"), ("uPub", "wrongSecret1"), ("-", "-")]
GRPC_OPS = ["send:mx-pub", "send:mx-pub-deny"]
GRPC_RECEIVE = {("uSub", "uSubPass01"): ["receive:mx-sub:mx-g1", "receive:mx-sub:mx-g2"]}


GRPC_IDENTITIES = [("uPub", "uPubPass01"), ("uSub", "uSubPass01"), ("uDef", "uDefPass01"), ("uOff", "uOffPass01"),
                   ("uPub", "wrongSecret1")]
# the Go gRPC client starts in a second (no JVM): it also knocks with the super user, a user without an ACL, an
# unknown user, empty credentials (signed with an empty key: what compat_tests/go/cmd/grpc5 configures) and none at
# all, and receives as a publisher, a user with a Default policy, the super user
GO_GRPC_IDENTITIES = GRPC_IDENTITIES + [SUPER, ("uNoAcl", "uNoAclPass1"), ("ghost", "ghostPass1"), ("", ""),
                                        ("-", "-")]
GO_GRPC_RECEIVE = {**GRPC_RECEIVE, ("uPub", "uPubPass01"): ["receive:mx-sub:mx-g1"],
                   ("uDef", "uDefPass01"): ["receive:mx-sub:mx-g1"], SUPER: ["receive:mx-sub:mx-g2"]}


def ops_for(identity: tuple, ops: list) -> list:
    """An identity refused at the door (unknown, disabled, wrong secret, nobody) needs one cell, not every one."""
    return ops[:1] if identity in REFUSED_AT_THE_DOOR else ops


_ADDR = re.compile(r"\d+\.\d+\.\d+\.\d+:\d+")
_REQUEST_ID = re.compile(r"request-id=[0-9a-f-]+")


def outcome(ev: dict) -> tuple:
    """A client's report of one cell, comparable between brokers: (ok, code, remark) with addresses, ports and
    request ids taken out of the remark."""
    error = ev.get("error")
    if isinstance(error, str):
        error = _REQUEST_ID.sub("request-id=*", _ADDR.sub("*", error)).split("\nSee ")[0]
    return bool(ev.get("ok")), ev.get("code"), None if ev.get("ok") else error


def differences(ours: dict, theirs: dict) -> dict:
    return {k: (ours.get(k), theirs.get(k)) for k in sorted(set(ours) | set(theirs)) if ours.get(k) != theirs.get(k)}
