"""ACL in a running broker: the request hook, the send lane's own check of raw signed sends, the admin codes."""
from __future__ import annotations

from typing import Iterator

import pytest

from rmqd.acl.signer import sign_request
from rmqd.remoting.client import BlockingClient
from rmqd.remoting.command import ROCKETMQ, encode_frame_bytes, new_request
from rmqd.testing import EmbeddedServer

ACL = """\
accounts:
  - {accessKey: laneUser01, secretKey: laneSecret01, admin: false, defaultTopicPerm: DENY,
     defaultGroupPerm: SUB, topicPerms: ["lanePub=PUB"]}
  - {accessKey: laneAdmin01, secretKey: laneAdminSk1, admin: true}
"""
USER = ("laneUser01", "laneSecret01")
ADMIN = ("laneAdmin01", "laneAdminSk1")


@pytest.fixture(scope="module")
def server(tmp_path_factory) -> Iterator[EmbeddedServer]:
    home = tmp_path_factory.mktemp("acl")
    (home / "conf").mkdir()
    (home / "conf" / "plain_acl.yml").write_text(ACL)
    with EmbeddedServer(broker_properties={"aclEnable": "true",
                                           "aclFile": str(home / "conf" / "plain_acl.yml")}) as s:
        with BlockingClient(s.broker_addr) as c:
            for topic in ("lanePub", "laneOther"):
                ext = sign_request({"topic": topic, "defaultTopic": "TBW102", "readQueueNums": "1",
                                    "writeQueueNums": "1", "perm": "6", "topicFilterType": "SINGLE_TAG",
                                    "topicSysFlag": "0", "order": "false"}, None, *ADMIN)
                assert c.invoke(new_request(17, ext)).code == 0
        yield s


def send_ext(topic: str, **extra: str) -> dict:
    ext = {"a": "PG", "b": topic, "c": "TBW102", "d": "4", "e": "0", "f": "0", "g": "1700000000000", "h": "0",
           "i": "TAGS\x01T", "j": "0", "k": "false", "m": "false"}
    ext.update(extra)
    return ext


def test_raw_signed_sends_are_checked_in_the_lane(server):
    lane = server.broker.send_processor.lane
    with BlockingClient(server.broker_addr) as c:
        c.invoke(new_request(310, sign_request(send_ext("lanePub"), b"hi", *USER), b"hi"))  # names the topic valid
        before = lane.served_raw
        r = c.invoke(new_request(310, sign_request(send_ext("lanePub"), b"hi", *USER), b"hi"))
        assert r.code == 0 and lane.served_raw == before + 1            # allowed, served from the bytes
        r = c.invoke(new_request(310, sign_request(send_ext("laneOther"), b"hi", *USER), b"hi"))
        assert r.code == 1 and r.remark == (
            "org.apache.rocketmq.acl.common.AclException: No default permission for topic:laneOther, "
            "org.apache.rocketmq.acl.plain.PlainPermissionManager.checkPerm(PlainPermissionManager.java:606)")
        bad = sign_request(send_ext("lanePub"), b"hi", *USER)
        bad["Signature"] = "A" + bad["Signature"][1:]
        r = c.invoke(new_request(310, bad, b"hi"))
        assert r.code == 1 and "Check signature failed for accessKey=laneUser01" in r.remark
        r = c.invoke(new_request(310, send_ext("lanePub"), b"hi"))
        assert r.code == 1 and "No accessKey is configured" in r.remark
        assert lane.served_raw == before + 1
        assert server.broker.store.get_max_offset("laneOther", 0) == 0


def test_refused_oneway_send_gets_no_answer_and_stores_nothing(server):
    with BlockingClient(server.broker_addr) as c:
        stored = server.broker.store.get_max_offset("laneOther", 0)
        c.send(new_request(310, sign_request(send_ext("laneOther"), b"x", *USER), b"x", oneway=True))
        r = c.invoke(new_request(310, sign_request(send_ext("lanePub"), b"y", *USER), b"y"))
        assert r.code == 0                                             # the next answer is this one's
        assert server.broker.store.get_max_offset("laneOther", 0) == stored


def _binary_with_every_field_twice(ext: dict, body: bytes, opaque: int) -> bytes:
    """A ROCKETMQ-header SEND_MESSAGE_V2 as the Java 4.9.8 client with AclClientRPCHook writes it: the
    header fields once, then all of them again followed by Signature and AccessKey."""
    fields = [(k, v) for k, v in ext.items() if k not in ("Signature", "AccessKey")]
    fields += fields + [("Signature", ext["Signature"]), ("AccessKey", ext["AccessKey"])]
    ext_bytes = b"".join(len(k).to_bytes(2, "big") + k.encode() + len(v.encode()).to_bytes(4, "big") + v.encode()
                         for k, v in fields)
    header = ((310).to_bytes(2, "big") + b"\x00" + (399).to_bytes(2, "big") + opaque.to_bytes(4, "big")
              + (0).to_bytes(4, "big") + (0).to_bytes(4, "big") + len(ext_bytes).to_bytes(4, "big") + ext_bytes)
    return (4 + len(header) + len(body)).to_bytes(4, "big") + bytes([1]) + len(header).to_bytes(3, "big") \
        + header + body


def test_java_clients_rocketmq_headers_with_every_field_twice_are_checked_in_the_lane(server):
    """The Java client's ACL hook makes a ROCKETMQ header carry each field twice; the decoder keeps the last
    of a repeated name, and so does the lane's signed content: such sends are served from the bytes."""
    lane = server.broker.send_processor.lane
    with BlockingClient(server.broker_addr) as c:
        c.invoke(new_request(310, sign_request(send_ext("lanePub"), b"hi", *USER), b"hi"))  # names the topic valid
        before = lane.served_raw
        for n, (topic, code) in enumerate((("lanePub", 0), ("lanePub", 0), ("laneOther", 1))):
            ext = sign_request(send_ext(topic), b"twice", *USER)
            c.send_raw(_binary_with_every_field_twice(ext, b"twice", 7000 + n))
            r = c.wait_response(7000 + n, 5)
            assert r.code == code, (topic, r.remark)
        assert lane.served_raw == before + 2                           # the refused one is answered, not stored
        bad = sign_request(send_ext("lanePub"), b"twice", *USER)
        bad["Signature"] = "A" + bad["Signature"][1:]
        c.send_raw(_binary_with_every_field_twice(bad, b"twice", 7010))
        r = c.wait_response(7010, 5)
        assert r.code == 1 and "Check signature failed for accessKey=laneUser01" in r.remark
        # a repeated name with two values (first "XX", last "PG"): the signature over the last one counts
        for n, signed_value, code in ((7020, "PG", 0), (7021, "XX", 1)):
            ext = sign_request(send_ext("lanePub", a=signed_value), b"v", *USER)
            ext["a"] = "PG"
            raw = _binary_with_every_field_twice(ext, b"v", n).replace(
                b"\x00\x01a\x00\x00\x00\x02PG", b"\x00\x01a\x00\x00\x00\x02XX", 1)
            c.send_raw(raw)
            r = c.wait_response(n, 5)
            assert r.code == code, (signed_value, r.remark)


@pytest.mark.parametrize("shape", ["repeated name", "number value", "ROCKETMQ header", "escaped value"])
def test_headers_the_lane_does_not_read_get_the_same_answer_from_the_hook(server, shape):
    with BlockingClient(server.broker_addr) as c:
        for topic, code in (("lanePub", 0), ("laneOther", 1)):
            ext = sign_request(send_ext(topic, i="TAGS\x01T\x02K\x01\"q\""), b"z", *USER)
            req = new_request(310, ext, b"z")
            if shape == "ROCKETMQ header":
                req.serialize_type = ROCKETMQ
                r = c.invoke(req)
            else:
                raw = encode_frame_bytes(req)
                if shape == "repeated name":
                    raw = raw.replace(b'"a":"PG"', b'"a":"XX","a":"PG"')
                elif shape == "number value":
                    raw = raw.replace(b'"d":"4"', b'"d":4')
                head = len(raw) - 8 - len(b"z")
                raw = (len(raw) - 4).to_bytes(4, "big") + (head).to_bytes(4, "big") + raw[8:]
                c.send_raw(raw)
                r = c.wait_response(req.opaque, 5)
            assert r.code == code, (shape, topic, r.remark)


def test_acl_admin_codes_off_answer_with_a_reason(tmp_path):
    with EmbeddedServer() as s, BlockingClient(s.broker_addr) as c:
        r = c.invoke(new_request(50, {"accessKey": "someone01", "secretKey": "someSecret01"}))
        assert r.code == 209 and "ACL is not enabled" in r.remark


@pytest.mark.parametrize("code,ext,body", [
    (25, {}, b"brokerPermission=6\n"),
    (215, {"topic": "laneOther"}, None),
    (200, {}, b'{"groupName":"laneGroup"}'),
    (207, {"groupName": "laneGroup", "removeOffset": "true"}, None),
])
def test_admin_codes_refuse_a_non_admin_account(server, code, ext, body):
    with BlockingClient(server.broker_addr) as c:
        r = c.invoke(new_request(code, sign_request(dict(ext), body, *USER), body))
    assert r.code == 1 and r.remark == (
        f"org.apache.rocketmq.acl.common.AclException: Need admin permission for request code={code}, but "
        "accessKey=laneUser01 is not, "
        "org.apache.rocketmq.acl.plain.PlainPermissionManager.checkPerm(PlainPermissionManager.java:581)")
    assert server.broker.topic_config_manager.get("laneOther") is not None      # 215 deleted nothing


def test_secrets_never_leave_the_broker(server, tmp_path, monkeypatch, caplog):
    """No secret key in GET_BROKER_RUNTIME_INFO (28), GET_BROKER_CONFIG (26), GET_BROKER_CLUSTER_ACL_INFO (52),
    `rmqd admin updateAclConfig` output, or the logs."""
    import contextlib
    import io
    import logging

    from rmqd.admin.main import main

    secrets = ("laneSecret01", "laneAdminSk1", "cliSecret0099")
    home = tmp_path / "home"
    (home / "conf").mkdir(parents=True)
    (home / "conf" / "tools.yml").write_text(f"accessKey: {ADMIN[0]}\nsecretKey: {ADMIN[1]}\n")
    monkeypatch.setenv("ROCKETMQ_HOME", str(home))
    out = io.StringIO()
    with caplog.at_level(logging.DEBUG), contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        rc = main(["updateAclConfig", "-n", server.namesrv_addr, "-c", "DefaultCluster", "-a", "cliUser0099",
                   "-s", "cliSecret0099", "-t", "lanePub=PUB"])
        seen = [out.getvalue()]
        with BlockingClient(server.broker_addr) as c:
            for code in (28, 26, 52):
                r = c.invoke(new_request(code, sign_request({}, None, *ADMIN)))
                assert r.code == 0, (code, r.remark)
                seen.append(f"{r.ext_fields} {r.remark} {bytes(r.body or b'').decode('utf-8', 'replace')}")
    assert rc == 0 and "create or update plain access config to" in seen[0] and "cliUser0099" in seen[0]
    seen.append(repr(server.broker.acl_manager.state.accounts["cliUser0099"]))       # the account was made
    assert "aclEnable" in seen[2] and "brokerName" in seen[3]                          # the answers are real
    for text in seen + [caplog.text]:
        assert not any(secret in text for secret in secrets), text[:2000]
    assert server.broker.acl_manager.delete_account("cliUser0099")
