"""One backend test suite for every tier backend: Posix (Java's path scheme), memory, S3 (moto)."""
from __future__ import annotations

import os

import pytest

from rmqd.store.tier.backend import md5_prefix, offset_to_file_name, provider_name, segment_path


def test_java_path_scheme():
    assert offset_to_file_name(0) == md5_prefix("0") + "0" * 20
    assert md5_prefix("0") == "cfcd2084"
    assert segment_path("DefaultCluster", "broker-a", "T", 3, "COMMIT_LOG", 1024) == (
        f"{md5_prefix('DefaultCluster')}_DefaultCluster/broker-a/T/3/COMMIT_LOG/"
        f"{md5_prefix('1024')}00000000000000001024")


def test_provider_names():
    assert provider_name("org.apache.rocketmq.tieredstore.provider.PosixFileSegment") == "posix"
    assert provider_name("org.apache.rocketmq.tieredstore.provider.MemoryFileSegment") == "memory"
    assert provider_name("S3") == "s3"
    with pytest.raises(ValueError, match="unknown tieredBackendServiceProvider"):
        provider_name("com.example.Nope")


def test_append_read_size_list_truncate_delete(backend_factory, tmp_path):
    b = backend_factory()
    p = "c/broker-a/T/0/COMMIT_LOG/seg0"
    assert b.size(p) == 0
    b.write(p, 0, b"hello ")
    b.write(p, 6, b"tiered world")
    assert b.size(p) == 18
    assert b.read(p, 0, 18) == b"hello tiered world"
    assert b.read(p, 4, 6) == b"o tier"            # spans the two commits
    assert b.read(p, 16, 100) == b"ld"             # clipped at the end
    b.write("c/broker-a/T/1/COMMIT_LOG/seg0", 0, b"x")
    assert b.list("c/broker-a/T/") == {p: 18, "c/broker-a/T/1/COMMIT_LOG/seg0": 1}
    b.truncate(p, 6)                               # what a crash recovery does past the commit
    assert b.size(p) == 6 and b.read(p, 0, 100) == b"hello "
    b.write(p, 6, b"again")
    assert b.read(p, 0, 100) == b"hello again"
    src = tmp_path / "upload.bin"
    src.write_bytes(os.urandom(100_000))
    b.upload("c/idx/0", str(src))
    assert b.read("c/idx/0", 50_000, 10) == src.read_bytes()[50_000:50_010]
    b.delete(p)
    assert b.size(p) == 0 and p not in b.list("c/")


def test_data_outlives_the_backend_object(backend_factory, backend_kind):
    b1 = backend_factory()
    b1.write("a/b", 0, b"durable")
    b1.close()
    b2 = backend_factory()
    assert b2.read("a/b", 0, 7) == (b"" if backend_kind == "memory" else b"durable")
    assert b2.persistent is (backend_kind != "memory")


def test_reads_are_counted(backend_factory):
    b = backend_factory()
    b.write("r/x", 0, b"0123456789")
    before = b.stats.reads
    b.read("r/x", 2, 3)
    assert b.stats.reads == before + 1


def test_upload_in_parts(backend_factory, backend_kind, tmp_path):
    """An upload in several parts (S3: multipart) reads back whole, as one segment; ``progress``
    runs between parts; the segment replaces a partial one left at the same path."""
    b = backend_factory()
    b.upload_part_size = 1024
    data = os.urandom(4500)
    src = tmp_path / "idx.bin"
    src.write_bytes(data)
    b.write("c/idx/1", 0, b"partial")                  # what an interrupted upload left
    calls = []
    b.upload("c/idx/1", str(src), progress=lambda: calls.append(b.size("c/idx/1")))
    assert len(calls) == 4                              # after parts 1-4, not after the last
    assert b.read("c/idx/1", 0, 5000) == data and b.size("c/idx/1") == 4500
    assert b.read("c/idx/1", 4000, 100) == data[4000:4100]
    assert b.list("c/idx/") == {"c/idx/1": 4500}
    assert b.abort_partial_uploads("c/") == 0
