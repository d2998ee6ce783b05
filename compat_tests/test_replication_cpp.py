"""The C++ clients (1.x and 2.x wheels) keep consuming from an rmqd slave while its master is down.

One rmqd group for the module: name server, master and slave processes; messages are sent to the master, the
slave copies them, the master is stopped; then each client's push and pull consumer reads everything from the
slave (the name server's route lists the slave only), as they do from a Java slave.
"""
from __future__ import annotations

import pytest

from javakit import free_port_block
from replication_kit import RmqdProcess, create_topic, max_offset, wait_until
from scenarios import PULL_CONSUMER, PUSH_CONSUMER, run
from rmqd.remoting.client import BlockingClient
from rmqd.remoting.codes import RequestCode, ResponseCode
from rmqd.remoting.command import new_request

TOPIC = "HaCppTopic"
COUNT = 40


@pytest.fixture(scope="module")
def master_down(tmp_path_factory):
    root = tmp_path_factory.mktemp("ha-cpp")
    base = free_port_block(12)
    ns = RmqdProcess("namesrv", "--port", str(base), log_path=root / "namesrv.log").start()
    (root / "s.conf").write_text("brokerRole=SLAVE\nbrokerId=1\n")
    procs = [ns]
    try:
        master = RmqdProcess("broker", "-n", ns.addr, "--broker-port", str(base + 3), "--store-dir",
                             str(root / "master"), "--grpc-port", "0", log_path=root / "master.log").start()
        procs.append(master)
        slave = RmqdProcess("broker", "-n", ns.addr, "--broker-port", str(base + 8), "--store-dir",
                            str(root / "slave"), "-c", str(root / "s.conf"), "--grpc-port", "0",
                            log_path=root / "slave.log").start()
        procs.append(slave)
        create_topic(master.addr, TOPIC)
        wait_until(lambda: "connected to master" in slave.log_text(), 30, what="slave connected")
        client = BlockingClient(master.addr, timeout=10)
        try:
            for i in range(COUNT):
                ext = {"a": "PG", "b": TOPIC, "c": "TBW102", "d": "4", "e": str(i % 4), "f": "0", "g": "0",
                       "h": "0", "i": f"KEYS\x01k{i}\x02WAIT\x01true", "j": "0", "k": "false", "m": "false"}
                assert client.invoke(new_request(RequestCode.SEND_MESSAGE_V2, ext, f"body{i}".encode()),
                                     10).code == ResponseCode.SUCCESS
        finally:
            client.close()
        wait_until(lambda: max_offset(slave.addr) == max_offset(master.addr), 30, what="slave caught up")
        master.stop()                              # unregisters: the route now lists the slave only
        yield ns.addr
    finally:
        for p in reversed(procs):
            p.stop()


def test_push_consumer_reads_from_the_slave(master_down, client):
    name, python = client
    res = run(python, PUSH_CONSUMER, master_down, {"group": f"HaCppPush_{name}", "topic": TOPIC, "expect": COUNT,
                                                   "timeout": 60}, timeout=120)
    bodies = {e["body"] for e in res.events_of("recv")}
    assert bodies >= {f"body{i}" for i in range(COUNT)}, (name, len(bodies), res.stderr[-2000:])


def test_pull_consumer_reads_from_the_slave(master_down, client):
    name, python = client
    res = run(python, PULL_CONSUMER, master_down, {"group": f"HaCppPull_{name}", "topic": TOPIC, "expect": COUNT,
                                                   "timeout": 60}, timeout=120)
    bodies = {e["body"] for e in res.events_of("recv")}
    assert bodies >= {f"body{i}" for i in range(COUNT)}, (name, len(bodies), res.stderr[-2000:])
