"""kill -9 in a replica group of rmqd processes: zero acknowledged loss, and a slave resuming where it was.

``RMQD_HA_KILL_ROUNDS`` repeats the master kill with fresh groups (``scripts/ha_kill_soak.py`` runs many);
the suite runs one.
"""
from __future__ import annotations

import os
import re
import time

import pytest

from tests.replication.harness import commitlog_files_equal, wait_until
from tests.kit.processes import RmqdProcess, write_conf
from tests.replication.procs import SendLoop, read_all_keys

pytestmark = pytest.mark.slow

ROUNDS = int(os.environ.get("RMQD_HA_KILL_ROUNDS", "1"))
FILE_SIZE = 1024 * 1024


class ProcGroup:
    def __init__(self, root, master_role: str) -> None:
        self.root = str(root)
        self.namesrv = RmqdProcess("namesrv", "--port", "0", log_path=f"{self.root}/namesrv.log").start()
        self.mconf = write_conf(f"{self.root}/m.conf", brokerRole=master_role, mapedFileSizeCommitLog=FILE_SIZE,
                                slaveTimeout=2000)
        self.sconf = write_conf(f"{self.root}/s.conf", brokerRole="SLAVE", brokerId=1,
                                mapedFileSizeCommitLog=FILE_SIZE)
        self.master = self.start_master()
        self.slave = self.start_slave()

    def _broker(self, name: str, conf: str, port: int = 0) -> RmqdProcess:
        return RmqdProcess("broker", "-n", self.namesrv.addr, "--broker-port", str(port), "--store-dir",
                           f"{self.root}/{name}", "-c", conf, "--grpc-port", "0",
                           log_path=f"{self.root}/{name}.log").start()

    def start_master(self) -> RmqdProcess:
        return self._broker("master", self.mconf)

    def start_slave(self) -> RmqdProcess:
        return self._broker("slave", self.sconf)

    def close(self) -> None:
        for p in (self.slave, self.master, self.namesrv):
            if p is not None:
                p.stop()


@pytest.fixture
def proc_group(tmp_path):
    made = []

    def make(master_role: str = "SYNC_MASTER", name: str = "g") -> ProcGroup:
        root = tmp_path / name
        root.mkdir()
        g = ProcGroup(root, master_role)
        made.append(g)
        return g
    yield make
    for g in made:
        g.close()


def _kill_master_in_send_loop(g: ProcGroup, topic: str) -> None:
    """SYNC_MASTER killed in the middle of a 4-thread send loop: every SEND_OK is on the slave."""
    loop = SendLoop(g.master.addr, topic, threads=4).start()
    wait_until(lambda: len(loop.acked) >= 300, 30, what="300 acknowledged sends")
    g.master.kill9()
    loop.stop()
    assert loop.errors, "the senders should have seen the master die"
    keys = read_all_keys(g.slave.addr, topic)
    missing = loop.acked - keys
    assert not missing, f"{len(missing)} acknowledged messages missing on the slave, e.g. {sorted(missing)[:5]}"


def test_kill9_slave_resumes_then_kill9_master_loses_nothing_acknowledged(proc_group):
    g = proc_group("SYNC_MASTER")
    wait_until(lambda: "HA client: connected to master" in g.slave.log_text(), 20, what="slave connected")
    # the slave, killed mid-stream, recovers its store and resumes from its own max offset
    loop = SendLoop(g.master.addr, "SlaveKill", threads=2).start()
    wait_until(lambda: len(loop.acked) >= 300, 30, what="300 sends")
    g.slave.kill9()
    time.sleep(0.3)
    loop.stop()
    before = len(g.slave.log_text())
    g.slave = g.start_slave()
    found = wait_until(lambda: re.search(r"reporting offset (\d+)", g.slave.log_text()[before:]), 20,
                       what="slave reconnected")
    resumed = int(found.group(1))
    assert resumed > 0                                        # not from scratch
    wait_until(lambda: f"requests offset {resumed}" in g.master.log_text(), 10, what="the master streams from there")
    on_master = read_all_keys(g.master.addr, "SlaveKill")
    assert loop.acked <= on_master
    wait_until(lambda: read_all_keys(g.slave.addr, "SlaveKill") == on_master, 20, what="the slave has every message")
    commitlog_files_equal(f"{g.root}/master", f"{g.root}/slave")      # nothing is being written now
    # then the master, killed in a send loop: zero acknowledged loss
    _kill_master_in_send_loop(g, "KillTopic")
    for n in range(1, ROUNDS):                                # RMQD_HA_KILL_ROUNDS: more rounds, fresh groups
        _kill_master_in_send_loop(proc_group("SYNC_MASTER", f"round{n}"), f"KillTopic{n}")

