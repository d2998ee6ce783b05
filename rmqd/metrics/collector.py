"""One scrape: the hot-path counters plus gauges read from the broker's tables at scrape time.

``collect(broker)`` walks the topic, group, offset and connection tables and a few store numbers;
it may take tens of milliseconds with thousands of topics and groups, so the HTTP endpoint runs it
in an executor thread, never on the event loop.
"""
from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Iterable, Mapping

from rmqd.metrics.histogram import Series
from rmqd.metrics.families import BY_INSTRUMENT, SPECS, TIMER_DIST_BOUNDS_S, Family, render
from rmqd.pop.extra_info import original_topic_of_pop_retry
from rmqd.store.topic_attributes import is_lite_topic
from rmqd.metrics.recorders import DLQ_PREFIX, RETRY_PREFIX, code_name
from rmqd.broker.stats import GROUP_GET_NUMS, GROUP_GET_SIZE
from rmqd.remoting.codes import RequestCode

if TYPE_CHECKING:
    from rmqd.metrics.families import FamilySpec
    from rmqd.metrics.handles import ScrapedBroker
    from rmqd.store.api import MessageStoreAPI
    from rmqd.store.metadata import TopicConfig

log = logging.getLogger(__name__)

# rocketmq_processor_watermark{processor}: Java's pool names -> rmqd's pools (absent ones export 0)
PROCESSORS = (("send", "send"), ("async_put", None), ("pull", "pull"), ("ack", None),
              ("query_message", "query"), ("client_manager", "client"), ("heartbeat", None),
              ("lite_pull", None), ("transaction", "transaction"), ("consumer_manager", "consumer"),
              ("admin", "admin"), ("reply", None))
CONSUME_MODES = {"CONSUME_PASSIVELY": "push", "CONSUME_ACTIVELY": "pull", "CONSUME_POP": "pop"}
SYSTEM_GROUP_PREFIX = "CID_RMQ_SYS_"
STORE_LABELS = ("local", "disk")


def _b(v: bool) -> str:
    return "true" if v else "false"


def _earliest(current: int, store: "MessageStoreAPI", topic: str, qid: int, offset: int, end: int) -> int:
    """The earlier of ``current`` (0 = none yet) and the store time of the message at ``offset``."""
    ts = store.get_message_store_timestamp(topic, qid, offset) if 0 <= offset < end else -1
    return ts if ts > 0 and (not current or ts < current) else current


def parse_metrics_label(spec: str | None) -> list[tuple[str, str]]:
    """``metricsLabel`` ("k:v,k:v") as label pairs."""
    out: list[tuple[str, str]] = []
    for part in (spec or "").split(","):
        if ":" in part:
            k, v = part.split(":", 1)
            if k.strip():
                out.append((k.strip(), v.strip()))
    return out


def common_labels(broker: "ScrapedBroker") -> list[tuple[str, str]]:
    c = broker.ctx.config
    return ([("cluster", c.brokerClusterName), ("node_type", "broker"), ("node_id", c.brokerName)]
            + parse_metrics_label(c.metricsLabel) + [("otel_scope_name", "broker-meter")])


class Scrape:
    """Builds every family for one scrape of one broker."""

    def __init__(self, broker: "ScrapedBroker") -> None:
        self.broker = broker
        self.ctx = broker.ctx
        self.fams = {s.instrument: Family(s) for s in SPECS}
        self.topics = self.ctx.topics
        self.now_ms = int(time.time() * 1000)

    def is_system_topic(self, topic: str) -> bool:
        return self.topics.is_system_topic(topic)

    @staticmethod
    def is_system_group(group: str) -> bool:
        from rmqd.store.metadata import SYSTEM_GROUPS
        return group in SYSTEM_GROUPS or group.startswith(SYSTEM_GROUP_PREFIX)

    def fam(self, instrument: str) -> Family:
        fam = self.fams.get(instrument)
        if fam is None:                   # a family outside the 5.x set: present once it has a sample
            fam = self.fams[instrument] = Family(BY_INSTRUMENT[instrument])
        return fam

    # ---------------------------------------------------------------- counters
    def messages_in(self) -> None:
        sizes: dict[tuple[str, ...], Series] = {}
        lane_metrics = self.broker.send_processor.lane.metrics
        if lane_metrics is not None:
            for topic, c in list(lane_metrics.topics.items()):
                sizes[(topic, "normal")] = (list(c.bucket_counts()), float(c.size))
        for key, (counts, total) in self.ctx.metrics.messages.snapshot()["sizes"].items():
            cur = sizes.get(key)
            sizes[key] = (counts, total) if cur is None else ([a + b for a, b in zip(cur[0], counts)], cur[1] + total)
        f_in, f_bytes, f_size = (self.fam("rocketmq_messages_in_total"), self.fam("rocketmq_throughput_in_total"),
                                 self.fam("rocketmq_message_size"))
        for (topic, mtype), (counts, total) in sorted(sizes.items()):
            labels = (topic, mtype, _b(self.is_system_topic(topic)))
            f_in.add(labels, sum(counts))
            f_bytes.add(labels, int(total))
            f_size.add_histogram(labels, counts, total)

    def messages_out(self) -> None:
        """Pulls as the broker's stats count them (retry and DLQ topics left out), without ``is_retry``; POP's
        pops with ``is_retry`` (5.x's PopMessageProcessor: a pop from the POP retry topic counts under the
        original topic, ``is_retry="true"``). The stats count both; POP's own counters tell them apart."""
        stats = self.ctx.stats
        f_out, f_bytes = self.fam("rocketmq_messages_out_total"), self.fam("rocketmq_throughput_out_total")
        nums = dict(stats.items.get(GROUP_GET_NUMS, {}))
        size = dict(stats.items.get(GROUP_GET_SIZE, {}))
        popped = self.ctx.metrics.pop_out.snapshot()
        by_key: dict[str, list[int]] = {}
        for (topic, group, _), (n, nbytes) in popped.items():
            row = by_key.setdefault(f"{topic}@{group}", [0, 0])
            row[0] += n
            row[1] += nbytes
        series: dict[tuple[str, str, str | None], list[int]] = {}
        for key in sorted(nums):
            topic, _, group = key.partition("@")
            if topic.startswith(RETRY_PREFIX) or topic.startswith(DLQ_PREFIX):
                continue
            item = size.get(key)
            pop_n, pop_bytes = by_key.get(key, (0, 0))
            pulled, pulled_bytes = nums[key].value - pop_n, (item.value if item is not None else 0) - pop_bytes
            if pulled > 0:
                series[(topic, group, None)] = [pulled, max(0, pulled_bytes)]
        for (topic, group, retried), (n, nbytes) in popped.items():
            if retried:
                topic = original_topic_of_pop_retry(topic, group)
            row = series.setdefault((topic, group, _b(retried)), [0, 0])
            row[0] += n
            row[1] += nbytes
        for (topic, group, is_retry), (n, nbytes) in sorted(series.items(), key=lambda kv: (kv[0][0], kv[0][1],
                                                                                             kv[0][2] or "")):
            labels = (topic, group, is_retry, _b(self.is_system_topic(topic) or self.is_system_group(group)))
            f_out.add(labels, n)
            f_bytes.add(labels, nbytes)

    def counters(self) -> None:
        snap = self.ctx.metrics.messages.snapshot()
        f = self.fam("rocketmq_send_to_dlq_messages_total")
        for (group, topic), n in sorted(snap["dlq"].items()):
            f.add((group, topic, _b(self.is_system_group(group))), n)
        for name, table in (("rocketmq_commit_messages_total", snap["commit"]),
                            ("rocketmq_rollback_messages_total", snap["rollback"])):
            f = self.fam(name)
            for topic, n in sorted(table.items()):
                f.add((topic,), n)
        for name, hist in (("rocketmq_topic_create_execution_time", snap["topic_create"]),
                           ("rocketmq_consumer_group_create_execution_time", snap["group_create"]),
                           ("rocketmq_finish_message_latency", snap["finish"])):
            f = self.fam(name)
            for labels, (counts, total) in sorted(hist.items()):
                f.add_histogram(labels, counts, total)

    def rpc_latency(self) -> None:
        series = dict(self.ctx.metrics.rpc.snapshot())
        lane_metrics = self.broker.send_processor.lane.metrics
        if lane_metrics is not None:
            for code, oneway, lane_counts, lane_total in lane_metrics.rpc_latency():
                key = ("remoting", code_name(RequestCode, code), "success", "false", "oneway" if oneway else "success")
                cur = series.get(key)
                if cur is None:
                    series[key] = (list(lane_counts), lane_total)
                else:
                    series[key] = ([a + b for a, b in zip(cur[0], lane_counts)], cur[1] + lane_total)
        f = self.fam("rocketmq_rpc_latency")
        for labels, (counts, total) in sorted(series.items()):
            f.add_histogram(labels, counts, total)

    # ---------------------------------------------------------------- gauges
    def tables(self) -> None:
        b, ctx = self.broker, self.ctx
        self.fam("rocketmq_topic_number").add((), len(self.topics.table))
        self.fam("rocketmq_consumer_group_number").add((), len(ctx.groups.table))
        self.fam("rocketmq_broker_permission").add((), int(ctx.config.brokerPermission))
        f = self.fam("rocketmq_processor_watermark")
        for name, pool in PROCESSORS:
            p = b.pools.get(pool) if pool else None
            f.add((name,), p.queue_size if p is not None else 0)

    def connections(self) -> None:
        from rmqd.processors.admin_broker import version_desc
        ctx = self.ctx
        counts: dict[tuple[str, ...], int] = {}
        key: tuple[str, ...]
        for _group, channels in list(ctx.producers.groups().items()):
            for ch in list(channels):
                key = (str(ch.language).lower(), version_desc(int(ch.version)).lower(), "remoting")
                counts[key] = counts.get(key, 0) + 1
        f = self.fam("rocketmq_producer_connections")
        for key, n in sorted(counts.items()):
            f.add(key, n)
        counts = {}
        for group, info in list(ctx.consumers.groups().items()):
            mode = CONSUME_MODES.get(str(info.consume_type), str(info.consume_type).lower())
            for ch in list(info.channels.values()):
                key = (group, str(ch.language).lower(), version_desc(int(ch.version)).lower(), mode, "remoting",
                       _b(self.is_system_group(group)))
                counts[key] = counts.get(key, 0) + 1
        f = self.fam("rocketmq_consumer_connections")
        for key, n in sorted(counts.items()):
            f.add(key, n)

    def consumer_lag(self) -> None:
        """Java's ConsumerLagCalculator: every subscription group with online consumers or consumers seen since
        the broker started (5.x's compensation table: a group whose clients left keeps its series), each topic
        they subscribe to (retry topics skipped), every write queue; a queue without a committed
        offset counts from the queue's end (no lag).  Lag latency is the age of the first unconsumed
        message.  rmqd keeps no separate pull offsets, so for pull/push groups a message counts as
        pulled when it is committed: ready = lag, inflight = 0, queueing latency = lag latency.
        POP groups: see :meth:`pop_lag`."""
        b, ctx = self.broker, self.ctx
        store = ctx.store
        offsets = ctx.offsets
        subscription_groups = ctx.groups.table
        fams = [self.fam(n) for n in ("rocketmq_consumer_lag_messages", "rocketmq_consumer_lag_latency",
                                      "rocketmq_consumer_inflight_messages",
                                      "rocketmq_consumer_queueing_latency", "rocketmq_consumer_ready_messages")]
        now = self.now_ms
        perm = int(ctx.config.brokerPermission)
        inflight = None
        lite = b.lite_priority.manager
        for (topic, group), (lag, oldest) in sorted((lite.lag() if lite is not None else {}).items()):
            latency = max(0, now - oldest) if oldest else 0     # 5.5: a lite group's lag is its parent topic's
            labels = (topic, group, "false", _b(self.is_system_topic(topic) or self.is_system_group(group)))
            for fam, value in zip(fams, (lag, latency, 0, latency, lag)):
                fam.add(labels, value)
        for group, (consume_type, topics) in sorted(ctx.consumers.groups_seen().items()):
            if group not in subscription_groups:
                continue
            for topic in sorted(topics):
                if topic.startswith(RETRY_PREFIX):
                    continue
                tc = self.topics.get(topic)
                if tc is None or not (tc.perm & perm & 6) or is_lite_topic(tc):
                    continue
                if str(consume_type) == "CONSUME_POP":
                    if inflight is None:
                        inflight = b.pop_service.inflight()
                    self.pop_lag(group, topic, tc, inflight, fams)
                    continue
                lag = 0
                oldest = 0
                for qid in range(tc.write_queue_nums):
                    broker_offset = max(0, store.get_max_offset(topic, qid))
                    consumer = offsets.query_offset(group, topic, qid)
                    if consumer < 0:
                        consumer = broker_offset
                    if broker_offset > consumer:
                        lag += broker_offset - consumer
                        ts = store.get_message_store_timestamp(topic, qid, consumer)
                        if ts > 0 and (oldest == 0 or ts < oldest):
                            oldest = ts
                latency = max(0, now - oldest) if oldest else 0
                labels = (topic, group, "false", _b(self.is_system_topic(topic) or self.is_system_group(group)))
                for fam, value in zip(fams, (lag, latency, 0, latency, lag)):
                    fam.add(labels, value)

    def pop_lag(self, group: str, topic: str, tc: "TopicConfig", inflight: Mapping[tuple[str, str, int], int],
                fams: list[Family]) -> None:
        """Java's rule for a POP group: a series for the topic and one (``is_retry="true"``) for its POP
        retry topic ``%RETRY%<group>_<topic>`` (zeros while it does not exist).  Per write queue: ready =
        queue end - pop offset; inflight = handed out, not acked or revived; lag = ready + inflight; lag
        latency = age of the message at (pop offset - inflight); queueing latency = age of the message at
        the pop offset."""
        from rmqd.pop.extra_info import pop_retry_topic
        store = self.ctx.store
        offsets = self.ctx.offsets
        now = self.now_ms
        is_system = _b(self.is_system_topic(topic) or self.is_system_group(group))
        retry = self.topics.get(pop_retry_topic(group, topic))
        for real, cfg, is_retry in ((topic, tc, "false"), (retry.topic_name if retry else "", retry, "true")):
            ready = flight = 0
            oldest_unconsumed = oldest_unpulled = 0
            for qid in range(cfg.write_queue_nums if cfg is not None else 0):
                end = max(0, store.get_max_offset(real, qid))
                pulled = offsets.query_offset(group, real, qid)
                if pulled < 0:
                    pulled = end
                n = inflight.get((real, group, qid), 0)
                ready += max(0, end - pulled)
                flight += n
                oldest_unconsumed = _earliest(oldest_unconsumed, store, real, qid, pulled - n, end)
                oldest_unpulled = _earliest(oldest_unpulled, store, real, qid, pulled, end)
            labels = (topic, group, is_retry, is_system)
            lag_ms = max(0, now - oldest_unconsumed) if oldest_unconsumed else 0
            queue_ms = max(0, now - oldest_unpulled) if oldest_unpulled else 0
            for fam, value in zip(fams, (ready + flight, lag_ms, flight, queue_ms, ready)):
                fam.add(labels, value)

    def pop(self) -> None:
        """rocketmq_pop_*: revive-log counters, revive backlog per revive queue, the merge-buffer gauges."""
        snap = self.ctx.metrics.pop.snapshot()
        for name, table in (("rocketmq_pop_revive_in_message_total", snap["in"]),
                            ("rocketmq_pop_revive_out_message_total", snap["out"]),
                            ("rocketmq_pop_revive_retry_messages_total", snap["retry"])):
            f = self.fam(name)
            for labels, n in sorted(table.items()):
                f.add(labels, n)
        self.fam("rocketmq_pop_offset_buffer_size").add((), 0)
        self.fam("rocketmq_pop_checkpoint_buffer_size").add((), 0)
        scan = self.fam("rocketmq_pop_buffer_scan_time_consume")
        scan.add_histogram((), [0] * (len(scan.spec.buckets) + 1), 0.0)
        svc = self.broker.pop_service
        lag, latency = self.fam("rocketmq_pop_revive_lag"), self.fam("rocketmq_pop_revive_latency")
        for qid, behind, age in svc.revive_backlog(self.now_ms):
            lag.add((str(qid),), behind)
            latency.add((str(qid),), age)

    def storage(self) -> None:
        ctx = self.ctx
        store = ctx.store
        root = ctx.config.storePathRootDir
        try:
            import shutil          # imports bz2/lzma: only when needed
            used = shutil.disk_usage(root).used
        except OSError as exc:
            log.warning("metrics: disk usage of %s: %s", root, exc)
            used = 0
        self.fam("rocketmq_storage_size").add(STORE_LABELS, used)
        commitlog = getattr(store, "commitlog", None)
        behind = commitlog.dirty_bytes() if commitlog is not None and hasattr(commitlog, "dirty_bytes") else 0
        self.fam("rocketmq_storage_flush_behind_bytes").add(STORE_LABELS, max(0, behind))
        # The put engine appends the ConsumeQueue entry and the index with the record: nothing lags.
        self.fam("rocketmq_storage_dispatch_behind_bytes").add(STORE_LABELS, 0)
        reserve = 0
        try:
            lo, hi = store.commitlog_min_offset(), store.commitlog_max_offset()
            if hi > lo:
                ts = store.pickup_store_timestamp(lo, 64)
                reserve = max(0, self.now_ms - ts) if ts > 0 else 0
        except Exception:
            log.exception("metrics: earliest message time")
        self.fam("rocketmq_storage_message_reserve_time").add(STORE_LABELS, reserve)

    def replication(self) -> None:
        """Each slave's lag on a master with slaves; the link to the master on a slave (rmqd.replicas)."""
        rep = self.ctx.replication
        info = rep.runtime_info()
        if rep.role.is_slave:
            self.fam("rmqd_ha_master_connected").add((), 1 if info["haClientRuntimeInfo"]["isActivated"] else 0)
            return
        conns = info["haConnectionInfo"]
        if not conns:
            return
        for ci in conns:
            self.fam("rmqd_ha_slave_lag").add((ci["addr"],), ci["diff"])
            self.fam("rmqd_ha_slave_lag_latency").add((ci["addr"],), ci["lagMillis"])
        self.fam("rmqd_ha_in_sync_slaves").add((), info["inSyncSlaveNums"])

    def controller_mode(self) -> None:
        """Role, brokerId, epoch, SyncStateSet and last switch of a broker in controller mode (5.x failover)."""
        rep = self.ctx.replication
        if not rep.controller_mode:
            return
        st = rep.replica_status()
        self.fam("rmqd_replica_role").add((st["role"],), 1)
        self.fam("rmqd_replica_broker_id").add((), st["controllerBrokerId"])
        self.fam("rmqd_replica_master_epoch").add((), st["masterEpoch"])
        self.fam("rmqd_replica_fenced").add((), 1 if st["fenced"] else 0)
        if st["role"] != "SLAVE":
            members = st["syncStateSet"]
            self.fam("rmqd_replica_sync_state_set_size").add((), len(members))
            self.fam("rmqd_replica_sync_state_set_epoch").add((), st["syncStateSetEpoch"])
            for m in members:
                self.fam("rmqd_replica_sync_state_set_member").add((str(m),), 1)
        last = st["lastSwitch"]
        if last is not None:
            self.fam("rmqd_replica_last_switch_time").add((last["cause"],), last["time_ms"])
        for cause, n in st["switchCounts"].items():
            self.fam("rmqd_replica_role_switches").add((cause,), n)
        if "slaveSync" in st:
            self.fam("rmqd_replica_offset_pushes").add((), st["slaveSync"]["offsetPushes"])

    def timer(self) -> None:
        """5.x's timer families (DefaultStoreMetricsManager), while the timer is on (timerWheelEnable)."""
        svc = self.broker.timer_message_service
        if not svc.enabled:
            return
        st = svc.metrics_state(self.now_ms, TIMER_DIST_BOUNDS_S)
        for name, value in (("rocketmq_timer_enqueue_lag", st.enqueue_lag),
                            ("rocketmq_timer_enqueue_latency", st.enqueue_latency_ms),
                            ("rocketmq_timer_dequeue_lag", st.dequeue_lag),
                            ("rocketmq_timer_dequeue_latency", st.dequeue_latency_ms)):
            self.fam(name).add(STORE_LABELS, value)
        timing = self.fam("rocketmq_timing_messages")
        for topic, n in sorted(st.timing.items()):
            timing.add(STORE_LABELS + (topic,), n)
        snapshot = self.fam("rocketmq_timer_message_snapshot")
        for bound, n in zip(TIMER_DIST_BOUNDS_S, st.distribution):
            snapshot.add(STORE_LABELS + (str(bound),), n)
        counts = self.ctx.metrics.timer.snapshot()
        for name, table in (("rocketmq_timer_enqueue_total", counts["enqueued"]),
                            ("rocketmq_timer_dequeue_total", counts["dequeued"])):
            f = self.fam(name)
            for topic, n in sorted(table.items()):
                f.add(STORE_LABELS + (topic,), n)
        f = self.fam("rocketmq_delay_message_latency")
        for (topic,), (buckets, total) in sorted(counts["delay"].items()):
            f.add_histogram(STORE_LABELS + (topic,), buckets, total)

    def half_messages(self) -> None:
        """Half messages prepared and not yet committed or rolled back, per real topic, counted since
        the broker started (Java persists its count; after a restart rmqd starts again from 0)."""
        f = self.fam("rocketmq_half_messages")
        for topic, n in sorted(self.ctx.metrics.messages.snapshot()["half"].items()):
            f.add((topic,), n)

    def families(self) -> Iterable[Family]:
        for step in (self.messages_in, self.messages_out, self.counters, self.rpc_latency, self.tables,
                     self.connections, self.consumer_lag, self.storage, self.timer, self.half_messages, self.pop,
                     self.replication, self.controller_mode):
            try:
                step()
            except Exception:
                log.exception("metrics: %s failed", step.__name__)
        return self.fams.values()


def collect(broker: "ScrapedBroker") -> str:
    """The Prometheus text of one scrape (blocking; run it off the event loop)."""
    scrape = Scrape(broker)
    fams = list(scrape.families())
    return render(fams, common_labels(broker))


def spec(instrument: str) -> "FamilySpec":
    return BY_INSTRUMENT[instrument]
