"""Bad input on the HA port: the connection is closed with a log line naming the cause, nothing stored is damaged.

The rmqd slave faces a fake master (wrong offset, truncated frame, absurd size, another file size, a damaged
record); the rmqd master faces a fake slave (an offset beyond the master, not at a record boundary).
"""
from __future__ import annotations

import logging
from contextlib import contextmanager
from typing import Iterator

import pytest

from rmqd.store.ha.config import HAConfig
from rmqd.store.ha.service import DefaultHAService
from tests.replication.harness import wait_until
from tests.replication.ha_peers import FakeMaster, FakeSlave, commitlog_bytes, fill, make_store

FS = 64 * 1024


@pytest.fixture
def source(tmp_path):
    """A store holding real CommitLog records to feed a slave with."""
    store = make_store(str(tmp_path / "src"), FS)
    fill(store, 40, size=700)                                # ~32 KB in the first file
    yield store
    store.shutdown()


@pytest.fixture
def slave(tmp_path):
    """An rmqd slave store + HA client pointed at a fake master."""
    fake = FakeMaster()
    store = make_store(str(tmp_path / "slave"), FS)
    ha = DefaultHAService(store, HAConfig(listen_port=0, commitlog_file_size=FS), slave=True)
    ha.client.reconnect_delay_s = 30          # stay down after the fault: the test inspects what is stored
    ha.start()
    ha.update_master_address(fake.address)
    yield store, fake
    ha.shutdown()
    fake.close()
    store.shutdown()


def _good_prefix(store, source, fake, n: int) -> bytes:
    """Send the first ``n`` bytes of the source CommitLog, wait until the slave reports them; returns them."""
    data = commitlog_bytes(source, 0, n)
    fake.transfer(0, data)
    assert fake.read_report() == n
    return data


def _fault(caplog, fake, cause: str) -> None:
    assert fake.closed_by_peer(5), "the slave did not close the connection"
    wait_until(lambda: any(cause in r.getMessage() for r in caplog.records), 5, what=f"a log line naming {cause!r}")


def _intact(store, source, upto: int) -> None:
    """The slave holds exactly the source's first ``upto`` bytes, dispatched."""
    assert store.commitlog_max_offset() == upto
    assert commitlog_bytes(store, 0, upto) == commitlog_bytes(source, 0, upto)
    total = store.get_max_offset("HaTopic", 0) + store.get_max_offset("HaTopic", 1)
    assert total > 0


def _record_end(source, after: int) -> int:
    """The end of the first record that ends after ``after``."""
    pos = 0
    while pos <= after:
        size = int.from_bytes(commitlog_bytes(source, pos, pos + 4), "big")
        pos += size
    return pos


def _after_good_prefix(caplog, slave, source, after: int) -> tuple:
    """The fake master accepted the slave (which reports 0: it is empty) and sent it the source's records up to
    the end of the first one ending after ``after``; returns the slave's store, the fake master and that end."""
    store, fake = slave
    caplog.set_level(logging.INFO)
    assert fake.accept() == 0
    n = _record_end(source, after)
    _good_prefix(store, source, fake, n)
    return store, fake, n


def test_wrong_offset_from_master(caplog, slave, source):
    store, fake, n = _after_good_prefix(caplog, slave, source, 10_000)
    fake.transfer(n + 700, commitlog_bytes(source, n, n + 700))
    _fault(caplog, fake, "master pushed offset")
    _intact(store, source, n)


def test_truncated_frame(caplog, slave, source):
    store, fake, n = _after_good_prefix(caplog, slave, source, 5_000)
    body = commitlog_bytes(source, n, n + 3000)
    fake.raw(n.to_bytes(8, "big") + (3000).to_bytes(4, "big") + body[:1000])
    fake.close()                                             # the connection ends inside the transfer
    wait_until(lambda: any("truncated frame" in r.getMessage() for r in caplog.records), 5, what="truncated frame logged")
    _intact(store, source, n)


def test_absurd_transfer_size(caplog, slave, source):
    store, fake, n = _after_good_prefix(caplog, slave, source, 5_000)
    fake.raw(n.to_bytes(8, "big") + (-5).to_bytes(4, "big", signed=True))
    _fault(caplog, fake, "transfer of -5 bytes")
    _intact(store, source, n)


def test_damaged_record_is_cut_off(caplog, slave, source):
    store, fake, n = _after_good_prefix(caplog, slave, source, 5_000)
    bad = bytearray(commitlog_bytes(source, n, n + 4000))
    bad[500] ^= 0xFF                                          # inside the first record's body: CRC mismatch
    fake.transfer(n, bytes(bad))
    _fault(caplog, fake, "damaged record")
    _intact(store, source, n)


@contextmanager
def _master_with_file_size(caplog, slave, tmp_path, file_size: int, count: int) -> Iterator[tuple]:
    """The slave accepted by the fake master, and a source store of ``count`` records in ``file_size`` files
    (a master whose CommitLog files differ from the slave's 64 KiB): yields slave store, fake master, source."""
    store, fake = slave
    caplog.set_level(logging.INFO)
    other = make_store(str(tmp_path / f"fs{file_size}"), file_size)
    try:
        fill(other, count, size=700)
        assert fake.accept() == 0
        yield store, fake, other
    finally:
        other.shutdown()


def test_master_with_smaller_files(caplog, slave, tmp_path):
    """A master with 32 KiB files: its end-of-file record stops in the middle of the slave's 64 KiB file."""
    with _master_with_file_size(caplog, slave, tmp_path, 32 * 1024, 60) as (store, fake, small):
        first = commitlog_bytes(small, 0, 32 * 1024)          # a whole file: records, then the BLANK marker
        end = _record_end(small, 20_000)
        fake.transfer(0, first[:end])
        assert fake.read_report() == end
        fake.transfer(end, first[end:])
        _fault(caplog, fake, "does not end at this slave's file end")
        assert store.commitlog_max_offset() == end
        assert commitlog_bytes(store, 0, end) == first[:end]


def test_master_with_larger_files(caplog, slave, tmp_path):
    """A master with 128 KiB files sends a transfer crossing the end of the slave's 64 KiB file."""
    with _master_with_file_size(caplog, slave, tmp_path, 128 * 1024, 120) as (store, fake, big):
        end = _record_end(big, 60_000)
        fake.transfer(0, commitlog_bytes(big, 0, end))
        assert fake.read_report() == end
        fake.transfer(end, commitlog_bytes(big, end, end + 8000))
        _fault(caplog, fake, "crosses the end of this slave's CommitLog file")
        assert store.commitlog_max_offset() == end


@pytest.fixture
def master(tmp_path):
    store = make_store(str(tmp_path / "m"), FS)
    fill(store, 40, size=700)
    ha = DefaultHAService(store, HAConfig(listen_port=0, commitlog_file_size=FS))
    ha.start()
    yield store, ha
    ha.shutdown()
    store.shutdown()


def test_slave_reports_offset_beyond_master(caplog, master):
    store, ha = master
    caplog.set_level(logging.INFO)
    before = commitlog_bytes(store, 0, store.commitlog_max_offset())
    fake = FakeSlave(ha.port)
    try:
        fake.report(store.commitlog_max_offset() + 1000)
        assert fake.closed_by_peer(5)
    finally:
        fake.close()
    wait_until(lambda: any("beyond the master's max offset" in r.getMessage() for r in caplog.records), 5, what="logged")
    assert commitlog_bytes(store, 0, store.commitlog_max_offset()) == before
    wait_until(lambda: ha.connection_count() == 0, 5, what="connection dropped")


def test_slave_reports_offset_inside_a_record(caplog, master):
    store, ha = master
    caplog.set_level(logging.INFO)
    fake = FakeSlave(ha.port)
    try:
        fake.report(1234)                                     # inside the second record
        assert fake.closed_by_peer(5)
    finally:
        fake.close()
    wait_until(lambda: any("not at a record boundary" in r.getMessage() for r in caplog.records), 5, what="logged")


def test_slave_acknowledges_beyond_master(caplog, master):
    store, ha = master
    caplog.set_level(logging.INFO)
    fake = FakeSlave(ha.port)
    try:
        fake.report(0)
        offset, body = fake.read_transfer()                    # the master streams its current file from 0
        assert offset == 0 and body
        fake.report(store.commitlog_max_offset() + 1)
        assert fake.closed_by_peer(5)
    finally:
        fake.close()
    wait_until(lambda: any("acknowledged offset" in r.getMessage() for r in caplog.records), 5, what="logged")


def test_slave_reconnecting_inside_a_files_blank_end_is_accepted(tmp_path, source):
    """A slave that got a file's records and part of its BLANK padding (cut off there) reports an offset inside
    the padding: the master streams the rest of it, then the next file."""
    fill(source, 60, size=700)                                # past the first 64 KiB file
    fake = FakeMaster()
    store = make_store(str(tmp_path / "cut"), FS)
    ha = DefaultHAService(store, HAConfig(listen_port=0, commitlog_file_size=FS), slave=True)
    ha.client.reconnect_delay_s = 0.1
    ha.start()
    master_ha = DefaultHAService(source, HAConfig(listen_port=0, commitlog_file_size=FS))
    master_ha.start()
    try:
        ha.update_master_address(fake.address)
        fake.accept()
        first = commitlog_bytes(source, 0, FS)
        blank_at = _record_end(source, FS - 1500)             # the end-of-file marker follows the last record
        while int.from_bytes(first[blank_at + 4:blank_at + 8], "big", signed=True) != -875286124:
            blank_at = _record_end(source, blank_at)
        cut = blank_at + 8 + (FS - blank_at - 8) // 2         # inside the padding
        fake.transfer(0, first[:cut])
        assert fake.read_report() == cut
        ha.update_master_address(f"127.0.0.1:{master_ha.port}")
        wait_until(lambda: store.commitlog_max_offset() == source.commitlog_max_offset(), 10, what="slave caught up")
        assert commitlog_bytes(store, FS, source.commitlog_max_offset()) == \
            commitlog_bytes(source, FS, source.commitlog_max_offset())
        assert store.get_max_offset("HaTopic", 0) == source.get_max_offset("HaTopic", 0)
    finally:
        master_ha.shutdown()
        ha.shutdown()
        fake.close()
        store.shutdown()
