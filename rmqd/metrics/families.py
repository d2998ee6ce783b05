"""The broker's metric families and the Prometheus text exposition (format 0.0.4).

Each family is declared once with its OTel instrument name, unit, type and label keys; the exported
name comes from ``naming.exported_name``.  Every series also carries the common labels
(``cluster``, ``node_type``, ``node_id``, ``otel_scope_name`` and any ``metricsLabel`` pairs).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Optional, Sequence

from rmqd.metrics.naming import exported_name

LATENCY_BUCKETS_MS = (1.0, 3.0, 5.0, 7.0, 10.0, 100.0, 1000.0, 2000.0, 3000.0)
MESSAGE_SIZE_BUCKETS = (1024.0, 4096.0, 512 * 1024.0, 1024 * 1024.0, 2 * 1024 * 1024.0, 4 * 1024 * 1024.0)
CREATE_TIME_BUCKETS_MS = (10.0, 100.0, 1000.0, 3000.0, 5000.0)
# Java's commitLatencyBuckets: 5 s, 1 min, 10 min, 1 h, 12 h, 24 h.  The broker records whole *seconds*
# into this "ms" histogram (EndTransactionProcessor: (now - bornTimestamp) / 1000); rmqd does the same,
# so 5.x dashboards read the same buckets.
FINISH_LATENCY_BUCKETS = (5.0, 60.0, 600.0, 3600.0, 43200.0, 86400.0)
POP_SCAN_BUCKETS_MS = (1.0, 10.0, 100.0, 1000.0, 2000.0, 3000.0)
# DefaultStoreMetricsManager's view of rocketmq_delay_message_latency (seconds): 1 min, 10 min, 1 h, 12 h, 1 d, 3 d.
DELAY_LATENCY_BUCKETS_S = (60.0, 600.0, 3600.0, 43200.0, 86400.0, 259200.0)
# TimerMetrics' distribution bounds (seconds) of rocketmq_timer_message_snapshot.
TIMER_DIST_BOUNDS_S = (5, 60, 300, 900, 3600, 14400, 28800, 86400)

COMMON_LABELS = ("cluster", "node_type", "node_id")


@dataclass(frozen=True)
class FamilySpec:
    instrument: str          # OTel instrument name (what the RocketMQ docs show)
    kind: str                # counter | gauge | histogram
    unit: str
    labels: tuple[str, ...]
    help: str
    buckets: tuple[float, ...] = ()

    @property
    def name(self) -> str:
        return exported_name(self.instrument, self.unit, self.kind)


_L_IN = ("topic", "message_type", "is_system")
_L_OUT = ("topic", "consumer_group", "is_retry", "is_system")     # is_retry only on POP's series (None: absent)
_L_LAG = ("topic", "consumer_group", "is_retry", "is_system")
_L_STORE = ("storage_type", "storage_medium")

SPECS: tuple[FamilySpec, ...] = (
    FamilySpec("rocketmq_messages_in_total", "counter", "", _L_IN, "Messages written (successful puts)."),
    FamilySpec("rocketmq_throughput_in_total", "counter", "", _L_IN, "Bytes of message bodies written."),
    FamilySpec("rocketmq_message_size", "histogram", "", _L_IN, "Size of the messages written.",
               MESSAGE_SIZE_BUCKETS),
    FamilySpec("rocketmq_messages_out_total", "counter", "", _L_OUT, "Messages delivered to consumers."),
    FamilySpec("rocketmq_throughput_out_total", "counter", "", _L_OUT, "Bytes delivered to consumers."),
    FamilySpec("rocketmq_send_to_dlq_messages_total", "counter", "", ("consumer_group", "topic", "is_system"),
               "Messages moved to a dead-letter queue."),
    FamilySpec("rocketmq_rpc_latency", "histogram", "ms",
               ("protocol_type", "request_code", "response_code", "is_long_polling", "result"),
               "Remoting request latency.", LATENCY_BUCKETS_MS),
    FamilySpec("rocketmq_topic_number", "gauge", "1", (), "Topics in the topic-config table."),
    FamilySpec("rocketmq_consumer_group_number", "gauge", "1", (), "Subscription groups."),
    FamilySpec("rocketmq_broker_permission", "gauge", "1", (), "brokerPermission (6 = read/write)."),
    FamilySpec("rocketmq_processor_watermark", "gauge", "1", ("processor",), "Queued requests per processor pool."),
    FamilySpec("rocketmq_producer_connections", "gauge", "1", ("language", "version", "protocol_type"),
               "Producer connections."),
    FamilySpec("rocketmq_consumer_connections", "gauge", "1",
               ("consumer_group", "language", "version", "consume_mode", "protocol_type", "is_system"),
               "Consumer connections."),
    FamilySpec("rocketmq_consumer_lag_messages", "gauge", "1", _L_LAG, "Messages not yet acknowledged."),
    FamilySpec("rocketmq_consumer_lag_latency", "gauge", "ms", _L_LAG,
               "Age of the oldest message not yet acknowledged."),
    FamilySpec("rocketmq_consumer_inflight_messages", "gauge", "1", _L_LAG,
               "Messages pulled but not yet acknowledged."),
    FamilySpec("rocketmq_consumer_queueing_latency", "gauge", "ms", _L_LAG,
               "Age of the oldest message not yet pulled."),
    FamilySpec("rocketmq_consumer_ready_messages", "gauge", "1", _L_LAG, "Messages not yet pulled."),
    FamilySpec("rocketmq_topic_create_execution_time", "histogram", "ms", ("invocation_status", "is_system"),
               "Time to create a topic.", CREATE_TIME_BUCKETS_MS),
    FamilySpec("rocketmq_consumer_group_create_execution_time", "histogram", "ms", ("invocation_status",),
               "Time to create a subscription group.", CREATE_TIME_BUCKETS_MS),
    FamilySpec("rocketmq_commit_messages_total", "counter", "", ("topic",), "Transactions committed."),
    FamilySpec("rocketmq_rollback_messages_total", "counter", "", ("topic",), "Transactions rolled back."),
    FamilySpec("rocketmq_half_messages", "gauge", "1", ("topic",), "Half messages not yet resolved."),
    FamilySpec("rocketmq_finish_message_latency", "histogram", "ms", ("topic",),
               "Transaction finish latency: whole seconds from the half message's birth to its commit "
               "(as the 5.x broker records it).", FINISH_LATENCY_BUCKETS),
    FamilySpec("rocketmq_storage_size", "gauge", "By", _L_STORE,
               "Disk space used on the store directory's filesystem."),
    FamilySpec("rocketmq_storage_flush_behind_bytes", "gauge", "By", _L_STORE,
               "CommitLog bytes written but not yet flushed."),
    FamilySpec("rocketmq_storage_dispatch_behind_bytes", "gauge", "By", _L_STORE,
               "CommitLog bytes not yet dispatched to consume queues and index."),
    FamilySpec("rocketmq_storage_message_reserve_time", "gauge", "ms", _L_STORE,
               "Age of the earliest stored message."),
    # POP (Java's PopMetricsManager; its units are spelled "milliseconds")
    FamilySpec("rocketmq_pop_revive_in_message_total", "counter", "",
               ("consumer_group", "topic", "revive_message_type", "put_status"),
               "Checkpoint (CK) and ack (ACK) records written to the revive log."),
    FamilySpec("rocketmq_pop_revive_out_message_total", "counter", "",
               ("consumer_group", "topic", "queue_id", "revive_message_type"),
               "Revive-log records the revive is done with (counted when their checkpoint is settled)."),
    FamilySpec("rocketmq_pop_revive_retry_messages_total", "counter", "", ("consumer_group", "topic", "put_status"),
               "Messages the revive put into a POP retry topic."),
    FamilySpec("rocketmq_pop_revive_lag", "gauge", "milliseconds", ("queue_id",),
               "Revive-log records the revive is not done with, per revive queue (a count, despite the "
               "5.x name)."),
    FamilySpec("rocketmq_pop_revive_latency", "gauge", "milliseconds", ("queue_id",),
               "Age of the oldest revive-log record the revive is not done with."),
    FamilySpec("rocketmq_pop_offset_buffer_size", "gauge", "", (),
               "Pop offsets waiting in the merge buffer (rmqd commits them with the pop: 0)."),
    FamilySpec("rocketmq_pop_checkpoint_buffer_size", "gauge", "", (),
               "Checkpoints waiting in the merge buffer (rmqd writes them with the pop: 0)."),
    FamilySpec("rocketmq_pop_buffer_scan_time_consume", "histogram", "milliseconds", (),
               "Merge-buffer scan time (rmqd has no merge buffer: one series, no samples).", POP_SCAN_BUCKETS_MS),
)
# The timer (5.x DefaultStoreMetricsManager, exported while timerWheelEnable is true), with the store labels.
_L_TIMER = _L_STORE + ("topic",)
TIMER_SPECS: tuple[FamilySpec, ...] = (
    FamilySpec("rocketmq_timer_enqueue_lag", "gauge", "", _L_STORE,
               "Timer messages stored and not yet taken into the timer."),
    FamilySpec("rocketmq_timer_enqueue_latency", "gauge", "milliseconds", _L_STORE,
               "Age of the oldest timer message not yet taken into the timer."),
    FamilySpec("rocketmq_timer_dequeue_lag", "gauge", "", _L_STORE, "Timer messages due and not yet delivered."),
    FamilySpec("rocketmq_timer_dequeue_latency", "gauge", "milliseconds", _L_STORE,
               "How long the oldest due timer message has waited past its time."),
    FamilySpec("rocketmq_timing_messages", "gauge", "", _L_TIMER, "Messages in the timer, per real topic."),
    FamilySpec("rocketmq_timer_enqueue_total", "counter", "", _L_TIMER, "Messages taken into the timer."),
    FamilySpec("rocketmq_timer_dequeue_total", "counter", "", _L_TIMER, "Messages the timer delivered."),
    FamilySpec("rocketmq_timer_message_snapshot", "gauge", "", _L_STORE + ("timer_bound_s",),
               "Timer messages due within each bound (from the previous bound), counted over 24 h."),
    FamilySpec("rocketmq_delay_message_latency", "histogram", "seconds", _L_TIMER,
               "The delay timer messages were set for, in whole seconds.", DELAY_LATENCY_BUCKETS_S),
)
# Master/slave replication: rmqd's own families (a 5.x broker exports none), only in a scrape of a broker in a
# replica group (rmqd.metrics.collector.Scrape.replication), so a lone broker's families stay the 5.x set.
REPLICA_SPECS: tuple[FamilySpec, ...] = (
    FamilySpec("rmqd_ha_slave_lag", "gauge", "By", ("slave_addr",),
               "CommitLog bytes the master holds and the slave has not acknowledged."),
    FamilySpec("rmqd_ha_slave_lag_latency", "gauge", "ms", ("slave_addr",),
               "Age of the oldest CommitLog byte sent to the slave and not acknowledged."),
    FamilySpec("rmqd_ha_in_sync_slaves", "gauge", "1", (),
               "Slaves less than haSlaveFallbehindMax behind the master."),
    FamilySpec("rmqd_ha_master_connected", "gauge", "1", (),
               "On a slave: 1 while it replicates from its master, else 0."),
)
# Controller mode (RocketMQ 5 automatic failover): rmqd's own families (a 5.x broker exports none; the 5.x
# controller's `role`, `active_broker_num`, `election_total` describe the controllers, not a broker), only in a
# scrape of a broker with enableControllerMode=true (rmqd.metrics.collector.Scrape.controller_mode).
CONTROLLER_MODE_SPECS: tuple[FamilySpec, ...] = (
    FamilySpec("rmqd_replica_role", "gauge", "1", ("role",),
               "1 for this broker's role (SYNC_MASTER, ASYNC_MASTER or SLAVE), one series."),
    FamilySpec("rmqd_replica_broker_id", "gauge", "1", (),
               "brokerId the controller assigned (a master registers as 0 with the name servers)."),
    FamilySpec("rmqd_replica_master_epoch", "gauge", "1", (), "Master epoch this broker serves or follows."),
    FamilySpec("rmqd_replica_fenced", "gauge", "1", (),
               "1 while this broker refuses writes (a master without the controller's lease, or starting)."),
    FamilySpec("rmqd_replica_sync_state_set_size", "gauge", "1", (),
               "On the master: members of the group's SyncStateSet (itself included)."),
    FamilySpec("rmqd_replica_sync_state_set_epoch", "gauge", "1", (), "On the master: the SyncStateSet's epoch."),
    FamilySpec("rmqd_replica_sync_state_set_member", "gauge", "1", ("member_broker_id",),
               "On the master: 1 per SyncStateSet member."),
    FamilySpec("rmqd_replica_last_switch_time", "gauge", "ms", ("cause",),
               "Wall-clock time (ms since the epoch) of the last role switch, labelled with its cause "
               "(elected_master, became_slave, followed_new_master, fenced_lease_lost, lease_regained)."),
    FamilySpec("rmqd_replica_role_switches", "counter", "", ("cause",),
               "Role switches since the broker started, per cause."),
    FamilySpec("rmqd_replica_offset_pushes", "counter", "", (),
               "On a slave: consumer-offset copies the master pushed (WAIT_METADATA_CHANGE)."),
)

#: One series: its label values (None = the label left out), its value (a histogram's sum) and, for a histogram,
#: its non-cumulative bucket counts (empty for a gauge or counter).
Sample = tuple[tuple[Optional[str], ...], float, tuple[int, ...]]

BY_INSTRUMENT = {s.instrument: s for s in SPECS + TIMER_SPECS + REPLICA_SPECS + CONTROLLER_MODE_SPECS}


@dataclass
class Family:
    """Samples of one family: gauge/counter ``(labels, value)``; histogram ``(labels, counts, sum)``
    with non-cumulative bucket counts (``len(buckets) + 1`` of them)."""

    spec: FamilySpec
    samples: list[Sample] = field(default_factory=list)

    def add(self, labels: Sequence[Optional[str]], value: float) -> None:
        self.samples.append((tuple(labels), value, ()))

    def add_histogram(self, labels: Sequence[Optional[str]], counts: Sequence[int], total: float) -> None:
        self.samples.append((tuple(labels), total, tuple(counts)))


def _escape(v: str) -> str:
    return v.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _num(v: float) -> str:
    if isinstance(v, int) or (isinstance(v, float) and v.is_integer() and abs(v) < 1e15):
        return f"{int(v)}.0" if isinstance(v, float) else str(v)
    return repr(float(v))


def render(families: Iterable[Family], common: Sequence[tuple[str, str]]) -> str:
    """Prometheus text format 0.0.4 for ``families`` with ``common`` labels on every series (a label whose value
    is None is left out of that series), after OTel's ``target_info`` (the resource, as 5.x's exporter shows it)."""
    head = ",".join(f'{k}="{_escape(v)}"' for k, v in common)
    out: list[str] = ["# HELP target_info Target metadata\n# TYPE target_info gauge\ntarget_info 1\n"]
    emit = out.append
    for fam in families:
        spec = fam.spec
        name = spec.name
        emit(f"# HELP {name} {spec.help}\n# TYPE {name} {spec.kind}\n")
        keys = spec.labels
        for sample in fam.samples:
            labels = sample[0]
            own = ",".join(f'{k}="{_escape(str(v))}"' for k, v in zip(keys, labels) if v is not None)
            lbl = head + ("," + own if own and head else own)
            if spec.kind != "histogram":
                emit(f"{name}{{{lbl}}} {_num(sample[1])}\n")
                continue
            total, counts = sample[1], sample[2]
            cum = 0
            sep = "," if lbl else ""
            for bound, n in zip(spec.buckets, counts):
                cum += n
                emit(f'{name}_bucket{{{lbl}{sep}le="{bound}"}} {cum}\n')
            cum += counts[len(spec.buckets)] if len(counts) > len(spec.buckets) else 0
            emit(f'{name}_bucket{{{lbl}{sep}le="+Inf"}} {cum}\n')
            emit(f"{name}_count{{{lbl}}} {cum}\n{name}_sum{{{lbl}}} {_num(float(total))}\n")
    return "".join(out)
