"""`rmqd serve` starts both servers fast, prints addresses, and exits 0 on SIGTERM/SIGINT."""
import os
import re
import signal
import socket
import subprocess
import sys
import time

import pytest

ADDR = re.compile(r"listening on (127\.0\.0\.1:\d+)")


def start(args, tmp_path):
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    return subprocess.Popen([sys.executable, "-m", "rmqd.runtime.cli", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env, cwd=tmp_path)


def read_addresses(proc, count, timeout=10.0):
    found = []
    deadline = time.monotonic() + timeout
    while len(found) < count and time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        m = ADDR.search(line)
        if m:
            found.append(m.group(1))
    return found


def answers(addr):
    host, port = addr.split(":")
    with socket.create_connection((host, int(port)), timeout=2):
        return True


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_serve_starts_fast_and_stops_cleanly(tmp_path, sig):
    t0 = time.monotonic()
    proc = start(["serve", "--namesrv-port", "0", "--broker-port", "0", "--console-port", "0", "--store-dir", str(tmp_path / "s")], tmp_path)
    try:
        addrs = read_addresses(proc, 2)
        assert len(addrs) == 2, proc.stderr.read()
        assert all(answers(a) for a in addrs)
        assert time.monotonic() - t0 < 5.0  # interpreter start included; the server itself is well under 1 s
    finally:
        proc.send_signal(sig)
        rc = proc.wait(10)
    assert rc == 0


def test_namesrv_and_broker_run_apart(tmp_path):
    ns = start(["namesrv", "--port", "0"], tmp_path)
    try:
        [ns_addr] = read_addresses(ns, 1)
        broker = start(["broker", "-n", ns_addr, "--broker-port", "0", "--store-dir", str(tmp_path / "b")], tmp_path)
        try:
            [b_addr] = read_addresses(broker, 1)
            assert answers(b_addr) and answers(ns_addr)
        finally:
            broker.terminate()
            assert broker.wait(10) == 0
    finally:
        ns.terminate()
        assert ns.wait(10) == 0


def test_multi_broker_names_and_stores():
    from rmqd.runtime.broker_processes import broker_names, store_dir_of

    assert broker_names("broker-a", 3) == ["broker-a", "broker-b", "broker-c"]
    assert broker_names("broker-x", 3) == ["broker-x", "broker-y", "broker-z"]
    assert broker_names("broker-y", 3) == ["broker-y", "broker-y-1", "broker-y-2"]   # past z
    assert broker_names("edge", 2) == ["edge", "edge-1"]
    assert store_dir_of("/s", "broker-b") == "/s/broker-b"


def test_serve_refuses_zero_brokers(capsys):
    from rmqd.runtime.cli import main

    assert main(["serve", "--brokers", "0"]) == 2
    assert "--brokers must be at least 1" in capsys.readouterr().err


def test_replicas_add_slave_processes_per_group(tmp_path):
    """`rmqd serve --brokers 2 --replicas 3`: broker-b, then two slaves of broker-a and two of broker-b, each with
    its own port (the master's + 4 per slave; groups 14 apart), store and a broker.conf naming role and id."""
    from rmqd.runtime.broker_processes import ExtraBrokers

    base = tmp_path / "base.conf"
    base.write_text("brokerRole=SYNC_MASTER\nflushDiskType=ASYNC_FLUSH\n")
    eb = ExtraBrokers(["broker-b"], str(base), str(tmp_path), 10911, replicas=3, first_name="broker-a",
                      grpc_port=8081)
    def arg(child, flag):
        return child.args[child.args.index(flag) + 1]
    assert [c.name for c in eb.children] == ["broker-b", "broker-a slave 1", "broker-a slave 2",
                                             "broker-b slave 1", "broker-b slave 2"]
    assert [int(arg(c, "--broker-port")) for c in eb.children] == [10925, 10915, 10919, 10929, 10933]
    assert [arg(c, "--broker-name") for c in eb.children] == ["broker-b", "broker-a", "broker-a", "broker-b",
                                                              "broker-b"]
    assert arg(eb.children[2], "--store-dir") == str(tmp_path / "broker-a-s2")
    conf = (tmp_path / "broker-a-s2.conf").read_text()
    assert conf.startswith("brokerRole=SYNC_MASTER\n") and conf.endswith("brokerRole=SLAVE\nbrokerId=2\n")
    # each broker process serves gRPC on the ports after the serve process's (optional, as its default port)
    assert [int(arg(c, "--grpc-port")) for c in eb.children] == [8082, 8083, 8084, 8085, 8086]
    assert all("--grpc-optional" in c.args for c in eb.children)
    assert all(arg(c, "--grpc-port") == "0" for c in ExtraBrokers(["broker-b"], None, str(tmp_path), 0).children)


def test_failover_replicas_serve_grpc_on_their_own_ports(tmp_path):
    from rmqd.runtime.failover_processes import FailoverProcesses

    group = FailoverProcesses(["broker-a"], None, str(tmp_path), 0, replicas=3, namesrv_port=0, grpc_port=8081,
                              grpc_optional=False)
    replicas = [c for c in group.children if c.takes_namesrv]
    assert [c.args[c.args.index("--grpc-port") + 1] for c in replicas] == ["8081", "8082", "8083"]
    assert not any("--grpc-optional" in c.args for c in replicas)
