"""The tiered store's random index: byte layouts, the indexing rule and a pure builder.

This module is the one source of truth for the index bytes; the broker's index service and any
bulk builder (e.g. a Spark job that writes compacted index files the broker adopts) use it.
Everything here is deterministic and free of I/O.

Entry points
------------
* :func:`entries_of_message` — *the* rule: which keys of a message are indexed (UNIQ_KEY plus each
  ``KEYS`` token split on ``" "`` as Java's ``String.split`` does, in Java ``HashSet`` iteration
  order) and with which item fields (topicId, queueId, the message's offset in its queue's flat
  CommitLog, its size, its store time).
* :func:`build_writable` — the writable file (Java ``IndexStoreFile``, UNSEALED) that putting
  those entries, message by message, into a fresh file produces: 28-byte header, ``slots`` 8-byte
  hash slots (the first 4 bytes hold the newest item's number), 32-byte items chained newest first.
* :func:`build_compacted` / :func:`compact_writable` — the compacted (sealed/uploaded) form:
  same header with the END magic, each slot ``(beginPos i32, byteLen i32)``, each slot's chain as
  one contiguous run of 28-byte items (no prevIdx), newest first; empty slots point at the current
  write position with length 0, as Java writes them.
* :func:`parse_header`, :func:`item_time` — readers.

The broker's copier runs the same rule through C fast paths (``rmqd.cython_ext.tier_index``:
``message_key_hashes``, ``put_batch``, ``compact``), which the tests hold byte for byte to the
functions here.

All integers are big-endian. ``hash = abs(String.hashCode(topic + "#" + key))`` in 32-bit
arithmetic; Java leaves ``Integer.MIN_VALUE`` negative and then fails on a negative slot. rmqd
stores the same hash but puts that one value in slot ``(hash & 0x7FFFFFFF) % slots`` (slot 0), so
such a key is indexed and found instead of breaking the put.

The file's begin timestamp is its creation time (also its name); ``timeDiff`` is
``(storeTime - beginTs) / 1000`` truncated toward zero (Java's long division), so it is negative
for messages stored before the file was created (a dispatcher catching up).
"""
from __future__ import annotations

import struct
from typing import TYPE_CHECKING, Iterable, NamedTuple, Optional, Sequence, TypeGuard

from rmqd.cython_ext.message_codec import java_string_hash

if TYPE_CHECKING:
    from _typeshed import ReadableBuffer

HEADER_SIZE = 28
HASH_SLOT_SIZE = 8
ITEM_SIZE = 32
COMPACT_ITEM_SIZE = 28
INVALID_INDEX = 0
BEGIN_MAGIC_CODE: int = struct.unpack(">i", struct.pack(">I", 0xCCDDEEFF ^ (1880681586 + 4)))[0]
END_MAGIC_CODE: int = struct.unpack(">i", struct.pack(">I", 0xCCDDEEFF ^ (1880681586 + 8)))[0]
JAVA_MAX_QUERY_HOPS = 512              # Java's chain walk limit on a writable file (rmqd walks all)
JAVA_COMPACT_READ_ITEMS = 1024         # Java reads at most this many items of a slot's run

_HEADER = struct.Struct(">iqqii")
_ITEM = struct.Struct(">iiiqiii")
_CITEM = struct.Struct(">iiiqii")
_SLOT = struct.Struct(">ii")
KEY_SEPARATOR = " "


class IndexEntry(NamedTuple):
    """One index item before it is placed: the hash of ``topic#key`` and the item fields."""
    hash_code: int        # signed 32-bit, as stored
    topic_id: int
    queue_id: int
    offset: int           # the message's position in its queue's flat CommitLog
    size: int
    timestamp: int        # store time, ms


class Header(NamedTuple):
    magic: int
    begin_timestamp: int
    end_timestamp: int
    hash_slot_count: int    # slots in use
    index_item_count: int   # items written (item numbers start at 1)


# ------------------------------------------------------------------------------------- hashing
def _to_i32(v: int) -> int:
    v &= 0xFFFFFFFF
    return v - (1 << 32) if v & 0x80000000 else v


def key_hash(topic: str, key: str) -> int:
    """``abs(("topic#key").hashCode())`` in Java int arithmetic (Integer.MIN_VALUE stays negative)."""
    h = java_string_hash(f"{topic}#{key}")
    return _to_i32(-h) if h < 0 else h


def slot_of(hash_code: int, slots: int) -> int:
    """The hash slot of a stored hash (Java's ``hash % slots``; MIN_VALUE goes to slot 0)."""
    return (hash_code & 0x7FFFFFFF) % slots if hash_code < 0 else hash_code % slots


def time_diff(timestamp: int, begin_timestamp: int) -> int:
    """``(int) ((timestamp - begin) / 1000L)``: truncated toward zero, wrapped to 32 bits."""
    d = timestamp - begin_timestamp
    q = d // 1000 if d >= 0 else -((-d) // 1000)
    return _to_i32(q)


def item_time(begin_timestamp: int, diff: int) -> int:
    """The store time an item claims (second precision: within 999 ms of the real one)."""
    return begin_timestamp + diff * 1000


# ------------------------------------------------------------------------------- the key rule
def _java_split(s: str) -> list[str]:
    """Java ``String.split(" ")``: a leading empty token stays, trailing empty tokens go."""
    parts = s.split(KEY_SEPARATOR)
    while parts and parts[-1] == "":
        parts.pop()
    return parts


def _spread(h: int) -> int:
    h &= 0xFFFFFFFF
    return h ^ (h >> 16)


def java_hashset_order(keys: Iterable[str]) -> list[str]:
    """The iteration order of a ``java.util.HashSet<String>`` filled with ``keys`` in this order
    (default capacity 16, load factor 0.75, duplicates dropped; bins long enough to treeify in a
    table of 64+ buckets — 8+ colliding keys in one message — are not modelled)."""
    keys = list(dict.fromkeys(keys))             # duplicates dropped, first occurrence kept
    if len(keys) <= 8:                           # no resize, no long bin: bucket order, then insertion
        return sorted(keys, key=lambda k: _spread(java_string_hash(k)) & 15) if len(keys) > 1 else keys
    cap, threshold = 16, 12
    bins: dict[int, list[tuple[int, str]]] = {}
    members: set[str] = set()
    order: list[tuple[int, str]] = []      # (spread hash, key) in insertion order

    def rebin(new_cap: int) -> None:
        bins.clear()
        for sh, k in order:
            bins.setdefault(sh & (new_cap - 1), []).append((sh, k))

    for k in keys:
        if k in members:
            continue
        members.add(k)
        sh = _spread(java_string_hash(k))
        order.append((sh, k))
        b = bins.setdefault(sh & (cap - 1), [])
        b.append((sh, k))
        if len(b) > 8 and cap < 64:      # HashMap.treeifyBin resizes small tables instead
            cap *= 2
            threshold = int(cap * 0.75)
            rebin(cap)
        if len(order) > threshold:
            cap *= 2
            threshold = int(cap * 0.75)
            rebin(cap)
    return [k for i in range(cap) for _, k in bins.get(i, ())]


def _not_blank(s: Optional[str]) -> TypeGuard[str]:
    if not s:
        return False
    return not s.isspace()


def indexed_keys(keys: Optional[str], uniq_key: Optional[str]) -> list[str]:
    """The keys Java's tiered dispatcher indexes for one message, in the order it puts them:
    UNIQ_KEY, then every ``KEYS`` token, as a HashSet."""
    seq: list[str] = []
    if _not_blank(uniq_key):
        seq.append(uniq_key)
    if _not_blank(keys):
        seq.extend(_java_split(keys))
    return java_hashset_order(seq) if seq else []


def entries_of_message(topic: str, topic_id: int, queue_id: int, keys: Optional[str],
                       uniq_key: Optional[str], offset: int, size: int,
                       store_timestamp: int) -> list[IndexEntry]:
    """The index entries of one message, in put order (see the module docstring)."""
    return [IndexEntry(key_hash(topic, k), topic_id, queue_id, offset, size, store_timestamp)
            for k in indexed_keys(keys, uniq_key)]


# ----------------------------------------------------------------------------------- layouts
def writable_size(slots: int, max_items: int) -> int:
    """Size of the preallocated writable file (Java ``getItemPosition(maxIndexNum)``)."""
    return HEADER_SIZE + slots * HASH_SLOT_SIZE + max_items * ITEM_SIZE


def compacted_size(slots: int, items: int) -> int:
    return HEADER_SIZE + slots * HASH_SLOT_SIZE + items * COMPACT_ITEM_SIZE


def item_position(slots: int, index: int) -> int:
    return HEADER_SIZE + slots * HASH_SLOT_SIZE + index * ITEM_SIZE


def pack_header(h: Header) -> bytes:
    return _HEADER.pack(*h)


def parse_header(buf: "ReadableBuffer") -> Header:
    return Header(*_HEADER.unpack_from(buf, 0))


def magic_for(item_count: int, max_items: int) -> int:
    """Java flushNewMetadata: END once the file holds ``max_items - 1`` items."""
    return END_MAGIC_CODE if max_items == item_count + 1 else BEGIN_MAGIC_CODE


def is_full_for(item_count: int, keys: int, max_items: int) -> bool:
    """Java putKey: a message whose keys would reach ``max_items`` seals the file unput."""
    return item_count + keys >= max_items


def build_writable(messages: Sequence[Sequence[IndexEntry]], begin_timestamp: int, slots: int,
                   max_items: int) -> tuple[bytes, int]:
    """The writable file after putting ``messages`` (each the entries of one message, as
    :func:`entries_of_message` gives them) into a fresh file, and how many messages fitted
    (the first message that does not fit seals the file; later ones are not put)."""
    buf = bytearray(writable_size(slots, max_items))
    items, put = _fitting(messages, max_items)
    used = 0
    for count, e in enumerate(items, 1):
        spos = HEADER_SIZE + slot_of(e.hash_code, slots) * HASH_SLOT_SIZE
        old = max(struct.unpack_from(">i", buf, spos)[0], INVALID_INDEX)
        _ITEM.pack_into(buf, item_position(slots, count), e.hash_code, e.topic_id, e.queue_id,
                        e.offset, e.size, time_diff(e.timestamp, begin_timestamp), old)
        struct.pack_into(">i", buf, spos, count)
        if old <= INVALID_INDEX:
            used += 1
    _HEADER.pack_into(buf, 0, magic_for(len(items), max_items), begin_timestamp, _end_timestamp(items), used,
                      len(items))
    return bytes(buf), put


def _fitting(messages: Sequence[Sequence[IndexEntry]], max_items: int) -> tuple[list[IndexEntry], int]:
    """The entries of the leading ``messages`` that fit in a file of ``max_items``, and how many messages that is
    (the first that does not fit seals the file; a message without entries always fits)."""
    items: list[IndexEntry] = []
    put = 0
    for entries in messages:
        if entries and is_full_for(len(items), len(entries), max_items):
            break
        items.extend(entries)
        put += 1
    return items, put


def _end_timestamp(items: Sequence[IndexEntry]) -> int:
    """The header's end timestamp: the newest entry's (0 for none)."""
    return max([0] + [e.timestamp for e in items])


def compact_writable(buf: bytes | bytearray | memoryview, slots: int, max_items: int) -> bytes:
    """The compacted form of a writable file's bytes (Java ``compactToNewFile``)."""
    h = parse_header(buf)
    n = h.index_item_count
    out = bytearray(compacted_size(slots, n))
    end = len(out)
    wpos = HEADER_SIZE + slots * HASH_SLOT_SIZE
    for s in range(slots):
        spos = HEADER_SIZE + s * HASH_SLOT_SIZE
        cur = max(struct.unpack_from(">i", buf, spos)[0], INVALID_INDEX)
        begin = wpos
        while cur > INVALID_INDEX and wpos < end:
            ipos = item_position(slots, cur)
            out[wpos:wpos + COMPACT_ITEM_SIZE] = buf[ipos:ipos + COMPACT_ITEM_SIZE]
            cur = struct.unpack_from(">i", buf, ipos + COMPACT_ITEM_SIZE)[0]
            wpos += COMPACT_ITEM_SIZE
        _SLOT.pack_into(out, spos, begin, wpos - begin)
    _HEADER.pack_into(out, 0, END_MAGIC_CODE, h.begin_timestamp, h.end_timestamp, h.hash_slot_count, n)
    return bytes(out)


def build_compacted(messages: Sequence[Sequence[IndexEntry]], begin_timestamp: int, slots: int,
                    max_items: int) -> tuple[bytes, int]:
    """The compacted file of the same puts as :func:`build_writable`, built directly (memory in
    proportion to the output, not to the preallocated writable file)."""
    runs: dict[int, list[bytes]] = {}
    items, put = _fitting(messages, max_items)
    for e in items:
        runs.setdefault(slot_of(e.hash_code, slots), []).append(
            _CITEM.pack(e.hash_code, e.topic_id, e.queue_id, e.offset, e.size, time_diff(e.timestamp, begin_timestamp)))
    head = bytearray(HEADER_SIZE + slots * HASH_SLOT_SIZE)
    body: list[bytes] = []
    wpos = len(head)
    for s in range(slots):
        run = runs.get(s)
        n = len(run) if run else 0
        _SLOT.pack_into(head, HEADER_SIZE + s * HASH_SLOT_SIZE, wpos, n * COMPACT_ITEM_SIZE)
        if run:
            body.extend(reversed(run))          # newest first, as the chain is walked
            wpos += n * COMPACT_ITEM_SIZE
    _HEADER.pack_into(head, 0, END_MAGIC_CODE, begin_timestamp, _end_timestamp(items), len(runs), len(items))
    return bytes(head) + b"".join(body), put


def parse_compacted_items(run: bytes) -> list[tuple[int, int, int, int, int, int]]:
    """``(hash, topicId, queueId, offset, size, timeDiff)`` of each 28-byte item of a run."""
    return [_CITEM.unpack_from(run, p) for p in range(0, len(run) - len(run) % COMPACT_ITEM_SIZE,
                                                      COMPACT_ITEM_SIZE)]


def parse_slot(buf: bytes | bytearray | memoryview, slot: int) -> tuple[int, int]:
    """A compacted file's ``(beginPos, byteLen)`` for ``slot`` (from the 8 bytes at its position)."""
    return _SLOT.unpack_from(buf, 0 if len(buf) == HASH_SLOT_SIZE else HEADER_SIZE + slot * HASH_SLOT_SIZE)


def slot_position(slot: int) -> int:
    return HEADER_SIZE + slot * HASH_SLOT_SIZE
