"""`rmqd namesrv` + two `rmqd broker` processes: the C++ clients spread over both brokers."""
from __future__ import annotations

import collections
import json

from processes import RmqdProcess
from scenarios import PUSH_CONSUMER, produce, run, wait_for

from rmqd.remoting.client import BlockingClient
from rmqd.remoting.command import new_request


def test_namesrv_with_two_brokers(client, tmp_path):
    name, python = client
    namesrv = RmqdProcess("namesrv", "--port", "0")
    brokers = []
    try:
        for b in ("broker-a", "broker-b"):
            brokers.append(RmqdProcess("broker", "-n", namesrv.addr, "--broker-port", "0", "--broker-name", b,
                                       "--store-dir", str(tmp_path / b)))
        with BlockingClient(namesrv.addr) as c:
            info = json.loads(c.invoke(new_request(106)).body_bytes().replace(b"{0:", b'{"0":'))
        assert sorted(info["clusterAddrTable"]["DefaultCluster"]) == ["broker-a", "broker-b"]

        topic = f"MultiBroker_{name}"
        sent = produce(python, namesrv.addr, topic, 40, "sync", prefix="mb")
        assert all(s["status"] == 0 for s in sent.events_of("send"))
        with BlockingClient(namesrv.addr) as c:
            route = c.invoke(new_request(105, {"topic": topic}))
        assert route.code == 0
        queue_brokers = {q["brokerName"] for q in json.loads(route.body_bytes().replace(b"{0:", b'{"0":'))["queueDatas"]}
        assert queue_brokers == {"broker-a", "broker-b"}, "auto-create should have happened on both brokers"

        res = run(python, PUSH_CONSUMER, namesrv.addr,
                  dict(topic=topic, group=f"CG_multi_{name}", expect=40, timeout=40, linger=1.5, props=[]), timeout=80)
        got = collections.Counter(e["body"] for e in res.events_of("recv"))
        assert set(got) == {f"mb-{i}" for i in range(40)} and set(got.values()) == {1}
    finally:
        for b in brokers:
            assert b.stop() == 0
        assert namesrv.stop() == 0


def _cluster_brokers(namesrv_addr: str) -> dict:
    with BlockingClient(namesrv_addr) as c:
        info = json.loads(c.invoke(new_request(106)).body_bytes().replace(b"{0:", b'{"0":'))
    return {name: data["brokerAddrs"]["0"] for name, data in info["brokerAddrTable"].items()}


def test_serve_with_two_broker_processes(client, tmp_path):
    """`rmqd serve --brokers 2`: broker-a in the serve process, broker-b a child process, both
    registered with the one name server; the C++ clients spread a topic over both, unchanged."""
    name, python = client
    serve = RmqdProcess("serve", "--brokers", "2", "--namesrv-port", "0", "--broker-port", "0",
                        "--store-dir", str(tmp_path))
    try:
        wait_for(lambda: len(_cluster_brokers(serve.addr)) == 2, 15, what="two brokers registered")
        brokers = _cluster_brokers(serve.addr)
        assert sorted(brokers) == ["broker-a", "broker-b"]
        assert (tmp_path / "broker-a" / "commitlog").is_dir() and (tmp_path / "broker-b" / "commitlog").is_dir()
        topic = f"ServeBrokers_{name}"
        sent = produce(python, serve.addr, topic, 40, "sync", prefix="sb")
        assert all(s["status"] == 0 for s in sent.events_of("send"))
        with BlockingClient(serve.addr) as c:
            route = json.loads(c.invoke(new_request(105, {"topic": topic})).body_bytes()
                               .replace(b"{0:", b'{"0":'))
        assert {q["brokerName"] for q in route["queueDatas"]} == {"broker-a", "broker-b"}
        per_broker = collections.Counter()
        for broker_name, addr in brokers.items():
            with BlockingClient(addr) as c:
                for qid in range(4):
                    r = c.invoke(new_request(30, {"topic": topic, "queueId": str(qid)}))
                    per_broker[broker_name] += int(r.ext_fields["offset"])
        assert sum(per_broker.values()) == 40 and min(per_broker.values()) > 0, per_broker
        res = run(python, PUSH_CONSUMER, serve.addr,
                  dict(topic=topic, group=f"CG_serve_{name}", expect=40, timeout=40, linger=1.5, props=[]),
                  timeout=80)
        got = collections.Counter(e["body"] for e in res.events_of("recv"))
        assert set(got) == {f"sb-{i}" for i in range(40)} and set(got.values()) == {1}
    finally:
        assert serve.stop() == 0


def test_serve_restarts_a_broker_process_that_died(tmp_path):
    import os
    import re
    import signal

    serve = RmqdProcess("serve", "--brokers", "2", "--namesrv-port", "0", "--broker-port", "0",
                        "--store-dir", str(tmp_path))
    try:
        wait_for(lambda: len(_cluster_brokers(serve.addr)) == 2, 15, what="two brokers registered")
        line = wait_for(lambda: next((ln for ln in serve.lines if "broker-b" in ln), None), 15,
                        what="broker-b's start-up line")
        pid = int(re.search(r"process (\d+)", line).group(1))
        os.kill(pid, signal.SIGKILL)
        wait_for(lambda: os.path.exists(f"/proc/{pid}") is False, 5, what="broker-b gone")
        # the serve process starts broker-b again on the same store; it registers again
        wait_for(lambda: len(_cluster_brokers(serve.addr)) == 2 and _broker_answers(_cluster_brokers(serve.addr)["broker-b"]),
                 30, what="broker-b back")
    finally:
        assert serve.stop() == 0
    assert _processes_using(str(tmp_path)) == [], "broker processes outlived `rmqd serve`"


def _processes_using(path: str) -> list[int]:
    import os

    found = []
    for p in os.listdir("/proc"):
        try:
            if p.isdigit() and path in open(f"/proc/{p}/cmdline").read():
                found.append(int(p))
        except OSError:
            continue
    return found


def _broker_answers(addr: str) -> bool:
    try:
        with BlockingClient(addr) as c:
            return c.invoke(new_request(28)).code == 0
    except OSError:
        return False
