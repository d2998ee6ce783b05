"""QUERY_MESSAGE (12), VIEW_MESSAGE_BY_ID (33) and SEARCH_OFFSET_BY_TIMESTAMP (29) boundaries
(README §3.3, §3.5)."""
from __future__ import annotations

import pytest

from rmqd.processors.query import record_matches
from rmqd.remoting.command import new_request
from rmqd.store.message import MessageToStore, decode_messages, decode_offset_msg_id
from rmqd.store.message_store import MessageStore, StoreConfig
from tests.features.msgfeat_helpers import Broker, props, send

pytestmark = pytest.mark.timeout(30)

T0 = 4_000_000_000_000          # fake store clock, far beyond any real store time


@pytest.fixture(scope="module")
def rb(tmp_path_factory):
    b = Broker(str(tmp_path_factory.mktemp("querystore"))).start()
    yield b
    b.stop()


def query(client, topic: str, key: str, max_num: int = 32, begin: int = 0, end: int = 2 ** 62,
          unique: bool = False):
    ext = {"topic": topic, "key": key, "maxNum": str(max_num), "beginTimestamp": str(begin),
           "endTimestamp": str(end)}
    if unique:
        ext["_UNIQUE_KEY_QUERY"] = "true"
    return client.invoke(new_request(12, ext))


def test_query_by_key_and_unique_key(rb):
    c = rb.client
    r1 = send(c, "QTopic", b"m1", properties=props(KEYS="order-1 shared", UNIQ_KEY="UQ1"))
    r2 = send(c, "QTopic", b"m2", properties=props(KEYS="order-2 shared", UNIQ_KEY="UQ2"))
    send(c, "QOther", b"o1", properties=props(KEYS="order-1", UNIQ_KEY="UQ3"))
    r = query(c, "QTopic", "order-1")
    assert r.code == 0, r.remark
    (m,) = decode_messages(r.body_bytes())
    assert m.body == b"m1" and m.msg_id == r1.ext_fields["msgId"]
    ext = r.ext_fields
    assert int(ext["indexLastUpdateTimestamp"]) > 0
    assert int(ext["indexLastUpdatePhyoffset"]) >= decode_offset_msg_id(r2.ext_fields["msgId"])[2]
    assert sorted(m.body for m in decode_messages(query(c, "QTopic", "shared").body_bytes())) == [b"m1", b"m2"]
    (u,) = decode_messages(query(c, "QTopic", "UQ2", unique=True).body_bytes())
    assert u.body == b"m2"
    (o,) = decode_messages(query(c, "QOther", "order-1").body_bytes())
    assert o.body == b"o1"


def test_query_not_found_and_time_range(rb):
    c = rb.client
    send(c, "QRange", b"r1", properties=props(KEYS="rk"))
    nf = query(c, "QRange", "missing")
    assert (nf.code, nf.remark) == (22, "can not find message, maybe time range not correct")
    assert "indexLastUpdateTimestamp" in nf.ext_fields and "indexLastUpdatePhyoffset" in nf.ext_fields
    assert query(c, "QRange", "rk", begin=1, end=1000).code == 22            # far past
    assert query(c, "QRange", "rk", begin=T0 * 2, end=T0 * 3).code == 22     # future
    assert query(c, "QRange", "rk").code == 0
    assert query(c, "QRangeX", "rk").code == 22                               # other topic


def test_max_num_and_unique_key_override(rb):
    c = rb.client
    for i in range(5):
        send(c, "QMax", b"d%d" % i, properties=props(KEYS="dup"))
    assert len(decode_messages(query(c, "QMax", "dup", max_num=2).body_bytes())) == 2
    assert len(decode_messages(query(c, "QMax", "dup", max_num=32).body_bytes())) == 5
    # _UNIQUE_KEY_QUERY replaces maxNum with defaultQueryMaxNum (32)
    assert len(decode_messages(query(c, "QMax", "dup", max_num=1, unique=True).body_bytes())) == 5


def test_missing_header_field(rb):
    r = rb.client.invoke(new_request(12, {"topic": "QTopic", "key": "k"}))
    assert r.code == 1 and "maxNum" in r.remark


def test_record_matches_drops_collisions(tmp_path):
    st = MessageStore(StoreConfig(store_root_dir=str(tmp_path), mapped_file_size_commitlog=1 << 20,
                                  mapped_file_size_consume_queue=6000))
    st.start()
    try:
        r = st.put_message(MessageToStore.create("T", 0, b"x", {"KEYS": "a bb", "UNIQ_KEY": "U"}))
        rec = st.read_message(r.wrote_offsets[0])
    finally:
        st.shutdown()
    assert record_matches(rec, "T", "a") and record_matches(rec, "T", "bb") and record_matches(rec, "T", "U")
    assert not record_matches(rec, "T", "b") and not record_matches(rec, "T2", "a")
    assert not record_matches(b"\x00" * 10, "T", "a")


def test_view_message_by_id(rb):
    c = rb.client
    r = send(c, "QView", b"view-me", properties=props(KEYS="v"))
    phys = decode_offset_msg_id(r.ext_fields["msgId"])[2]
    v = c.invoke(new_request(33, {"offset": str(phys)}))
    assert v.code == 0
    (m,) = decode_messages(v.body_bytes())
    assert m.body == b"view-me" and m.commit_log_offset == phys and m.topic == "QView"
    for bad in (phys + 1, 10 ** 12, -1):
        e = c.invoke(new_request(33, {"offset": str(bad)}))
        assert (e.code, e.remark) == (1, f"can not find message by the offset, {bad}")
    assert c.invoke(new_request(33, {})).code == 1


# ------------------------------------------------------------------------ SEARCH_OFFSET_BY_TIMESTAMP
def search(client, topic: str, ts: int, queue_id: int = 0) -> int:
    r = client.invoke(new_request(29, {"topic": topic, "queueId": str(queue_id), "timestamp": str(ts)}))
    assert r.code == 0, r.remark
    return int(r.ext_fields["offset"])


def test_search_offset_by_timestamp_boundaries(tmp_path):
    b = Broker(str(tmp_path / "s")).start()
    try:
        times = [T0, T0 + 10, T0 + 10, T0 + 10, T0 + 20, T0 + 40]
        pending = list(times)
        store = b.broker.store
        real_clock = store.clock
        store.clock = lambda: pending.pop(0) if pending else real_clock()
        try:
            for i in range(len(times)):
                assert send(b.client, "SearchT", b"%d" % i).code == 0
        finally:
            store.clock = real_clock
        c = b.client
        assert search(c, "SearchT", T0 - 1000) == 0          # before the first
        assert search(c, "SearchT", T0) == 0                 # exact first
        assert search(c, "SearchT", T0 + 10) == 1            # exact, ties: the earliest
        assert search(c, "SearchT", T0 + 3) == 0             # between: closer to the left
        assert search(c, "SearchT", T0 + 7) == 1             # between: closer to the right
        assert search(c, "SearchT", T0 + 30) == 4            # equidistant: the left one
        assert search(c, "SearchT", T0 + 40) == 5            # exact last
        assert search(c, "SearchT", T0 + 10_000) == 5        # after the last
        assert search(c, "SearchNone", T0) == 0              # unknown queue
    finally:
        b.stop()
