"""The RocketMQ 5.x reference kit itself works here: fetched, started once per session, its mqadmin sees the
broker, and the 5.x gRPC Java client sends and receives through the Java proxy and through rmqd alike."""
from __future__ import annotations

import pytest

from java5kit import FETCH_TIMEOUT, START_TIMEOUT, run_java5

pytestmark = pytest.mark.timeout(FETCH_TIMEOUT + START_TIMEOUT + 240)


def test_mqadmin5_cluster_list_names_the_broker(reference5, mqadmin5) -> None:
    res = mqadmin5.run("clusterList", "-n", reference5.namesrv_addr)
    assert res.returncode == 0, res.stdout[-2000:]
    assert "broker-a" in res.stdout and "V5_5" in res.stdout, res.stdout


def test_grpc_java_client_sends_and_receives_on_java5_and_rmqd(reference5, mqadmin5, grpc_server) -> None:
    """The topic and the consumer group are made with each system's mqadmin first: a 5.x proxy refuses a
    consumer of a group it does not know (INVALID_ARGUMENT, "group not found")."""
    outcomes = {}
    for name, endpoint, namesrv in (("java", reference5.grpc_addr, reference5.namesrv_addr),
                                    ("rmqd", grpc_server.grpc_addr, grpc_server.server.namesrv_addr)):
        for create in (("updateTopic", "-t", "Java5KitTopic"), ("updateSubGroup", "-g", "java5-kit-group")):
            res = mqadmin5.run(create[0], "-n", namesrv, "-c", "DefaultCluster", *create[1:])
            assert "success" in res.stdout, (name, res.stdout)
        res = run_java5("grpc", "Grpc5Smoke", endpoint, "Java5KitTopic", "java5-kit-group", "5", "false",
                        timeout=120)
        assert res.returncode == 0 and not res.timed_out, (name, res.stdout[-2000:], res.stderr[-3000:])
        outcomes[name] = (sorted(e["body"] for e in res.events_of("send")),
                          sorted(e["body"] for e in res.events_of("receive")))
    assert outcomes["java"] == outcomes["rmqd"] == ([f"smoke-{i}" for i in range(5)],) * 2
