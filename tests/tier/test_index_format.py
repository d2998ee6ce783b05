"""Byte-exact tests of the tier index formats against hand-computed bytes (Java IndexStoreFile /
IndexItem / compactToNewFile), and the C hot paths against the pure builder."""
from __future__ import annotations

import random

import pytest

from rmqd.cython_ext import tier_index as X
from rmqd.store.tier.index import layout as L

BEGIN = 1_700_000_000_000


def h(hex_text: str) -> bytes:
    return bytes.fromhex("".join(hex_text.split()))


# "T#k": 'T'=84 '#'=35 'k'=107 -> ((84*31)+35)*31+107 = 81916 = 0x00013FFC, slot 81916 % 5 = 1
# "T#b": 81907 = 0x00013FF3, slot 2
MSGS = [
    [L.IndexEntry(81916, 7, 3, 4096, 321, BEGIN + 2500)],       # timeDiff 2
    [L.IndexEntry(81916, 7, 3, 5000, 100, BEGIN + 1999)],       # timeDiff 1 (truncated), chains to item 1
    [L.IndexEntry(81907, 7, 0, 6000, 50, BEGIN - 1500)],        # timeDiff -1 (toward zero)
]

WRITABLE = h("""
    bcc50285 0000018bcfe56800 0000018bcfe571c4 00000002 00000003
    0000000000000000 0000000200000000 0000000300000000 0000000000000000 0000000000000000
""") + bytes(32) + h("""
    00013ffc 00000007 00000003 0000000000001000 00000141 00000002 00000000
    00013ffc 00000007 00000003 0000000000001388 00000064 00000001 00000001
    00013ff3 00000007 00000000 0000000000001770 00000032 ffffffff 00000000
""")

COMPACTED = h("""
    bcc50285 0000018bcfe56800 0000018bcfe571c4 00000002 00000003
    0000004400000000 0000004400000038 0000007c0000001c 0000009800000000 0000009800000000
    00013ffc 00000007 00000003 0000000000001388 00000064 00000001
    00013ffc 00000007 00000003 0000000000001000 00000141 00000002
    00013ff3 00000007 00000000 0000000000001770 00000032 ffffffff
""")


def test_magic_codes_are_javas():
    assert L.BEGIN_MAGIC_CODE & 0xFFFFFFFF == 0xBCC50289
    assert L.END_MAGIC_CODE & 0xFFFFFFFF == 0xBCC50285


def test_hash_of_topic_and_key():
    assert L.key_hash("T", "k") == 81916
    assert L.key_hash("T", "b") == 81907


def test_writable_bytes_match_hand_computed():
    data, put = L.build_writable(MSGS, BEGIN, 5, 4)
    assert put == 3
    assert len(data) == 28 + 5 * 8 + 4 * 32 == len(WRITABLE)
    assert data == WRITABLE


def test_fresh_file_header_and_partial_magic():
    buf = bytearray(L.writable_size(5, 4))
    X.init_header(buf, BEGIN, 4)
    assert bytes(buf[:28]) == h("bcc50289 0000018bcfe56800 0000000000000000 00000000 00000000")
    X.put_batch(buf, 5, 4, BEGIN, [((81916,), 7, 3, 4096, 321, BEGIN + 2500)])
    # one item of four: BEGIN magic, end time, one slot used, one item
    assert bytes(buf[:28]) == h("bcc50289 0000018bcfe56800 0000018bcfe571c4 00000001 00000001")


def test_c_put_matches_hand_computed_and_stops_when_full():
    buf = bytearray(L.writable_size(5, 4))
    X.init_header(buf, BEGIN, 4)
    batch = [((e.hash_code,), e.topic_id, e.queue_id, e.offset, e.size, e.timestamp) for m in MSGS for e in m]
    batch.append(((81916,), 7, 3, 7000, 10, BEGIN))      # 3 + 1 >= 4: Java's FILE_FULL
    assert X.put_batch(buf, 5, 4, BEGIN, batch) == 3
    assert bytes(buf) == WRITABLE


def test_compacted_bytes_match_hand_computed():
    assert L.compact_writable(WRITABLE, 5, 4) == COMPACTED
    built, put = L.build_compacted(MSGS, BEGIN, 5, 4)
    assert (built, put) == (COMPACTED, 3)
    out = bytearray(len(COMPACTED))
    assert X.compact(WRITABLE, out, 5) == len(COMPACTED)
    assert bytes(out) == COMPACTED
    # in pieces (what the index service does): the same bytes; the magic only with the last piece
    out = bytearray(len(COMPACTED))
    wpos = X.compact(WRITABLE, out, 5, 0, 2)
    assert bytes(out[:4]) == bytes(4)
    wpos = X.compact(WRITABLE, out, 5, 2, 3, wpos)
    assert X.compact(WRITABLE, out, 5, 3, 5, wpos) == len(COMPACTED)
    assert bytes(out) == COMPACTED
    with pytest.raises(ValueError, match="out of range"):
        X.compact(WRITABLE, out, 5, 3, 2)


def test_query_paths_on_both_forms():
    items, hops = X.query_chain(WRITABLE, 5, 81916, 0, 1 << 62, 10)
    assert items == [(7, 3, 5000, 100, 1), (7, 3, 4096, 321, 2)] and hops == 2
    pos, length = L.parse_slot(COMPACTED, 1)
    assert (pos, length) == (68, 56)
    run = COMPACTED[pos:pos + length]
    assert X.filter_run(run, 81916, BEGIN, 0, 1 << 62, 10) == items
    # time window on the claimed time (begin + diff * 1000)
    assert X.filter_run(run, 81916, BEGIN, BEGIN + 2000, BEGIN + 2000, 10) == [(7, 3, 4096, 321, 2)]


def test_integer_min_value_hash_is_indexed_in_slot_zero():
    key = "\ub3cdakxA"                       # "TopicMin#" + key hashes to Integer.MIN_VALUE
    hc = L.key_hash("TopicMin", key)
    assert hc == -2 ** 31 and L.slot_of(hc, 5) == 0
    msgs = [L.entries_of_message("TopicMin", 1, 0, key, None, 0, 99, BEGIN)]
    data, put = L.build_writable(msgs, BEGIN, 5, 8)
    assert put == 1
    assert data[28:32] == h("00000001")      # slot 0 holds item 1
    assert data[28 + 40 + 32:28 + 40 + 36] == h("80000000")
    buf = bytearray(L.writable_size(5, 8))
    X.init_header(buf, BEGIN, 8)
    assert X.put_batch(buf, 5, 8, BEGIN, [((hc,), 1, 0, 0, 99, BEGIN)]) == 1
    assert bytes(buf) == data
    assert X.query_chain(buf, 5, hc, 0, 1 << 62, 4)[0] == [(1, 0, 0, 99, 0)]


def test_indexed_keys_follow_java_split_and_hashset_order():
    # String.split(" "): a leading empty token stays, trailing ones go; HashSet drops duplicates
    assert L.indexed_keys(" a b  ", None) == ["", "a", "b"]
    # buckets of "Aa"/"BB" (2112 -> 0), "a" (97 -> 1), "b" (98 -> 2): bucket order, insertion order within
    assert L.indexed_keys("b a BB", "Aa") == ["Aa", "BB", "a", "b"]
    assert L.indexed_keys("   ", "  ") == []
    # 13 keys resize the table to 32 buckets: "k10" (hash 105743 -> 15 of 32) after "k9" etc.
    keys = [f"k{i}" for i in range(13)]
    order = L.indexed_keys(" ".join(keys), None)
    assert sorted(order) == sorted(keys)
    spread = {k: (L.java_string_hash(k) ^ (L.java_string_hash(k) >> 16)) & 31 for k in keys}
    assert [spread[k] for k in order] == sorted(spread[k] for k in keys)


def test_time_diff_truncates_toward_zero():
    assert L.time_diff(BEGIN + 1999, BEGIN) == 1
    assert L.time_diff(BEGIN - 1999, BEGIN) == -1
    assert L.time_diff(BEGIN - 999, BEGIN) == 0


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_c_paths_equal_the_pure_builder(seed):
    rnd = random.Random(seed)
    slots, max_items = rnd.choice([1, 7, 64]), rnd.choice([10, 50, 300])
    msgs = []
    for i in range(200):
        keys = " ".join(f"key{rnd.randint(0, 40)}" for _ in range(rnd.randint(0, 4)))
        msgs.append(L.entries_of_message("Topic", 2, i % 3, keys, f"UNIQ{i}" if i % 2 else "", i * 77, 77,
                                         BEGIN + rnd.randint(-5000, 60000)))
    ref, put = L.build_writable(msgs, BEGIN, slots, max_items)
    buf = bytearray(L.writable_size(slots, max_items))
    X.init_header(buf, BEGIN, max_items)
    batch = [(tuple(e.hash_code for e in m), 2, m[0].queue_id if m else 0, m[0].offset if m else 0,
              m[0].size if m else 0, m[0].timestamp if m else 0) for m in msgs]
    assert X.put_batch(buf, slots, max_items, BEGIN, batch) == put
    assert bytes(buf) == ref
    compacted = L.compact_writable(ref, slots, max_items)
    assert L.build_compacted(msgs, BEGIN, slots, max_items)[0] == compacted
    out = bytearray(len(compacted))
    X.compact(bytes(buf), out, slots)
    assert bytes(out) == compacted
    out = bytearray(len(compacted))
    wpos, step = -1, rnd.randint(1, 9)
    for lo in range(0, slots, step):
        wpos = X.compact(bytes(buf), out, slots, lo, min(lo + step, slots), wpos)
    assert wpos == len(compacted) and bytes(out) == compacted


def test_undo_restores_the_committed_bytes():
    full, _ = L.build_writable(MSGS, BEGIN, 5, 4)
    two, _ = L.build_writable(MSGS[:2], BEGIN, 5, 4)
    buf = bytearray(full)
    hdr = L.parse_header(two)
    assert X.undo_after(buf, 5, 4, 2, hdr.end_timestamp, hdr.hash_slot_count) == 1
    assert bytes(buf) == two


def test_c_key_hashes_follow_the_rule():
    """The copier's C fast path computes exactly what entries_of_message (the rule) gives."""
    rnd = random.Random(11)
    alphabet = ["a", "b", "Aa", "BB", " ", "  ", "k1", "\u00e9", "\U0001F600", "zz", "", "x y"]
    for _ in range(5000):
        keys = "".join(rnd.choice(alphabet) for _ in range(rnd.randint(0, 14))) if rnd.random() < 0.9 else None
        uniq = rnd.choice([None, "", " ", "U1", "a", "\U0001F600x"])
        topic = rnd.choice(["T", "Topic\u00e9", "TopicMin"])
        ref = tuple(e.hash_code for e in L.entries_of_message(topic, 1, 0, keys, uniq, 0, 1, 0))
        assert X.message_key_hashes(topic, keys, uniq, L.java_hashset_order) == ref, (topic, keys, uniq)
    assert X.message_key_hashes("TopicMin", "\ub3cdakxA", None, L.java_hashset_order) == (-2 ** 31,)
