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
