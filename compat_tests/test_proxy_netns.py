"""``rmqd proxy`` over brokers on hosts of their own (compat_tests/netkit.py network namespaces on one bridge): the
name server on host ``ns``, rmqd brokers ``broker-a`` and ``broker-b`` on hosts ``a`` and ``b`` (each at its own
address, the Java ports 9876 / 10911), the proxy on host ``px`` reaching them over the bridge, and the 5.x Python
client (rocketmq-python-client 5.1.2) in the test's namespace given the proxy's address only. Its producer spreads
over both brokers' queues (every queue of both hosts stores some) and a SimpleConsumer through the proxy receives
every message exactly once; the Go v5 client with TLS as it comes sends and receives over the same hosts at the
same time. Needs root and ``ip netns``: without them the test fails naming what is missing (never skips)."""
from __future__ import annotations

import os
import sys
from concurrent.futures import ThreadPoolExecutor

import pytest

from clientrunner import run_client_script
from go_outcomes import distinct, of, ok
from gokit import BUILD_TIMEOUT, run_go_all
from netkit import NetKit, require_netns
from rmqd_proxy import RmqdProxy

from tests.kit.processes import RmqdProcess, write_conf

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "grpc"))
import client5_env  # noqa: E402
from two_brokers import SEND_AND_RECEIVE, admin, assert_spread, stored_per_broker, stored_per_queue, wait_two_brokers  # noqa: E402
from test_grpc_python import PRELUDE5  # noqa: E402

TOPIC, GROUP, COUNT = "NetnsSpread", "NetnsSpreadG", 40

CLIENT = f'''
SPREAD_TOPIC, SPREAD_COUNT, SIMPLE_GROUP, AWAIT, SIMPLE_OP = "{TOPIC}", {COUNT}, "{GROUP}", 2, "got"
''' + SEND_AND_RECEIVE


@pytest.mark.timeout(BUILD_TIMEOUT + 150)
def test_python5_through_the_proxy_spreads_over_brokers_on_two_hosts(tmp_path):
    require_netns()
    py5 = client5_env.py5_python()
    procs: list[RmqdProcess] = []
    proxy = None
    with NetKit() as net:
        try:
            ns, a, b, px = (net.add_host(n) for n in ("ns", "a", "b", "px"))
            namesrv = f"{ns.ip}:9876"
            conf = write_conf(str(tmp_path / "namesrv.conf"), listenPort=9876, bindAddress=ns.ip,
                              kvConfigPath=str(tmp_path / "kv.json"))
            procs.append(RmqdProcess("namesrv", "-c", conf, log_path=tmp_path / "namesrv.log", wrap=ns.wrap).start(60))
            for host, name in ((a, "broker-a"), (b, "broker-b")):
                conf = write_conf(str(tmp_path / f"{name}.conf"), brokerClusterName="DefaultCluster",
                                  brokerName=name, brokerId=0, brokerIP1=host.ip, listenPort=10911,
                                  namesrvAddr=namesrv)
                procs.append(RmqdProcess("broker", "-c", conf, "--store-dir", str(tmp_path / name), "--grpc-port", "0",
                                         "--no-metrics", log_path=tmp_path / f"{name}.log",
                                         wrap=host.wrap).start(60))
            brokers = wait_two_brokers(namesrv)
            assert brokers == {"broker-a": f"{a.ip}:10911", "broker-b": f"{b.ip}:10911"}, brokers
            for topic in (TOPIC, "NetnsGo"):
                admin("updateTopic", "-n", namesrv, "-c", "DefaultCluster", "-t", topic)
            admin("updateSubGroup", "-n", namesrv, "-c", "DefaultCluster", "-g", "netns-go")
            proxy = RmqdProxy(tmp_path / "proxy", namesrv, host=px.ip, port=8081, wrap=px.wrap).start(60)
            # the Go v5 client with TLS as it comes (compat_tests/go/cmd/grpc5 -tls) at the same time, same hosts
            with ThreadPoolExecutor(1) as pool:
                go_run = pool.submit(run_go_all, {"go": ["grpc5", "-endpoint", proxy.grpc_addr, "-topic", "NetnsGo",
                                                         "-group", "netns-go", "-wait", "60", "-tls", "normal"]}, 120)
                res = run_client_script(py5, PRELUDE5 + CLIENT, env={"ENDPOINT": proxy.grpc_addr}, timeout=90)
                go = go_run.result()["go"]
            assert res.returncode == 0 and not res.timed_out, (res.stderr[-3000:], res.events[-5:],
                                                               proxy.log_tail())
            per = assert_spread(res, brokers, TOPIC, COUNT, "got")             # both hosts store some
            queues = stored_per_queue(brokers, TOPIC)
            assert min(queues.values()) > 0, queues                                # every queue of both
            assert sorted(e["body"] for e in res.events_of("got")) == sorted(f"spread-{i}" for i in range(COUNT))
            print(f"stored per broker {per}")
            ok(go, "the Go client with TLS through the proxy")
            assert [e["tls"] for e in of(go, "client")] == [True]
            assert sorted(e["body"] for e in distinct(of(go, "recv"), "messageId")) == \
                ["normal-0", "normal-2", "normal-async"]                           # the scenario's TagA filter
            assert sum(stored_per_broker(brokers, "NetnsGo").values()) == len(of(go, "send")) == 4
        finally:
            if proxy is not None:
                proxy.stop()
            for proc in reversed(procs):
                proc.stop()
