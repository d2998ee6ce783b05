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
    return subprocess.Popen([sys.executable, "-m", "rmqd.cli", *args], stdout=subprocess.PIPE,
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
    from rmqd.broker_processes import broker_names, store_dir_of

    assert broker_names("broker-a", 3) == ["broker-a", "broker-b", "broker-c"]
    assert broker_names("broker-x", 3) == ["broker-x", "broker-y", "broker-z"]
    assert broker_names("broker-y", 3) == ["broker-y", "broker-y-1", "broker-y-2"]   # past z
    assert broker_names("edge", 2) == ["edge", "edge-1"]
    assert store_dir_of("/s", "broker-b") == "/s/broker-b"


def test_serve_refuses_zero_brokers(capsys):
    from rmqd.cli import main

    assert main(["serve", "--brokers", "0"]) == 2
    assert "--brokers must be at least 1" in capsys.readouterr().err
