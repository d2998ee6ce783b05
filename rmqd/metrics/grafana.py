"""The Grafana dashboard rmqd ships (``rmqd metrics grafana > rmqd.json``).

Its panels query only the 5.x metric names in ``families.SPECS`` (a test checks each query's
metrics against a live ``/metrics``), with ``cluster`` and ``node_id`` template variables.
"""
from __future__ import annotations

import json
import re
from typing import NotRequired, TypedDict

SEL = 'cluster=~"$cluster",node_id=~"$node"'

# (title, unit, [(expr, legend)], panel type)
PANELS: list[tuple[str, str, list[tuple[str, str]], str]] = [
    ("Messages in / s by topic", "short",
     [(f"sum by (topic) (rate(rocketmq_messages_in_total{{{SEL}}}[1m]))", "{{topic}}")], "timeseries"),
    ("Messages out / s by group", "short",
     [(f"sum by (consumer_group) (rate(rocketmq_messages_out_total{{{SEL}}}[1m]))", "{{consumer_group}}")],
     "timeseries"),
    ("Throughput in / out", "Bps",
     [(f"sum(rate(rocketmq_throughput_in_total{{{SEL}}}[1m]))", "in"),
      (f"sum(rate(rocketmq_throughput_out_total{{{SEL}}}[1m]))", "out")], "timeseries"),
    ("Consumer lag (messages)", "short",
     [(f"sum by (consumer_group, topic) (rocketmq_consumer_lag_messages{{{SEL},is_system=\"false\"}})",
       "{{consumer_group}} / {{topic}}")], "timeseries"),
    ("Consumer lag latency", "ms",
     [(f"max by (consumer_group) (rocketmq_consumer_lag_latency_milliseconds{{{SEL}}})", "{{consumer_group}}")],
     "timeseries"),
    ("Send RPC latency p99", "ms",
     [(f"histogram_quantile(0.99, sum by (le, request_code) "
       f"(rate(rocketmq_rpc_latency_milliseconds_bucket{{{SEL}}}[5m])))", "{{request_code}}")], "timeseries"),
    ("Requests / s by code and result", "reqps",
     [(f"sum by (request_code, response_code) (rate(rocketmq_rpc_latency_milliseconds_count{{{SEL}}}[1m]))",
       "{{request_code}} {{response_code}}")], "timeseries"),
    ("Message size p95", "bytes",
     [(f"histogram_quantile(0.95, sum by (le) (rate(rocketmq_message_size_bucket{{{SEL}}}[5m])))", "p95")],
     "timeseries"),
    ("Dead-lettered / s", "short",
     [(f"sum by (consumer_group) (rate(rocketmq_send_to_dlq_messages_total{{{SEL}}}[5m]))",
       "{{consumer_group}}")], "timeseries"),
    ("Connections", "short",
     [(f"sum(rocketmq_producer_connections{{{SEL}}})", "producers"),
      (f"sum(rocketmq_consumer_connections{{{SEL}}})", "consumers")], "timeseries"),
    ("Processor queues", "short",
     [(f"rocketmq_processor_watermark{{{SEL}}}", "{{processor}}")], "timeseries"),
    ("Topics / groups", "short",
     [(f"sum(rocketmq_topic_number{{{SEL}}})", "topics"),
      (f"sum(rocketmq_consumer_group_number{{{SEL}}})", "groups")], "stat"),
    ("Disk used", "bytes", [(f"max by (node_id) (rocketmq_storage_size_bytes{{{SEL}}})", "{{node_id}}")], "stat"),
    ("Flush behind", "bytes",
     [(f"max by (node_id) (rocketmq_storage_flush_behind_bytes{{{SEL}}})", "{{node_id}}")], "timeseries"),
    ("Oldest stored message age", "ms",
     [(f"max by (node_id) (rocketmq_storage_message_reserve_time_milliseconds{{{SEL}}})", "{{node_id}}")], "stat"),
    ("Broker permission", "short", [(f"rocketmq_broker_permission{{{SEL}}}", "{{node_id}}")], "stat"),
]

METRIC_RE = re.compile(r"\b(rocketmq_[a-z0-9_]+)\b")


class Target(TypedDict):
    expr: str
    legendFormat: str
    refId: str


class Panel(TypedDict):
    id: int
    title: str
    type: str
    datasource: dict[str, str]
    gridPos: dict[str, int]
    fieldConfig: dict[str, object]
    targets: list[Target]


class Variable(TypedDict):
    """A template variable: the data source picker, or a label query (``definition``)."""

    name: str
    type: str
    query: object
    current: dict[str, str]
    datasource: NotRequired[dict[str, str]]
    definition: NotRequired[str]
    includeAll: NotRequired[bool]
    multi: NotRequired[bool]
    refresh: NotRequired[int]


Templating = TypedDict("Templating", {"list": list[Variable]})


class Dashboard(TypedDict):
    """The dashboard's JSON model (the parts rmqd sets)."""

    title: str
    uid: str
    schemaVersion: int
    version: int
    tags: list[str]
    timezone: str
    refresh: str
    time: dict[str, str]
    templating: Templating
    panels: list[Panel]


def _label_variable(name: str, q: str) -> Variable:
    return {"name": name, "type": "query", "datasource": {"type": "prometheus", "uid": "${datasource}"},
            "query": {"query": q, "refId": name}, "definition": q, "includeAll": True, "multi": True,
            "current": {"text": "All", "value": "$__all"}, "refresh": 2}


def dashboard() -> Dashboard:
    panels: list[Panel] = []
    for i, (title, unit, targets, kind) in enumerate(PANELS):
        panels.append({
            "id": i + 1, "title": title, "type": kind, "datasource": {"type": "prometheus", "uid": "${datasource}"},
            "gridPos": {"h": 8, "w": 12, "x": (i % 2) * 12, "y": (i // 2) * 8},
            "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
            "targets": [{"expr": expr, "legendFormat": legend, "refId": chr(65 + j)}
                        for j, (expr, legend) in enumerate(targets)],
        })
    return {
        "title": "rmqd / RocketMQ 5.x broker", "uid": "rmqd-broker", "schemaVersion": 39, "version": 1,
        "tags": ["rocketmq", "rmqd"], "timezone": "browser", "refresh": "30s",
        "time": {"from": "now-1h", "to": "now"},
        "templating": {"list": [
            {"name": "datasource", "type": "datasource", "query": "prometheus", "current": {}},
            _label_variable("cluster", "label_values(rocketmq_topic_number, cluster)"),
            _label_variable("node", 'label_values(rocketmq_topic_number{cluster=~"$cluster"}, node_id)'),
        ]},
        "panels": panels,
    }


def dashboard_json() -> str:
    return json.dumps(dashboard(), indent=2) + "\n"


def metric_names(d: Dashboard | None = None) -> set[str]:
    """Every metric name the dashboard's queries use (histogram series names included)."""
    d = d or dashboard()
    names: set[str] = set()
    for p in d["panels"]:
        for t in p["targets"]:
            names.update(METRIC_RE.findall(t["expr"]))
    for v in d["templating"]["list"]:
        q = v.get("definition") or ""
        names.update(METRIC_RE.findall(q))
    return names
