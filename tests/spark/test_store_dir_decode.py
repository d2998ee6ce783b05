"""The store-directory reader decodes records straight out of the mapped CommitLog files (no Spark here):
rows are what was stored, batches end where ``max_bytes`` says, and a unit pointing at damaged bytes is
skipped (and logged) without leaving the columns ragged."""
from __future__ import annotations

import logging
import os
import time

import pyarrow as pa
import pytest

from rmqd.cython_ext import record_columns as rc
from rmqd.spark.arrow import columns_batch
from rmqd.spark.source import StoreRange, read_from_store
from rmqd.spark.store_dir import FileAccess, QueueFiles, StoreLayout
from rmqd.store.message import MessageToStore
from rmqd.store.message_store import MessageStore, StoreConfig
from rmqd.common.fileutil import copy_sparse

TOPIC = "DecodeT"
N = 120


@pytest.fixture(scope="module")
def store_dir(tmp_path_factory):
    """N messages over 2 queues, in 64 KB CommitLog files (records cross files) with user headers."""
    root = str(tmp_path_factory.mktemp("decode-store"))
    s = MessageStore(StoreConfig(store_root_dir=root, mapped_file_size_commitlog=64 * 1024,
                                 mapped_file_size_consume_queue=20 * 20))
    s.start()
    try:
        for i in range(N):
            props = {"KEYS": f"k{i}", "TAGS": "even" if i % 2 == 0 else "odd", "h1": f"v{i}"}
            assert s.put_message(MessageToStore.create(TOPIC, i % 2, _body(i), props)).ok
        s.flush()
    finally:
        s.shutdown()
    return root


def _body(i: int) -> bytes:
    return bytes([i % 251]) * (100 + 37 * (i % 50))


def _queue(root: str, qid: int) -> pa.Table:
    batches = list(read_from_store(StoreRange(root, TOPIC, "broker-a", qid, 0, N // 2), None, None))
    return pa.Table.from_batches(batches)


def test_rows_are_what_was_stored(store_dir):
    for qid in (0, 1):
        t = _queue(store_dir, qid)
        sent = [i for i in range(N) if i % 2 == qid]
        assert t.column("value").to_pylist() == [_body(i) for i in sent]
        assert t.column("key").to_pylist() == [f"k{i}".encode() for i in sent]
        assert t.column("offset").to_pylist() == list(range(len(sent)))
        assert t.column("headers").to_pylist() == [[{"key": "h1", "value": f"v{i}".encode()}] for i in sent]
        assert set(t.column("partition").to_pylist()) == {qid}


def test_batches_stop_before_max_bytes(store_dir):
    files = QueueFiles(StoreLayout(store_dir), TOPIC, 0, FileAccess())
    try:
        off, rows, sizes = 0, [], []
        while off < N // 2:
            cols = rc.Columns(0, N // 2)
            off = files.decode(off, N // 2, 4096, cols)
            assert cols.record_bytes <= 4096 or cols.rows == 1       # one record bigger than a batch: alone
            sizes.append(cols.rows)
            rows += columns_batch(cols.result(), "broker-a")[0].column("offset").to_pylist()
    finally:
        files.access.close()
    assert rows == list(range(N // 2)) and len(sizes) > 3


def test_a_damaged_record_is_skipped_and_logged(store_dir, tmp_path, caplog):
    import shutil
    root = str(tmp_path / "copy")
    for d in ("commitlog", "consumequeue"):                   # not the (sparse, 400 MB) index file
        shutil.copytree(f"{store_dir}/{d}", f"{root}/{d}", copy_function=copy_sparse)
    files = QueueFiles(StoreLayout(root), TOPIC, 0, FileAccess())
    phys, _size, _tags = files.unit(3)
    files.access.close()
    cl_size = files.cl_size
    with open(f"{root}/commitlog/{phys - phys % cl_size:020d}", "r+b") as f:
        f.seek(phys % cl_size + 4)
        f.write(b"\0\0\0\0")                                    # the record's magic
    with caplog.at_level(logging.WARNING, logger="rmqd.spark.store_dir"):
        t = _queue(root, 0)
    assert t.column("offset").to_pylist() == [o for o in range(N // 2) if o != 3]
    assert t.column("value").to_pylist() == [_body(2 * o) for o in range(N // 2) if o != 3]
    assert "1 ConsumeQueue units" in caplog.text and "skipped" in caplog.text


def test_the_map_cache_reuses_a_file_until_it_changes_goes_or_idles(tmp_path):
    from rmqd.spark.store_dir import MapCache
    path = str(tmp_path / "f")
    with open(path, "wb") as f:
        f.write(b"a" * 4096)
    maps = MapCache(capacity=2, idle_s=0.2)
    first = maps.get(path)
    assert maps.get(path) is first and first[:1] == b"a"
    with open(path, "wb") as f:                                 # replaced: a new size, so a new map
        f.write(b"b" * 8192)
    second = maps.get(path)
    assert second is not first and len(second) == 8192 and second[:1] == b"b"
    access = FileAccess(str(tmp_path / "log"), maps)
    assert access.map(path) is second
    os.unlink(path)
    access.close()                                              # a deleted file's map is dropped
    assert maps.get(path) is None and not maps._maps
    with open(path, "wb") as f:
        f.write(b"c" * 4096)
    FileAccess(None, maps).map(path)
    FileAccess(None, maps).close()
    assert maps._maps
    deadline = time.monotonic() + 5                             # idle: every map dropped
    while maps._maps and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not maps._maps
