"""Request bodies that are JSON but not a JSON object where one is expected: the broker answers as it does for an
undecodable body, never with a processor failure (CHECK_CLIENT_CONFIG; a consumer's answer to
GET_CONSUMER_STATUS_FROM_CLIENT relayed by INVOKE_BROKER_TO_GET_CONSUMER_STATUS)."""
from __future__ import annotations

import threading
import time

import orjson

from rmqd.remoting.command import encode_frame_bytes, new_request, new_response
from tests.broker.helpers import heartbeat, sub


def test_check_client_config_body_not_an_object(broker, client):
    r = client.invoke(new_request(46, None, b'["not", "an", "object"]'))
    assert r.code == 1 and r.remark == "the CHECK_CLIENT_CONFIG body is not a JSON object"


def _answer_next(consumer, code, body, seconds=3.0):
    """Answer the next request ``code`` the broker sends ``consumer`` with SUCCESS and ``body``."""
    deadline = time.monotonic() + seconds
    req = None
    while req is None and time.monotonic() < deadline:
        consumer.read_some(0.05)
        req = next((x for x in consumer.server_requests if x.code == code), None)
    assert req is not None, f"the broker sent no request {code}"
    answer = new_response(0, None, None, body)
    answer.opaque = req.opaque
    answer.flag = 1
    consumer.send_raw(encode_frame_bytes(answer))


def test_consumer_status_skips_an_answer_that_is_not_an_object(broker, harness):
    """INVOKE_BROKER_TO_GET_CONSUMER_STATUS (223) asks every consumer of the group (221); an answer whose body is
    not a JSON object is logged and left out, as an undecodable one is, and the others are answered."""
    good, bad, admin = harness.client(), harness.client(), harness.client()
    heartbeat(good, "cid-good", "G", [sub("T")])
    heartbeat(bad, "cid-bad", "G", [sub("T")])
    result = {}
    th = threading.Thread(target=lambda: result.setdefault("r", admin.invoke(new_request(
        223, {"topic": "T", "group": "G"}), 10)))
    th.start()
    _answer_next(good, 221, b'{"messageQueueTable":{"q":1}}')
    _answer_next(bad, 221, b'[1, 2]')
    th.join(10)
    r = result["r"]
    assert r.code == 0
    assert orjson.loads(r.body_bytes())["consumerTable"] == {"cid-good": {"q": 1}}
