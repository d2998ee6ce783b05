"""SEND_REPLY_MESSAGE (324) / _V2 (325) → PUSH_REPLY_MESSAGE_TO_CLIENT (326) to the requester
(Java ReplyMessageProcessor semantics)."""
from __future__ import annotations

import threading

import pytest

from rmqd.remoting.client import BlockingClient
from rmqd.remoting.command import RemotingCommand, encode_frame_bytes, new_request, new_response, prepare_reply
from rmqd.store.message import decode_offset_msg_id
from tests.features.msgfeat_helpers import Broker, heartbeat_consumer, heartbeat_producer, now_ms, props, pull

pytestmark = pytest.mark.timeout(40)

REPLY_TOPIC = "DefaultCluster_REPLY_TOPIC"
REQUESTER = "127.0.0.1@requester#1"

PUSH_HEADER_FIELDS = {"producerGroup", "topic", "defaultTopic", "defaultTopicQueueNums", "queueId", "sysFlag",
                      "bornTimestamp", "flag", "properties", "reconsumeTimes", "unitMode", "bornHost",
                      "storeHost", "storeTimestamp"}


@pytest.fixture(scope="module")
def rb(tmp_path_factory):
    b = Broker(str(tmp_path_factory.mktemp("replystore"))).start()
    yield b
    b.stop()


class Requester:
    """A requester connection that answers PUSH_REPLY_MESSAGE_TO_CLIENT on a thread."""

    def __init__(self, client: BlockingClient, code: int = 0) -> None:
        self.client = client
        self.code = code
        self.pushes: list[RemotingCommand] = []
        self._stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        c = self.client
        while not self._stop.is_set():
            try:
                c.read_some(0.05)
            except (ConnectionError, OSError):
                return
            while c.server_requests:
                req = c.server_requests.pop(0)
                if req.code == 326:
                    self.pushes.append(req)
                    resp = prepare_reply(req, new_response(self.code, None if self.code == 0 else "nope"))
                    c.send_raw(encode_frame_bytes(resp))

    def stop(self) -> None:
        self._stop.set()
        self.thread.join(2)


def send_reply(client: BlockingClient, properties: str, body: bytes = b"the-reply", code: int = 325,
               topic: str = REPLY_TOPIC) -> RemotingCommand:
    if code == 325:
        ext = {"a": "PG_REPLY", "b": topic, "c": "TBW102", "d": "4", "e": "0", "f": "0", "g": str(now_ms()),
               "h": "3", "i": properties, "j": "0", "k": "false"}
    else:
        ext = {"producerGroup": "PG_REPLY", "topic": topic, "defaultTopic": "TBW102",
               "defaultTopicQueueNums": "4", "queueId": "0", "sysFlag": "0", "bornTimestamp": str(now_ms()),
               "flag": "3", "properties": properties, "reconsumeTimes": "0", "unitMode": "false"}
    return client.invoke(new_request(code, ext, body), timeout=15)


def reply_props(requester: str = REQUESTER, corr: str = "CORR-1") -> str:
    return props(CORRELATION_ID=corr, REPLY_TO_CLIENT=requester, MSG_TYPE="reply", TTL="3000", UNIQ_KEY=corr)


def test_reply_pushed_to_requester_and_stored(rb):
    req_conn = rb.new_client()
    assert heartbeat_producer(req_conn, REQUESTER, "PG_REQ").code == 0
    requester = Requester(req_conn)
    try:
        replier = rb.new_client()
        r = send_reply(replier, reply_props())
        assert r.code == 0, r.remark
        (push,) = requester.pushes
        h = push.ext_fields
        assert set(h) == PUSH_HEADER_FIELDS
        assert h["topic"] == REPLY_TOPIC and h["producerGroup"] == "PG_REPLY" and h["flag"] == "3"
        assert h["queueId"] == "0" and h["sysFlag"] == "0" and h["unitMode"] == "false"
        assert h["reconsumeTimes"] == "0" and h["defaultTopic"] == "TBW102"
        ip, port = replier.sock.getsockname()
        assert h["bornHost"] == f"/{ip}:{port}"
        assert h["storeHost"] == f"/127.0.0.1:{rb.broker.server.port}"
        assert abs(int(h["storeTimestamp"]) - now_ms()) < 10_000
        pushed_props = dict(kv.split("\x01") for kv in h["properties"].split("\x02"))
        assert pushed_props["CORRELATION_ID"] == "CORR-1" and int(pushed_props["PUSH_REPLY_TIME"]) > 0
        assert push.body_bytes() == b"the-reply"
        # stored in the reply topic; the response points at the stored record
        (m,) = pull(replier, REPLY_TOPIC, 0)
        assert m.body == b"the-reply" and "PUSH_REPLY_TIME" not in m.properties
        assert decode_offset_msg_id(r.ext_fields["msgId"])[2] == m.commit_log_offset
        assert r.ext_fields["queueOffset"] == "0" and r.ext_fields["MSG_REGION"] == "DefaultRegion"
    finally:
        requester.stop()


def test_reply_v1_to_a_consumer_only_requester(rb):
    req_conn = rb.new_client()
    assert heartbeat_consumer(req_conn, "127.0.0.1@cons-requester", "CG_REQ", "AnyTopic").code == 0
    requester = Requester(req_conn)
    try:
        r = send_reply(rb.new_client(), reply_props("127.0.0.1@cons-requester", "CORR-2"), code=324)
        assert r.code == 0, r.remark
        (push,) = requester.pushes
        assert "CORRELATION_ID\x01CORR-2" in push.ext_fields["properties"]
    finally:
        requester.stop()


def test_requester_offline_is_a_system_error_but_reply_is_stored(rb):
    c = rb.new_client()
    before = len(pull(c, REPLY_TOPIC, 0))
    r = send_reply(c, reply_props("127.0.0.1@gone"))
    assert (r.code, r.remark) == (1, "push reply message fail, channel of <127.0.0.1@gone> not found.")
    assert "msgId" in r.ext_fields and len(pull(c, REPLY_TOPIC, 0)) == before + 1


def test_reply_without_reply_to_client(rb):
    r = send_reply(rb.new_client(), props(CORRELATION_ID="C3"))
    assert (r.code, r.remark) == (1, "reply message properties[REPLY_TO_CLIENT] is null")


def test_requester_rejects_the_push(rb):
    req_conn = rb.new_client()
    heartbeat_producer(req_conn, "127.0.0.1@grumpy", "PG_GRUMPY")
    requester = Requester(req_conn, code=1)
    try:
        r = send_reply(rb.new_client(), reply_props("127.0.0.1@grumpy"))
        assert (r.code, r.remark) == (1, "push reply message to 127.0.0.1@grumpyfail.")
    finally:
        requester.stop()


def test_store_disabled_answers_zero_ids(rb):
    req_conn = rb.new_client()
    heartbeat_producer(req_conn, "127.0.0.1@nostore", "PG_NS")
    requester = Requester(req_conn)
    rb.broker.config.storeReplyMessageEnable = False
    try:
        r = send_reply(rb.new_client(), reply_props("127.0.0.1@nostore"), topic="OwnReplyTopic")
        assert r.code == 0 and (r.ext_fields["msgId"], r.ext_fields["queueOffset"]) == ("0", "0")
        assert len(requester.pushes) == 1
    finally:
        rb.broker.config.storeReplyMessageEnable = True
        requester.stop()


def test_reply_topic_checks_like_send(rb):
    r = send_reply(rb.new_client(), reply_props(), topic="RMQ_SYS_TRANS_HALF_TOPIC")
    assert r.code == 16
    r = rb.new_client().invoke(new_request(325, {"a": "PG", "b": REPLY_TOPIC}))
    assert r.code == 1 and "is null" in r.remark
