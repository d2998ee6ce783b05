"""A consumer of a controller-mode group never reads past the confirmOffset (5.x: the consume queues are built
only up to it): with ``allAckInSyncStateSet`` a message the SyncStateSet members do not all have yet is
invisible on the master, and appears once they acknowledge it. Without that, a consumer could read a message a
failover then cuts off the new master's CommitLog."""
from __future__ import annotations

import os
import signal
import time

import pytest

from rmqd.remoting.codes import ResponseCode
from tests.failover.kit import FailoverGroup, wait_until
from tests.replication.procs import BlockingClient, read_all_keys, send_one

TOPIC = "ConfirmTopic"


def stopped(pid: int) -> bool:
    """Every thread of ``pid`` is in the stopped state (T) of /proc."""
    task = f"/proc/{pid}/task"
    for tid in os.listdir(task):
        try:
            with open(f"{task}/{tid}/stat", encoding="ascii") as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except FileNotFoundError:          # a thread that just ended
            continue
        if state not in ("T", "t"):
            return False
    return True


@pytest.mark.slow
def test_a_message_not_on_every_sync_state_set_member_is_not_consumed_until_it_is(tmp_path):
    group = FailoverGroup(str(tmp_path), haMaxTimeSlaveNotCatchup=20000, haHousekeepingInterval=20000,
                          slaveTimeout=1000)
    slaves = []
    try:
        group.start_all()
        master = group.wait_group(TOPIC, 3)["masterAddress"]
        with BlockingClient(master, timeout=10) as c:
            assert send_one(c, TOPIC, "k0", b"confirmed", 0).code == ResponseCode.SUCCESS
        assert "k0" in read_all_keys(master, TOPIC)
        slaves = [b.proc for b in group.brokers if b is not None and b.addr != master]
        for p in slaves:
            p.send_signal(signal.SIGSTOP)
        # SIGSTOP is asynchronous: a slave thread running on the other core can still read and acknowledge for a
        # moment. Send only once every thread of both slaves is stopped.
        wait_until(lambda: all(stopped(p.pid) for p in slaves), 5, interval=0.01, what="the slaves stopped")
        try:
            t0 = time.monotonic()
            with BlockingClient(master, timeout=10) as c:
                r = send_one(c, TOPIC, "k1", b"stored on the master only", 0)
            assert r.code == ResponseCode.FLUSH_SLAVE_TIMEOUT, (r.code, r.remark)     # stored, not replicated
            seen = read_all_keys(master, TOPIC)
            assert "k0" in seen and "k1" not in seen, seen
            assert time.monotonic() - t0 < 2.5              # still inside the slaves' heartbeat timeout
        finally:
            for p in slaves:
                p.send_signal(signal.SIGCONT)
        wait_until(lambda: "k1" in read_all_keys(master, TOPIC), 10, interval=0.1, what="k1 visible once the members have it")
    finally:
        for p in slaves:
            p.send_signal(signal.SIGCONT)
        group.stop()
