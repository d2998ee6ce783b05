"""``rmqd proxy`` in front of a Java 5.5.0 broker (the session's reference5 broker, reached over remoting only),
judged against Java's own proxy on that same broker:

- the Java client (rocketmq-client-java 5.2.0) in its default configuration (TLS on) runs Grpc5Scenario's normal,
  fifo, delay, tx (the broker's check-back relayed) and push sections once through Java's local-mode proxy and once
  through ``rmqd proxy``, at the same time, on topics and groups of their own (made with the 5.x mqadmin); what each
  section reported is normalised as test_grpc5_java does and must be the same;
- the PyPI 5.1.2 Python client with TLS on runs test_proxy_brokers' scenario (SimpleConsumer, PushConsumer, FIFO,
  delay, transaction check-back) through ``rmqd proxy``.
"""
from __future__ import annotations

import concurrent.futures
import json

import pytest

from clientrunner import run_client_script
from differential5 import Target, assert_same
from java5kit import FETCH_TIMEOUT, START_TIMEOUT, run_java5
from rmqd_proxy import FAST_PROXY, RmqdProxy
from test_grpc5_java import admin_commands, normalise
from test_grpc_python import PRELUDE5
from test_proxy_brokers import JAVA_SECTIONS, PYTHON
from two_brokers import assert_each_once, assert_fifo_tx_delay

from rmqd.testing.pki import TestPki

pytestmark = pytest.mark.timeout(FETCH_TIMEOUT + START_TIMEOUT + 400)

SUFFIXES = {"java": "JvPx", "rmqd-proxy": "RmPx"}
#: Grpc5Scenario's sections run through both proxies (lite: 5.5.0's local proxy has none)
SECTIONS = (*JAVA_SECTIONS, "priority", "change", "dlq", "recall")
SECTION_NAMES = ("Normal", "Fifo", "Delay", "Tx", "Push", "Prio", "Change", "Dlq", "Recall", "NormalG", "FifoG",
                 "DelayG", "TxG", "PushG", "PrioG", "ChangeG", "DlqG", "DlqReader", "RecallG")


@pytest.fixture(scope="module")
def proxy_over_java(reference5, tmp_path_factory):
    """``rmqd proxy`` over the reference's name server, serving a CA-issued certificate (the Python client checks)."""
    work = tmp_path_factory.mktemp("rmqd-proxy-java")
    pki = TestPki(work / "pki")
    conf = dict(FAST_PROXY, tlsTestModeEnable="false", tlsCertPath=str(pki.server.cert),
                tlsKeyPath=str(pki.server.key))
    with RmqdProxy(work / "proxy", reference5.namesrv_addr, conf) as proxy:
        proxy.ca = str(pki.ca)
        yield proxy


def _create(side: Target, mqadmin5, suffix: str) -> None:
    wanted = {f"J5{k}{suffix}" for k in SECTION_NAMES}
    side.create(mqadmin5, *[cmd for cmd in admin_commands(suffix)
                            if cmd[cmd.index("-t" if "-t" in cmd else "-g") + 1] in wanted])


def _run(side: Target, suffix: str) -> list[dict]:
    res = run_java5("grpc", "Grpc5Scenario", side.grpc_addr, side.grpc_addr, suffix, *SECTIONS, timeout=200,
                    system_props={"grpc5.tls": "default"})
    assert res.returncode == 0 and not res.timed_out, (side.name, res.stdout[-3000:], res.stderr[-3000:])
    return res.events


def test_java5_client_through_rmqd_proxy_as_through_javas_proxy(reference5, mqadmin5, proxy_over_java):
    sides = {"java": Target("java", reference5.grpc_addr, reference5.namesrv_addr, reference5.broker_addr),
             "rmqd-proxy": Target("rmqd-proxy", proxy_over_java.grpc_addr, reference5.namesrv_addr,
                                  reference5.broker_addr)}
    for name, side in sides.items():
        _create(side, mqadmin5, SUFFIXES[name])
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        runs = dict(zip(sides, pool.map(_run, sides.values(), SUFFIXES.values())))
    # each side's topic names carry its suffix (the same broker): masked before comparing
    got = {name: normalise(json.loads(json.dumps(events).replace(SUFFIXES[name], "<suffix>")))
           for name, events in runs.items()}
    assert_same(got["java"], got["rmqd-proxy"], f"Java client 5.2.0 (TLS) via rmqd proxy: {proxy_over_java.log_tail()}")
    # the facts themselves (a shared mistake would pass the comparison)
    received = {e["section"]: e["messages"] for e in runs["rmqd-proxy"] if e["op"] == "got"}
    assert sorted(m["body"] for m in received["normal"]) == ["n0", "n1", "n2"]
    assert [m["body"] for m in received["fifo"] if m["group"] == "order-1"] == [f"g1-{i}" for i in range(4)]
    assert [m["body"] for m in received["delay"]] == ["later"]
    # a loaded Java broker may commit the orphan twice (check-back racing the end: test_grpc5_java.normalise)
    assert sorted({m["body"] for m in received["tx"]}) == ["commit", "orphan"], received["tx"]
    dlq = {e["op"]: [m["attempt"] for m in e["messages"]] for e in runs["rmqd-proxy"]
           if e.get("section") == "dlq" and "messages" in e}
    assert dlq["attempts"] == [1, 2] and dlq["after"] == [] and len(dlq["dlq"]) >= 1, dlq   # then in the DLQ
    assert [e["orphan"] for e in runs["rmqd-proxy"] if e["op"] == "checked"] == [True]


def test_python5_client_tls_through_rmqd_proxy_over_the_java_broker(py5_python, mqadmin5, reference5,
                                                                   proxy_over_java):
    ns = reference5.namesrv_addr
    for cmd in (("updateTopic", "-t", "PxSpread"), ("updateTopic", "-t", "PxFifo", "-a", "+message.type=FIFO"),
                ("updateTopic", "-t", "PxTx", "-a", "+message.type=TRANSACTION"),
                ("updateTopic", "-t", "PxDelay", "-a", "+message.type=DELAY"),
                ("updateSubGroup", "-g", "PxFifoG", "-o", "true"), ("updateSubGroup", "-g", "PxSpreadSimple"),
                ("updateSubGroup", "-g", "PxSpreadPush"), ("updateSubGroup", "-g", "PxTxG"),
                ("updateSubGroup", "-g", "PxDelayG")):
        res = mqadmin5.run(cmd[0], "-n", ns, "-c", reference5.cluster_name, *cmd[1:])
        assert "success" in res.stdout, (cmd, res.stdout[-1500:])
    res = run_client_script(py5_python, PRELUDE5 + PYTHON, timeout=300,
                            env={"ENDPOINT": proxy_over_java.grpc_addr,
                                 "GRPC_DEFAULT_SSL_ROOTS_FILE_PATH": proxy_over_java.ca})
    assert res.returncode == 0 and not res.timed_out, (res.stderr[-3000:], res.events[-5:],
                                                       proxy_over_java.log_tail())
    sent = [e["id"] for e in res.events_of("sent")]
    assert len(set(sent)) == 40
    assert_each_once(res, sent, "simple", "push")
    assert_fifo_tx_delay(res)
