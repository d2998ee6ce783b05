"""A replica group in this process: a name server, a master and a slave BrokerController on one loop thread.

Tests talk to them byte-exact with the blocking client, as a client would; fake HA peers (a master or a slave
speaking the raw 8/12-byte protocol) come from :mod:`tests.replication.ha_peers`, rmqd processes for kill -9
from :mod:`tests.replication.procs`.
"""
from __future__ import annotations

import asyncio
import faulthandler
import filecmp
import os
import sys
import time
from typing import Any

from rmqd.broker.controller import BrokerController
from rmqd.config import BrokerConfig, NamesrvConfig
from rmqd.namesrv.server import NameServer
from rmqd.common.localports import free_port_block
from rmqd.remoting.client import BlockingClient
from tests.kit.clients import send_keyed
from tests.kit.loop import LoopThread
from tests.kit.waits import wait_until

__all__ = ["Group", "LoopThread", "wait_until", "send", "commitlog_files_equal", "FILE_SIZE"]

FILE_SIZE = 256 * 1024           # small CommitLog files: every test crosses file ends
CLOSE_TIMEOUT_S = 60.0
CLOSE_REPORT_S = 20.0


def send(client: BlockingClient, topic: str, body: bytes, key: str, queue_id: int = 0, wait: bool = True,
         timeout: float = 10.0):
    """SEND_MESSAGE_V2 as the Java client sends it (WAIT=true unless ``wait`` is False)."""
    return send_keyed(client, topic, key, body, queue_id, wait, timeout)


def commitlog_files_equal(master_dir: str, slave_dir: str) -> list[str]:
    """Names of the slave's CommitLog files, after checking each is byte-identical to the master's."""
    names = sorted(os.listdir(os.path.join(slave_dir, "commitlog")))
    assert names, "the slave has no CommitLog file"
    for name in names:
        a, b = os.path.join(master_dir, "commitlog", name), os.path.join(slave_dir, "commitlog", name)
        assert filecmp.cmp(a, b, shallow=False), f"CommitLog file {name} differs between master and slave"
    return names


def _print_tasks(loop: asyncio.AbstractEventLoop) -> None:
    for task in asyncio.all_tasks(loop):
        print(f"--- task {task.get_name()}", file=sys.stderr)
        task.print_stack(file=sys.stderr)


class Group:
    """Name server + master + slave; each broker can be stopped and started again on the same store."""

    def __init__(self, lt: LoopThread, root: str, master_conf: dict | None = None,
                 slave_conf: dict | None = None) -> None:
        self.lt = lt
        self.root = root
        self.namesrv = NameServer(NamesrvConfig(listenPort=0))
        lt.call(self.namesrv.start())
        self.master_conf = dict(master_conf or {})
        self.slave_conf = dict(slave_conf or {})
        self.master: BrokerController | None = None
        self.slave: BrokerController | None = None
        self.master_port = 0
        self.clients: list[BlockingClient] = []

    def _config(self, name: str, extra: dict) -> BrokerConfig:
        values = dict(listenPort=0, storePathRootDir=os.path.join(self.root, name), mapedFileSizeCommitLog=FILE_SIZE,
                      mapedFileSizeConsumeQueue=3000 * 20, brokerIP1="127.0.0.1", namesrvAddr=self.namesrv.address,
                      grpcServerPort=0)
        values.update(extra)
        return BrokerConfig(**values)

    def start_master(self, **extra: Any) -> BrokerController:
        """Start (or restart, on the same ports: the slave keeps reconnecting to them) the master."""
        conf = {**self.master_conf, **extra}
        if not self.master_port:        # below the ephemeral range: still free when the master starts again
            self.master_port = free_port_block(2)
        conf.setdefault("listenPort", self.master_port)
        conf.setdefault("haListenPort", self.master_port + 1)
        self.master = BrokerController(self._config("master", conf))
        self.lt.call(self.master.start())
        self.master_port = self.master.server.port
        return self.master

    def start_slave(self, **extra: Any) -> BrokerController:
        conf = {"brokerRole": "SLAVE", "brokerId": 1, **self.slave_conf, **extra}
        slave = BrokerController(self._config("slave", conf))
        slave.replication.sync_first_delay_s = 0.2
        slave.replication.sync_period_s = 0.5
        slave.replication.ha.client.reconnect_delay_s = 0.2
        self.lt.call(slave.start())
        self.slave = slave
        return slave

    def _close(self, broker: BrokerController) -> None:
        """Close a broker; if that takes long (a loaded machine), dump every thread's stack once to say where."""
        faulthandler.dump_traceback_later(CLOSE_REPORT_S, exit=False)
        try:
            self.lt.call(broker.close(), timeout=CLOSE_TIMEOUT_S)
        except TimeoutError:
            self.lt.loop.call_soon_threadsafe(_print_tasks, self.lt.loop)     # where each coroutine waits
            time.sleep(0.5)
            raise
        finally:
            faulthandler.cancel_dump_traceback_later()

    def stop_master(self) -> None:
        if self.master is not None:
            self._close(self.master)
            self.master = None

    def stop_slave(self) -> None:
        if self.slave is not None:
            self._close(self.slave)
            self.slave = None

    def client(self, broker: BrokerController) -> BlockingClient:
        c = BlockingClient(broker.address, timeout=10.0)
        self.clients.append(c)
        return c

    def caught_up(self) -> bool:
        m, s = self.master, self.slave
        return s.store.commitlog_max_offset() == m.store.commitlog_max_offset() > 0

    def wait_caught_up(self, timeout: float = 15.0) -> None:
        wait_until(self.caught_up, timeout, what="slave caught up with the master")

    def close(self) -> None:
        for c in self.clients:
            c.close()
        self.stop_slave()
        self.stop_master()
        self.lt.call(self.namesrv.close())


