"""Frames of the real C++ client (1.x wheel and 2.x), byte-exact, through our codec.

The live test starts plain socket listeners (a fake name server and a fake broker, no rmqd
server code), points the C++ producer at them, records its GET_ROUTEINFO_BY_TOPIC request,
answers it with a route encoded by our codec, records the next frame (the send), answers it, and
checks that the client accepted both answers.  Stored captures (tests/fixtures/cpp_frames) are
decoded byte for byte as well.
"""
from __future__ import annotations

import os
import struct
import sys
from pathlib import Path

import orjson
import pytest

from clientrunner import ensure_cpp2_python, run_client_script     # compat_tests/ (pyproject's pythonpath)
from rmqd.remoting.command import FrameReader, new_response
from tests.kit.peers import RecordingPeer

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "fixtures" / "cpp_frames"


def fixture_files():
    return sorted(p for p in FIXTURES.glob("*.bin"))


@pytest.mark.parametrize("path", fixture_files(), ids=lambda p: p.name)
def test_captured_frame_decodes_exactly(path):
    raw = path.read_bytes()
    length, word = struct.unpack_from(">II", raw)
    assert length == len(raw) - 4
    assert word >> 24 == 0                                   # C++ never sets the type byte
    header = raw[8:8 + word]
    [cmd] = FrameReader().feed(raw)
    expected = orjson.loads(header)
    assert cmd.code == expected["code"] and cmd.opaque == expected["opaque"] and cmd.flag == expected["flag"]
    assert cmd.language == "CPP" and cmd.version in (63, 333)
    assert cmd.remark == expected.get("remark")
    # Every ext value arrives as a string, whatever JSON type C++ used.
    assert cmd.ext_fields == {k: ("true" if v is True else "false" if v is False else str(v))
                              for k, v in expected.get("extFields", {}).items()}
    assert bytes(cmd.body or b"") == raw[8 + word:]
    # C++ writes jsoncpp FastWriter output: compact, keys sorted, one trailing newline.
    assert header.endswith(b"}\n")
    keys = list(expected)
    assert keys == sorted(keys)


def test_code_of_captures_matches_file_names():
    for path in fixture_files():
        code = int(path.name.split("_")[1])
        [cmd] = FrameReader().feed(path.read_bytes())
        assert cmd.code == code, path.name


PRODUCER = r'''
from rocketmq.client import Producer, Message
p = Producer('CapturePG')
p.set_namesrv_addr(NAMESRV)
p.set_timeout(3000)
p.start()
m = Message('CaptureTopic'); m.set_tags('TagA'); m.set_keys('k1'); m.set_body('hello capture')
m.set_property('user', 'v')
r = p.send_sync(m)
emit(op='send', status=int(r.status), msg_id=r.msg_id, offset=r.offset)
_os._exit(0)
'''

SEND_ANSWER = {"msgId": "7F00000100002A9F0000000000000064", "queueId": "0", "queueOffset": "7",
               "MSG_REGION": "DefaultRegion", "TRACE_ON": "true"}


@pytest.mark.slow
def test_live_capture_route_request_and_send(client_pythons_for_capture):
    for name, python in client_pythons_for_capture.items():
        broker = RecordingPeer(lambda cmd: new_response(0, None, SEND_ANSWER) if cmd.code in (10, 310)
                          else new_response(0))
        route = (b'{"brokerDatas":[{"brokerAddrs":{0:"127.0.0.1:%d"},"brokerName":"fake","cluster":"C"}],'
                 b'"filterServerTable":{},"queueDatas":[{"brokerName":"fake","perm":6,"readQueueNums":1,'
                 b'"topicSysFlag":0,"writeQueueNums":1}]}' % broker.port)
        namesrv = RecordingPeer(lambda cmd: new_response(0, body=route) if cmd.code == 105 else new_response(0))
        try:
            res = run_client_script(python, PRODUCER, env={"NAMESRV": f"127.0.0.1:{namesrv.port}"}, timeout=40)
            assert res.events_of("send"), f"{name}: {res.stderr[-1500:]} {res.client_log[-1500:]}"
            [sent] = res.events_of("send")
            assert sent["status"] == 0 and sent["offset"] == 7, (name, sent)

            raw, first = namesrv.frames[0]
            assert first.code == 105 and first.ext_fields["topic"] == "CaptureTopic"
            assert struct.unpack_from(">I", raw, 4)[0] >> 24 == 0
            # Our answer, byte for byte: JSON type, opaque echoed, response flag, version 409.
            header = (b'{"code":0,"flag":1,"language":"JAVA","opaque":%d,"serializeTypeCurrentRPC":"JSON",'
                      b'"version":409}' % first.opaque)
            assert namesrv.answered[0] == struct.pack(">II", 4 + len(header) + len(route), len(header)) + header + route

            sends = [cmd for _, cmd in broker.frames if cmd.code in (10, 310)]
            assert sends, f"{name}: no send frame among {[c.code for _, c in broker.frames]}"
            send = sends[0]
            topic_field = "topic" if send.code == 10 else "b"
            assert send.ext_fields[topic_field] == "CaptureTopic"
            assert bytes(send.body) == b"hello capture"
            props = send.ext_fields["properties" if send.code == 10 else "i"]
            pairs = dict(p.split("\x01", 1) for p in props.split("\x02") if "\x01" in p)
            assert pairs["TAGS"] == "TagA" and pairs["KEYS"] == "k1" and pairs["user"] == "v"
            assert len(pairs["UNIQ_KEY"]) == 32
            assert sent["msg_id"] == pairs["UNIQ_KEY"]          # the user-visible id is the UNIQ_KEY
        finally:
            namesrv.close()
            broker.close()


@pytest.fixture(scope="module")
def client_pythons_for_capture():
    """cpp1 = this interpreter's wheel; cpp2 = .venv-cpp2 (created by compat_tests' fixture)."""
    return {"cpp1": os.environ.get("RMQD_CPP1_PYTHON", sys.executable), "cpp2": ensure_cpp2_python()}
