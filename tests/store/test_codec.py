import socket
import struct
import zlib

import pytest

from rmqd.store.message import (MessageToStore, decode_message, decode_messages,
                                decode_offset_msg_id, decode_properties, encode_properties,
                                java_string_hash, offset_msg_id, tags_code_of)
from rmqd.store.message_store import PutMessageStatus


def expected_record(topic, qid, flag, qoff, phys, sysflag, born_ts, born, store_ts, store, recons,
                    prep, body, props):
    """Independent hand-built §4.1 record."""
    def host(h):
        ip, port = h
        fam = socket.AF_INET6 if ":" in ip else socket.AF_INET
        return socket.inet_pton(fam, ip) + struct.pack(">i", port)
    bh, sh = host(born), host(store)
    t, p = topic.encode(), props.encode()
    out = b"".join([
        struct.pack(">I", 0xDAA320A7),
        struct.pack(">i", zlib.crc32(body) & 0x7FFFFFFF),
        struct.pack(">i", qid), struct.pack(">i", flag), struct.pack(">q", qoff),
        struct.pack(">q", phys), struct.pack(">i", sysflag), struct.pack(">q", born_ts), bh,
        struct.pack(">q", store_ts), sh, struct.pack(">i", recons), struct.pack(">q", prep),
        struct.pack(">i", len(body)), body, struct.pack(">B", len(t)), t,
        struct.pack(">h", len(p)), p,
    ])
    return struct.pack(">i", len(out) + 4) + out


def test_java_string_hash():
    assert java_string_hash("TagA") == 2598919
    assert java_string_hash("") == 0
    # reference values computed with Java semantics (UTF-16, int overflow)
    def ref(s):
        h = 0
        data = s.encode("utf-16-be")
        for i in range(0, len(data), 2):
            h = (31 * h + int.from_bytes(data[i:i + 2], "big")) & 0xFFFFFFFF
        return h - (1 << 32) if h >= 1 << 31 else h
    for s in ["TagA", "a" * 50, "中文标签", "emoji😀x", "T#UNIQ123"]:
        assert java_string_hash(s) == ref(s)


def test_properties_lenient():
    assert decode_properties("a\x01b\x02c\x01d") == {"a": "b", "c": "d"}
    assert decode_properties("a\x01b\x02") == {"a": "b"}
    assert decode_properties("\x02\x02a\x01b\x02\x01x\x02y\x01\x02zz") == {"a": "b"}
    assert decode_properties("") == {}
    s = encode_properties({"KEYS": "k1 k2", "TAGS": "t", "N": None})
    assert s == "KEYS\x01k1 k2\x02TAGS\x01t"
    assert decode_properties(s) == {"KEYS": "k1 k2", "TAGS": "t"}
    assert tags_code_of(s) == java_string_hash("t")
    assert tags_code_of("KEYS\x01x") == 0


def test_offset_msg_id():
    mid = offset_msg_id("10.0.0.1", 10911, 123)
    assert mid == "0A00000100002A9F000000000000007B"
    assert decode_offset_msg_id(mid) == ("10.0.0.1", 10911, 123)
    mid6 = offset_msg_id("fe80::1", 10911, 1 << 40)
    assert len(mid6) == 56 and mid6 == mid6.upper()
    assert decode_offset_msg_id(mid6) == ("fe80::1", 10911, 1 << 40)
    with pytest.raises(ValueError):
        decode_offset_msg_id("ABCD")


@pytest.mark.parametrize("born,store", [
    (("192.168.1.7", 50123), ("10.0.0.1", 10911)),
    (("2001:db8::7", 50123), ("10.0.0.1", 10911)),
    (("192.168.1.7", 50123), ("2001:db8::1", 10911)),
    (("::1", 1), ("fe80::abcd", 65535)),
])
def test_byte_exact_record_and_round_trip(make_store, born, store):
    s = make_store()
    # a first message so physical and queue offsets are non-zero
    s.put_message(MessageToStore.create("T", 3, b"first"))
    props = encode_properties({"TAGS": "TagA", "KEYS": "k1 k2", "UNIQ_KEY": "ABC", "中": "文"})
    body = bytes(range(256)) * 3
    m = MessageToStore(topic="T", queue_id=3, body=body, properties=props, flag=7, sys_flag=0x8,
                       born_timestamp=1_699_999_999_123, born_host=born, store_host=store,
                       reconsume_times=2, prepared_transaction_offset=4242,
                       tags_code=tags_code_of(props), keys="k1 k2", uniq_key="ABC")
    r = s.put_message(m)
    assert r.status == PutMessageStatus.PUT_OK and r.queue_offset == 1
    phys = r.wrote_offsets[0]
    raw = s.read_message(phys)
    sysflag = 0x8 | (0x10 if ":" in born[0] else 0) | (0x20 if ":" in store[0] else 0)
    exp = expected_record("T", 3, 7, 1, phys, sysflag, 1_699_999_999_123, born, r.store_timestamp,
                          store, 2, 4242, body, props)
    assert raw == exp
    assert r.wrote_bytes == len(exp)
    d = decode_message(raw)
    assert (d.topic, d.queue_id, d.flag, d.queue_offset, d.commit_log_offset) == ("T", 3, 7, 1, phys)
    assert d.sys_flag == sysflag and d.born_host == born and d.store_host == store
    assert d.born_timestamp == 1_699_999_999_123 and d.store_timestamp == r.store_timestamp
    assert d.reconsume_times == 2 and d.prepared_transaction_offset == 4242
    assert d.body == body and d.body_crc == zlib.crc32(body) & 0x7FFFFFFF
    assert d.properties == {"TAGS": "TagA", "KEYS": "k1 k2", "UNIQ_KEY": "ABC", "中": "文"}
    assert d.msg_id == offset_msg_id(store[0], store[1], phys)
    g = s.get_messages("T", 3, 0, 32)
    assert [bytes(b) for b in g.buffers][1] == exp
    assert [x.queue_offset for x in decode_messages(g.body())] == [0, 1]


def test_empty_body_and_props(make_store):
    s = make_store()
    r = s.put_message(MessageToStore(topic="E", queue_id=0, body=b""))
    d = decode_message(s.read_message(r.wrote_offsets[0]))
    assert d.body == b"" and d.properties == {} and d.body_crc == 0
    assert d.store_size == 91 + 1  # 91 + body + topic + props
