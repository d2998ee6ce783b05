"""Broker-level admin codes: GET_BROKER_RUNTIME_INFO (28), GET_BROKER_CONFIG (26),
UPDATE_BROKER_CONFIG (25), VIEW_BROKER_STATS_DATA (315).

GET_BROKER_RUNTIME_INFO answers in the asking client's generation, where 4.9.8 and 5.x disagree: a 4.x client
(mqadmin brokerStatus, exportMetrics) gets 4.9.8's table, a 5.x client (request version from V5_0_0_SNAPSHOT) 5.x's
(``getTransferredTps`` for 4.9.8's ``getTransferedTps``, ``brokerActive``, the ack and lite-pull pools, the timer
rows, no ``brokerVersion``): each generation's mqadmin reads keys the other lacks (5.x's exportMetrics fails
without ``getTransferredTps``, its clusterList shows ``#ACTIVATED false`` without ``brokerActive``).
GET_BROKER_CONFIG leaves out, for a 5.x client, the 4.9.8 settings 5.x removed (:data:`FOUR_X_ONLY_KEYS`).

Java: ``AdminBrokerProcessor.getBrokerRuntimeInfo/prepareRuntimeInfo``, ``StoreStatsService``,
``Configuration`` (README §3.5).  UPDATE_BROKER_CONFIG goes through ``BrokerConfig.apply_runtime``, whose
subscribers (wired by the broker) apply what the Java broker applies at runtime: ``brokerPermission``
(re-register at once), ``autoCreateTopicEnable``, store settings the store reads on each use (flush
intervals, retention...); flags such as ``enablePropertyFilter`` are read per request.
"""
from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Mapping, Optional, Protocol

import orjson

from rmqd.broker.context import BrokerContext
from rmqd.config import BrokerRole, parse_properties
from rmqd.common.constants import SCHEDULE_TOPIC
from rmqd.common.fileutil import disk_capacity
from rmqd.config.java_defaults import java_broker_properties
from rmqd.processors.admin_common import json_response
from rmqd.remoting.codes import RequestCode, ResponseCode, Version
from rmqd.remoting.dispatch import Dispatcher, ProcessorPool
from rmqd.remoting.command import RemotingCommand, error_response, new_response, require
from rmqd.tls.settings import SECRET_KEYS as SECRET_TLS_KEYS
from rmqd.common.data_version import DataVersion

if TYPE_CHECKING:
    from rmqd.processors.handles import RequestPeer
    from rmqd.store.results import StoreStats


log = logging.getLogger(__name__)

DEFAULT_CONFIG_BLACK_LIST = "configBlackList;brokerConfigPath"
_DISTRIBUTE_BUCKETS = ("<=0ms", "0~10ms", "10~50ms", "50~100ms", "100~200ms", "200~500ms", "500ms~1s",
                       "1~2s", "2~3s", "3~4s", "4~5s", "5~10s", "10s~")
_BUCKET_UPPER_MS = (1, 10, 50, 100, 200, 500, 1000, 2000, 3000, 4000, 5000, 10000)


def latency_percentile(counts: list[int], px: float, max_ms: float) -> float:
    """The ``px`` latency (ms) from per-bucket put counts, interpolated within its bucket (as
    Java's ``findPutMessageEntireTimePX`` does), never above the largest put seen (``max_ms``)."""
    total = sum(counts)
    if total == 0:
        return 0.0
    rank = int(total * px)
    passed = 0
    lower = 0.0
    for i, count in enumerate(counts):
        upper = float(_BUCKET_UPPER_MS[i]) if i < len(_BUCKET_UPPER_MS) else max(max_ms, lower)
        if rank <= passed + count:
            value = lower + ((upper - lower) * (rank - passed) / count if count else 0.0)
            return min(value, max_ms) if max_ms > 0 else value
        passed += count
        lower = upper
    return max_ms


def version_desc(ordinal: int) -> str:
    """MQVersion.getVersionDesc for the 4.9.x ordinals rmqd announces."""
    if ordinal >= 400:   # V4_9_4_SNAPSHOT = 400, V4_9_4 = 401, ... V4_9_8 = 409
        off = ordinal - 400
        return f"V4_9_{4 + off // 2}" + ("" if off % 2 else "_SNAPSHOT")
    return f"V{ordinal}"


def human_bytes(n: int) -> str:
    """MixAll.humanReadableByteCount(bytes, si=false): ``"12.3 GiB"``."""
    if n < 1024:
        return f"{n} B"
    exp = 0
    v = float(n)
    while v >= 1024 and exp < 6:
        v /= 1024
        exp += 1
    return "%.1f %siB" % (n / (1024 ** exp), "KMGTPE"[exp - 1])


def runtime_text(ms: int) -> str:
    s = ms // 1000
    return "[ %d days, %d hours, %d minutes, %d seconds ]" % (s // 86400, s % 86400 // 3600, s % 3600 // 60, s % 60)


#: 4.9.8 broker settings 5.x's BrokerConfig no longer has: a 5.x client's getBrokerConfig leaves them out (5.5's
#: exportConfigs copies filterServerNums when the broker reports it)
FOUR_X_ONLY_KEYS = ("filterServerNums",)


class TimerRuntime(Protocol):
    """The 5.x timer's rows of the runtime info (rmqd.broker.timer.TimerMessageService)."""

    def runtime_info(self, now: int) -> dict[str, str]: ...


class BrokerAdminProcessor:
    """``pools``: the broker's processor pools by name (their queues are part of the runtime info); ``timer``:
    the 5.x timer, whose figures a 5.x client's runtime info carries."""

    def __init__(self, ctx: BrokerContext, pools: Mapping[str, ProcessorPool],
                 timer: Optional[TimerRuntime] = None) -> None:
        self.ctx = ctx
        self.pools = pools
        self.timer = timer
        self.config_data_version = DataVersion.fresh()

    # ------------------------------------------------------------------ 28
    def runtime_info(self, five: bool = False) -> dict[str, str]:
        """The KVTable the Java broker answers GET_BROKER_RUNTIME_INFO with (real values): 4.9.8's, or with
        ``five`` 5.x's (see the module docstring)."""
        store = self.ctx.store
        t: dict[str, str] = {}
        self._store_info(t, store.stats)
        self._schedule_info(t)
        self._broker_info(t, store.stats)
        self._disk_info(t)
        if store.compaction is not None:
            t.update(store.compaction.runtime_info())
        if store.tier is not None and store.tier.started:
            t.update(store.tier.runtime_info())
        if five:
            self._five_x_info(t)
        return t

    def _five_x_info(self, t: dict[str, str]) -> None:
        """5.x's AdminBrokerProcessor.prepareRuntimeInfo on top of 4.9.8's table. rmqd serves lite pulls
        (LITE_PULL_MESSAGE) from its pull pool, so the lite-pull rows are that pool's; POP acks are answered on the
        event loop without a queue, so the ack queue is empty and never waits (its capacity is the setting's)."""
        t.pop("brokerVersion", None)
        t["getTransferredTps"] = t.pop("getTransferedTps")
        # BrokerController.isSpecialServiceRunning: the schedule, transaction check and revive services, which
        # run on a master
        t["brokerActive"] = "false" if self.ctx.role is BrokerRole.SLAVE else "true"
        pull = self.pools["pull"]
        t["litePullThreadPoolQueueSize"] = str(pull.queue_size)
        t["litePullThreadPoolQueueCapacity"] = str(pull.capacity)
        t["litePullThreadPoolQueueHeadWaitTimeMills"] = str(pull.head_wait_ms())
        t["ackThreadPoolQueueSize"] = "0"
        t["ackThreadPoolQueueCapacity"] = str(self.ctx.config.extra.get("ackThreadPoolQueueCapacity", 100000))
        t["ackThreadPoolQueueHeadWaitTimeMills"] = "0"
        now = int(time.time() * 1000)
        if self.timer is not None:
            t.update(self.timer.runtime_info(now))
        else:
            t.update(timerReadBehind="0", timerOffsetBehind="0", timerCongestNum="0", timerEnqueueTps="0.0",
                     timerDequeueTps="0.0")

    def _store_info(self, t: dict[str, str], st: StoreStats) -> None:
        """StoreStatsService.getRuntimeInfo + DefaultMessageStore.getRuntimeInfo."""
        stats = self.ctx.stats
        now = int(time.time() * 1000)
        t["bootTimestamp"] = str(st.start_time_ms)
        t["runtime"] = runtime_text(max(0, now - st.start_time_ms))
        t["putMessageEntireTimeMax"] = str(int(st.put_latency_max_ms))
        t["putMessageTimesTotal"] = str(st.put_message_times_total)
        t["putMessageFailedTimes"] = str(st.put_message_failed_times)
        t["putMessageSizeTotal"] = str(st.put_message_size_total)
        t["putMessageDistributeTime"] = "".join(f"[{b}]:{n} " for b, n in zip(_DISTRIBUTE_BUCKETS,
                                                                              st.put_distribution))
        avg = st.put_message_size_total / st.put_message_times_total if st.put_message_times_total else 0.0
        t["putMessageAverageSize"] = repr(float(avg))
        # StoreStatsService's dispatch buffer high-water mark: rmqd writes ConsumeQueue and index entries in
        # the append itself (no dispatch buffer), and 4.9.8 never feeds it either: both report 0.
        t["dispatchMaxBuffer"] = "0"
        t["getMessageEntireTimeMax"] = str(int(st.get_latency_max_ms))
        t["putTps"] = stats.tps_triplet(1)
        t["getFoundTps"] = stats.tps_triplet(2)
        t["getMissTps"] = stats.tps_triplet(5)
        t["getTotalTps"] = stats.tps_triplet(3)
        t["getTransferedTps"] = stats.tps_triplet(4)
        t["putLatency99"] = "%.2f" % latency_percentile(st.put_distribution, 0.99, st.put_latency_max_ms)
        t["putLatency999"] = "%.2f" % latency_percentile(st.put_distribution, 0.999, st.put_latency_max_ms)
        t["commitLogDiskRatio"] = repr(st.commitlog_disk_ratio / 100.0)
        t["commitLogDiskRatio_" + self.ctx.store.config.commitlog_dir] = t["commitLogDiskRatio"]
        t["consumeQueueDiskRatio"] = repr(st.consume_queue_disk_ratio / 100.0)
        t["commitLogMinOffset"] = str(st.commitlog_min_offset)
        t["commitLogMaxOffset"] = str(st.commitlog_max_offset)

    def _schedule_info(self, t: dict[str, str]) -> None:
        """ScheduleMessageService.buildRunningStats: each level of its offset table, i.e. every level a delayed
        message has used → "delivered offset,max offset"."""
        for level, delivered in sorted(self.ctx.delay_offsets.table_copy().items()):
            mx = self.ctx.store.get_max_offset(SCHEDULE_TOPIC, level - 1)
            t[f"scheduleMessageOffset_{level}"] = f"{delivered},{mx}"

    def _broker_info(self, t: dict[str, str], st: StoreStats) -> None:
        """AdminBrokerProcessor.prepareRuntimeInfo: version, daily totals, pool queues, flush backlog."""
        stats, store, pools = self.ctx.stats, self.ctx.store, self.pools
        t["brokerVersionDesc"] = version_desc(Version.V4_9_8)
        t["brokerVersion"] = str(Version.V4_9_8)
        morning = stats.morning
        t["msgPutTotalYesterdayMorning"] = str(morning.get("put_yesterday", 0))
        t["msgPutTotalTodayMorning"] = str(morning.get("put_today", 0))
        t["msgPutTotalTodayNow"] = str(st.put_message_times_total)
        t["msgGetTotalYesterdayMorning"] = str(morning.get("get_yesterday", 0))
        t["msgGetTotalTodayMorning"] = str(morning.get("get_today", 0))
        t["msgGetTotalTodayNow"] = str(st.get_message_transferred_total)
        for name, key in (("send", "sendThreadPool"), ("pull", "pullThreadPool"), ("query", "queryThreadPool")):
            pool = pools[name]
            t[f"{key}QueueSize"] = str(pool.queue_size)
            t[f"{key}QueueCapacity"] = str(pool.capacity)
            t[f"{key}QueueHeadWaitTimeMills"] = str(pool.head_wait_ms())
        t["EndTransactionQueueSize"] = str(pools["transaction"].queue_size)
        t["EndTransactionThreadPoolQueueCapacity"] = str(pools["transaction"].capacity)
        t["dispatchBehindBytes"] = str(st.dispatch_behind_bytes)
        t["pageCacheLockTimeMills"] = str(store.lock_time_mills())
        earliest = 0
        if st.commitlog_max_offset > st.commitlog_min_offset:
            earliest = max(0, store.pickup_store_timestamp(st.commitlog_min_offset, 64))
        t["earliestMessageTimeStamp"] = str(earliest)
        t["startAcceptSendRequestTimeStamp"] = str(stats.start_accept_send_ts)
        t["remainHowManyDataToFlush"] = human_bytes(max(0, st.commitlog_max_offset - st.commitlog_flushed_offset))
        # DefaultMessageStore.remainTransientStoreBufferNumbs: Integer.MAX_VALUE without a transient store
        # pool; with transientStorePoolEnable Java also reports what waits to be committed from the pool's
        # buffers to the file. rmqd writes into the mapped file directly: every buffer is free, nothing waits.
        extra = self.ctx.config.extra
        if str(extra.get("transientStorePoolEnable", "false")).lower() == "true":
            t["remainTransientStoreBufferNumbs"] = str(extra.get("transientStorePoolSize", 5))
            t["remainHowManyDataToCommit"] = human_bytes(0)
        else:
            t["remainTransientStoreBufferNumbs"] = str(2 ** 31 - 1)

    def _disk_info(self, t: dict[str, str]) -> None:
        root = self.ctx.store.config.store_root_dir
        capacity = disk_capacity(root)
        if capacity is not None:
            t["commitLogDirCapacity"] = f"Total : {human_bytes(capacity[0])}, Free : {human_bytes(capacity[1])}."
        else:
            log.warning("disk capacity of %s cannot be read: commitLogDirCapacity left out, as Java does", root)

    def get_broker_runtime_info(self, conn: RequestPeer, request: RemotingCommand) -> RemotingCommand:
        return json_response({"table": self.runtime_info(five=request.version >= Version.V5_0_0_SNAPSHOT)})

    # ------------------------------------------------------------------ 26 / 25
    def get_broker_config(self, conn: RequestPeer, request: RemotingCommand) -> RemotingCommand:
        """Every property the Java broker reports (see rmqd.config.java_defaults), rmqd's values where
        it has them."""
        props = java_broker_properties(self.ctx.config.to_properties())
        if request.version >= Version.V5_0_0_SNAPSHOT:
            for key in FOUR_X_ONLY_KEYS:
                props.pop(key, None)
        for secret in ("objectStoreSecretKey", *SECRET_TLS_KEYS):
            if props.get(secret):
                props[secret] = "******"       # the tier's S3 secret and TLS key passwords are never shown
        text = "".join(f"{k}={v}\n" for k, v in sorted(props.items()))
        version = orjson.dumps(self.config_data_version.to_json()).decode()
        return new_response(ResponseCode.SUCCESS, None, {"version": version}, text.encode("utf-8"))

    def update_broker_config(self, conn: RequestPeer, request: RemotingCommand) -> RemotingCommand:
        raw = request.body_bytes() if request.body is not None else b""
        if not raw:
            return new_response()
        try:
            props = parse_properties(raw.decode("utf-8"))
        except Exception as exc:
            log.warning("updateBrokerConfig from %s: unparsable body: %s", conn.remote_address, exc)
            return error_response(ResponseCode.SYSTEM_ERROR, "string2Properties error")
        black = str(self.ctx.config.extra.get("configBlackList") or DEFAULT_CONFIG_BLACK_LIST)
        if any(k in {b.strip() for b in black.split(";") if b.strip()} for k in props):
            return error_response(ResponseCode.NO_PERMISSION, "Can not update config in black list.")
        try:
            self.ctx.config.apply_runtime(props)       # subscribers push the changes (BrokerController)
        except (ValueError, TypeError) as exc:
            return error_response(ResponseCode.SYSTEM_ERROR, f"update broker config failed: {exc}")
        self.config_data_version.next_version()
        log.info("updateBrokerConfig called by %s: %s", conn.remote_address, props)
        return new_response()

    # ------------------------------------------------------------------ 315
    def view_broker_stats_data(self, conn: RequestPeer, request: RemotingCommand) -> RemotingCommand:
        name, key = require(request, "statsName", "statsKey")
        item = self.ctx.stats.get(name, key)
        if item is None:
            return error_response(ResponseCode.SYSTEM_ERROR, f"The stats <{name}> <{key}> not exist")
        return json_response(item.stats_data())

    def register(self, dispatcher: Dispatcher, pool: ProcessorPool) -> None:
        """Register the codes this processor answers (in ``pool``, or on the loop where noted)."""
        dispatcher.register(RequestCode.GET_BROKER_RUNTIME_INFO, self.get_broker_runtime_info, pool)
        dispatcher.register(RequestCode.GET_BROKER_CONFIG, self.get_broker_config, pool)
        dispatcher.register(RequestCode.UPDATE_BROKER_CONFIG, self.update_broker_config, pool)
        dispatcher.register(RequestCode.VIEW_BROKER_STATS_DATA, self.view_broker_stats_data, pool)
