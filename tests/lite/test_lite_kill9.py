"""Lite Mode survives kill -9 without revive records (5.5 keeps lite order state in memory and commits the
consume offset on ack): after a crash the consumer gets every unacked lite message again, and an ack whose
offset was persisted is not undone."""
from __future__ import annotations

import glob
import os
import time

import pytest

import orjson

from rmqd.remoting.client import BlockingClient
from rmqd.remoting.command import new_request
from rmqd.store.message import decode_messages, encode_properties
from tests.pop.pop_helpers import serving

CTL, POP_LITE, ACK = 200071, 200070, 200051


def subscribe(c: BlockingClient, names: list[str]) -> None:
    body = {"subscriptionSet": [{"action": "PARTIAL_ADD", "clientId": "k9c", "group": "K9LG", "topic": "K9L",
                                 "liteTopicSet": names, "version": 0}]}
    assert c.invoke(new_request(CTL, None, orjson.dumps(body)), 5).code == 0


def pop_all(c: BlockingClient, want: int, seconds: float) -> list:
    got, deadline = [], time.monotonic() + seconds
    while len(got) < want and time.monotonic() < deadline:
        r = c.invoke(new_request(POP_LITE, {"clientId": "k9c", "consumerGroup": "K9LG", "topic": "K9L",
                                            "maxMsgNum": "32", "invisibleTime": "60000", "pollTime": "1000",
                                            "bornTime": str(int(time.time() * 1000))}), 10)
        if r.code == 0:
            got += [(m, r.ext_fields["popTime"]) for m in decode_messages(r.body)]
    return got


def ack(c: BlockingClient, m, pop_time: str, broker_name: str = "broker-a") -> None:
    off, lite = m.properties["INNER_MULTI_QUEUE_OFFSET"], m.properties["__LITE_TOPIC"]
    extra = f"{off} {pop_time} 60000 999 0 {broker_name} 0 {off}"
    r = c.invoke(new_request(ACK, {"consumerGroup": "K9LG", "topic": "K9L", "queueId": "0", "extraInfo": extra,
                                   "offset": off, "liteTopic": lite}), 5)
    assert r.code == 0, r.remark


def persisted_offset(path: str, key: str) -> int:
    try:
        with open(path, "rb") as f:
            return int(orjson.loads(f.read())["offsetTable"].get(key, {}).get("0", -1))
    except (OSError, ValueError, KeyError):          # not written yet, or being replaced
        return -1


@pytest.mark.slow
def test_kill9_redelivers_unacked_lite_messages(tmp_path):
    store = str(tmp_path / "store")
    with serving(store, 60) as c:
        assert c.invoke(new_request(17, {"topic": "K9L", "readQueueNums": "1", "writeQueueNums": "1", "perm": "6",
                                         "attributes": "+message.type=LITE"}), 5).code == 0
        assert c.invoke(new_request(200, None, orjson.dumps({"groupName": "K9LG", "attributes": {
            "+lite.bind.topic": "K9L"}})), 5).code == 0
        subscribe(c, ["k-a", "k-b"])
        for i in range(6):
            lite = "k-a" if i < 3 else "k-b"
            props = encode_properties({"__LITE_TOPIC": lite, "UNIQ_KEY": f"u{i}"})
            assert c.invoke(new_request(10, {"producerGroup": "p", "topic": "K9L", "defaultTopic": "TBW102", "defaultTopicQueueNums": "4",
                                             "queueId": "0", "sysFlag": "0",
                                             "bornTimestamp": str(int(time.time() * 1000)), "flag": "0",
                                             "properties": props}, f"m{i}".encode()), 5).code == 0
        got = pop_all(c, 6, 15)
        assert sorted(m.body for m, _ in got) == [b"m%d" % i for i in range(6)]
        for m, pt in got:
            if m.properties["__LITE_TOPIC"] == "k-a":
                ack(c, m, pt)
        # acked offsets reach consumerOffset.json (persisted every 5 s); then the crash
        path = os.path.join(store, "config", "consumerOffset.json")
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            if persisted_offset(path, "%LMQ%$K9L$k-a@K9LG") == 3:
                break
            time.sleep(0.2)
        else:
            raise AssertionError("the acked lite offset was not persisted within 15 s")
    # no revive record was written for lite messages: their checkpoints and acks live in memory
    for f in glob.glob(os.path.join(store, "commitlog", "*")):
        with open(f, "rb") as fh:                   # a few KB were written: the head of the first file holds them
            head = fh.read(1 << 20)
        assert b'"t":"%LMQ%' not in head and (b"K9L" in head or not f.endswith("0" * 20))
    with serving(store, 60) as c:
        subscribe(c, ["k-a", "k-b"])                  # subscriptions are in memory: the client syncs again
        again = pop_all(c, 3, 15)
        assert sorted(m.body for m, _ in again) == [b"m3", b"m4", b"m5"]      # the unacked ones, not the acked
        for m, pt in again:
            ack(c, m, pt)
        assert not pop_all(c, 1, 1.5)
