"""The 5.x gRPC clients through a failover of a mixed group: three rmqd brokers (each serving gRPC) under Java
5.x's controller and name server. The Python client (rocketmq-python-client 5.1.2) and the Java client
(rocketmq-client-java 5.2.0, compat_tests/java5/grpc/Grpc5FailoverProducer.java) produce through the two
slaves' endpoints while the master is killed with kill -9; each records what it saw acknowledged; then a 5.x
SimpleConsumer on the new master's endpoint must receive every acknowledged key, and the checker finds them all
stored once.

Not driven yet: the Go clients (the official remoting client and the 5.x gRPC Go client). Their programs come with
the Go scenarios of another branch (compat_tests/go); :data:`GO_PRODUCERS` is where they plug in (a name and a
function starting one against ``(namesrv, endpoints, topic, prefix, flag)`` that returns an object with
``result()`` giving ``events_of("ok")``, as :class:`scenarios.Background` does).
"""
from __future__ import annotations

import time

import pytest

import client5_env     # compat_tests/grpc/ (pyproject's pythonpath)
from java5kit import java5_process, require_kit5
from mixed_group import MIXES, MixedGroup
from queue_checker import read_queues
from scenarios import Background
from test_failover_clients import GRPC_CONSUMER, GRPC_PRODUCER, finished

from tests.failover.kit import wait_until

TOPIC = "MixedClientTopic"
AFTER_KILL = 30
#: name -> starter of a Go producer (see the module docstring); empty until compat_tests/go is on main
GO_PRODUCERS: dict = {}


@pytest.mark.timeout(600)
def test_grpc_clients_produce_through_a_kill9_of_an_rmqd_master_under_the_java_controller(tmp_path):
    require_kit5()
    py5 = client5_env.py5_python()
    group = MixedGroup(tmp_path / "group", MIXES["rmqd-under-java-controller"])
    java = None
    try:
        group.start()
        st = group.wait_group(TOPIC, 3, timeout=120)
        old = group.member(st["masterAddress"])
        slaves = ";".join(f"127.0.0.1:{m.grpc_port}" for m in group.members if m is not old)
        flag = str(tmp_path / "killed")
        py = Background(py5, GRPC_PRODUCER, group.namesrv, {"topic": TOPIC, "seconds": 90, "flag": flag,
                                                              "after_kill": AFTER_KILL, "endpoints": slaves,
                                                              "prefix": "py5-"}, 120)
        java = java5_process("grpc", "Grpc5FailoverProducer", slaves, TOPIC, "j5-", "90", flag, str(AFTER_KILL))
        java.wait_for(lambda ev: any(e.get("op") == "ready" for e in ev), 90, "the Java gRPC producer")
        wait_until(lambda: len([k for k in read_queues(old.addr, TOPIC) if k.startswith("j5-")]) > 30
                   and len([k for k in read_queues(old.addr, TOPIC) if k.startswith("py5-")]) > 30, 60, interval=0.3,
                   what="both clients' sends on the master")
        old.kill9()
        t_kill = time.time()
        open(flag, "w").close()
        new = group.wait_new_master(TOPIC, old.addr, 30)
        acked = {"grpc-py5": {e["key"]: e["t"] for e in finished(py, 150).events_of("ok")}}
        java.wait_for(lambda ev: any(e.get("op") == "producer_done" for e in ev), 150, "the Java producer's end")
        acked["grpc-java5"] = {e["key"]: e["t"] / 1000 for e in java.events if e.get("op") == "ok"}
        for name, keys in acked.items():
            after = sorted(t for t in keys.values() if t > t_kill)
            assert len(after) >= AFTER_KILL, (name, len(after))
            print(f"{name}: {len(keys)} acknowledged, first after the kill {after[0] - t_kill:.2f} s later")
        every = set().union(*acked.values())
        stored = read_queues(new, TOPIC)
        assert not every - set(stored), sorted(every - set(stored))[:5]
        assert not [k for k in every if len(stored[k]) > 1]
        endpoint = f"127.0.0.1:{group.member(new).grpc_port}"
        got = finished(Background(py5, GRPC_CONSUMER, group.namesrv, {"endpoint": endpoint, "topic": TOPIC,
                                                                      "group": "MixedGrpcCG", "expect": sorted(every),
                                                                      "timeout": 60}, 90), 120)
        missing = every - {e["key"] for e in got.events_of("recv")}
        assert not missing, f"{len(missing)} acknowledged keys not consumed: {sorted(missing)[:5]}"
    finally:
        if java is not None:
            java.stop()
        group.stop()
