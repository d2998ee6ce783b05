"""``rmqd proxy`` through a kill -9 failover: a controller-mode group of three rmqd brokers (tests/failover/kit.py, no
gRPC of their own) behind one ``rmqd proxy``. The Python 5.x client (rocketmq-python-client 5.1.2) and the Java
5.x client (rocketmq-client-java 5.2.0, compat_tests/java5/grpc/Grpc5FailoverProducer.java) produce through the
proxy's address only while the master is killed with kill -9; the proxy follows the name server to the elected
master. Each client records what it saw acknowledged; every acknowledged key is on the new master once, and a
5.x SimpleConsumer through the same proxy receives every one (0 acknowledged lost).
"""
from __future__ import annotations

import os
import sys
import time

import pytest

import client5_env
from java5kit import java5_process, require_kit5
from rmqd_proxy import RmqdProxy
from scenarios import Background
from test_failover_clients import GRPC_CONSUMER, GRPC_PRODUCER, finished

from tests.failover.kit import FailoverGroup, check_acked, read_key_counts, wait_until

TOPIC = "ProxyFailoverTopic"
AFTER_KILL = 30


@pytest.mark.timeout(420)
def test_clients_through_rmqd_proxy_survive_a_kill9_of_the_master_with_nothing_acknowledged_lost(tmp_path):
    require_kit5()
    py5 = client5_env.py5_python()
    group = FailoverGroup(str(tmp_path / "group"))
    proxy = java = None
    try:
        group.start_all()
        st = group.wait_group(TOPIC, 3, timeout=90)
        old = st["masterAddress"]
        proxy = RmqdProxy(tmp_path / "proxy", group.namesrv).start()
        flag = str(tmp_path / "killed")
        py = Background(py5, GRPC_PRODUCER, group.namesrv, {"topic": TOPIC, "seconds": 90, "flag": flag,
                                                             "after_kill": AFTER_KILL, "endpoints": proxy.grpc_addr,
                                                             "prefix": "py5-"}, 120)
        java = java5_process("grpc", "Grpc5FailoverProducer", proxy.grpc_addr, TOPIC, "j5-", "90", flag,
                             str(AFTER_KILL))
        java.wait_for(lambda ev: any(e.get("op") == "ready" for e in ev), 90, "the Java gRPC producer")
        def both_on_master() -> bool:
            keys = read_key_counts(old, TOPIC)
            return all(sum(k.startswith(prefix) for k in keys) >= 30 for prefix in ("py5-", "j5-"))
        wait_until(both_on_master, 60, interval=0.3, what="both clients' sends on the master")
        group.kill9(group.index_of(old))
        t_kill = time.time()
        open(flag, "w").close()
        new = group.wait_new_master(TOPIC, old, 30)
        acked = {"grpc-py5": {e["key"]: e["t"] for e in finished(py, 150).events_of("ok")}}
        java.wait_for(lambda ev: any(e.get("op") == "producer_done" for e in ev), 150, "the Java producer's end")
        acked["grpc-java5"] = {e["key"]: e["t"] / 1000 for e in java.events if e.get("op") == "ok"}
        for name, keys in acked.items():
            after = sorted(t for t in keys.values() if t > t_kill)
            assert len(after) >= AFTER_KILL and len(keys) > len(after), (name, len(after), proxy.log_tail())
            print(f"{name}: {len(keys)} acknowledged, first after the kill {after[0] - t_kill:.2f} s later")
        every = set().union(*acked.values())
        assert {k[:3] for k in every} == {"py5", "j5-"}
        stored = check_acked(new, TOPIC, every)
        assert not stored["lost"], stored["lost"][:5]
        got = finished(Background(py5, GRPC_CONSUMER, group.namesrv, {"endpoint": proxy.grpc_addr, "topic": TOPIC,
                                                                      "group": "ProxyFoCG", "expect": sorted(every),
                                                                      "timeout": 60}, 90), 120)
        missing = every - {e["key"] for e in got.events_of("recv")}
        assert not missing, f"{len(missing)} acknowledged keys not consumed through the proxy: {sorted(missing)[:5]}"
        assert "new master" in proxy.log_tail(200000) or "unreachable" in proxy.log_tail(200000)
    finally:
        if java is not None:
            java.stop()
        if proxy is not None:
            proxy.stop()
        group.stop()
