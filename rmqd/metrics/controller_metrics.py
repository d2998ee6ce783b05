"""A controller's Prometheus metrics with RocketMQ 5's names (``ControllerMetricsConstant``, meter "controller"):

============================  =======  ===========================  ================================================
family                        type     labels (+ common)            value
============================  =======  ===========================  ================================================
``role``                      gauge                                 0 unknown (not started), 1 candidate (no leader
                                                                    known), 2 follower, 3 leader (5.x's values)
``active_broker_num``         gauge    cluster, broker_set          brokers heartbeating, per replica group
``election_total``            counter  election_result              elections since start: new_master_elected,
                                                                    keep_current_master, no_master_elected
``dledger_disk_usage_bytes``  gauge                                 bytes under the controller's store path
``request_total``             counter  request_type,                requests handled: success (whatever the response
                                       request_handle_status        code), failed, timeout (5.x's RequestType names)
``request_latency_            histo-   request_type                 microseconds per request that returned
microseconds``                gram
``dledger_op_total``          counter  dledger_operation,           Raft appends (operation ``append``): success,
                                       dLedger_operation_status     failed, timeout
``dledger_op_latency_         histo-   dledger_operation            microseconds from proposal to commit
microseconds``                gram
============================  =======  ===========================  ================================================

The histograms use 5.x's buckets: 1 us to 10 s.

Common labels, as 5.x's ``ControllerMetricsManager`` sets them: ``address`` (this controller's address),
``group`` (controllerDLegerGroup), ``peer_id`` (controllerDLegerSelfId), the ``metricsLabel`` pairs and
``otel_scope_name="controller"``. Served at ``metricsPromExporterPort`` when the controller's config says
``metricsExporterType=PROM`` (:class:`ControllerMetricsEndpoint`), by ``rmqd controller`` and by a name server
with ``enableControllerInNamesrv``.
"""
from __future__ import annotations

import asyncio
import logging
import os
from typing import TYPE_CHECKING

from rmqd.controller.request_meter import LATENCY_BUCKETS_US
from rmqd.metrics.endpoint import CONTENT_TYPE, MetricsEndpoint
from rmqd.metrics.families import Family, FamilySpec, render

if TYPE_CHECKING:
    from aiohttp import web

    from rmqd.metrics.handles import ControllerNode

log = logging.getLogger(__name__)

ELECTION_RESULTS = ("new_master_elected", "keep_current_master", "no_master_elected")

CONTROLLER_SPECS: tuple[FamilySpec, ...] = (
    FamilySpec("role", "gauge", "", (), "role of current node"),
    FamilySpec("active_broker_num", "gauge", "", ("cluster", "broker_set"), "now active brokers num"),
    FamilySpec("election_total", "counter", "", ("election_result",), "total elect num"),
    FamilySpec("dledger_disk_usage", "gauge", "bytes", (), "disk usage of dledger"),
    FamilySpec("request_total", "counter", "", ("request_type", "request_handle_status"), "total request num"),
    FamilySpec("request_latency", "histogram", "us", ("request_type",), "request latency", LATENCY_BUCKETS_US),
    FamilySpec("dledger_op_total", "counter", "", ("dledger_operation", "dLedger_operation_status"),
               "total dledger operation num"),
    FamilySpec("dledger_op_latency", "histogram", "us", ("dledger_operation",), "dledger operation latency",
               LATENCY_BUCKETS_US),
)


def role_value(server: "ControllerNode") -> int:
    """5.x's MemberState.Role values: UNKNOWN 0, CANDIDATE 1, FOLLOWER 2, LEADER 3."""
    raft = server.controller.raft
    if not server.started:
        return 0
    if raft.is_leader:
        return 3
    return 2 if raft.leader_id is not None else 1


def disk_usage(path: str) -> int:
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            try:
                total += os.path.getsize(os.path.join(root, name))
            except OSError:                 # a file replaced while we walk (a Raft snapshot)
                continue
    return total


def collect_controller(server: "ControllerNode") -> str:
    """The Prometheus text of one scrape of controller ``server`` (blocking: it walks the store directory)."""
    from rmqd.metrics.collector import parse_metrics_label
    c = server.config
    fams = {s.instrument: Family(s) for s in CONTROLLER_SPECS}
    fams["role"].add((), role_value(server))
    for cluster, groups in sorted(server.heartbeat.active_brokers_num().items()):
        for name, n in sorted(groups.items()):
            fams["active_broker_num"].add((cluster, name), n)
    elections = server.controller.election_counts
    for result in ELECTION_RESULTS:
        fams["election_total"].add((result,), elections.get(result, 0))
    for meter, total, latency in ((server.request_meter, "request_total", "request_latency"),
                                  (server.append_meter, "dledger_op_total", "dledger_op_latency")):
        totals, histograms = meter.snapshot()
        for labels, n in sorted(totals.items()):
            fams[total].add(labels, n)
        for kind, (counts, sum_us) in sorted(histograms.items()):
            fams[latency].add_histogram(kind, counts, sum_us)
    store = c.store_path()
    if os.path.isdir(store):
        fams["dledger_disk_usage"].add((), disk_usage(store))
    common = ([("address", server.address), ("group", c.group()), ("peer_id", server.peer.id)]
              + parse_metrics_label(c.metricsLabel) + [("otel_scope_name", "controller")])
    return render(fams.values(), common)


class ControllerMetricsEndpoint(MetricsEndpoint):
    """``GET /metrics`` of a controller node (``GET /healthz`` as the broker's endpoint)."""

    def __init__(self, server: "ControllerNode", host: str, port: int) -> None:
        super().__init__(host, port)
        self.server = server

    def describe(self) -> list[str]:
        return [f"rmqd controller metrics on {self.url}"]

    async def _metrics(self, request: "web.Request") -> "web.Response":
        from aiohttp import web
        loop = asyncio.get_running_loop()
        text = await loop.run_in_executor(self._executor, collect_controller, self.server)
        return web.Response(body=text.encode("utf-8"), headers={"Content-Type": CONTENT_TYPE})


def controller_metrics_endpoint(server: "ControllerNode") -> list[ControllerMetricsEndpoint]:
    """The endpoint the controller's config asks for (``metricsExporterType=PROM``), else none."""
    from rmqd.metrics.endpoint import exporter_type
    c = server.config
    if exporter_type(c.metricsExporterType) != "PROM":
        return []
    host = c.metricsPromExporterHost or server.address.rpartition(":")[0] or "127.0.0.1"
    return [ControllerMetricsEndpoint(server, host, int(c.metricsPromExporterPort))]
