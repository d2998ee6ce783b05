"""The HA service between two stores in this process: byte-identical CommitLogs, the SYNC_MASTER wait and codes."""
from __future__ import annotations

import filecmp
import os
import threading
import time

import pytest

from rmqd.config import BrokerRole
from rmqd.store.ha.config import HAConfig
from rmqd.store.ha.layer import ReplicatedStore
from rmqd.store.ha.service import DefaultHAService
from rmqd.store.ha.transfer import GroupTransferService
from rmqd.store.message_store import MessageToStore, PutMessageStatus
from tests.replication.harness import wait_until
from tests.replication.ha_peers import FakeSlave, fill, make_store

FS = 64 * 1024


def _msg(i: int, wait: bool = True) -> MessageToStore:
    props = f"KEYS\x01k{i}" + ("" if wait else "\x02WAIT\x01false")
    return MessageToStore("SyncTopic", 0, b"s" * 500, props, 0, 0, int(time.time() * 1000), ("127.0.0.1", 1),
                          ("127.0.0.1", 2))


@pytest.fixture
def pair(tmp_path):
    """A master store with its HA service, and a function making slaves of it."""
    made = []
    master = make_store(str(tmp_path / "m"), FS)
    ha = DefaultHAService(master, HAConfig(listen_port=0, commitlog_file_size=FS, slave_timeout_ms=400,
                                           slave_fallbehind_max=40_000))
    ha.start()

    def slave(name: str = "s"):
        store = make_store(str(tmp_path / name), FS)
        sha = DefaultHAService(store, HAConfig(listen_port=0, commitlog_file_size=FS), slave=True)
        sha.client.reconnect_delay_s = 0.1
        sha.start()
        sha.update_master_address(f"127.0.0.1:{ha.port}")
        made.append((store, sha))
        return store, sha

    yield master, ha, slave
    for store, sha in made:
        sha.shutdown()
        store.shutdown()
    ha.shutdown()
    master.shutdown()


def test_slave_commitlog_is_byte_identical_and_dispatched(pair, tmp_path):
    master, ha, make_slave = pair
    slave, _ = make_slave()
    wait_until(lambda: [c for c in ha.connections if c.transfer_from >= 0], 5, what="slave connected")
    fill(master, 300)                                    # ~330 KB: five 64 KiB files, BLANK ends included
    wait_until(lambda: slave.commitlog_max_offset() == master.commitlog_max_offset(), 10, what="slave caught up")
    names = sorted(os.listdir(tmp_path / "s" / "commitlog"))
    assert len(names) >= 5
    for name in names:
        assert filecmp.cmp(tmp_path / "m" / "commitlog" / name, tmp_path / "s" / "commitlog" / name, shallow=False)
    for q in (0, 1):
        assert slave.get_max_offset("HaTopic", q) == master.get_max_offset("HaTopic", q) == 150
        got = slave.get_messages("HaTopic", q, 140, 32)
        assert got.message_count == 10
    assert len(slave.query_message("HaTopic", "k299", 4).messages) == 1      # the index is rebuilt too
    info = ha.runtime_info(True)
    assert info["inSyncSlaveNums"] == 1
    conn = info["haConnectionInfo"][0]
    assert conn["diff"] == 0 and conn["slaveAckOffset"] == master.commitlog_max_offset()


def test_fresh_slave_starts_at_the_masters_current_file(pair):
    master, ha, make_slave = pair
    fill(master, 200)
    mx = master.commitlog_max_offset()
    slave, _ = make_slave()
    wait_until(lambda: slave.get_max_offset("HaTopic", 0) == 100, 10, what="slave caught up")
    assert slave.commitlog_max_offset() == mx
    assert slave.commitlog_min_offset() == mx - mx % FS     # no older file
    assert 0 < slave.get_min_offset("HaTopic", 0) < 100
    fill(master, 10)
    wait_until(lambda: slave.get_max_offset("HaTopic", 0) == 105, 10, what="new messages dispatched on the slave")


def test_sync_master_codes(pair):
    master, ha, make_slave = pair
    rs = ReplicatedStore(master, ha, BrokerRole.SYNC_MASTER)
    r = rs.put_message(_msg(0))
    assert r.status is PutMessageStatus.SLAVE_NOT_AVAILABLE and r.wrote_offsets      # stored all the same
    assert rs.put_message(_msg(1, wait=False)).status is PutMessageStatus.PUT_OK      # WAIT=false: no wait
    fake = FakeSlave(ha.port)
    try:
        fake.report(master.commitlog_max_offset())           # in sync, then silent
        wait_until(lambda: ha.connection_count() == 1 and ha.push2slave > 0, 5, what="fake slave registered")
        t0 = time.monotonic()
        r = rs.put_message(_msg(2))
        assert r.status is PutMessageStatus.FLUSH_SLAVE_TIMEOUT
        assert 0.35 < time.monotonic() - t0 < 3.0            # slaveTimeout 400 ms
        done = []
        rs.on_durable(r.end_offset, done.append)              # the lane's way: no thread held
        assert done == []
        fake.report(r.end_offset)                              # the slave has it now
        wait_until(lambda: done, 5, what="on_durable answered")
        assert done == [PutMessageStatus.PUT_OK]
        fill(master, 60)                                      # 60 KB more than the slave acknowledged
        assert rs.put_message(_msg(3)).status is PutMessageStatus.SLAVE_NOT_AVAILABLE   # > haSlaveFallbehindMax
    finally:
        fake.close()
    slave, _ = make_slave()
    wait_until(lambda: ha.push2slave == master.commitlog_max_offset(), 10, what="slave caught up and acknowledged")
    r = rs.put_message(_msg(4))
    assert r.status is PutMessageStatus.PUT_OK
    assert slave.commitlog_max_offset() >= r.end_offset                 # answered only once the slave had it


def test_sync_master_concurrent_putters_all_acknowledged(pair):
    master, ha, make_slave = pair
    slave, _ = make_slave()
    wait_until(lambda: ha.connection_count() == 1, 5, what="slave connected")
    rs = ReplicatedStore(master, ha, BrokerRole.SYNC_MASTER)
    statuses = []

    def putter(n: int) -> None:
        for i in range(n):
            statuses.append(rs.put_message(_msg(i)).status)
    threads = [threading.Thread(target=putter, args=(50,)) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert statuses.count(PutMessageStatus.PUT_OK) == 200, set(statuses)


def test_group_transfer_completes_in_offset_order_and_times_out():
    gts = GroupTransferService()
    gts.tick_s = 0.02
    gts.start()
    try:
        got = []
        for off in (100, 200, 300):
            gts.put_request(off, 0.3, lambda ok, off=off: got.append((off, ok)))
        gts.notify_transfer_some(250)
        assert got == [(100, True), (200, True)]
        wait_until(lambda: len(got) == 3, 3, what="timeout")
        assert got[-1] == (300, False)
        gts.put_request(250, 1, lambda ok: got.append(("old", ok)))            # already acknowledged
        assert got[-1] == ("old", True)
        gts.put_request(400, 30, lambda ok: got.append((400, ok)))
        gts.put_request(350, 30, lambda ok: got.append((350, ok)))            # out of offset order: waits behind 400
        gts.notify_transfer_some(380)
        assert got[-1] == ("old", True)
        gts.notify_transfer_some(400)
        assert got[-2:] == [(400, True), (350, True)]
        gts.put_request(10_000, 30, lambda ok: got.append(("pending", ok)))
    finally:
        gts.shutdown()
    assert got[-1] == ("pending", False)                                        # shutdown fails what waits
