"""Stale controller input at a controller-mode master, as a lagging or restarted controller (rmqd's or Java 5.x's)
can send it: a NOTIFY_BROKER_ROLE_CHANGED (1008) carrying an older SyncStateSet than the master already applied,
or an older master epoch naming another broker. Both are refused with a log line naming them; the master keeps its
role and its SyncStateSet, so a send still waits for every member of the real set (a stale smaller set would let
it acknowledge alone)."""
from __future__ import annotations

import signal
import time

import pytest

import orjson

from rmqd.remoting.codes import ResponseCode
from tests.failover.kit import FailoverGroup, call, wait_until
from tests.replication.procs import BlockingClient, send_one

TOPIC = "StaleInputTopic"


def notify(addr: str, master_addr: str, master_id: int, epoch: int, set_epoch: int, members: list[int]) -> None:
    r = call(addr, 1008, {"masterAddress": master_addr, "masterEpoch": str(epoch),
                          "syncStateSetEpoch": str(set_epoch), "masterBrokerId": str(master_id)},
             orjson.dumps({"syncStateSet": members, "syncStateSetEpoch": set_epoch}))
    assert r.code == ResponseCode.SUCCESS, (r.code, r.remark)


@pytest.mark.slow
def test_a_stale_sync_state_set_and_a_stale_master_epoch_are_refused_with_a_log_line(tmp_path):
    group = FailoverGroup(str(tmp_path), replicas=2)
    try:
        group.start_all()
        st = group.wait_group(TOPIC, 2)
        master, epoch, set_epoch = st["masterAddress"], st["masterEpoch"], st["syncStateSetEpoch"]
        master_id = st["masterBrokerId"]
        master_i = group.index_of(master)
        slave = next(p for p in group.brokers if p is not None and p.addr != master)
        slave_id = next(b["brokerId"] for b in st["inSyncReplicas"] if b["brokerAddress"] == slave.addr)
        notify(master, master, master_id, epoch, set_epoch - 1, [master_id])          # the set before the slave
        notify(master, slave.addr, slave_id, epoch - 1, set_epoch - 1, [slave_id])   # an older epoch, another master
        wait_until(lambda: "ignoring a stale SyncStateSet" in group.log_tail(master_i, 100_000)
                   and "ignoring a stale role notification" in group.log_tail(master_i, 100_000), 10, interval=0.1,
                   what="both refusals logged")
        client = BlockingClient(master, timeout=10)
        try:
            assert send_one(client, TOPIC, "before-pause", b"x", 0).code == ResponseCode.SUCCESS
            slave.proc.send_signal(signal.SIGSTOP)
            try:
                t0 = time.monotonic()
                r = send_one(client, TOPIC, "while-paused", b"x", 0)
                # the real set {master, slave}: no acknowledgement without the paused slave (the stale {master}
                # would have answered SEND_OK at once)
                assert r.code != ResponseCode.SUCCESS or time.monotonic() - t0 > 2.5, (r.code, r.remark)
            finally:
                slave.proc.send_signal(signal.SIGCONT)
        finally:
            client.close()
        st = group.wait_group(TOPIC, 2)
        assert st["masterAddress"] == master and st["masterEpoch"] == epoch, st
    finally:
        group.stop()
