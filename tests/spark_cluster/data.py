"""What the cluster tests run the jobs on, and what each job must give, computed without Spark: small stores
(seconds to make) built with the pipeline tests' helpers, and their oracles."""
from __future__ import annotations

import hashlib
import json
import os
import random
import shutil

from rmqd.common.fileutil import copy_sparse
from rmqd.remoting.client import BlockingClient
from rmqd.store.message import decode_message
from rmqd.store.tier.index import layout as L
from tests.compaction.helpers import TOPIC as COMPACT_TOPIC
from tests.compaction.helpers import open_store as open_compaction_store
from tests.compaction.helpers import fill_rewritten_keys, read_all
from tests.kit import clients
from tests.pipeline.helpers import archive_rows, expected_rows, fill, open_store
from tests.pipeline.index_helpers import MAX_ITEMS, fill_base, tier_store

COMPACT_LOG_FILE = 16 * 1024

__all__ = ["COMPACT_TOPIC", "archive_rows", "expected_rows"]


def copy(src: str, dst: str) -> str:
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns("lock"), copy_function=copy_sparse)
    return dst


# ------------------------------------------------------------------------------------------ archive / query
def make_archive_store(root: str) -> str:
    """2,400 varied messages over sixteen 64 KB CommitLog files (fifteen sealed), across a UTC midnight."""
    store = open_store(root)
    fill(store, 2400, seed=11)
    store.shutdown()
    return root


def sealed_segment_names(root: str) -> list[str]:
    names = sorted(os.listdir(os.path.join(root, "commitlog")))
    return names[:-1]


def manifest(out: str) -> tuple[list[str], list[str]]:
    """(segment keys, files) over every commit record of an archive."""
    segs, files = [], []
    d = os.path.join(out, "_rmqd", "commits")
    for n in sorted(os.listdir(d)):
        rec = json.load(open(os.path.join(d, n)))
        segs += [s["segment"] for s in rec["segments"]]
        files += [f["file"] for f in rec["files"]]
    return segs, files


def data_files(out: str) -> list[str]:
    """Every file under messages/ and keyindex/ (relative to the archive)."""
    found = []
    for top in ("messages", "keyindex"):
        for dp, _dn, fs in os.walk(os.path.join(out, top)):
            found += [os.path.relpath(os.path.join(dp, f), out) for f in fs]
    return sorted(found)


def messages_with_key(root: str, topic: str, key: str) -> list[tuple[int, int]]:
    """(queueId, offset) of the archived messages of ``topic`` whose KEYS has the token ``key``."""
    return sorted((r[1], r[2]) for r in expected_rows(root)
                  if r[0] == topic and r[3] is not None and key in r[3].decode().split(" "))


# ------------------------------------------------------------------------------------------ index
def make_index_base(root: str) -> str:
    fill_base(root)
    return root


def all_messages(root: str) -> list:
    """Every message in the store's CommitLog files, decoded."""
    out = []
    d = os.path.join(root, "commitlog")
    for n in sorted(os.listdir(d)):
        data = open(os.path.join(d, n), "rb").read()
        pos = 0
        while pos + 8 <= len(data):
            total = int.from_bytes(data[pos:pos + 4], "big", signed=True)
            if data[pos + 4:pos + 8] != b"\xda\xa3\x20\xa7" or total <= 0:
                break
            out.append(decode_message(data, pos))
            pos += total
    return out


def index_expectation(base: str) -> tuple[dict, int, int]:
    """((topic, key) -> sorted (queueId, offset)), the index items and the messages skipped (more keys than
    a file takes), by the broker's key rule over the base store's messages."""
    keyed: dict = {}
    items = skipped = 0
    for m in all_messages(base):
        keys = L.indexed_keys(m.properties.get("KEYS"), m.properties.get("UNIQ_KEY"))
        if len(keys) > MAX_ITEMS:
            skipped += 1
            continue
        items += len(keys)
        for k in keys:
            keyed.setdefault((m.topic, k), []).append((m.queue_id, m.queue_offset))
    return {k: sorted(v) for k, v in keyed.items()}, items, skipped


def index_answers(root: str, keys: list) -> dict:
    """The store (adopting a pending job output as it starts) answering each (topic, key) from its tier
    index: sorted (queueId, offset); and whether every tier queue is fully indexed."""
    store = tier_store(root, root + "-tier", index=False)
    store.start()
    try:
        out = {}
        for topic, key in keys:
            recs = store.tier.reads.tier_query(topic, key, 10_000, 0, 2 ** 62)
            out[(topic, key)] = sorted((decode_message(r).queue_id, decode_message(r).queue_offset) for r in recs)
        states = {f["state"] for f in store.tier.index.status()}
        covered = all(tq.unindexed(tq.min_offset, tq.max_offset) == [] for tq in store.tier.queues.values())
        return {"answers": out, "states": states, "covered": covered}
    finally:
        store.shutdown()


# ------------------------------------------------------------------------------------------ compaction
def _open_compaction(root: str):
    return open_compaction_store(root, log_file_size=COMPACT_LOG_FILE, map_bytes=300 * 24)


def make_compact_store(root: str, n: int = 3000, seed: int = 3) -> str:
    """A compaction topic of two queues, 16 KB compaction-log files, keys rewritten many times, tombstones."""
    store = _open_compaction(root)
    fill_rewritten_keys(store, n, seed)
    store.shutdown()
    return root


def broker_compacted(src: str, dst: str) -> str:
    """A copy of ``src`` compacted by the broker's own compaction."""
    copy(src, dst)
    store = _open_compaction(dst)
    store.compaction.compact(COMPACT_TOPIC)
    store.shutdown()
    return dst


def compaction_tree(root: str) -> dict:
    out = {}
    for d in ("compactionLog", "compactionCq"):
        for dp, _dn, fn in os.walk(os.path.join(root, "compaction", d, COMPACT_TOPIC)):
            for f in fn:
                out[os.path.relpath(os.path.join(dp, f), root)] = hashlib.sha1(
                    open(os.path.join(dp, f), "rb").read()).hexdigest()
    return out


def compaction_table(root: str) -> dict:
    """What a consumer reads from each queue (opening the store adopts a pending job output)."""
    store = _open_compaction(root)
    try:
        return {q: [(o, k) for o, k, _v in read_all(store, q, topic=COMPACT_TOPIC)] for q in (0, 1)}
    finally:
        store.shutdown()


# ------------------------------------------------------------------------------------------ broker
def send(addr: str, topic: str, n: int, seed: int, queues: int = 4) -> list[tuple]:
    """Sends ``n`` messages (SEND_MESSAGE_V2); returns what the broker acknowledged:
    (queueId, offset, sha1 of the body, key)."""
    rnd = random.Random(seed)
    acked = []
    with BlockingClient(addr) as c:
        for i in range(n):
            body = rnd.randbytes(rnd.randint(1, 1500))
            props = f"KEYS\x01key-{seed}-{i}\x02TAGS\x01T{i % 3}\x02"
            r = clients.send_v2(c, topic, body, i % queues, props, group="PG_cluster")
            assert r.code == 0, r.remark
            acked.append((int(r.ext_fields["queueId"]), int(r.ext_fields["queueOffset"]),
                          hashlib.sha1(body).hexdigest(), f"key-{seed}-{i}"))
    return acked
