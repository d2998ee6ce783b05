"""The C scanner of JSON remoting headers (rmqd.cython_ext.json_scan) used by the send lane.

Whatever it accepts must mean exactly what the ordinary decoder (orjson) makes of the header;
whatever it is not sure about it must refuse, leaving the header to the decoder.
"""
from __future__ import annotations

import random

import pytest

from rmqd.cython_ext.json_scan import scan
from rmqd.remoting.command import FrameError, decode_header

JAVA = (b'{"code":310,"extFields":{"a":"PG","b":"TopicA","c":"TBW102","d":"4","e":"1","f":"0",'
        b'"g":"1700000000000","h":"0","i":"UNIQ_KEY\\u0001AC11\\u0002WAIT\\u0001true\\u0002TAGS\\u0001TagA",'
        b'"j":"0","k":"false","m":"false"},"flag":0,"language":"JAVA","opaque":17,'
        b'"serializeTypeCurrentRPC":"JSON","version":399}')
CPP = (b'{"code":310,"extFields":{"a":"PG","b":"TopicA","c":"TBW102","d":4,"e":-1,"f":0,"g":1700000000000,'
       b'"h":0,"i":"TAGS\\u0001t\\u0002KEYS\\u0001k1 k2","j":0,"k":false,"m":false},"flag":0,"language":"CPP",'
       b'"opaque":5,"serializeTypeCurrentRPC":"JSON","version":405}')

ACCEPTED = [
    JAVA,
    CPP,
    b'  {\n "opaque" : 3 ,\r\n\t"extFields" : { "b" : "T" } , "code" : 10 }  ',
    b'{"code":310,"extFields":{"e":"0","e":"1"},"extFields":{"e":"2"}}',       # last value wins
    b'{"code":310,"extFields":{"i":null,"b":"T"},"remark":null}',               # null = absent
    b'{"code":310,"extFields":{"i":"q\\"\\\\\\/\\b\\f\\n\\r\\t\\u007f"}}',       # every escape
    b'{"code":310,"extFields":{}}',
    b'{}',
    b'{"code":-0,"opaque":-2147483648,"extFields":null}',
]

REFUSED = [
    b'',
    b'[]',
    b'{"code":310,"extFields":{"i":"caf\xc3\xa9"}}',            # non-ASCII: the decoder checks UTF-8
    b'{"code":310,"extFields":{"i":"caf\\u00e9"}}',             # escape decoding to non-ASCII
    b'{"code":310,"extFields":{"i":"\\ud800"}}',                # lone surrogate (orjson rejects)
    b'{"code":310,"extFields":{"b":{"x":1}}}',                  # nested object
    b'{"code":310,"extFields":{"b":[1]}}',
    b'{"code":310,"remark":{"x":1}}',
    b'{"code":310.0}',
    b'{"code":1e3}',
    b'{"code":0310}',                                           # leading zero (invalid JSON)
    b'{"code":310,}',                                           # trailing comma (invalid JSON)
    b'{"code":310} x',                                          # content after the document
    b'{"code":310',
    b'{"code":"310"}'[:-1],
    b'{"code":310,"extFields":{"i":"a\x01b"}}',                 # raw control character (invalid)
    b'{"code":310,"extFields":{"i":"\\x"}}',                    # bad escape (invalid)
    b'{"code":310,"extFields":"x"}',                            # extFields not an object
    b'{"co\\u0064e":310}',                                      # escaped key
    b'{"code":310,"extFields":{' + b",".join(b'"k%d":"v"' % i for i in range(33)) + b'}}',
    b'{"code":tru}',
    b'{"code":12345678901234567890}',
]


def decoded(header: bytes) -> dict:
    cmd = decode_header(0, header)
    return {"code": cmd.code, "flag": cmd.flag, "opaque": cmd.opaque, "extFields": cmd.ext_fields}


@pytest.mark.parametrize("header", ACCEPTED)
def test_accepted_headers_mean_what_the_decoder_reads(header):
    got = scan(header)
    assert got is not None
    assert got == decoded(header)


@pytest.mark.parametrize("header", REFUSED)
def test_refused_headers(header):
    assert scan(header) is None


def test_java_header_fields():
    got = scan(JAVA)
    assert got["code"] == 310 and got["opaque"] == 17 and got["flag"] == 0
    assert got["extFields"]["i"] == "UNIQ_KEY\x01AC11\x02WAIT\x01true\x02TAGS\x01TagA"
    assert scan(CPP)["extFields"]["e"] == "-1" and scan(CPP)["extFields"]["m"] == "false"


def test_mutated_headers_are_refused_or_read_as_the_decoder_reads_them():
    """Seeded fuzzing: every mutation the scanner accepts, orjson accepts with the same meaning."""
    rng = random.Random(20261122)
    alphabet = b'{}[]:,"\\ 0123456789-.eEtrufalsn\x01\x7f\xc3abu'
    accepted = 0
    for _ in range(4000):
        h = bytearray(rng.choice((JAVA, CPP)))
        for _ in range(rng.randint(1, 3)):
            pos = rng.randrange(len(h))
            op = rng.random()
            if op < 0.4:
                h[pos] = rng.choice(alphabet)
            elif op < 0.7:
                del h[pos]
            else:
                h.insert(pos, rng.choice(alphabet))
        h = bytes(h)
        got = scan(h)
        if got is None:
            continue
        accepted += 1
        try:
            want = decoded(h)
        except FrameError as exc:
            # Only a code/flag/opaque the decoder cannot take as an int; the lane refuses those too.
            assert not all(got[k] is not None and -2**31 <= got[k] < 2**31
                           for k in ("code", "flag", "opaque")), (h, exc)
            continue
        assert got == want, h
    assert accepted > 400          # the fuzzing exercised the accepting side too
