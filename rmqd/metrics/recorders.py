"""Counters updated where things happen (the rest of the metrics are read at scrape time).

The send fast lane counts its own sends in C (``send_lane.LaneMetrics``); what goes through the
processors is counted here: a lock and a few dict operations per request, on paths that already
cost tens of microseconds.
"""
from __future__ import annotations

import threading
import time
from enum import IntEnum
from typing import Optional, TypedDict

from rmqd.metrics.families import (CREATE_TIME_BUCKETS_MS, DELAY_LATENCY_BUCKETS_S, FINISH_LATENCY_BUCKETS,
                                   LATENCY_BUCKETS_MS, MESSAGE_SIZE_BUCKETS)
from rmqd.metrics.histogram import Histogram, Series
from rmqd.common.constants import DLQ_GROUP_TOPIC_PREFIX as DLQ_PREFIX
from rmqd.common.constants import RETRY_GROUP_TOPIC_PREFIX as RETRY_PREFIX
from rmqd.remoting.codes import RequestCode, ResponseCode
from rmqd.store.message import find_property


def code_name(enum: type[IntEnum], code: int) -> str:
    """RequestCode/ResponseCode field name, lower-cased (the number when unknown), as 5.x labels it."""
    try:
        return enum(code).name.lower()
    except ValueError:
        return str(code)


def message_type(props: Optional[str]) -> str:
    """TopicMessageType.parseFromMessageProperty: transaction | delay | fifo | priority | lite | normal."""
    if not props:
        return "normal"
    if "TRAN_MSG" in props and find_property(props, "TRAN_MSG") == "true":
        return "transaction"
    for key in ("DELAY", "TIMER_DELIVER_MS", "TIMER_DELAY_SEC", "TIMER_DELAY_MS"):
        if key in props and find_property(props, key) not in (None, "", "0"):
            return "delay"
    if "__SHARDINGKEY" in props and find_property(props, "__SHARDINGKEY"):
        return "fifo"
    if "_SYS_MSG_PRIORITY_" in props and find_property(props, "_SYS_MSG_PRIORITY_"):     # 5.4
        return "priority"
    if "__LITE_TOPIC" in props and find_property(props, "__LITE_TOPIC"):                 # 5.5
        return "lite"
    return "normal"


class MessageSnapshot(TypedDict):
    """:meth:`MessageCounters.snapshot`: histogram series by label tuple, counters by key."""

    sizes: dict[tuple[str, ...], Series]            # (topic, message type)
    dlq: dict[tuple[str, str], int]                 # (group, topic)
    commit: dict[str, int]
    rollback: dict[str, int]
    half: dict[str, int]
    finish: dict[tuple[str, ...], Series]           # (topic,)
    topic_create: dict[tuple[str, ...], Series]     # (status, is_system)
    group_create: dict[tuple[str, ...], Series]     # (status,)


#: :meth:`PopCounters.snapshot` (``in`` is a keyword, hence the functional form).
PopSnapshot = TypedDict("PopSnapshot", {"in": dict[tuple[str, str, str, str], int],
                                        "out": dict[tuple[str, str, str, str], int],
                                        "retry": dict[tuple[str, str, str], int]})


class TimerSnapshot(TypedDict):
    """:meth:`TimerCounters.snapshot`."""

    enqueued: dict[str, int]
    dequeued: dict[str, int]
    delay: dict[tuple[str, ...], Series]            # (topic,)


class RpcLatency:
    """rocketmq_rpc_latency_milliseconds for requests answered through the dispatcher."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.hist = Histogram(LATENCY_BUCKETS_MS)

    def observe(self, request_code: int, response_code: int, elapsed_s: float, oneway: bool = False,
                long_polling: bool = False) -> None:
        labels = ("remoting", code_name(RequestCode, request_code),
                  code_name(ResponseCode, response_code) if not oneway else "success",
                  "true" if long_polling else "false", "oneway" if oneway else "success")
        with self._lock:
            self.hist.observe(labels, elapsed_s * 1000.0)

    def snapshot(self) -> dict[tuple[str, ...], Series]:
        with self._lock:
            return {k: (list(v[0]), v[1]) for k, v in self.hist.series.items()}


class MessageCounters:
    """Messages/bytes in (by topic and message type) for sends served by the processors, DLQ moves,
    transaction outcomes and create timings."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.sizes = Histogram(MESSAGE_SIZE_BUCKETS)     # (topic, type) -> buckets, sum = bytes
        self.dlq: dict[tuple[str, str], int] = {}
        self.commit: dict[str, int] = {}
        self.rollback: dict[str, int] = {}
        self.half: dict[str, int] = {}          # prepared, not yet committed/rolled back (since start)
        self.finish = Histogram(FINISH_LATENCY_BUCKETS)   # (topic,) -> whole seconds from birth to commit
        self.topic_create = Histogram(CREATE_TIME_BUCKETS_MS)
        self.group_create = Histogram(CREATE_TIME_BUCKETS_MS)

    def on_put(self, topic: str, props: Optional[str], body_sizes: list[int]) -> None:
        """A send stored ``len(body_sizes)`` messages to ``topic`` (retry/DLQ topics are skipped)."""
        if topic.startswith(RETRY_PREFIX) or topic.startswith(DLQ_PREFIX):
            return
        key = (topic, message_type(props))
        with self._lock:
            for size in body_sizes:
                self.sizes.observe(key, float(size))
            if key[1] == "transaction":
                self.half[topic] = self.half.get(topic, 0) + len(body_sizes)

    def on_dlq(self, group: str, topic: str) -> None:
        with self._lock:
            self.dlq[(group, topic)] = self.dlq.get((group, topic), 0) + 1

    def on_end_transaction(self, topic: str, commit: bool, born_ms: int = 0) -> None:
        """A half message of ``topic`` was committed or rolled back.  A commit also records the finish
        latency as the 5.x broker does: whole seconds since the half message's born timestamp (rollbacks
        are not timed there either)."""
        table = self.commit if commit else self.rollback
        with self._lock:
            table[topic] = table.get(topic, 0) + 1
            if self.half.get(topic, 0) > 0:
                self.half[topic] -= 1
            if commit and born_ms > 0:
                self.finish.observe((topic,), float(max(0, int(time.time() * 1000) - born_ms) // 1000))

    def on_create(self, what: str, elapsed_s: float, ok: bool, is_system: bool = False) -> None:
        status = "success" if ok else "failure"
        with self._lock:
            if what == "topic":
                self.topic_create.observe((status, "true" if is_system else "false"), elapsed_s * 1000.0)
            else:
                self.group_create.observe((status,), elapsed_s * 1000.0)

    def snapshot(self) -> "MessageSnapshot":
        with self._lock:
            return {"sizes": {k: (list(v[0]), v[1]) for k, v in self.sizes.series.items()},
                    "dlq": dict(self.dlq), "commit": dict(self.commit), "rollback": dict(self.rollback),
                    "half": dict(self.half),
                    "finish": {k: (list(v[0]), v[1]) for k, v in self.finish.series.items()},
                    "topic_create": {k: (list(v[0]), v[1]) for k, v in self.topic_create.series.items()},
                    "group_create": {k: (list(v[0]), v[1]) for k, v in self.group_create.series.items()}}


REVIVE_TYPES = {"ck": "CK", "ack": "ACK", "bAck": "ACK"}     # revive-log tag -> PopReviveMessageType


class PopCounters:
    """POP's revive-log traffic (``rocketmq_pop_revive_*_total``): records written to the revive log,
    records the revive is done with (a checkpoint's ``ck`` records and its ``ack``/``bAck`` records, when
    the checkpoint is settled: fully acked, revived or handed out again), messages revived into a POP
    retry topic."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.revive_in: dict[tuple[str, str, str, str], int] = {}   # (group, topic, type, put status)
        self.revive_out: dict[tuple[str, str, str, str], int] = {}  # (group, topic, revive qid, type)
        self.retry: dict[tuple[str, str, str], int] = {}            # (group, topic, put status)

    def on_revive_put(self, group: str, topic: str, tag: str, status: str) -> None:
        key = (group, topic, REVIVE_TYPES.get(tag, tag), status)
        with self._lock:
            self.revive_in[key] = self.revive_in.get(key, 0) + 1

    def on_settled(self, group: str, topic: str, revive_qid: int, ck_records: int, ack_records: int) -> None:
        with self._lock:
            for kind, n in (("CK", ck_records), ("ACK", ack_records)):
                if n > 0:
                    key = (group, topic, str(revive_qid), kind)
                    self.revive_out[key] = self.revive_out.get(key, 0) + n

    def on_retry_put(self, group: str, topic: str, status: str) -> None:
        key = (group, topic, status)
        with self._lock:
            self.retry[key] = self.retry.get(key, 0) + 1

    def snapshot(self) -> "PopSnapshot":
        with self._lock:
            return {"in": dict(self.revive_in), "out": dict(self.revive_out), "retry": dict(self.retry)}


class SecondsWindow:
    """Events per second over the last ``seconds`` whole seconds (one counter per second of a ring): what 5.x's
    timer reports as its enqueue and dequeue TPS (``PerfCounter.Ticks.getLastTps``)."""

    def __init__(self, seconds: int = 60) -> None:
        self.seconds = seconds
        self._slots = seconds + 1                # the window and the current, partial second
        self._counts = [0] * self._slots
        self._stamps = [-1] * self._slots

    def add(self, now_s: int, n: int = 1) -> None:
        i = now_s % self._slots
        if self._stamps[i] != now_s:
            self._stamps[i], self._counts[i] = now_s, 0
        self._counts[i] += n

    def tps(self, now_s: int) -> float:
        """The mean rate over the ``seconds`` before ``now_s`` (the current, partial second left out)."""
        total = sum(c for c, t in zip(self._counts, self._stamps) if now_s - self.seconds <= t < now_s)
        return total / self.seconds


class TimerCounters:
    """The timer's traffic (5.x DefaultStoreMetricsManager): messages taken into the timer and delivered
    from it, per real topic, and the delay each was set for (whole seconds, ``rocketmq_delay_message_latency``);
    the rate of both over the last minute (``tps``)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.enqueued: dict[str, int] = {}
        self.dequeued: dict[str, int] = {}
        self.delay = Histogram(DELAY_LATENCY_BUCKETS_S)      # (topic,) -> seconds
        self._enqueue_rate = SecondsWindow()
        self._dequeue_rate = SecondsWindow()

    def on_enqueue(self, topic: str, delay_ms: int) -> None:
        with self._lock:
            self.enqueued[topic] = self.enqueued.get(topic, 0) + 1
            self.delay.observe((topic,), float(max(0, delay_ms) // 1000))
            self._enqueue_rate.add(int(time.time()))

    def on_dequeue(self, topic: str) -> None:
        with self._lock:
            self.dequeued[topic] = self.dequeued.get(topic, 0) + 1
            self._dequeue_rate.add(int(time.time()))

    def tps(self) -> tuple[float, float]:
        """(enqueue, dequeue) messages per second over the last minute."""
        now = int(time.time())
        with self._lock:
            return self._enqueue_rate.tps(now), self._dequeue_rate.tps(now)

    def snapshot(self) -> "TimerSnapshot":
        with self._lock:
            return {"enqueued": dict(self.enqueued), "dequeued": dict(self.dequeued),
                    "delay": {k: (list(v[0]), v[1]) for k, v in self.delay.series.items()}}


class PopOutCounters:
    """Messages and bytes POP handed out, by (topic, group, is_retry): 5.x labels POP's
    ``rocketmq_messages_out_total`` with ``is_retry`` (a pop from the POP retry topic counts under the
    original topic with ``is_retry="true"``); pulls carry no ``is_retry``.  Kept apart from the broker's stats
    (which count pops and pulls together, as Java's BrokerStatsManager) so the scrape can tell them apart."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.out: dict[tuple[str, str, bool], list[int]] = {}    # (stats topic, group, is_retry) -> [n, bytes]

    def on_out(self, group: str, topic: str, nums: int, size: int) -> None:
        key = (topic, group, topic.startswith(RETRY_PREFIX))
        with self._lock:
            row = self.out.get(key)
            if row is None:
                self.out[key] = [nums, size]
            else:
                row[0] += nums
                row[1] += size

    def snapshot(self) -> dict[tuple[str, str, bool], tuple[int, int]]:
        with self._lock:
            return {k: (v[0], v[1]) for k, v in self.out.items()}


class BrokerMetrics:
    """What the broker's hot paths record into (``broker.metrics``)."""

    def __init__(self) -> None:
        self.rpc = RpcLatency()
        self.messages = MessageCounters()
        self.pop = PopCounters()
        self.pop_out = PopOutCounters()
        self.timer = TimerCounters()
        self.started_at = time.time()
