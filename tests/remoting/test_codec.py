"""Byte-exact tests of the remoting codec, both serialize types."""
import struct

import orjson
import pytest

from rmqd.remoting.command import (
    JSON,
    ROCKETMQ,
    FrameError,
    FrameReader,
    RemotingCommand,
    decode_header,
    encode_frame,
    encode_frame_bytes,
    new_request,
    new_response,
    prepare_reply,
)


def frame(stype: int, header: bytes, body: bytes = b"") -> bytes:
    return struct.pack(">II", 4 + len(header) + len(body), (stype << 24) | len(header)) + header + body


def rocketmq_header(code, lang, version, opaque, flag, remark=b"", ext=()):
    entries = b"".join(struct.pack(">H", len(k)) + k + struct.pack(">i", len(v)) + v for k, v in ext)
    return (struct.pack(">hBhii", code, lang, version, opaque, flag) + struct.pack(">i", len(remark)) + remark
            + struct.pack(">i", len(entries)) + entries)


def test_json_response_bytes_exact():
    req = RemotingCommand(310, {"a": "PG"}, opaque=7, language="CPP", version=333)
    resp = prepare_reply(req, new_response(0, None, {"msgId": "AB", "queueId": 1, "queueOffset": 5}))
    header = (b'{"code":0,"extFields":{"msgId":"AB","queueId":"1","queueOffset":"5"},"flag":1,'
              b'"language":"JAVA","opaque":7,"serializeTypeCurrentRPC":"JSON","version":409}')
    assert encode_frame_bytes(resp) == frame(JSON, header)


def test_json_request_with_remark_and_body():
    cmd = RemotingCommand(11, None, b"xyz", "hi", opaque=1)
    header = (b'{"code":11,"flag":0,"language":"JAVA","opaque":1,"remark":"hi",'
              b'"serializeTypeCurrentRPC":"JSON","version":409}')
    assert encode_frame_bytes(cmd) == frame(JSON, header, b"xyz")


def test_rocketmq_header_bytes_exact():
    cmd = RemotingCommand(105, {"topic": "TopicTest"}, None, "r", opaque=9, flag=0,
                          language="JAVA", version=409, serialize_type=ROCKETMQ)
    expected = frame(ROCKETMQ, rocketmq_header(105, 0, 409, 9, 0, b"r", [(b"topic", b"TopicTest")]))
    assert encode_frame_bytes(cmd) == expected


def test_rocketmq_decode_all_fields():
    header = rocketmq_header(310, 9, 317, 123456, 2, "réponse".encode(), [(b"a", b"PG"), (b"e", b"-1")])
    reader = FrameReader()
    [cmd] = reader.feed(frame(ROCKETMQ, header, b"body"))
    assert (cmd.code, cmd.language, cmd.version, cmd.opaque, cmd.flag) == (310, "GO", 317, 123456, 2)
    assert cmd.remark == "réponse"
    assert cmd.ext_fields == {"a": "PG", "e": "-1"}
    assert cmd.body == b"body" and cmd.is_oneway and not cmd.is_response
    assert cmd.serialize_type == ROCKETMQ


def test_rocketmq_negative_code_and_empty_remark_is_none():
    [cmd] = FrameReader().feed(frame(ROCKETMQ, rocketmq_header(-1, 1, 0, -5, 1)))
    assert cmd.code == -1 and cmd.opaque == -5 and cmd.remark is None and cmd.ext_fields is None


def test_json_decode_is_lenient_like_cpp():
    # C++ (jsoncpp FastWriter): numbers in extFields, trailing newline, language name string.
    header = (b'{"code":310,"extFields":{"a":"PG","e":1,"f":0,"k":false,"m":true,"x":null,"AccessKey":""},'
              b'"flag":0,"language":"CPP","opaque":3,"remark":"","serializeTypeCurrentRPC":"JSON","version":333}\n')
    [cmd] = FrameReader().feed(frame(JSON, header, b"hello"))
    assert cmd.ext_fields == {"a": "PG", "e": "1", "f": "0", "k": "false", "m": "true", "AccessKey": ""}
    assert cmd.language == "CPP" and cmd.version == 333 and cmd.opaque == 3 and cmd.remark == ""
    assert bytes(cmd.body) == b"hello"


def test_json_decode_language_ordinal_and_string_numbers():
    header = b'{"code":"34","language":9,"opaque":"12","flag":0,"version":317}'
    [cmd] = FrameReader().feed(frame(JSON, header))
    assert (cmd.code, cmd.language, cmd.opaque) == (34, "GO", 12)


@pytest.mark.parametrize("stype", [JSON, ROCKETMQ])
def test_round_trip_both_types(stype):
    cmd = RemotingCommand(320, {"b": "T", "k": "v" * 300, "ü": "ß"}, b"\x00\x01" * 50, "remark ✓",
                          opaque=77, flag=2, language="CPP", version=333, serialize_type=stype)
    [back] = FrameReader().feed(encode_frame_bytes(cmd))
    assert (back.code, back.ext_fields, bytes(back.body), back.remark, back.opaque, back.flag, back.language,
            back.version, back.serialize_type) == (320, cmd.ext_fields, cmd.body, "remark ✓", 77, 2, "CPP", 333, stype)


def test_multipart_body_is_written_without_joining():
    parts = [b"abc", memoryview(b"defg"), b""]
    cmd = new_response(0, body=parts)
    buffers = encode_frame(cmd)
    assert buffers[1] is parts[0] and buffers[2] is parts[1] and len(buffers) == 3
    [back] = FrameReader().feed(b"".join(bytes(b) for b in buffers))
    assert back.body == b"abcdefg"


def test_reader_handles_every_split_point_and_many_frames():
    frames = [encode_frame_bytes(RemotingCommand(10 + i, {"i": i}, b"x" * i, opaque=i)) for i in range(5)]
    stream = b"".join(frames)
    for cut in range(len(stream) + 1):
        reader = FrameReader()
        out = reader.feed(stream[:cut]) + reader.feed(stream[cut:])
        assert [c.opaque for c in out] == list(range(5))
        assert [bytes(c.body or b"") for c in out] == [b"x" * i for i in range(5)]
        assert reader.buffered == 0


def test_reader_byte_by_byte():
    data = encode_frame_bytes(RemotingCommand(11, {"q": "1"}, b"payload", opaque=5))
    reader = FrameReader()
    out = []
    for i in range(len(data)):
        out += reader.feed(data[i:i + 1])
    assert len(out) == 1 and out[0].body == b"payload"


def test_body_is_zero_copy_view_of_received_bytes():
    data = encode_frame_bytes(RemotingCommand(10, None, b"B" * 1000))
    [cmd] = FrameReader().feed(data)
    assert isinstance(cmd.body, memoryview) and cmd.body.obj is data


@pytest.mark.parametrize("raw, message", [
    (struct.pack(">I", 3) + b"abc", "< 4"),
    (struct.pack(">II", 8, 100) + b"{}{}", "header length"),
    (frame(JSON, b"{not json"), "bad JSON"),
    (frame(JSON, b"[1,2]"), "not an object"),
    (frame(5, b"{}"), "unknown serialize type"),
    (struct.pack(">I", 16 * 1024 * 1024 + 1), "over max"),
    (frame(ROCKETMQ, b"\x00" * 10), "shorter than 21"),
    (frame(ROCKETMQ, rocketmq_header(1, 0, 0, 0, 0)[:-4] + struct.pack(">i", 50)), "extFields length"),
    (frame(JSON, b'{"code":"abc"}'), "not an int"),
])
def test_malformed_frames_raise(raw, message):
    with pytest.raises(FrameError, match=message):
        FrameReader().feed(raw)


def test_oversized_frame_rejected_before_body_arrives():
    reader = FrameReader(max_frame_length=1024)
    with pytest.raises(FrameError):
        reader.feed(struct.pack(">I", 2048) + b"\x00\x00")


def test_decode_header_function_both_types():
    assert decode_header(JSON, b'{"code":1}').code == 1
    assert decode_header(ROCKETMQ, rocketmq_header(2, 0, 0, 0, 0)).code == 2
    with pytest.raises(FrameError):
        decode_header(3, b"")


def test_prepare_reply_copies_opaque_and_serialize_type():
    req = RemotingCommand(34, None, opaque=42, serialize_type=ROCKETMQ, version=317)
    resp = prepare_reply(req, new_response(0))
    assert resp.opaque == 42 and resp.flag & 1 and resp.serialize_type == ROCKETMQ and resp.version == 409


def test_new_request_drops_none_fields():
    req = new_request(40, {"consumerGroup": "G", "x": None}, oneway=True)
    assert req.ext_fields == {"consumerGroup": "G"} and req.is_oneway
    header = orjson.loads(encode_frame_bytes(req)[8:])
    assert header["extFields"] == {"consumerGroup": "G"} and header["flag"] == 2
