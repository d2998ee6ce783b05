"""rmqd pipeline compact on a running broker's store, adopted with `rmqd admin adoptCompaction`: the C++
consumer (1.x wheel) then reads exactly the newest value per key (tombstoned keys gone), at the original
increasing queue offsets, served from the adopted files."""
from __future__ import annotations

import os

import pytest

from scenarios import run
from test_compaction_clients import CPP_READER, _create, admin

from rmqd.store.message import MessageToStore

pytest.importorskip("pyspark", reason="the spark extra (pip install -e '.[test]') is required")

pytestmark = pytest.mark.timeout(300)      # a Spark job's first run on a loaded 2-core host

KEYS, VERSIONS, FILLERS = 40, 60, 700
TOMBSTONED = {3, 17}


@pytest.mark.rmqd_broker(compactionMappedFileSize=64 * 1024, compactionScheduleInternal=3_600_000)
def test_cpp_consumer_reads_the_adopted_compaction(spark, rmqd_server, client_pythons):
    from rmqd.pipeline.compact import Compact
    ns, store = rmqd_server.namesrv_addr, rmqd_server.broker.store
    topic = "PipeCompactCpp"
    _create(ns, rmqd_server.broker_addr, topic)
    newest: dict[str, tuple[int, bytes]] = {}
    batch = []
    for v in range(VERSIONS):
        for k in range(KEYS):
            body = b"" if (k in TOMBSTONED and v == VERSIONS - 1) else f"k{k}-v{v}".encode() + b"." * 40
            batch.append((f"key-{k}", body))
    batch += [(f"filler-{f}", f"f{f}".encode() + b"-" * 60) for f in range(FILLERS)]   # seals the key versions
    for key, body in batch:
        r = store.put_message(MessageToStore.create(topic, 0, body, {"KEYS": key, "TAGS": "TagP"}))
        assert r.status.name == "PUT_OK"
        newest[key] = (r.queue_offset, body)
    store.compaction.catch_up(topic, 0)
    store.flush()
    summary = Compact(store.config.store_root_dir, topic).run(spark)          # the broker keeps running
    assert summary.details["segmentsRewritten"] > 0
    out = admin(ns, "adoptCompaction", "-t", topic)
    assert "adopted" in out and "did not adopt" not in out, out
    assert not os.listdir(os.path.join(store.config.store_root_dir, "compaction", "pipeline"))
    status = store.compaction.status(topic)[0]
    assert status["records"] < len(batch) // 2

    got = run(client_pythons["cpp1"], CPP_READER, ns, dict(topic=topic, group="CG_pipe_cpt"), timeout=120)
    assert got.returncode == 0 and not got.timed_out, got.stderr[-2000:]
    recv = got.events_of("recv")
    offsets = [e["offset"] for e in recv]
    assert offsets == sorted(offsets) and len(set(offsets)) == len(offsets)
    table = {}
    for e in recv:
        assert e["key"] not in table, f"{e['key']} received twice"
        table[e["key"]] = (e["offset"], e["body"])
    want = {k: (o, b.decode()) for k, (o, b) in newest.items() if b}
    assert table == want
    assert all(f"key-{k}" not in table for k in TOMBSTONED)
