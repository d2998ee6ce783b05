"""Prometheus /metrics: parity with the 5.x families, values after known traffic, scrape budget,
the Grafana dashboard's queries, the unit-suffix naming rule."""
from __future__ import annotations

import os
import re
import threading
import time
import urllib.error
import urllib.request

import orjson
import pytest

from rmqd.admin.client import AdminClient
from rmqd.metrics.collector import collect
from rmqd.metrics.endpoint import MetricsEndpoint
from rmqd.metrics.grafana import METRIC_RE, dashboard, metric_names
from rmqd.metrics.naming import exported_name
from rmqd.broker.client_manager import ClientChannelInfo
from rmqd.remoting.client import BlockingClient
from rmqd.remoting.codes import RequestCode
from rmqd.remoting.command import new_request
from rmqd.store.message import encode_properties
from rmqd.store.metadata import SubscriptionGroupConfig, TopicConfig
from rmqd.testing import EmbeddedServer

from tests.metrics import golden
from tests.kit.waits import poll
from tests.pop.pop_helpers import PEEK, ack, create_group, create_topic, extra_info, pop, popped, send
from tests.metrics.promtext import family_of, parse, series, value

pytestmark = pytest.mark.timeout(60)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    eps = []

    def endpoints():
        eps[:] = [MetricsEndpoint("127.0.0.1", 0)]
        return list(eps)

    srv = EmbeddedServer(store_dir=str(tmp_path_factory.mktemp("metrics-store")),
                         broker_properties={"metricsLabel": "region:test,az:a"}, endpoints=endpoints)
    srv.start()
    srv.metrics_url = eps[0].url
    try:
        yield srv
    finally:
        srv.stop()


@pytest.fixture(scope="module")
def admin(server):
    c = AdminClient(server.namesrv_addr)
    yield c
    c.close()


def scrape(server) -> tuple[dict, list]:
    with urllib.request.urlopen(server.metrics_url, timeout=10) as r:
        assert r.status == 200
        assert r.headers["Content-Type"].startswith("text/plain; version=0.0.4")
        return parse(r.read().decode("utf-8"))


def test_naming_follows_otel_1_29_unit_suffix_rule():
    assert exported_name("rocketmq_rpc_latency", "ms", "histogram") == "rocketmq_rpc_latency_milliseconds"
    assert exported_name("rocketmq_storage_size", "By", "gauge") == "rocketmq_storage_size_bytes"
    assert exported_name("rocketmq_storage_flush_behind_bytes", "By", "gauge") == "rocketmq_storage_flush_behind_bytes"
    assert exported_name("rocketmq_message_size", "", "histogram") == "rocketmq_message_size"
    assert exported_name("rocketmq_messages_in_total", "", "counter") == "rocketmq_messages_in_total"
    assert exported_name("rocketmq_send_to_dlq_messages", "", "counter") == "rocketmq_send_to_dlq_messages_total"


@pytest.mark.slow
def test_parity_with_the_5x_families_types_and_labels(server, admin):
    admin.send(server.broker_addr, "TBW102", 0, b"warm-up")       # at least one series per traffic family
    types, samples = scrape(server)
    for name, (kind, keys) in golden.FAMILIES.items():
        assert types.get(name) == kind, f"{name}: exported as {types.get(name)}, 5.x exports {kind}"
    assert types.get(golden.RESOURCE) == "gauge"
    assert set(types) - set(golden.FAMILIES) - {golden.RESOURCE} == set(), "families a 5.x broker does not export"
    expected_keys = {n: set(golden.COMMON) | set(k) | {"otel_scope_name", "region", "az"}
                     for n, (_, k) in golden.FAMILIES.items()}
    seen = set()
    for name, labels, _ in samples:
        if name == golden.RESOURCE:
            assert labels == {}
            continue
        fam = family_of(name, types)
        keys = set(labels) - {"le"}
        assert keys - golden.OPTIONAL.get(fam, set()) == expected_keys[fam] - golden.OPTIONAL.get(fam, set()) \
            and keys <= expected_keys[fam] | golden.OPTIONAL.get(fam, set()), f"{name}: labels {sorted(keys)}"
        assert labels["node_type"] == "broker" and labels["node_id"] == "broker-a"
        assert labels["cluster"] == "DefaultCluster" and labels["region"] == "test"
        seen.add(fam)
    for must in ("rocketmq_messages_in_total", "rocketmq_rpc_latency_milliseconds", "rocketmq_topic_number",
                 "rocketmq_processor_watermark", "rocketmq_storage_size_bytes"):
        assert must in seen
    assert {lb["processor"] for lb in series(samples, "rocketmq_processor_watermark")} == golden.PROCESSORS


def heartbeat(client: BlockingClient, consumer_group: str | None, topic: str = "TBW102",
              producer_group: str | None = None, consume_type: str = "CONSUME_PASSIVELY") -> None:
    """A Java client's HEART_BEAT: the connection becomes a producer and/or (push) consumer."""
    hb = {"clientID": f"metrics-test-{consumer_group or producer_group}",
          "producerDataSet": [{"groupName": producer_group}] if producer_group else [],
          "consumerDataSet": [{"groupName": consumer_group, "consumeType": consume_type,
                               "messageModel": "CLUSTERING", "consumeFromWhere": "CONSUME_FROM_LAST_OFFSET",
                               "unitMode": False,
                               "subscriptionDataSet": [{"topic": topic, "subString": "*", "tagsSet": [],
                                                        "codeSet": [], "subVersion": 0, "classFilterMode": False,
                                                        "expressionType": "TAG"}]}] if consumer_group else []}
    req = new_request(RequestCode.HEART_BEAT, None, orjson.dumps(hb))
    req.language = "JAVA"
    req.version = 409
    assert client.invoke(req, 5).code == 0


def _send(client: BlockingClient, topic: str, body: bytes, props: dict) -> None:
    resp = client.invoke(new_request(RequestCode.SEND_MESSAGE, {
        "producerGroup": "PG_METRICS", "topic": topic, "defaultTopic": "TBW102", "defaultTopicQueueNums": "4",
        "queueId": "0", "sysFlag": "0", "bornTimestamp": str(int(time.time() * 1000)), "flag": "0",
        "properties": encode_properties(props), "reconsumeTimes": "0", "unitMode": "false", "batch": "false"},
        body), 5)
    assert resp.code == 0, resp.remark


def test_values_after_known_traffic(server, admin):
    topic, group = "MetricsValueTopic", "MetricsValueGroup"
    broker = server.broker_addr
    admin.call(broker, RequestCode.UPDATE_AND_CREATE_TOPIC,
               {"topic": topic, "readQueueNums": 4, "writeQueueNums": 4, "perm": 6})
    _, before = scrape(server)
    sends_before = value(before, "rocketmq_rpc_latency_milliseconds_count", request_code="send_message")
    t_first = int(time.time() * 1000)
    for i in range(7):                                                    # plain sends: the fast lane
        admin.send(broker, topic, 0, b"x" * 100, keys=f"k{i}")
    with BlockingClient(broker) as c:                                     # delay sends: the processor
        for _ in range(2):
            _send(c, topic, b"d" * 2000, {"DELAY": "3", "UNIQ_KEY": os.urandom(16).hex().upper(), "WAIT": "true"})
        _send(c, topic, b"t" * 10, {"UNIQ_KEY": os.urandom(16).hex().upper(), "__SHARDINGKEY": "order-1"})
    code, nxt, msgs = admin.pull(broker, topic, 0, 0, 32, group=group)
    assert len(msgs) == 8 and nxt == 8                                    # 7 plain + the fifo one
    admin.call(broker, RequestCode.UPDATE_CONSUMER_OFFSET,
               {"consumerGroup": group, "topic": topic, "queueId": 0, "commitOffset": 3})
    dead = msgs[0]
    admin.call(broker, RequestCode.CONSUMER_SEND_MSG_BACK,
               {"offset": dead.commit_log_offset, "group": group, "delayLevel": -1, "originMsgId": dead.msg_id,
                "originTopic": topic, "unitMode": "false", "maxReconsumeTimes": 16})

    with BlockingClient(broker) as consumer:                              # an online consumer of the group
        heartbeat(consumer, group, topic)
        types, samples = scrape(server)
    assert value(samples, "rocketmq_messages_in_total", topic=topic, message_type="normal") == 7
    assert value(samples, "rocketmq_throughput_in_total", topic=topic, message_type="normal") == 700
    assert value(samples, "rocketmq_messages_in_total", topic=topic, message_type="delay") == 2
    assert value(samples, "rocketmq_throughput_in_total", topic=topic, message_type="delay") == 4000
    assert value(samples, "rocketmq_messages_in_total", topic=topic, message_type="fifo") == 1
    assert value(samples, "rocketmq_message_size_count", topic=topic, message_type="delay") == 2
    assert value(samples, "rocketmq_message_size_bucket", topic=topic, message_type="delay", le="1024.0") == 0
    assert value(samples, "rocketmq_message_size_bucket", topic=topic, message_type="delay", le="4096.0") == 2
    assert value(samples, "rocketmq_messages_in_total", topic=topic, is_system="false") == 10
    assert value(samples, "rocketmq_messages_out_total", topic=topic, consumer_group=group) == 8
    assert value(samples, "rocketmq_throughput_out_total", topic=topic, consumer_group=group) > 8 * 100
    # lag (Java's ConsumerLagCalculator): 8 stored in queue 0, 3 committed; queues 1-3 have no offset
    lag = dict(topic=topic, consumer_group=group, is_retry="false", is_system="false")
    assert value(samples, "rocketmq_consumer_lag_messages", **lag) == 5
    assert value(samples, "rocketmq_consumer_ready_messages", **lag) == 5
    assert value(samples, "rocketmq_consumer_inflight_messages", **lag) == 0
    age = value(samples, "rocketmq_consumer_lag_latency_milliseconds", **lag)
    assert 0 <= age <= int(time.time() * 1000) - t_first + 1000
    assert value(samples, "rocketmq_send_to_dlq_messages_total", consumer_group=group, topic=topic) == 1
    # every send answered: 7 through the lane + 3 through the processor, all SEND_MESSAGE / success
    assert value(samples, "rocketmq_rpc_latency_milliseconds_count", request_code="send_message",
                 response_code="success", result="success") - sends_before == 10
    assert value(samples, "rocketmq_rpc_latency_milliseconds_bucket", request_code="send_message",
                 le="+Inf") - sends_before == 10
    assert value(samples, "rocketmq_rpc_latency_milliseconds_count", request_code="consumer_send_msg_back") == 1
    assert value(samples, "rocketmq_rpc_latency_milliseconds_count", request_code="pull_message") >= 1
    assert value(samples, "rocketmq_topic_create_execution_time_milliseconds_count",
                 invocation_status="success") >= 1
    assert value(samples, "rocketmq_broker_permission") == 6
    assert value(samples, "rocketmq_topic_number") == len(server.broker.topic_config_manager.table)
    assert value(samples, "rocketmq_consumer_group_number") == len(server.broker.subscription_group_manager.table)
    assert value(samples, "rocketmq_storage_size_bytes") > 0
    assert value(samples, "rocketmq_storage_message_reserve_time_milliseconds") >= 0


def test_connections_from_heartbeats(server):
    with BlockingClient(server.broker_addr) as c:
        heartbeat(c, "CG_HB", producer_group="PG_HB")
        types, samples = scrape(server)
        assert value(samples, "rocketmq_producer_connections", language="java", version="v4_9_8",
                     protocol_type="remoting") == 1
        assert value(samples, "rocketmq_consumer_connections", consumer_group="CG_HB", consume_mode="push",
                     language="java", is_system="false") == 1
        # online, nothing committed: a lag series of 0 (Java counts an offset-less queue from its end)
        assert series(samples, "rocketmq_consumer_lag_messages", consumer_group="CG_HB", topic="TBW102")
    _, samples = scrape(server)
    assert not series(samples, "rocketmq_consumer_lag_messages", consumer_group="CG_HB")   # offline: no series


SELECTOR = re.compile(r"(rocketmq_[a-z0-9_]+)\s*\{([^}]*)\}")
MATCHER = re.compile(r"([a-zA-Z_][a-zA-Z0-9_]*)\s*(?:=~|!~|!=|=)")
GROUPING = re.compile(r"\b(?:by|without)\s*\(([^)]*)\)")
LEGEND = re.compile(r"\{\{\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*\}\}")
LABEL_VALUES = re.compile(r"label_values\(\s*(rocketmq_[a-z0-9_]+)\s*(?:\{[^}]*\})?\s*,"
                          r"\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*\)")


def query_labels(expr: str, legend: str = "") -> dict[str, set[str]]:
    """Metric name -> the label names one dashboard query reads from it (its selector's matchers, the
    ``by``/``without`` grouping around it, the legend's ``{{label}}``; ``label_values(m, l)``'s label)."""
    names = set(METRIC_RE.findall(expr))
    shared = {x.strip() for g in GROUPING.findall(expr) for x in g.split(",") if x.strip()}
    shared |= set(LEGEND.findall(legend))
    out = {n: set(shared) for n in names}
    for name, body in SELECTOR.findall(expr):
        out[name] |= set(MATCHER.findall(body))
    for name, label in LABEL_VALUES.findall(expr):
        out[name].add(label)
    return out


def dashboard_queries(d: dict) -> list[tuple[str, str]]:
    qs = [(t["expr"], t.get("legendFormat", "")) for p in d["panels"] for t in p["targets"]]
    return qs + [(v["definition"], "") for v in d["templating"]["list"] if v.get("definition")]


def test_query_labels_parser():
    got = query_labels('histogram_quantile(0.99, sum by (le, request_code) (rate('
                       'rocketmq_rpc_latency_milliseconds_bucket{cluster=~"$c",node_id!="x"}[5m])))', "{{request_code}}")
    assert got == {"rocketmq_rpc_latency_milliseconds_bucket": {"le", "request_code", "cluster", "node_id"}}
    assert query_labels('label_values(rocketmq_topic_number{cluster=~"$cluster"}, node_id)') == {
        "rocketmq_topic_number": {"cluster", "node_id"}}


def test_grafana_dashboard_queries_only_exported_metrics(server, admin):
    """Every metric a dashboard query reads is a family the exporter declares (its TYPE line) with
    series, and every label the query selects, groups by or shows in its legend is on those series.
    The test makes its own traffic (sends, a pull, a DLQ move, an online producer and consumer), so it
    passes alone and in any order."""
    topic, group = "GrafanaTopic", "GrafanaGroup"
    broker = server.broker_addr
    admin.call(broker, RequestCode.UPDATE_AND_CREATE_TOPIC,
               {"topic": topic, "readQueueNums": 1, "writeQueueNums": 1, "perm": 6})
    for i in range(3):
        admin.send(broker, topic, 0, b"g" * 50, keys=f"g{i}")
    _, _, msgs = admin.pull(broker, topic, 0, 0, 32, group=group)
    assert len(msgs) == 3
    admin.call(broker, RequestCode.CONSUMER_SEND_MSG_BACK,
               {"offset": msgs[0].commit_log_offset, "group": group, "delayLevel": -1, "originMsgId": msgs[0].msg_id,
                "originTopic": topic, "unitMode": "false", "maxReconsumeTimes": 16})
    with BlockingClient(broker) as c:
        heartbeat(c, group, topic, producer_group="PG_GRAFANA")
        types, samples = scrape(server)
    keys: dict[str, set[str]] = {}
    for name, labels, _ in samples:
        keys.setdefault(name, set()).update(labels)
    d = dashboard()
    queries = dashboard_queries(d)
    assert queries and all(p["targets"] and p["datasource"]["type"] == "prometheus" for p in d["panels"])
    used = metric_names(d)
    assert used == {m for q in queries for m in query_labels(*q)}
    for expr, legend in queries:
        for name, labels in query_labels(expr, legend).items():
            fam = family_of(name, types)
            assert fam in types, f"{name} (in {expr!r}) is no family the exporter declares"
            assert name in keys, f"{name} (in {expr!r}) has no series after the traffic"
            assert labels <= keys[name], f"{expr!r} reads labels {sorted(labels - keys[name])} {name} does not have"


def test_healthz(server):
    with urllib.request.urlopen(server.metrics_url.replace("/metrics", "/healthz"), timeout=5) as r:
        assert r.status == 200 and orjson.loads(r.read())["status"] == "ok"


def http_get(url: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def test_healthz_is_503_while_the_store_loads(tmp_path, monkeypatch):
    """The metrics and console endpoints bind before the broker: while its store loads, /healthz
    answers 503 {"status": "starting"} (and /metrics and the console's API 503), then 200."""
    from rmqd.broker.controller import BrokerController
    from rmqd.console.endpoint import ConsoleEndpoint
    loading, release = threading.Event(), threading.Event()
    load = BrokerController._load_blocking

    def held_load(self) -> None:
        loading.set()
        release.wait(20)
        load(self)
    monkeypatch.setattr(BrokerController, "_load_blocking", held_load)
    eps: dict = {}

    def endpoints() -> list:
        eps.update(metrics=MetricsEndpoint("127.0.0.1", 0), console=ConsoleEndpoint("127.0.0.1", 0, lag_interval_s=60))
        return list(eps.values())
    srv = EmbeddedServer(store_dir=str(tmp_path / "store"), endpoints=endpoints)
    starter = threading.Thread(target=srv.start)
    starter.start()
    try:
        assert loading.wait(20)
        health, console = eps["metrics"].url.replace("/metrics", "/healthz"), eps["console"].url
        starting = (503, b'{"status": "starting"}')
        assert http_get(health) == starting and http_get(console + "healthz")[0] == 503
        assert orjson.loads(http_get(console + "healthz")[1]) == {"status": "starting"}
        assert http_get(eps["metrics"].url)[0] == 503
        code, body = http_get(console + "api/overview")
        assert code == 503 and "starting" in orjson.loads(body)["error"]
        release.set()
        starter.join(20)
        assert not starter.is_alive()
        assert http_get(health) == (200, b'{"status": "ok"}')
        assert http_get(eps["metrics"].url)[0] == 200
        assert orjson.loads(http_get(console + "api/overview")[1])["brokers"][0]["brokerName"] == "broker-a"
    finally:
        release.set()
        starter.join(20)
        srv.stop()


class FakeConn:
    """A consumer channel registered straight into the ConsumerManager (no socket)."""

    def __init__(self, n: int) -> None:
        self.remote_address = f"127.0.0.1:{20000 + n}"
        self.closed = False


@pytest.mark.slow
def test_scrape_budget_1000_topics_x_100_groups(tmp_path):
    """Gauges are computed at scrape time: 1,000 topics x 100 online groups (each subscribed to ten
    topics, half of them behind) must scrape in < 200 ms."""
    with EmbeddedServer(store_dir=str(tmp_path / "s"), broker_properties={"mapedFileSizeConsumeQueue": 20 * 1000}) as srv:
        b = srv.broker
        tm, gm, om = b.topic_config_manager, b.subscription_group_manager, b.consumer_offset_manager
        for i in range(1000):
            tm.table[f"T{i:04d}"] = TopicConfig(f"T{i:04d}", 4, 4)
        for g in range(100):
            gm.table[f"G{g:03d}"] = SubscriptionGroupConfig(f"G{g:03d}")
            subs = []
            for k in range(10):
                topic = f"T{(g * 10 + k) % 1000:04d}"
                om.table[f"{topic}@G{g:03d}"] = {q: 0 for q in range(4)}
                subs.append({"topic": topic, "subString": "*", "expressionType": "TAG", "tagsSet": [],
                             "codeSet": [], "subVersion": 0, "classFilterMode": False})
            b.consumer_manager.register(f"G{g:03d}", ClientChannelInfo(FakeConn(g), f"client-{g}", "JAVA", 409),
                                        "CONSUME_PASSIVELY", "CLUSTERING", "CONSUME_FROM_LAST_OFFSET", subs,
                                        notify=False)
        admin = AdminClient(srv.namesrv_addr)
        try:
            for i in range(0, 1000, 2):                                  # half the topics have a message
                admin.send(srv.broker_addr, f"T{i:04d}", 0, b"m")
        finally:
            admin.close()
        times = []
        for _ in range(3):
            t0 = time.perf_counter()
            text = collect(b)
            times.append(time.perf_counter() - t0)
        types, samples = parse(text)
        assert len(series(samples, "rocketmq_consumer_lag_messages")) == 1000
        assert value(samples, "rocketmq_consumer_lag_messages") == 500
        assert value(samples, "rocketmq_messages_in_total") >= 500
        print("scrape ms", [round(t * 1000) for t in times])
        assert min(times) < 0.2, f"scrape took {[round(t * 1000) for t in times]} ms"


def test_transaction_counters(server):
    from rmqd.store.message import decode_offset_msg_id
    topic = "MetricsTxTopic"
    with BlockingClient(server.broker_addr) as c:
        def prepare(age_ms: int = 0) -> dict:
            resp = c.invoke(new_request(RequestCode.SEND_MESSAGE, {
                "producerGroup": "PG_TX", "topic": topic, "defaultTopic": "TBW102", "defaultTopicQueueNums": "4",
                "queueId": "0", "sysFlag": "4", "bornTimestamp": str(int(time.time() * 1000) - age_ms), "flag": "0",
                "properties": encode_properties({"TRAN_MSG": "true", "PGROUP": "PG_TX",
                                                 "UNIQ_KEY": os.urandom(16).hex().upper()}),
                "reconsumeTimes": "0", "unitMode": "false", "batch": "false"}, b"tx"), 5)
            assert resp.code == 0, resp.remark
            return resp.ext_fields

        def end(ext: dict, kind: int) -> None:
            _, _, offset = decode_offset_msg_id(ext["msgId"])
            resp = c.invoke(new_request(RequestCode.END_TRANSACTION, {
                "producerGroup": "PG_TX", "tranStateTableOffset": ext["queueOffset"], "commitLogOffset": offset,
                "commitOrRollback": kind, "fromTransactionCheck": "false", "msgId": ext["msgId"],
                "transactionId": ext.get("transactionId", "")}), 5)
            assert resp.code == 0, resp.remark

        a, b, old = prepare(), prepare(), prepare(age_ms=125_000)   # `old` was born 125 s ago
        prepare()                                   # left pending
        _, samples = scrape(server)
        assert value(samples, "rocketmq_half_messages", topic=topic) == 4
        assert value(samples, "rocketmq_messages_in_total", topic=topic, message_type="transaction") == 4
        assert not series(samples, "rocketmq_finish_message_latency_milliseconds_count", topic=topic)
        end(a, 8)
        end(b, 12)
        end(old, 8)
    _, samples = scrape(server)
    assert value(samples, "rocketmq_commit_messages_total", topic=topic) == 2
    assert value(samples, "rocketmq_rollback_messages_total", topic=topic) == 1
    assert value(samples, "rocketmq_half_messages", topic=topic) == 1
    # finish latency, as the 5.x broker records it: commits only, whole seconds since the born timestamp
    fin = "rocketmq_finish_message_latency_milliseconds"
    assert value(samples, f"{fin}_count", topic=topic) == 2
    assert 125 <= value(samples, f"{fin}_sum", topic=topic) <= 125 + 10
    buckets = {lb["le"]: v for n, lb, v in samples if n == f"{fin}_bucket" and lb.get("topic") == topic}
    assert buckets == {"5.0": 1, "60.0": 1, "600.0": 2, "3600.0": 2, "43200.0": 2, "86400.0": 2, "+Inf": 2}


def test_pop_consumer_and_revive_metrics(server):
    """POP: messages out on pop and peek, Java's POP lag rule (inflight = handed out, not acked), the
    revive-log counters (in when written, out when the checkpoint is settled), revive retries and the
    revive backlog per revive queue."""
    topic, group = "MetricsPopTopic", "MetricsPopGroup"
    lbl = dict(topic=topic, consumer_group=group)
    with BlockingClient(server.broker_addr) as c:
        create_topic(c, topic, 1)
        create_group(c, group)
        for i in range(5):
            send(c, topic, b"pop-%d" % i)
        heartbeat(c, group, topic, consume_type="CONSUME_POP")
        first = pop(c, topic, group, max_nums=3, invisible=60_000)
        a, b, d = popped(first)
        assert ack(c, topic, group, extra_info(first, a), a.queue_offset).code == 0
        second = pop(c, topic, group, max_nums=1, invisible=1000)           # revived after 1 s
        assert [m.body for m in popped(second)] == [b"pop-3"]
        peek = c.invoke(new_request(PEEK, {"consumerGroup": group, "topic": topic, "queueId": "0", "maxMsgNums": "4"}))
        assert [m.body for m in popped(peek)] == [b"pop-4"]
        _, samples = scrape(server)
        assert value(samples, "rocketmq_consumer_connections", consumer_group=group, consume_mode="pop") == 1
        assert value(samples, "rocketmq_messages_out_total", **lbl) == 5                # 3 + 1 popped, 1 peeked
        main = dict(lbl, is_retry="false", is_system="false")
        # queue end 5, pop offset 4; in flight: b, d (first pop) and pop-3 (second)
        assert value(samples, "rocketmq_consumer_ready_messages", **main) == 1
        assert value(samples, "rocketmq_consumer_inflight_messages", **main) == 3
        assert value(samples, "rocketmq_consumer_lag_messages", **main) == 4
        assert 0 <= value(samples, "rocketmq_consumer_lag_latency_milliseconds", **main) < 60_000
        assert series(samples, "rocketmq_consumer_lag_messages", is_retry="true", **lbl)   # no retry topic yet: 0
        assert value(samples, "rocketmq_consumer_lag_messages", is_retry="true", **lbl) == 0
        rin = "rocketmq_pop_revive_in_message_total"
        assert value(samples, rin, revive_message_type="CK", put_status="PUT_OK", **lbl) == 2
        assert value(samples, rin, revive_message_type="ACK", put_status="PUT_OK", **lbl) == 1
        assert value(samples, "rocketmq_pop_revive_out_message_total", **lbl) == 0      # nothing settled yet
        assert value(samples, "rocketmq_pop_revive_lag_milliseconds") == 3              # ck, ack, ck
        assert {lb["queue_id"] for lb in series(samples, "rocketmq_pop_revive_lag_milliseconds")} == {
            str(q) for q in range(int(server.broker.config.reviveQueueNum))}
        assert value(samples, "rocketmq_pop_checkpoint_buffer_size") == 0
        # the second pop's message is revived into the POP retry topic
        retried = "rocketmq_pop_revive_retry_messages_total"
        assert poll(lambda: value(scrape(server)[1], retried, put_status="PUT_OK", **lbl) == 1, 10)
        for m in (b, d):
            assert ack(c, topic, group, extra_info(first, m), m.queue_offset).code == 0
        _, samples = scrape(server)
    out = "rocketmq_pop_revive_out_message_total"
    # in == out once every checkpoint is settled: 2 ck; 3 acks of the first pop + the revive's bAck
    assert value(samples, rin, revive_message_type="ACK", **lbl) == 4
    assert value(samples, out, revive_message_type="CK", **lbl) == 2
    assert value(samples, out, revive_message_type="ACK", **lbl) == 4
    assert {lb["queue_id"] for lb in series(samples, out, **lbl)} <= {
        first.ext_fields["reviveQid"], second.ext_fields["reviveQid"]}
    assert value(samples, "rocketmq_pop_revive_lag_milliseconds") == 0
    assert value(samples, "rocketmq_pop_revive_latency_milliseconds") == 0
    assert series(samples, "rocketmq_consumer_inflight_messages", **main)
    assert value(samples, "rocketmq_consumer_inflight_messages", **main) == 0
    # the revived message waits in the retry topic; Java counts its lag from the first pop there
    assert series(samples, "rocketmq_consumer_lag_messages", is_retry="true", **lbl)
