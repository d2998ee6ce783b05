"""/metrics beside the Java 5.x broker's Prometheus exporter for the same traffic.

The same scenario runs on the session's Java 5.x reference (its broker exports with metricsExporterType=PROM)
and on an rmqd with its gRPC and metrics endpoints: the topic and group made with 5.x's mqadmin, normal messages
and one timer message (to a DELAY topic) sent and received through the 5.x gRPC Java client, the consumer closed. Then both are
scraped and compared family by family: names and types, and the label keys of their series. The series left after
the consumer is gone matter too: 5.x keeps a group it saw popping in its compensation table, so its lag series stay.
The Java reference is shared by the session, so only the series this traffic makes there are its own (the test's
docstring says how they are told apart).
"""
from __future__ import annotations

import time
import urllib.request

import pytest

from java5kit import FETCH_TIMEOUT, START_TIMEOUT, run_java5
from rmqd.grpc.endpoint import GrpcEndpoint
from rmqd.metrics.endpoint import MetricsEndpoint
from rmqd.testing import EmbeddedServer

from tests.metrics.promtext import family_of, parse

pytestmark = pytest.mark.timeout(FETCH_TIMEOUT + START_TIMEOUT + 300)

TOPIC, TIMER_TOPIC, GROUP = "MetricsParityTopic", "MetricsParityTimerTopic", "metrics-parity-group"
# Families Java 5.x shows for this traffic that rmqd does not, each with its reason (docs/compatibility.md).
JAVA_ONLY: dict[str, str] = {}
# Families rmqd shows for this traffic that the Java broker does not, each with its reason.
RMQD_ONLY: dict[str, str] = {}
# Families whose series follow the clients connected at the moment of the scrape: the session's mqadmin JVM
# heartbeats (as a producer, CLIENT_INNER_PRODUCER) to each broker it knows every 30 s, so either side may or may
# not show it yet. Compared by label keys when both show them.
LIVE_CONNECTIONS = {"rocketmq_producer_connections", "rocketmq_consumer_connections"}


def java_revive_internals(labels: dict[str, str]) -> bool:
    """A series of the Java broker's own POP revive machinery: its revive consumer group pulling the revive log
    (and the revive log's timer traffic), which rmqd's revive, reading no topic, has no counterpart of."""
    return labels.get("consumer_group") == "CID_RMQ_SYS_REVIVE_GROUP" \
        or labels.get("topic", "").startswith("rmq_sys_REVIVE_LOG_")


Sample = tuple[str, tuple[tuple[str, str], ...]]         # (sample name, its labels)


def scrape(url: str) -> tuple[dict[str, str], dict[Sample, float]]:
    """Family -> type, and every sample's value; the Java broker's revive internals are left out
    (:func:`java_revive_internals`)."""
    with urllib.request.urlopen(url, timeout=15) as r:
        types, samples = parse(r.read().decode("utf-8"))
    return types, {(name, tuple(sorted(labels.items()))): v for name, labels, v in samples
                   if not java_revive_internals(labels)}


def names_a_resource(labels: dict[str, str]) -> bool:
    return bool(labels.get("topic") or labels.get("consumer_group"))


def of_this_traffic(labels: dict[str, str]) -> bool:
    """A series naming this test's topics or group (their retry topics included)."""
    return any(name in labels.get("topic", "") for name in (TOPIC, TIMER_TOPIC, GROUP)) \
        or labels.get("consumer_group") == GROUP


def families(types: dict[str, str], samples: dict[Sample, float],
             keep=lambda sample, labels: True) -> tuple[dict[str, str], dict[str, set[frozenset[str]]]]:
    """Family -> type, and family -> the label-key sets of its series (bucket ``le`` left out), for the families
    with a series ``keep`` takes (OTel's exporter leaves a family without series out; rmqd prints its HELP/TYPE
    lines anyway)."""
    keys: dict[str, set[frozenset[str]]] = {}
    for sample in samples:
        labels = dict(sample[1])
        if keep(sample, labels):
            keys.setdefault(family_of(sample[0], types), set()).add(frozenset(k for k in labels if k != "le"))
    return {f: t for f, t in types.items() if f in keys}, keys


def lag_series(url: str) -> set[tuple[str, str]]:
    with urllib.request.urlopen(url, timeout=15) as r:
        _, samples = parse(r.read().decode("utf-8"))
    return {(lb["consumer_group"], lb["is_retry"]) for n, lb, _ in samples
            if n == "rocketmq_consumer_lag_messages" and lb.get("topic") == TOPIC}


def traffic(mqadmin5, namesrv: str, endpoint: str) -> None:
    for create in (("updateTopic", "-t", TOPIC), ("updateTopic", "-t", TIMER_TOPIC, "-a", "+message.type=DELAY"),
                   ("updateSubGroup", "-g", GROUP)):
        res = mqadmin5.run(create[0], "-n", namesrv, "-c", "DefaultCluster", *create[1:])
        assert "success" in res.stdout, res.stdout
    res = run_java5("grpc", "MetricsTraffic", endpoint, TOPIC, TIMER_TOPIC, GROUP, "4", "2000", timeout=150)
    assert res.returncode == 0 and not res.timed_out, (endpoint, res.stdout[-2000:], res.stderr[:3000])
    assert len(res.events_of("receive")) == 5, res.events


REVIVE_OUT_WITHIN_S = 60.0       # the consumer's 15 s invisible time, and Java's revive rounds on a loaded machine


def wait_revive_out(url: str, within: float) -> bool:
    """Wait until ``url`` shows a rocketmq_pop_revive_out_message_total series of this test's group."""
    end = time.monotonic() + within
    while True:
        with urllib.request.urlopen(url, timeout=15) as r:
            _, samples = parse(r.read().decode("utf-8"))
        if any(n == "rocketmq_pop_revive_out_message_total" and lb.get("consumer_group") == GROUP
               for n, lb, _ in samples):
            return True
        if time.monotonic() > end:
            return False
        time.sleep(1.0)


@pytest.fixture
def rmqd_with_metrics():
    grpc = GrpcEndpoint("127.0.0.1", 0)
    metrics = MetricsEndpoint("127.0.0.1", 0)
    server = EmbeddedServer(broker_properties={"brokerIP1": "127.0.0.1", "minInvisibleTimeMillsForRecv": "1000",
                                               "grpcClientConsumerMaxLongPollingTimeoutMillis": "3000"},
                            endpoints=lambda: [grpc, metrics]).start()
    try:
        yield server, grpc.address, metrics.url
    finally:
        server.stop()


def test_metric_families_and_labels_match_the_java_5x_broker(reference5, mqadmin5, rmqd_with_metrics) -> None:
    """The Java reference is the session's: earlier tests' traffic (transactions, DLQ moves, lite topics...) has
    series there. Java's families of this test are those with a series naming this test's topics or group, or a
    series naming no topic or group that this traffic made or changed; series naming other resources are left out
    on both sides. rmqd (fresh) must export every such family, with the same type and label keys, and never a
    family the Java broker does not export at all."""
    server, grpc_addr, metrics_url = rmqd_with_metrics
    java_before = scrape(reference5.metrics_url)[1]
    traffic(mqadmin5, reference5.namesrv_addr, reference5.grpc_addr)
    traffic(mqadmin5, server.namesrv_addr, grpc_addr)
    time.sleep(1.0)              # the Java exporter's callbacks read the tables at scrape time; let acks settle
    # the revive counts a checkpoint's records once it is done with them: rmqd when the checkpoint settles (acked),
    # Java when its revive reads the record, due after the invisible time; both in a bounded time
    for url in (reference5.metrics_url, metrics_url):
        assert wait_revive_out(url, REVIVE_OUT_WITHIN_S), f"{url}: no revive-out series of {GROUP}"
    java_types_all, java_samples = scrape(reference5.metrics_url)
    rmqd_types_all, rmqd_samples = scrape(metrics_url)

    def ours(sample: Sample, labels: dict[str, str]) -> bool:
        return of_this_traffic(labels) if names_a_resource(labels) else True

    def touched(sample: Sample, labels: dict[str, str]) -> bool:
        if names_a_resource(labels):
            return of_this_traffic(labels)
        return java_before.get(sample) != java_samples[sample]
    java_types, _ = families(java_types_all, java_samples, touched)
    _, java_keys = families(java_types_all, java_samples, ours)
    _, rmqd_keys = families(rmqd_types_all, rmqd_samples, ours)
    all_java, _ = families(java_types_all, java_samples)
    all_rmqd, _ = families(rmqd_types_all, rmqd_samples)
    rmqd_named, _ = families(rmqd_types_all, rmqd_samples,
                             lambda _s, labels: names_a_resource(labels) and of_this_traffic(labels))
    assert set(java_types) - set(all_rmqd) - LIVE_CONNECTIONS == set(JAVA_ONLY), "families only Java exports"
    assert set(all_rmqd) - set(all_java) - LIVE_CONNECTIONS == set(RMQD_ONLY), "families only rmqd exports"
    assert set(rmqd_named) - set(java_types) - LIVE_CONNECTIONS == set(RMQD_ONLY), \
        "families rmqd shows for this test's topics or group and Java not"
    for fam in sorted(set(all_java) & set(all_rmqd)):
        assert all_rmqd[fam] == all_java[fam], f"{fam}: rmqd {all_rmqd[fam]}, Java {all_java[fam]}"
    for fam in sorted(set(java_types) & set(all_rmqd)):
        assert rmqd_keys.get(fam, set()) == java_keys.get(fam, set()), \
            f"{fam}: label keys rmqd {sorted(map(sorted, rmqd_keys.get(fam, ())))}, " \
            f"Java {sorted(map(sorted, java_keys.get(fam, ())))}"
    # the POP group's lag series outlive its consumer on both (5.x's compensation table)
    assert lag_series(metrics_url) == lag_series(reference5.metrics_url) == {(GROUP, "false"), (GROUP, "true")}
