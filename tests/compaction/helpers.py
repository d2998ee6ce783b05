"""Shared helpers of the compaction tests: a store with small compaction files, keyed puts, reads."""
from __future__ import annotations

import random

from rmqd.store.compaction.store import CompactionConfig
from rmqd.store.layers import build_store
from rmqd.store.message import MessageToStore, decode_messages
from rmqd.store.message_store import GetMessageStatus, MessageStore, StoreConfig

TOPIC = "CTopic"


def open_store(root, log_file_size=64 * 1024, map_bytes=1 << 20, **kw) -> MessageStore:
    cfg = StoreConfig(str(root), mapped_file_size_commitlog=kw.pop("commitlog_size", 1 << 20),
                      mapped_file_size_consume_queue=20 * 10000, max_hash_slot_num=1024,
                      max_index_num=100000, flush_interval_commitlog_ms=50,
                      clean_resource_interval_ms=3_600_000, message_index_enable=False, **kw)
    store = build_store(cfg, CompactionConfig(log_file_size=log_file_size, cq_file_size=46 * 100000,
                                              max_offset_map_size=map_bytes, thread_num=1,
                                              schedule_interval_ms=3_600_000, copy_interval_ms=3_600_000))
    store.start()
    store.compaction.on_topic_config(TOPIC, True)
    return store


def put(store: MessageStore, key: str | None, value: bytes, qid: int = 0, tags: str | None = None,
        topic: str = TOPIC) -> int:
    props = {}
    if key is not None:
        props["KEYS"] = key
    if tags:
        props["TAGS"] = tags
    r = store.put_message(MessageToStore.create(topic, qid, value, props))
    assert r.status.name == "PUT_OK", r
    return r.queue_offset


def read_all(store: MessageStore, qid: int = 0, start: int | None = None, topic: str = TOPIC,
             message_filter=None) -> list[tuple[int, str, bytes]]:
    """Everything a consumer pulling from ``start`` (default min offset) to the end receives."""
    off = store.get_min_offset(topic, qid) if start is None else start
    out = []
    for _ in range(1_000_000):
        r = store.get_messages(topic, qid, off, 32, message_filter=message_filter)
        if r.status is GetMessageStatus.FOUND:
            for m in decode_messages(r.body()):
                out.append((m.queue_offset, m.properties.get("KEYS"), m.body))
        elif r.status not in (GetMessageStatus.NO_MATCHED_MESSAGE,):
            break
        assert r.next_begin_offset > off, (r.status, off)
        off = r.next_begin_offset
    return out


def newest_per_key(sent: list[tuple[int, str, bytes]]) -> dict[str, tuple[int, bytes]]:
    table = {}
    for off, key, value in sent:
        table[key] = (off, value)
    return table


def fill_rewritten_keys(store: MessageStore, n: int, seed: int, first: int = 0, topic: str = TOPIC) -> None:
    """Messages ``first`` .. ``first + n - 1`` on queues 0 and 1 of ``topic``: ~400 keys rewritten many times,
    6 % tombstones (empty bodies), put in batches of 64; then the compaction caught up on both queues."""
    rnd = random.Random(seed)
    msgs = []
    for i in range(first, first + n):
        body = b"" if rnd.random() < 0.06 else f"v{i}-".encode() + b"x" * rnd.randint(0, 90)
        msgs.append(MessageToStore.create(topic, i % 2, body, {"KEYS": f"key-{rnd.randint(0, 400)}"}))
    for i in range(0, len(msgs), 64):
        store.put_messages(msgs[i:i + 64])
    for q in (0, 1):
        store.compaction.catch_up(topic, q)
