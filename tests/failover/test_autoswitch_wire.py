"""The 5.x AutoSwitch HA protocol (controller-5x.md §7; AutoSwitchHAClient / AutoSwitchHAConnection, 5.3.x).

Golden byte strings are written field by field in the sources' order (big-endian): the slave handshake (state,
isSyncFromLastFile, isAsyncLearner, slaveBrokerId), the master's handshake reply (state, bodySize, maxPhyOffset,
lastEpoch; epoch/startOffset entries), the slave ack (state, maxPhyOffset) and the transfer header (state,
bodySize, offset, epoch, epochStartOffset, confirmOffset). Then two in-process stores talk it over a socket: a
diverged slave is cut back to the consistent point, a transfer never crosses an epoch end, the epochs arrive in
the slave's epoch file, and with allAckInSyncStateSet no read goes past the confirmOffset.
"""
from __future__ import annotations

import contextlib
import socket
import time
from types import SimpleNamespace
from typing import Iterator

import pytest

from rmqd.config import BrokerRole
from rmqd.store.ha import autoswitch_protocol as wire
from rmqd.store.ha.autoswitch import ControllerHAService
from rmqd.store.ha.config import HAConfig
from rmqd.store.ha.epoch_file import EpochFileCache
from rmqd.store.ha.layer import ReplicatedStore
from rmqd.store.ha.protocol import HAProtocolError
from rmqd.store.message import MessageToStore
from tests.replication.ha_peers import FakeListener, fill, make_store, recv_exactly
from tests.replication.harness import wait_until

FS = 64 * 1024


def h(s: str) -> bytes:
    return bytes.fromhex(s.replace(" ", ""))


# ---------------------------------------------------------------------------------------------- byte layouts
def test_state_ordinals_are_javas():
    assert [s.value for s in wire.HAConnectionState] == [0, 1, 2, 3, 4]
    assert [s.name for s in wire.HAConnectionState] == ["READY", "HANDSHAKE", "TRANSFER", "SUSPEND", "SHUTDOWN"]


def test_slave_handshake_golden():
    golden = h("00000001 0001 0000 0000000000000002")       # HANDSHAKE, syncFromLastFile, not a learner, id 2
    assert wire.pack_slave_handshake(True, False, 2) == golden and len(golden) == 16
    assert wire.unpack_slave_handshake(golden) == wire.SlaveHandshake(True, False, 2)
    assert wire.unpack_slave_handshake(h("00000001 0000 0001 0000000000000003")) == wire.SlaveHandshake(False, True, 3)
    with pytest.raises(HAProtocolError):
        wire.unpack_slave_handshake(h("00000002 0000 0000 0000000000000002"))


def test_master_handshake_golden():
    golden = h("00000001 00000018 0000000000001000 00000002"        # HANDSHAKE, 2 entries, max 4096, epoch 2
               "00000001 0000000000000000 00000002 0000000000000800")
    assert wire.pack_master_handshake(0x1000, 2, [(1, 0), (2, 0x800)]) == golden
    head = wire.unpack_master_handshake(golden)
    assert head == wire.MasterHandshake(24, 0x1000, 2)
    assert wire.unpack_epoch_entries(golden, 20, head.body_size) == [(1, 0), (2, 0x800)]
    assert len(wire.pack_master_handshake(0, 1500, [(e, e * 10) for e in range(1, 1501)])) == 20 + 12 * 1000
    for bad in ("00000002 00000000 0000000000000000 00000001",     # TRANSFER state
                "00000001 0000000d 0000000000000000 00000001"):    # 13 bytes is no whole entry
        with pytest.raises(HAProtocolError):
            wire.unpack_master_handshake(h(bad))


def test_ack_and_transfer_header_golden():
    assert wire.pack_ack(0x400) == h("00000002 0000000000000400")
    assert wire.unpack_ack(h("00000002 0000000000000400")) == 0x400
    with pytest.raises(HAProtocolError):
        wire.unpack_ack(h("00000001 0000000000000400"))
    golden = h("00000002 00000020 0000000000000800 00000002 0000000000000800 00000000000007f0")
    assert len(golden) == 36
    assert wire.pack_transfer_header(0x20, 0x800, 2, 0x800, 0x7F0) == golden
    assert wire.unpack_transfer_header(golden) == wire.TransferHeader(0x20, 0x800, 2, 0x800, 0x7F0)
    with pytest.raises(HAProtocolError):
        wire.unpack_transfer_header(h("00000001") + golden[4:])


# ---------------------------------------------------------------------------------------------- two stores
def put_keyed(store, topic: str, key: str) -> None:
    r = store.put_message(MessageToStore.create(topic, 0, b"keyed", {"KEYS": key}))
    assert r.status.name == "PUT_OK", r


def _service(store, tmp, name: str, slave: bool, **kw) -> ControllerHAService:
    svc = ControllerHAService(store, HAConfig(listen_port=0, commitlog_file_size=FS, slave_timeout_ms=2000),
                              slave=slave, **kw)
    svc.set_epoch_cache(EpochFileCache(str(tmp / f"{name}-epochs")))
    svc.client.reconnect_delay_s = 0.1
    return svc


@pytest.fixture
def group(tmp_path):
    made = []

    def make(name: str, slave: bool, **kw):
        store = make_store(str(tmp_path / name), FS)
        svc = _service(store, tmp_path, name, slave, **kw)
        made.append((store, svc))
        return store, svc
    yield make
    for store, svc in reversed(made):
        svc.shutdown()
        store.shutdown()


def test_diverged_slave_is_cut_to_the_consistent_point_and_takes_the_new_epochs(group):
    master, mha = group("m", slave=False)
    fill(master, 40, 700)                                # epoch 1: written by the old master (this one too)
    old_end = master.commitlog_max_offset()
    slave, sha = group("s", slave=True)
    fill(slave, 40, 700)                                 # the same bytes ...
    assert slave.commitlog_max_offset() == old_end
    fill(slave, 15, 900, topic="Stale")                  # ... and a tail the new master never had
    mha.epoch_cache.append(1, 0)
    sha.epoch_cache.append(1, 0)
    mha.become_master(1, old_end)
    mha.epoch_cache.append(2, old_end)                   # promoted at old_end
    mha.start()
    fill(master, 80, 700)                                # epoch 2: crosses CommitLog files

    seen = []                                            # every transfer header the master sends
    real = mha.connection_class._frame_header

    def spy(conn, offset, size):
        out = real(conn, offset, size)
        seen.append(wire.unpack_transfer_header(out))
        return out
    mha.connection_class._frame_header = spy
    try:
        sha.client.broker_id = 2
        sha.client.expected_epoch = 2
        sha.start()
        sha.update_master_address(f"127.0.0.1:{mha.port}")
        wait_until(lambda: slave.commitlog_max_offset() == master.commitlog_max_offset(), 15, what="slave caught up")
    finally:
        mha.connection_class._frame_header = real
    assert sha.client.consistent_point == old_end
    assert slave.get_max_offset("Stale", 0) == 0 or slave.get_messages("Stale", 0, 0, 32).message_count == 0
    assert sha.epoch_cache.snapshot() == [(1, 0), (2, old_end)] == mha.epoch_cache.snapshot()
    data = [x for x in seen if x.body_size]
    assert data and all(x.epoch == (1 if x.offset < old_end else 2) for x in data)
    assert all(x.offset + x.body_size <= old_end for x in data if x.epoch == 1)   # no frame crosses the epoch end
    assert all(x.epoch_start == (0 if x.epoch == 1 else old_end) for x in data)
    conn = mha.connection_of(2)
    assert conn is not None and conn.state is wire.HAConnectionState.TRANSFER
    assert sha.client.state is wire.HAConnectionState.TRANSFER
    for q in (0, 1):
        assert slave.get_max_offset("HaTopic", q) == master.get_max_offset("HaTopic", q)


def test_master_not_at_the_named_epoch_is_refused_by_the_slave(group):
    master, mha = group("m", slave=False)
    mha.epoch_cache.append(1, 0)
    mha.become_master(1, 0)
    mha.start()
    slave, sha = group("s", slave=True)
    sha.client.broker_id = 2
    sha.client.expected_epoch = 3                        # the controller named epoch 3: this master is behind
    ended = []
    sha.client.on_disconnect = ended.append
    sha.start()
    sha.update_master_address(f"127.0.0.1:{mha.port}")
    wait_until(lambda: ended, 10, what="the slave gives the master up")
    assert sha.client.state is wire.HAConnectionState.READY and not mha.connections


def test_a_raw_socket_speaking_4x_is_closed_by_a_controller_master(group):
    master, mha = group("m", slave=False)
    mha.epoch_cache.append(1, 0)
    mha.become_master(1, 0)
    mha.start()
    with socket.create_connection(("127.0.0.1", mha.port), timeout=5) as s:
        s.sendall((0).to_bytes(8, "big") * 2)            # a 4.x report: state 0 (READY) is no handshake
        s.settimeout(5)
        assert s.recv(64) == b""                          # closed, nothing sent
    wait_until(lambda: not mha.connections, 5, what="the connection dropped")


def connected_pair(group, **master_kw):
    """A master at epoch 1 (started) and a slave, brokerId 2, replicating from it: (master, mha, slave, sha)."""
    master, mha = group("m", slave=False, **master_kw)
    mha.epoch_cache.append(1, 0)
    mha.become_master(1, 0)
    mha.start()
    slave, sha = group("s", slave=True)
    sha.client.broker_id = 2
    sha.client.expected_epoch = 1
    sha.start()
    sha.update_master_address(f"127.0.0.1:{mha.port}")
    wait_until(lambda: mha.connection_of(2) is not None and mha.connection_of(2).slave_request_offset >= 0, 10,
               what="slave connected")
    return master, mha, slave, sha


@contextlib.contextmanager
def stub_member(mha, broker_id: int):
    """A member connected to ``mha`` that acknowledged offset 0 (tests move its ``slave_ack_offset``)."""
    member = SimpleNamespace(broker_id=broker_id, slave_ack_offset=0, async_learner=False,
                             last_caught_up=time.monotonic())
    mha.connections = mha.connections + [member]
    try:
        yield member
    finally:
        mha.connections = [c for c in mha.connections if c is not member]


def test_reads_stop_at_the_confirm_offset_with_all_ack(group):
    master, mha, slave, sha = connected_pair(group, all_ack=True)
    layer = ReplicatedStore(master, mha, BrokerRole.SYNC_MASTER)
    layer.bound_reads(mha.get_confirm_offset)
    mha.set_sync_state_set(frozenset({1, 2}))
    fill(master, 10, 500)
    put_keyed(master, "KeyTopic", "dup")
    wait_until(lambda: mha.connection_of(2).slave_ack_offset == master.commitlog_max_offset(), 10, what="acknowledged")
    assert mha.get_confirm_offset() == master.commitlog_max_offset()
    assert layer.get_messages("HaTopic", 0, 0, 32).message_count == 5
    confirmed = master.commitlog_max_offset()
    sha.client.set_active(False)                         # the member stops acknowledging
    wait_until(lambda: mha.connection_of(2) is None, 10, what="slave gone")
    fill(master, 10, 500)                                # written, not on the SyncStateSet member
    put_keyed(master, "KeyTopic", "dup")
    assert mha.get_confirm_offset() == confirmed < master.commitlog_max_offset()
    for q in (0, 1):
        assert master.get_max_offset("HaTopic", q) == 10
        assert layer.get_max_offset("HaTopic", q) == 5
        r = layer.get_messages("HaTopic", q, 0, 32)
        assert r.message_count == 5 and r.next_begin_offset == 5
        assert layer.get_messages("HaTopic", q, 5, 32).status.name == "OFFSET_OVERFLOW_ONE"
        assert layer.get_messages_resident("HaTopic", q, 0, 32, None) is None       # cut: the slow path does it
    # key queries too (5.x indexes only up to the confirmOffset): "dup" was written twice, once confirmed
    assert len(master.query_message("KeyTopic", "dup", 32).messages) == 2
    assert len(layer.query_message("KeyTopic", "dup", 32).messages) == 1
    # the slave's copy: min(the master's confirmOffset in the last header, its own max): never past the master's
    # (the header of a transfer carries the value from before that transfer's ack, as in 5.x)
    assert 0 <= sha.get_confirm_offset() <= confirmed == slave.commitlog_max_offset()
    # without allAckInSyncStateSet the confirmOffset is the max offset (5.x)
    mha.all_ack = False
    assert mha.get_confirm_offset() == master.commitlog_max_offset()
    assert layer.get_messages("HaTopic", 0, 0, 32).message_count == 10
    assert len(layer.query_message("KeyTopic", "dup", 32).messages) == 2


def test_async_learner_never_in_sync_and_sync_from_last_file_starts_at_the_last_file(group):
    master, mha = group("m", slave=False)
    fill(master, 200, 1000)                              # ~3 files
    mha.epoch_cache.append(1, 0)
    mha.become_master(1, 0)
    mha.start()
    slave, sha = group("s", slave=True, async_learner=True, sync_from_last_file=True)
    sha.client.broker_id = 2
    sha.client.expected_epoch = 1
    sha.start()
    sha.update_master_address(f"127.0.0.1:{mha.port}")
    wait_until(lambda: slave.commitlog_max_offset() == master.commitlog_max_offset(), 10, what="caught up")
    mx = master.commitlog_max_offset()
    assert slave.commitlog.min_offset() == mx - mx % FS > 0
    conn = mha.connection_of(2)
    assert conn.async_learner and conn.sync_from_last_file
    time.sleep(0.1)
    assert mha.in_sync_members() == {1}


def test_a_member_that_has_nothing_yet_holds_the_confirm_offset_at_zero(group):
    """5.x skips SyncStateSet members whose ack is 0: in a fresh group the first message was readable (and the
    members, behind that confirmOffset, were dropped from the set) before any member had it. Here an ack of 0
    counts: nothing is readable until the member has it, and the member stays in sync."""
    master, mha = group("m", slave=False, all_ack=True)
    mha.epoch_cache.append(1, 0)
    mha.become_master(1, 0)
    with stub_member(mha, 2) as member:                  # connected, acknowledged offset 0
        mha.set_sync_state_set(frozenset({1, 2}))
        fill(master, 4, 300)
        assert master.commitlog_max_offset() > 0
        assert mha.get_confirm_offset() == 0
        assert mha.in_sync_members() == {1, 2}
        member.slave_ack_offset = master.commitlog_max_offset()
        assert mha.get_confirm_offset() == master.commitlog_max_offset()


@pytest.mark.slow
def test_a_restarted_slave_reads_no_further_than_the_recorded_confirm_offset(group):
    """The checkpoint keeps the confirmOffset: a slave started again serves reads up to the value it had, not up
    to its max offset, until the first transfer header of a master (none here)."""
    master, mha, slave, sha = connected_pair(group, all_ack=True)
    with stub_member(mha, 3) as other:                   # a third member, behind
        mha.set_sync_state_set(frozenset({1, 2, 3}))
        fill(master, 4, 500)
        confirmed = master.commitlog_max_offset()
        other.slave_ack_offset = confirmed               # the third member has the first 4 messages only
        fill(master, 6, 500)
        wait_until(lambda: slave.commitlog_max_offset() == master.commitlog_max_offset(), 10, what="slave caught up")
        wait_until(lambda: sha.get_confirm_offset() == confirmed, 10, what="the slave took the master's confirmOffset")
    slave_max = slave.commitlog_max_offset()
    sha.shutdown()
    slave.shutdown()
    again, sha2 = group("s", slave=True)                 # the same store directory, no master named
    assert again.commitlog_max_offset() == slave_max > confirmed
    assert sha2.get_confirm_offset() == confirmed
    layer = ReplicatedStore(again, sha2, BrokerRole.SLAVE)
    layer.bound_reads(sha2.get_confirm_offset)
    assert sum(layer.get_messages("HaTopic", q, 0, 32).message_count for q in (0, 1)) == 4


def test_a_heartbeat_at_offset_minus_one_from_an_empty_master_is_taken_by_an_empty_slave(group):
    """A 5.x master whose CommitLog is empty sends its heartbeats at offset -1 (CommitLog.getMinOffset answers -1 with
    no file, AutoSwitchHAConnection's transfer start); a 5.x slave checks offsets only once it has data. rmqd's slave
    closed the connection every second ("negative offset -1") under a fresh Java master, never joining its set."""
    slave, sha = group("s", slave=True)
    client = sha.client
    frames = wire.pack_transfer_header(0, -1, 1, 0, 0) * 2
    assert client._consume(memoryview(frames), len(frames)) == len(frames)
    assert client.confirm_offset == 0 and slave.commitlog_max_offset() == 0
    put_keyed(slave, "HaTopic", "k1")                     # a slave holding data: -1 is no offset of its CommitLog
    hb = wire.pack_transfer_header(0, -1, 1, 0, 0)
    with pytest.raises(HAProtocolError, match="negative offset -1"):
        client._consume(memoryview(hb), len(hb))
    body = wire.pack_transfer_header(16, -1, 1, 0, 0) + b"x" * 16
    _, sha2 = group("s2", slave=True)
    with pytest.raises(HAProtocolError, match="negative offset -1"):
        sha2.client._consume(memoryview(body), len(body))


# ------------------------------------------------------------------------------------- bad input from a Java peer
class FakeJavaMaster(FakeListener):
    """A 5.x master's HA port as a test drives it: reads the slave's handshake, answers with ``epochs`` and
    ``max_offset``, reads the first ack, then sends what the test says."""

    def __init__(self, epochs: list, max_offset: int) -> None:
        super().__init__()
        self.addr = self.address
        self.epochs, self.max_offset = epochs, max_offset

    def accept(self, timeout: float = 10.0) -> int:
        conn = self.accept_conn(timeout)
        wire.unpack_slave_handshake(recv_exactly(conn, wire.SLAVE_HANDSHAKE.size, "the slave"))
        conn.sendall(wire.pack_master_handshake(self.max_offset, self.epochs[-1][0], self.epochs))
        return wire.unpack_ack(recv_exactly(conn, wire.SLAVE_ACK.size, "the slave"))

    def closed_by_slave(self, timeout: float = 10.0) -> bool:
        return self.closed_by_peer(timeout)


def _slave_following(group, tmp_path, name: str = "s"):
    """A slave holding 20 records at epoch 1, ready to follow a master (brokerId 2, epoch 1 expected)."""
    slave, sha = group(name, slave=True)
    fill(slave, 20, 500)
    sha.epoch_cache.append(1, 0)
    sha.client.broker_id = 2
    sha.client.expected_epoch = 1
    sha.client.reconnect_delay_s = 30                 # one connection: the test watches it end
    return slave, sha


def _intact(slave, sha, max_offset: int) -> None:
    assert slave.commitlog_max_offset() == max_offset
    assert sha.epoch_cache.snapshot() == [(1, 0)]
    for q in (0, 1):
        got = slave.get_messages("HaTopic", q, 0, 32)
        assert got.message_count == 10, (q, got.message_count)


@contextlib.contextmanager
def _java_master_connected(group, tmp_path, ahead: int = 0) -> Iterator[tuple]:
    """A following slave (:func:`_slave_following`) connected to a :class:`FakeJavaMaster` that announces the
    slave's max offset plus ``ahead``; yields slave, its HA service, the fake master and the slave's max offset."""
    slave, sha = _slave_following(group, tmp_path)
    mx = slave.commitlog_max_offset()
    peer = FakeJavaMaster([(1, 0)], mx + ahead)
    try:
        sha.start()
        sha.update_master_address(peer.addr)
        assert peer.accept() == mx
        yield slave, sha, peer, mx
    finally:
        peer.close()


def test_a_java_master_frame_of_an_unexpected_epoch_closes_the_connection_and_stores_nothing(group, tmp_path, caplog):
    """A 5.x master sending data labelled with an epoch below this slave's last one (a mislabelled frame, as 5.x's
    #9689 sends after an epoch bump without a switch): the slave closes the connection naming the epoch, appends
    nothing, and keeps its epoch file."""
    with _java_master_connected(group, tmp_path, 0) as (slave, sha, peer, mx):
        body = b"\x00" * 64
        peer.conn.sendall(wire.pack_transfer_header(len(body), mx, 0, 0, mx) + body)
        assert peer.closed_by_slave(), "the slave kept the connection"
        wait_until(lambda: "epoch 0 from 0 does not follow this slave's epochs" in caplog.text, 5, what="the log line")
        _intact(slave, sha, mx)


def test_a_truncated_autoswitch_frame_from_a_java_master_is_dropped_and_the_store_kept(group, tmp_path, caplog):
    """A 5.x master's connection ending inside a transfer (its header announced 600 bytes, 300 came): the slave
    logs the truncated frame, appends none of it, and its CommitLog and epochs are as before."""
    with _java_master_connected(group, tmp_path, 600) as (slave, sha, peer, mx):
        peer.conn.sendall(wire.pack_transfer_header(600, mx, 1, 0, mx) + b"\x01" * 300)
        time.sleep(0.3)
        peer.close()
        wait_until(lambda: "truncated frame dropped" in caplog.text, 10, what="the log line")
        _intact(slave, sha, mx)


def test_a_java_master_confirm_offset_beyond_what_arrived_is_not_trusted(group, tmp_path):
    """A transfer header's confirmOffset past the bytes this slave holds (a Java master confirms what its other
    slaves have): reads stay within what this slave holds (5.x: min(confirmOffset, maxPhyOffset))."""
    with _java_master_connected(group, tmp_path, 0) as (slave, sha, peer, mx):
        peer.conn.sendall(wire.pack_transfer_header(0, mx, 1, 0, mx + 10_000))
        wait_until(lambda: sha.client.confirm_offset == mx, 5, what="the heartbeat taken")
        assert sha.get_confirm_offset() == mx
        _intact(slave, sha, mx)
