"""The send fast lane (rmqd.cython_ext.send_lane) answers exactly like SendMessageProcessor.

Every plain send is made twice, once through the lane and once with the lane off, and the
responses (byte for byte, but for offsets) and the stored records must agree; everything the lane
must not serve is checked to reach the full processor (and its error responses).
"""
from __future__ import annotations

import socket

import pytest

from rmqd.remoting.command import (ROCKETMQ, FrameReader, encode_frame_bytes, new_request, new_response,
                                   prepare_reply)
from tests.broker.helpers import messages, pull, send_v2

JAVA_PROPS = "UNIQ_KEY\x01AC11000100002A9F00000000000000A1\x02WAIT\x01true\x02TAGS\x01TagA\x02KEYS\x01k1 k2\x02"
CPP_PROPS = "TAGS\x01TagB\x02KEYS\x01kk\x02WAIT\x01true\x02UNIQ_KEY\x01ABC\x02a\x01b"


def lane_of(broker):
    return broker.send_processor.lane


def send_both_ways(broker, client, topic: str, **kw):
    """(response via the lane, response via the processor) for the same request."""
    lane = lane_of(broker)
    before = lane.served
    via_lane = send_v2(client, topic, **kw)
    assert lane.served == before + 1, "the lane did not serve a plain send"
    lane.enabled = False
    try:
        via_processor = send_v2(client, topic, **kw)
    finally:
        lane.enabled = True
    assert lane.served == before + 1
    return via_lane, via_processor


PROPERTY_SHAPES = ["", JAVA_PROPS, CPP_PROPS, "WAIT\x01true", "WAIT\x01false\x02TAGS\x01x",
                   "WAIT\x01true\x02", "TAGS\x01x\x02WAIT\x01true", "\x02WAIT\x01true\x02TAGS\x01x",
                   "a\x01b\x02\x02WAIT\x01true", "xWAIT\x01true\x02a\x01b", "WAIT\x01true\x02WAIT\x01true",
                   "a\x01b\x02WAIT\x01true\x02\x02", "k\x01v\x02WAIT\x01true\x02TAGS\x01t\x02UNIQ_KEY\x01u\x02"]


@pytest.mark.parametrize("props", PROPERTY_SHAPES)
@pytest.mark.parametrize("code", [310, 10])
def test_lane_matches_processor(broker, client, props, code):
    send_v2(client, "LaneTopic")          # first send validates the topic (full processor)
    if code == 10:
        ext = {"producerGroup": "PG", "topic": "LaneTopic", "defaultTopic": "TBW102",
               "defaultTopicQueueNums": "4", "queueId": "1", "sysFlag": "0", "bornTimestamp": "1700000000000",
               "flag": "3", "properties": props, "reconsumeTimes": "2"}
        lane = lane_of(broker)
        before = lane.served
        a = client.invoke(new_request(10, ext, b"payload"))
        lane.enabled = False
        b = client.invoke(new_request(10, ext, b"payload"))
        lane.enabled = True
        assert lane.served == before + 1
    else:
        a, b = send_both_ways(broker, client, "LaneTopic", body=b"payload", queue_id=1, properties=props,
                              h="3", j="2")
    assert a.code == b.code == 0
    assert int(b.ext_fields["queueOffset"]) == int(a.ext_fields["queueOffset"]) + 1
    same = {k: v for k, v in a.ext_fields.items() if k not in ("msgId", "queueOffset")}
    assert same == {k: v for k, v in b.ext_fields.items() if k not in ("msgId", "queueOffset")}
    m1, m2 = messages(pull(client, "LaneTopic", queue_id=1, subscription="*", sys_flag=4))[-2:]
    for field in ("body", "flag", "sys_flag", "born_timestamp", "born_host", "store_host",
                  "reconsume_times", "properties_str", "topic", "queue_id"):
        assert getattr(m1, field) == getattr(m2, field), field
    assert m1.msg_id == a.ext_fields["msgId"] and m2.msg_id == b.ext_fields["msgId"]
    assert m1.properties["CLUSTER"] == "DefaultCluster" and m1.reconsume_times == 2 and m1.flag == 3
    if "WAIT\x01true" in props:
        assert "WAIT" not in m1.properties


def test_lane_response_bytes_are_the_codecs(broker, client):
    """The lane's hand-built JSON header is what the codec writes for the same response."""
    send_v2(client, "LaneBytes")
    lane = lane_of(broker)
    for serialize_type, opaque in ((0, 77), (ROCKETMQ, 78), (0, 0), (0, -5), (0, 2147483647)):
        req = new_request(310, {"a": "PG", "b": "LaneBytes", "c": "TBW102", "d": "4", "e": "2", "f": "0",
                                "g": "1700000000000", "h": "0", "i": JAVA_PROPS}, b"x")
        req.opaque = opaque
        req.serialize_type = serialize_type
        (cmd,) = FrameReader().feed(encode_frame_bytes(req))
        frame = lane.handle(("127.0.0.1", 40000), cmd)
        (resp,) = FrameReader().feed(frame)
        expected = encode_frame_bytes(prepare_reply(cmd, new_response(0, None, resp.ext_fields)))
        assert frame == expected
        assert resp.opaque == opaque and resp.serialize_type == serialize_type


def test_lane_follows_region_and_trace_changes(broker, client):
    send_v2(client, "LaneCfg")
    broker.config.regionId = 'Reg"ion'         # needs escaping: the codec's path
    broker.config.traceOn = False
    a, b = send_both_ways(broker, client, "LaneCfg")
    assert a.ext_fields["MSG_REGION"] == b.ext_fields["MSG_REGION"] == 'Reg"ion'
    assert a.ext_fields["TRACE_ON"] == b.ext_fields["TRACE_ON"] == "false"
    broker.config.regionId = "R" * 300           # longer than the lane's stack-built frame takes
    a, b = send_both_ways(broker, client, "LaneCfg")
    assert a.ext_fields["MSG_REGION"] == b.ext_fields["MSG_REGION"] == "R" * 300


DECLINED = [
    ("batch flag", dict(m="true", body=b"\x00\x00\x00\x05xx"), 13),
    ("delay level", dict(properties="DELAY\x012"), 0),
    ("transaction", dict(properties="TRAN_MSG\x01true\x02PGROUP\x01PG"), 0),
    ("timer", dict(properties="TIMER_DELAY_SEC\x015"), 0),
    ("queue out of range", dict(queue_id=99), 1),
    ("bad queue id", dict(e="x"), 1),
    ("missing producer group", dict(a=None), 0),     # Java stores it too (the group only feeds hooks)
    ("large body", dict(body=b"z" * (257 * 1024)), 0),
]


@pytest.mark.parametrize("case,kw,code", DECLINED, ids=[c[0] for c in DECLINED])
def test_lane_declines_to_processor(broker, client, case, kw, code):
    send_v2(client, "LaneDecl")
    lane = lane_of(broker)
    kw = dict(kw)
    if kw.get("a", "") is None:
        kw.pop("a")
        ext = {"b": "LaneDecl", "c": "TBW102", "d": "4", "e": "0", "f": "0", "g": "1", "h": "0"}
        before = lane.served
        r = client.invoke(new_request(310, ext, b"x"))
    else:
        before = lane.served
        r = send_v2(client, "LaneDecl", **kw)
    assert lane.served == before, case
    assert r.code == code, (case, r.remark)


def test_lane_leaves_unknown_retry_and_forbidden_topics(broker, client):
    lane = lane_of(broker)
    r = send_v2(client, "NeverSeen")             # auto-create happens in the processor
    assert r.code == 0 and lane.served == 0
    assert send_v2(client, "NeverSeen").code == 0 and lane.served == 1
    assert send_v2(client, "SCHEDULE_TOPIC_XXXX").code == 16
    broker.topic_config_manager.get("NeverSeen").perm = 4  # read only
    r = send_v2(client, "NeverSeen")
    assert r.code == 16 and "forbidden" in r.remark and lane.served == 1
    broker.config.brokerPermission = 4
    broker.topic_config_manager.get("NeverSeen").perm = 6
    send_v2(client, "NeverSeen")
    assert lane.served == 1


def test_lane_under_sync_flush_answers_once_flushed(harness):
    """SYNC_FLUSH: the lane stores the message on the loop; its answer waits for the group commit
    (no thread held), so every answer means "on disk"."""
    broker = harness.start(flushDiskType="SYNC_FLUSH")
    client = harness.client()
    lane = lane_of(broker)
    assert lane.enabled and lane.sync_flush
    send_v2(client, "SyncTopic")
    served = lane.served
    for i in range(5):
        r = send_v2(client, "SyncTopic", body=b"m%d" % i)
        assert r.code == 0
        assert broker.store.commitlog.flushed_where >= broker.store.commitlog_max_offset()
    assert lane.served == served + 5


def test_lane_under_sync_flush_times_out_with_flush_disk_timeout(harness, monkeypatch):
    broker = harness.start(flushDiskType="SYNC_FLUSH", syncFlushTimeout=200)
    client = harness.client()
    send_v2(client, "SyncSlow")
    monkeypatch.setattr(broker.store.message_store.flusher, "flush_commitlog", lambda: None)   # the disk never confirms
    r = send_v2(client, "SyncSlow", body=b"late")
    assert r.code == 10 and r.ext_fields["queueOffset"] == "1"            # stored, flush not confirmed
    r = send_v2(client, "SyncSlow", body=b"nowait", properties="WAIT\x01false\x02")
    assert r.code == 0                                                     # WAIT=false: no flush wait


def test_lane_oneway(broker, client):
    send_v2(client, "LaneOneway")
    ext = {"a": "PG", "b": "LaneOneway", "c": "TBW102", "d": "4", "e": "0", "f": "0", "g": "1", "h": "0"}
    client.send(new_request(310, ext, b"one", oneway=True))
    assert send_v2(client, "LaneOneway", body=b"two").code == 0    # answered: the oneway got no reply
    assert [m.body for m in messages(pull(client, "LaneOneway", subscription="*", sys_flag=4))] == \
        [b"hello", b"one", b"two"]
    assert lane_of(broker).served == 2


def test_lane_failure_is_a_system_error_not_a_dead_connection(broker, client):
    send_v2(client, "LaneFail")
    lane = lane_of(broker)
    engine = lane.engine

    class Broken:
        def put_message(self, msg):
            raise RuntimeError("boom")

    lane.engine = Broken()
    try:
        r = send_v2(client, "LaneFail")
    finally:
        lane.engine = engine
    assert r.code == 1 and "boom" in r.remark
    assert send_v2(client, "LaneFail").code == 0


def test_lane_serves_many_requests_in_one_read(broker, client):
    """Requests that arrive together are answered together, in order, in one write."""
    send_v2(client, "LaneBurst")
    frames = b""
    for k in range(20):
        req = new_request(310, {"a": "PG", "b": "LaneBurst", "c": "TBW102", "d": "4", "e": "0", "f": "0",
                                "g": "1", "h": "0"}, b"m%d" % k)
        req.opaque = 1000 + k
        frames += encode_frame_bytes(req)
    sock = socket.create_connection(("127.0.0.1", broker.server.port))
    try:
        sock.sendall(frames)
        reader = FrameReader()
        got: list = []
        while len(got) < 20:
            data = sock.recv(65536)
            assert data
            got += reader.feed(data)
    finally:
        sock.close()
    assert [r.opaque for r in got] == list(range(1000, 1020))
    assert [int(r.ext_fields["queueOffset"]) for r in got] == list(range(1, 21))


# Hand-written JSON headers for SEND_MESSAGE_V2 to "LaneRaw": (id, header text, served from the bytes?)
RAW_BASE = ('"a":"PG","b":"LaneRaw","c":"TBW102","d":"4","e":"1","f":"0","g":"1700000000000","h":"3",'
            '"i":"TAGS\\u0001t\\u0002KEYS\\u0001k1 k2\\u0002WAIT\\u0001true","j":"2","m":"false"')
RAW_VARIANTS = [
    ("java", '{"code":310,"extFields":{%s},"flag":0,"language":"JAVA","opaque":%%d,'
             '"serializeTypeCurrentRPC":"JSON","version":399}' % RAW_BASE, True),
    ("spaces and key order", ' {\n "opaque" : %%d , "extFields" : { %s } ,\t"code" : 310 } ' % RAW_BASE, True),
    ("cpp numbers", '{"code":310,"extFields":{"a":"PG","b":"LaneRaw","c":"TBW102","d":4,"e":1,"f":0,'
                    '"g":1700000000000,"h":3,"i":"TAGS\\u0001t","j":2,"m":false},"flag":0,"opaque":%d}', True),
    ("repeated key", '{"code":310,"extFields":{%s,"e":"0","e":"1"},"opaque":%%d}' % RAW_BASE, True),
    ("null properties", '{"code":310,"extFields":{%s,"i":null},"opaque":%%d}' % RAW_BASE, True),
    ("code 10", '{"code":10,"extFields":{"producerGroup":"PG","topic":"LaneRaw","defaultTopic":"TBW102",'
                '"defaultTopicQueueNums":"4","queueId":"1","sysFlag":"0","bornTimestamp":"1","flag":"3",'
                '"properties":"a\\u0001b"},"opaque":%d}', True),
    ("escaped topic", '{"code":310,"extFields":{%s,"b":"L\\u0061neRaw"},"opaque":%%d}' % RAW_BASE, False),
    ("non-ascii property", '{"code":310,"extFields":{%s,"i":"TAGS\\u0001caf\u00e9"},"opaque":%%d}' % RAW_BASE,
     False),
    ("string opaque", '{"code":310,"extFields":{%s},"opaque":"%%d"}' % RAW_BASE, False),
    ("queue id with plus", '{"code":310,"extFields":{%s,"e":"+1"},"opaque":%%d}' % RAW_BASE, False),
    ("batch TRUE", '{"code":310,"extFields":{%s,"m":"TRUE"},"opaque":%%d}' % RAW_BASE, False),
    ("missing group", '{"code":310,"extFields":{%s,"a":null},"opaque":%%d}' % RAW_BASE, False),
]


def raw_exchange(port: int, frames: bytes, replies: int) -> list:
    sock = socket.create_connection(("127.0.0.1", port))
    try:
        sock.sendall(frames)
        reader = FrameReader()
        got: list = []
        while len(got) < replies:
            data = sock.recv(65536)
            if not data:
                break
            got += reader.feed(data)
        return got
    finally:
        sock.close()


def json_frame(header: str, body: bytes) -> bytes:
    h = header.encode("utf-8")
    return (4 + len(h) + len(body)).to_bytes(4, "big") + len(h).to_bytes(4, "big") + h + body


@pytest.mark.parametrize("case,header,raw", RAW_VARIANTS, ids=[v[0] for v in RAW_VARIANTS])
def test_raw_json_headers_answer_like_the_processor(broker, client, case, header, raw):
    """Each header shape gets the processor's answer and record, served from the bytes when plain."""
    send_v2(client, "LaneRaw")
    lane = lane_of(broker)
    port = broker.server.port
    served, served_raw = lane.served, lane.served_raw
    (a,) = raw_exchange(port, json_frame(header % 41, b"raw-body"), 1)
    assert lane.served_raw - served_raw == (1 if raw else 0), case
    lane.enabled = False
    try:
        (b,) = raw_exchange(port, json_frame(header % 42, b"raw-body"), 1)
    finally:
        lane.enabled = True
    assert (a.opaque, b.opaque) == (41, 42)
    assert a.code == b.code, (case, a.remark, b.remark)
    if a.code != 0:
        assert lane.served == served, case
        return
    same = {k: v for k, v in a.ext_fields.items() if k not in ("msgId", "queueOffset")}
    assert same == {k: v for k, v in b.ext_fields.items() if k not in ("msgId", "queueOffset")}
    queue_id = int(a.ext_fields["queueId"])
    m1, m2 = messages(pull(client, "LaneRaw", queue_id=queue_id, subscription="*", sys_flag=4))[-2:]
    for field in ("body", "flag", "sys_flag", "born_timestamp", "reconsume_times", "properties_str", "topic"):
        assert getattr(m1, field) == getattr(m2, field), (case, field)
    assert m1.msg_id == a.ext_fields["msgId"] and m1.body == b"raw-body"


def test_raw_lane_response_bytes_are_the_codecs(broker, client):
    send_v2(client, "LaneRaw")
    header = RAW_VARIANTS[0][1]
    for opaque in (0, 7, -5, 2147483647):
        (resp,) = raw_exchange(broker.server.port, json_frame(header % opaque, b"x"), 1)
        assert resp.opaque == opaque
        assert encode_frame_bytes(resp) == encode_frame_bytes(
            prepare_reply(resp, new_response(0, None, resp.ext_fields)))


def test_sends_before_a_malformed_frame_are_answered_then_the_connection_closes(broker, client):
    send_v2(client, "LaneRaw")
    lane = lane_of(broker)
    before = lane.served_raw
    good = json_frame(RAW_VARIANTS[0][1] % 9, b"ok")
    bad = json_frame('{"code":310,"extFields":{"b":"LaneRaw"}', b"")        # cut-off JSON
    got = raw_exchange(broker.server.port, good + bad + good, 3)
    assert [r.opaque for r in got] == [9]                # the first answered, then closed
    assert lane.served_raw == before + 1
    assert send_v2(client, "LaneRaw").code == 0           # other connections carry on


# ROCKETMQ (binary) headers: what the Java client sends with rocketmq.serialize.type=ROCKETMQ (RocketMQ's
# own benchmark producer does). (id, extFields overrides, served from the bytes?)
BIN_BASE = {"a": "PG", "b": "LaneBin", "c": "TBW102", "d": "4", "e": "1", "f": "0", "g": "1700000000000",
            "h": "3", "i": "TAGS\x01t\x02KEYS\x01k1 k2\x02WAIT\x01true", "j": "2", "m": "false"}
BIN_VARIANTS = [
    ("java", {}, True),
    ("no reconsume or batch", {"j": None, "m": None}, True),
    ("non-ascii property", {"i": "TAGS\x01caf\u00e9"}, False),
    ("queue id with plus", {"e": "+1"}, False),
    ("batch", {"m": "true"}, False),
    ("missing group", {"a": None}, False),
    ("unknown topic", {"b": "LaneBinNowhere"}, False),
]


def bin_frame(ext: dict, body: bytes, opaque: int, code: int = 310) -> bytes:
    from rmqd.remoting.command import RemotingCommand
    cmd = RemotingCommand(code, {k: v for k, v in ext.items() if v is not None}, body, None, opaque, 0)
    cmd.serialize_type = ROCKETMQ
    return encode_frame_bytes(cmd)


@pytest.mark.slow
@pytest.mark.parametrize("case,over,raw", BIN_VARIANTS, ids=[v[0] for v in BIN_VARIANTS])
def test_rocketmq_headers_answer_like_the_processor(broker, client, case, over, raw):
    send_v2(client, "LaneBin")
    lane = lane_of(broker)
    port = broker.server.port
    ext = dict(BIN_BASE, **over)
    served_raw = lane.served_raw
    (a,) = raw_exchange(port, bin_frame(ext, b"bin-body", 51), 1)
    assert lane.served_raw - served_raw == (1 if raw else 0), case
    lane.enabled = False
    try:
        (b,) = raw_exchange(port, bin_frame(ext, b"bin-body", 52), 1)
    finally:
        lane.enabled = True
    assert (a.opaque, b.opaque, a.serialize_type, b.serialize_type) == (51, 52, ROCKETMQ, ROCKETMQ)
    assert (a.code, a.remark) == (b.code, b.remark), case
    if a.code != 0:
        return
    same = {k: v for k, v in a.ext_fields.items() if k not in ("msgId", "queueOffset")}
    assert same == {k: v for k, v in b.ext_fields.items() if k not in ("msgId", "queueOffset")}
    m1, m2 = messages(pull(client, ext["b"], queue_id=int(a.ext_fields["queueId"]), subscription="*",
                           sys_flag=4))[-2:]
    for field in ("body", "flag", "sys_flag", "born_timestamp", "reconsume_times", "properties_str", "topic"):
        assert getattr(m1, field) == getattr(m2, field), (case, field)
    assert m1.msg_id == a.ext_fields["msgId"] and m1.body == b"bin-body"


def test_rocketmq_response_bytes_are_the_codecs(broker, client):
    send_v2(client, "LaneBin")
    for opaque in (0, 7, -5, 2147483647):
        frame = bin_frame(BIN_BASE, b"x", opaque)
        (resp,) = raw_exchange(broker.server.port, frame, 1)
        assert resp.opaque == opaque and resp.serialize_type == ROCKETMQ
        expected = prepare_reply(resp, new_response(0, None, resp.ext_fields))
        expected.serialize_type = ROCKETMQ
        assert encode_frame_bytes(resp) == encode_frame_bytes(expected)
    # code 10 (SEND_MESSAGE, full field names) is served from the bytes too
    lane = lane_of(broker)
    before = lane.served_raw
    v1 = {"producerGroup": "PG", "topic": "LaneBin", "defaultTopic": "TBW102", "defaultTopicQueueNums": "4",
          "queueId": "0", "sysFlag": "0", "bornTimestamp": "1", "flag": "0", "properties": "a\x01b"}
    (resp,) = raw_exchange(broker.server.port, bin_frame(v1, b"v1", 3, code=10), 1)
    assert resp.code == 0 and lane.served_raw == before + 1


def test_truncated_rocketmq_header_is_left_to_the_decoder(broker, client):
    """A header whose extFields overrun it is refused by the decoder (the connection closes) as before."""
    send_v2(client, "LaneBin")
    frame = bytearray(bin_frame(BIN_BASE, b"", 5))
    hlen = int.from_bytes(frame[4:8], "big") & 0xFFFFFF
    ext_len_at = 8 + 17                                      # no remark: the extFields length follows
    frame[ext_len_at:ext_len_at + 4] = (hlen * 2).to_bytes(4, "big")
    got = raw_exchange(broker.server.port, bytes(frame), 1)
    assert got == []
    assert send_v2(client, "LaneBin").code == 0
