"""`rmqd namesrv` + two `rmqd broker` processes: the C++ clients spread over both brokers."""
from __future__ import annotations

import collections
import json

from processes import RmqdProcess
from scenarios import PUSH_CONSUMER, produce, run

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
