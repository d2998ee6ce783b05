"""Shared helpers of the pipeline tests: a small store with varied messages, and the rows expected of it
decoded independently of the pipeline (rmqd.store.message.decode_message over the sealed files)."""
from __future__ import annotations

import os
import random
import zlib
from typing import Optional

from rmqd.store.message import (COMPRESSED_FLAG, MessageToStore, decode_message, offset_msg_id,
                                transaction_type)
from rmqd.store.message_store import MessageStore, StoreConfig

DAY_EDGE_MS = 1_709_337_540_000          # 2024-03-01T23:59:00Z: the messages span two UTC days
TOPICS = ["PipeA", "PipeB", "%RETRY%pipe_cg", "007"]
SYSTEM_PROPS = {"KEYS", "TAGS", "UNIQ_KEY", "WAIT"}


def open_store(root: str, commitlog_size: int = 64 * 1024, clock_start: Optional[int] = None) -> MessageStore:
    clock = {"t": clock_start or DAY_EDGE_MS}

    def now() -> int:
        clock["t"] += 37                  # 3,000 messages cover about 110 s across midnight
        return clock["t"]
    cfg = StoreConfig(root, mapped_file_size_commitlog=commitlog_size, mapped_file_size_consume_queue=20 * 1000,
                      message_index_enable=False, flush_interval_commitlog_ms=50, clean_resource_interval_ms=3_600_000,
                      clock=now)
    store = MessageStore(cfg)
    store.start()
    return store


def fill(store: MessageStore, n: int, seed: int, first: int = 0) -> None:
    """Varied messages: four topics (one %-escaped, one numeric), keys with several tokens or none,
    tags, user properties, UNIQ_KEYs, empty and compressed bodies, and prepared / rolled-back
    transaction halves (which are in the CommitLog but not in any ConsumeQueue)."""
    rnd = random.Random(seed)
    for i in range(first, first + n):
        topic = TOPICS[i % len(TOPICS)]
        body = rnd.randbytes(rnd.randint(0, 600)) if i % 17 else b""
        props = {"TAGS": f"Tag{i % 3}", "origin": f"o{i % 5}", "n": str(i)}
        if i % 6:
            props["KEYS"] = f"k{i}" if i % 4 else f"k{i} alias{i % 9}  spare{i}"
        if i % 7 == 0:
            props["UNIQ_KEY"] = f"{0xC0A80001:08X}{i:024X}"
        sys_flag = 0
        if i % 50 == 3:
            body, sys_flag = zlib.compress(b"compressed body %d " % i * 20), COMPRESSED_FLAG
        if i % 97 == 5:
            sys_flag |= 0x4 if i % 2 else 0xC          # a prepared or a rolled-back half
        r = store.put_message(MessageToStore.create(topic, i % 3, body, props, sys_flag=sys_flag,
                                                    born_timestamp=DAY_EDGE_MS - 1000 + i))
        assert r.status.name == "PUT_OK", r


def sealed_files(root: str) -> list[str]:
    d = os.path.join(root, "commitlog")
    names = sorted(os.listdir(d))
    return [os.path.join(d, n) for n in names[:-1]]


def expected_rows(root: str, broker: str = "broker-a") -> list[tuple]:
    """One tuple per message of the sealed CommitLog files, as the archive must hold it."""
    rows = []
    for path in sealed_files(root):
        data = open(path, "rb").read()
        pos = 0
        while pos + 8 <= len(data):
            total, magic = int.from_bytes(data[pos:pos + 4], "big", signed=True), data[pos + 4:pos + 8]
            if magic != b"\xda\xa3\x20\xa7" or total <= 0:
                break
            m = decode_message(data, pos)
            pos += total
            if transaction_type(m.sys_flag) in (0x4, 0xC):
                continue
            rows.append(message_row(m, broker))
    return sorted(rows)


def message_row(m, broker: str = "broker-a") -> tuple:
    """One decoded message (rmqd.store.message.decode_message) as the archive must hold it."""
    body = zlib.decompress(m.body) if m.sys_flag & COMPRESSED_FLAG else m.body
    props = m.properties
    headers = tuple(sorted((k, v.encode()) for k, v in props.items() if k not in SYSTEM_PROPS))
    msg_id = props.get("UNIQ_KEY") or offset_msg_id(m.store_host[0], m.store_host[1], m.commit_log_offset)
    return (m.topic, m.queue_id, m.queue_offset, props.get("KEYS", "").encode() or None, body,
            props.get("TAGS"), msg_id, m.store_timestamp, m.born_timestamp, m.commit_log_offset,
            m.reconsume_times, headers, broker)


def archive_rows(out: str) -> list[tuple]:
    """The archive's messages read back with pyarrow (hive partitions), as expected_rows' tuples."""
    import pyarrow as pa
    import pyarrow.dataset as ds
    part = ds.partitioning(pa.schema([("topic", pa.string()), ("queueId", pa.int32()), ("day", pa.string())]),
                           flavor="hive")
    t = ds.dataset(os.path.join(out, "messages"), partitioning=part, format="parquet").to_table()
    rows = []
    for r in t.to_pylist():
        rows.append((r["topic"], r["partition"], r["offset"], r["key"], r["value"], r["tags"], r["msgId"],
                     int(r["timestamp"].timestamp() * 1000), int(r["bornTimestamp"].timestamp() * 1000),
                     r["commitLogOffset"], r["reconsumeTimes"],
                     tuple(sorted((h["key"], h["value"]) for h in r["headers"])), r["brokerName"]))
    return sorted(rows)
