"""``format("rocketmq")``: the PySpark Python data source (batch and streaming reads, batch and
streaming writes). Options and columns: README "Spark"."""
from __future__ import annotations

import datetime
import gc
import logging
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterator, Mapping, Optional, Sequence, Union

import pyarrow as pa  # type: ignore[import-untyped, unused-ignore]  # pyarrow ships no type information
from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceStreamReader, Filter, InputPartition

from rmqd.remoting.codes import ResponseCode
from rmqd.cython_ext import record_columns as _rc
from rmqd.spark.arrow import DDL, Projection, columns_batch, decode_batch, decompress_values, projection
from rmqd.spark.executor import not_visible
from rmqd.spark.group import GroupRegistration
from rmqd.spark.options import DEFAULT_GROUP, EARLIEST, LATEST, OffsetSpec, Options, pick
from rmqd.spark.remote import Clients, Cluster, ConnectorError, QueueRef, pull
from rmqd.spark.sink import BatchWriter, StreamWriter
from rmqd.spark.store_dir import FileAccess, QueueFiles, StoreLayout

if TYPE_CHECKING:
    from pyspark.sql.datasource import EqualTo, GreaterThan, GreaterThanOrEqual, In, LessThan, LessThanOrEqual
    from pyspark.sql.streaming.datasource import ReadLimit, SupportsTriggerAvailableNow
    from pyspark.sql.types import StructType
else:
    try:                               # Spark >= 4.2: Trigger.AvailableNow for Python sources
        from pyspark.sql.streaming.datasource import SupportsTriggerAvailableNow
    except ImportError:                # pragma: no cover - older Spark
        SupportsTriggerAvailableNow = object

log = logging.getLogger(__name__)

BATCH_BYTES = 4 << 20                  # records decoded into one Arrow batch

#: a stream's offsets: {topic: {brokerName: {queueId: next offset}}}
QueueOffsets = dict[str, dict[str, dict[str, int]]]
#: a pushed-down filter's narrowing of one column: [lo, hi) and the value set (None: no bound)
Narrowed = tuple[Optional[int], Optional[int], Optional[set[object]]]
#: the filters that narrow a store directory's read (BatchReader._push)
PushedFilter = Union["EqualTo", "GreaterThan", "GreaterThanOrEqual", "LessThan", "LessThanOrEqual", "In"]


@dataclass
class QueueRange(InputPartition):
    """[start, end) of one queue, read from the broker at ``addr``."""
    topic: str
    broker: str
    addr: str
    queue_id: int
    start: int
    end: int
    fail_on_data_loss: bool = True


@dataclass
class StoreRange(InputPartition):
    """[start, end) of one queue, read from the store directory ``root``."""
    root: str
    topic: str
    broker: str
    queue_id: int
    start: int
    end: int
    ts_from: Optional[int] = None
    ts_to: Optional[int] = None      # exclusive


def _split(start: int, end: int, size: Optional[int]) -> list[tuple[int, int]]:
    if not size or size <= 0 or end - start <= size:
        return [(start, end)] if end > start else []
    return [(s, min(s + size, end)) for s in range(start, end, size)]


def data_lost(ref: QueueRef, start: int, min_offset: int, fail: bool) -> None:
    """Offsets [start, min_offset) of ``ref`` were deleted (retention) before they were read: fail
    (failOnDataLoss=true) or log a warning and go on at ``min_offset``."""
    if fail:
        raise ConnectorError(
            f"failOnDataLoss: {ref.topic}/{ref.broker}/{ref.queue_id}: offsets [{start}, {min_offset}) were deleted "
            f"before they were read (the broker's min offset is {min_offset}); set failOnDataLoss=false to skip "
            "ahead")
    log.warning("failOnDataLoss=false: %s/%s/%d: offsets [%d, %d) were deleted before they were read; skipping "
                "ahead to %d", ref.topic, ref.broker, ref.queue_id, start, min_offset, min_offset)


def read_from_broker(p: QueueRange, group: str, expr_type: str, expression: str) -> Iterator[pa.RecordBatch]:
    """Pull [start, end) and yield Arrow batches of about BATCH_BYTES."""
    clients = Clients()
    ref = QueueRef(p.topic, p.broker, p.queue_id)
    offset, buf = p.start, bytearray()
    try:
        while offset < p.end:
            code, nxt, _mx, body = pull(clients, p.addr, group, ref, offset, expr_type, expression)
            if body and code == 0:
                buf += body
            if nxt <= offset:                      # nothing more in range (NOT_FOUND at the end)
                break
            if code == ResponseCode.PULL_OFFSET_MOVED:  # below the min offset: deleted since planning
                data_lost(ref, offset, nxt, p.fail_on_data_loss)
            offset = nxt
            if len(buf) >= BATCH_BYTES:
                yield _decode(buf, p.broker, p.start, p.end)
                buf = bytearray()
        if buf:
            yield _decode(buf, p.broker, p.start, p.end)
    finally:
        clients.close()


_heap_frozen = False


def freeze_worker_heap() -> None:
    """Once per Python worker (Spark calls ``reader()`` and ``read()`` in its workers, never in the user's
    process): move every object alive now (the imported modules: pyspark, pyarrow, pandas,
    rmqd) out of the cyclic garbage collector's reach (``gc.freeze``). Spark's worker daemon runs a full
    ``gc.collect()`` after every task, which otherwise walks all of them each time (~0.1 CPU s per query
    of 4 tasks). Objects that die later are still freed by reference counting; only cyclic garbage among
    the objects alive at this moment would stay, once."""
    global _heap_frozen
    if not _heap_frozen:
        _heap_frozen = True
        gc.freeze()


def _projected(batches: Iterator[pa.RecordBatch], proj: Optional[Projection]) -> Iterator[pa.RecordBatch]:
    return batches if proj is None else (proj.apply(b) for b in batches)


def _decode(buf: bytearray, broker: str, lo: int, hi: int) -> pa.RecordBatch:
    batch, _n, _used, sys_flags = decode_batch(buf, broker, lo, hi)
    return decompress_values(batch, sys_flags)


def read_from_store(p: StoreRange, access_log: Optional[str], tags: Optional[set[str]]) -> Iterator[pa.RecordBatch]:
    import pyarrow.compute as pc  # type: ignore[import-untyped, unused-ignore]  # no type information
    layout = StoreLayout(p.root)
    if not os.path.isdir(layout.cq_root) or not os.path.isdir(layout.commitlog_dir):
        # planned on the driver, which sees the store: this executor does not (missing files would read as
        # an empty range)
        raise ConnectorError(not_visible("option 'path':", p.root))
    access = FileAccess(access_log)
    try:
        files = QueueFiles(layout, p.topic, p.queue_id, access)
        start, end = p.start, p.end
        if p.ts_from is not None:
            start = files.offset_at_time(p.ts_from, start, end)
        if p.ts_to is not None:
            end = files.offset_at_time(p.ts_to, start, end)
        off = start
        while off < end:
            cols = _rc.Columns(p.start, p.end, BATCH_BYTES, 4096)   # the bodies are a part of the records
            off = files.decode(off, end, BATCH_BYTES, cols)
            if not cols.record_bytes:
                continue
            batch, sys_flags = columns_batch(cols.result(), p.broker)
            batch = decompress_values(batch, sys_flags)
            if tags is not None:
                batch = batch.filter(pc.is_in(batch.column("tags"), pa.array(sorted(tags), pa.string())))
            if batch.num_rows:
                yield batch
    finally:
        access.close()


def first_offset_at(cluster: Cluster, addr: str, ref: QueueRef, ts_ms: int, group: str) -> int:
    """Kafka's startingTimestamp: the first offset stored at or after ``ts_ms`` (the queue's max when none).
    The broker's SEARCH_OFFSET_BY_TIMESTAMP answers the closest record, which may be just before it."""
    off = cluster.offset_by_time(addr, ref, ts_ms)
    mx = cluster.max_offset(addr, ref)
    while off < mx:
        code, nxt, _m, body = pull(cluster.clients, addr, group, ref, off, "TAG", "*")
        if code == 0 and body:
            cols, _ = _rc.decode(body, off, -1)
            stamps = memoryview(cols["timestamp"]).cast("q")
            offs = memoryview(cols["offset"]).cast("q")
            for t, o in zip(stamps, offs):
                if t >= ts_ms * 1000:
                    return o
        if nxt <= off:
            break
        off = nxt
    return mx


def _int_bounds(v: Union[datetime.datetime, int, float]) -> tuple[int, int]:
    """(floor, ceil) of a filter value: a timestamp in whole ms (store times are ms), else the integer."""
    if isinstance(v, datetime.datetime):
        us = round(v.timestamp() * 1_000_000)        # naive = local time, as PySpark hands TimestampType over
        return us // 1000, -(-us // 1000)
    return int(v), int(v)


class _Plan:
    """The driver's view of the options a reader needs."""

    def __init__(self, options: Mapping[str, str]) -> None:
        self.o = Options(options)
        self.group = self.o.get("group", DEFAULT_GROUP)
        self.expr_type, self.expression = self.o.expression()
        self.max_per_partition = self.o.int("maxRecordsPerPartition")
        self.path = self.o.get("path")
        self.fail_on_data_loss = self.o.bool("failOnDataLoss", True)

    def cluster(self) -> Cluster:
        return Cluster(self.o.get("nameServer") or "")

    def resolve(self, spec: OffsetSpec, cluster: Cluster, addrs: dict[str, str], ref: QueueRef, default: int) -> int:
        want = pick(spec, ref.topic, ref.broker, ref.queue_id, default)
        if want == EARLIEST:
            return cluster.min_offset(addrs[ref.broker], ref)
        if want == LATEST:
            return cluster.max_offset(addrs[ref.broker], ref)
        if want < -2:
            raise ConnectorError(f"offset {want} for {ref.topic}/{ref.broker}/{ref.queue_id}: -2 = earliest, "
                                 "-1 = latest, else >= 0")
        return want


class BatchReader(DataSourceReader):
    """Batch reads from the brokers, or from a store directory (``path``)."""

    def __init__(self, options: Mapping[str, str], schema: Optional[StructType] = None) -> None:
        self.plan = _Plan(options)
        self.pushed: dict[str, Narrowed] = {}
        self.projection: Optional[Projection] = projection(schema)

    def _push(self, filters: list[Filter]) -> Iterator[Filter]:
        from pyspark.sql.datasource import (EqualTo, GreaterThan, GreaterThanOrEqual, In, LessThan,
                                            LessThanOrEqual)
        for f in filters:
            attribute = getattr(f, "attribute", None)
            col = attribute[0] if attribute and len(attribute) == 1 else None
            if col in ("offset", "partition") and isinstance(f, (EqualTo, GreaterThan, GreaterThanOrEqual,
                                                                  LessThan, LessThanOrEqual, In)):
                self._narrow(col, f)
            elif col == "topic" and isinstance(f, (EqualTo, In)):
                self._narrow(col, f)
            elif col == "timestamp" and isinstance(f, (GreaterThan, GreaterThanOrEqual, LessThan,
                                                       LessThanOrEqual, EqualTo)):
                self._narrow(col, f)
            yield f                    # Spark still applies every filter: pushdown only prunes files

    def _narrow(self, col: str, f: PushedFilter) -> None:
        """Intersect [lo, hi) (offsets, queue ids, store times in ms) or the value set (topics, queue ids)."""
        from pyspark.sql.datasource import (EqualTo, GreaterThan, GreaterThanOrEqual, In, LessThan,
                                            LessThanOrEqual)
        lo, hi, values = self.pushed.get(col, (None, None, None))
        if isinstance(f, In) or (col == "topic" and isinstance(f, EqualTo)):
            vals = set(f.value) if isinstance(f, In) else {f.value}
            values = vals if values is None else values & vals
        else:
            floor, ceil = _int_bounds(f.value)
            new_lo = {GreaterThan: floor + 1, GreaterThanOrEqual: ceil, EqualTo: ceil}.get(type(f))
            new_hi = {LessThan: ceil, LessThanOrEqual: floor + 1, EqualTo: floor + 1}.get(type(f))
            if new_lo is not None:
                lo = new_lo if lo is None else max(lo, new_lo)
            if new_hi is not None:
                hi = new_hi if hi is None else min(hi, new_hi)
        self.pushed[col] = (lo, hi, values)

    # ------------------------------------------------------------------ partitions
    def partitions(self) -> Sequence[InputPartition]:
        return self._store_partitions(self.plan.path) if self.plan.path else self._broker_partitions()

    def _broker_partitions(self) -> list[QueueRange]:
        plan, o = self.plan, self.plan.o
        cluster = plan.cluster()
        try:
            topics = cluster.resolve_topics(o.get("topic"), o.get("topicPattern"))
            refs, addrs = cluster.queues(topics)
            starting = o.offsets("startingOffsets", "earliest")
            ending = o.offsets("endingOffsets", "latest")
            ts = o.int("startingTimestamp")
            parts: list[QueueRange] = []
            for ref in refs:
                addr = addrs[ref.broker]
                start = first_offset_at(cluster, addr, ref, ts, plan.group) if ts is not None else \
                    plan.resolve(starting, cluster, addrs, ref, EARLIEST)
                end = plan.resolve(ending, cluster, addrs, ref, LATEST)
                for s, e in _split(max(start, 0), end, plan.max_per_partition):
                    parts.append(QueueRange(ref.topic, ref.broker, addr, ref.queue_id, s, e,
                                            plan.fail_on_data_loss))
            return parts
        finally:
            cluster.clients.close()

    def _store_partitions(self, path: str) -> list[StoreRange]:
        plan, o = self.plan, self.plan.o
        layout = StoreLayout(path)
        layout.check()
        broker = o.get("brokerName", "broker-a")
        topics = layout.topics(o.get("topic"), o.get("topicPattern"))
        tlo, thi, tvals = self.pushed.get("topic", (None, None, None))
        if tvals is not None:
            topics = [t for t in topics if t in tvals]
        plo, phi, pvals = self.pushed.get("partition", (None, None, None))
        olo, ohi, _ = self.pushed.get("offset", (None, None, None))
        slo, shi, _ = self.pushed.get("timestamp", (None, None, None))
        starting = o.offsets("startingOffsets", "earliest")
        ending = o.offsets("endingOffsets", "latest")
        access = FileAccess(o.get("fileAccessLog"))
        parts: list[StoreRange] = []
        try:
            for topic in topics:
                for qid in layout.queue_ids(topic):
                    if (pvals is not None and qid not in pvals) or (plo is not None and qid < plo) or \
                            (phi is not None and qid >= phi):
                        continue
                    files = QueueFiles(layout, topic, qid, access)
                    mn, mx = files.bounds()
                    s = pick(starting, topic, broker, qid, EARLIEST)
                    e = pick(ending, topic, broker, qid, LATEST)
                    start = mn if s == EARLIEST else (mx if s == LATEST else max(s, mn))
                    end = mx if e in (EARLIEST, LATEST) and e == LATEST else (mn if e == EARLIEST else min(e, mx))
                    if olo is not None:
                        start = max(start, olo)
                    if ohi is not None:
                        end = min(end, ohi)
                    for a, b in _split(start, end, plan.max_per_partition):
                        parts.append(StoreRange(path, topic, broker, qid, a, b, slo, shi))
        finally:
            access.close()
        return parts

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        freeze_worker_heap()
        plan = self.plan
        if isinstance(partition, StoreRange):
            tags = None
            if plan.expr_type == "SQL92":
                raise ConnectorError("option 'sql' is evaluated by the broker; it cannot be used with 'path'")
            if plan.expression.strip() not in ("*", ""):
                tags = {t.strip() for t in plan.expression.split("||") if t.strip()}
            batches = read_from_store(partition, plan.o.get("fileAccessLog"), tags)
        elif isinstance(partition, QueueRange):
            batches = read_from_broker(partition, plan.group, plan.expr_type, plan.expression)
        else:                          # Spark's placeholder partition when partitions() found nothing to read
            return
        yield from _projected(batches, self.projection)


class PruningBatchReader(BatchReader):
    """A store-directory read with ``filterPushdown=true``: Spark hands over the query's filters on topic,
    partition, offset and timestamp, which prune files (Spark insists on
    ``spark.sql.python.filterPushdown.enabled=true`` for any reader that takes filters)."""

    def pushFilters(self, filters: list[Filter]) -> Iterator[Filter]:
        yield from self._push(filters)


class StreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Offsets are {topic: {broker: {queueId: next offset}}}; each micro-batch reads [start, end)."""

    def __init__(self, options: Mapping[str, str], schema: Optional[StructType] = None) -> None:
        self.plan = _Plan(options)
        self.projection: Optional[Projection] = projection(schema)
        o = self.plan.o
        if self.plan.path:
            raise ConnectorError("option 'path' is for batch reads; streams read from the broker")
        self.max_per_trigger = o.int("maxOffsetsPerTrigger")
        self.commit_offsets = o.bool("commitOffsets", False)
        if self.commit_offsets and not o.get("group"):
            raise ConnectorError("option 'commitOffsets' needs the option 'group' (the consumer group to commit)")
        self.cap: Optional[QueueOffsets] = None
        self._cluster: Optional[Cluster] = None
        self._topics: Optional[list[str]] = None
        self._initial: Optional[QueueOffsets] = None  # a fresh query's initialOffset (nothing read yet)
        self._committed: dict[tuple[str, str, int], int] = {}     # what the broker already has, per queue
        self._group: Optional[GroupRegistration] = None
        self._broker_addrs: set[str] = set()

    def _c(self) -> Cluster:
        if self._cluster is None:
            self._cluster = self.plan.cluster()
        return self._cluster

    def _refs(self) -> tuple[list[QueueRef], dict[str, str]]:
        c = self._c()
        if self._topics is None:
            self._topics = c.resolve_topics(self.plan.o.get("topic"), self.plan.o.get("topicPattern"))
        refs, addrs = c.queues(self._topics)
        if self.commit_offsets:
            self._broker_addrs = set(addrs.values())
            if self._group is None:              # the group shows in mqadmin from the query's start
                self._group = GroupRegistration(self.plan.group, self._topics, self.plan.expr_type,
                                                self.plan.expression, lambda: list(self._broker_addrs)).start()
        return refs, addrs

    def _latest_all(self) -> QueueOffsets:
        refs, addrs = self._refs()
        out: QueueOffsets = {}
        for ref in refs:
            out.setdefault(ref.topic, {}).setdefault(ref.broker, {})[str(ref.queue_id)] = \
                self._c().max_offset(addrs[ref.broker], ref)
        return out

    def initialOffset(self) -> QueueOffsets:
        spec = self.plan.o.offsets("startingOffsets", "latest")
        refs, addrs = self._refs()
        ts = self.plan.o.int("startingTimestamp")
        out: QueueOffsets = {}
        for ref in refs:
            off = first_offset_at(self._c(), addrs[ref.broker], ref, ts, self.plan.group) if ts is not None else \
                self.plan.resolve(spec, self._c(), addrs, ref, LATEST)
            out.setdefault(ref.topic, {}).setdefault(ref.broker, {})[str(ref.queue_id)] = off
        self._initial = out
        return out

    def prepareForTriggerAvailableNow(self) -> None:
        self.cap = self._latest_all()

    def latestOffset(self, start: Optional[QueueOffsets] = None, limit: Optional[ReadLimit] = None) -> QueueOffsets:
        if start is not None and start != self._initial:
            # Spark plans the next batch only once the previous one is done, so ``start`` (that batch's
            # end) is consumed: committing it here commits an AvailableNow run's last batch before the
            # query stops (Spark's commit() of a batch comes only when the batch after it is planned)
            self._commit(start)
        latest = self.cap if self.cap is not None else self._latest_all()
        if start is None or not self.max_per_trigger:
            return latest
        # maxOffsetsPerTrigger: split the budget over the queues in proportion to their backlog
        backlog: dict[tuple[str, str, str], tuple[int, int]] = {}
        for t, brokers in latest.items():
            for b, queues in brokers.items():
                for q, mx in queues.items():
                    s = start.get(t, {}).get(b, {}).get(q, 0)
                    backlog[(t, b, q)] = (s, max(0, mx - s))
        total = sum(n for _s, n in backlog.values())
        out: QueueOffsets = {}
        budget = self.max_per_trigger
        for (t, b, q), (s, n) in sorted(backlog.items()):
            take = n if total <= budget else min(n, max(1 if n else 0, budget * n // total))
            out.setdefault(t, {}).setdefault(b, {})[q] = s + take
        return out

    def partitions(self, start: QueueOffsets, end: QueueOffsets) -> list[QueueRange]:
        refs, addrs = self._refs()
        parts: list[QueueRange] = []
        for ref in refs:
            q = str(ref.queue_id)
            s = start.get(ref.topic, {}).get(ref.broker, {}).get(q, 0)
            e = end.get(ref.topic, {}).get(ref.broker, {}).get(q, s)
            if e <= s:
                continue
            mn = self._c().min_offset(addrs[ref.broker], ref)
            if s < mn:
                data_lost(ref, s, mn, self.plan.fail_on_data_loss)
                s = mn
            for a, b in _split(s, e, self.plan.max_per_partition):
                parts.append(QueueRange(ref.topic, ref.broker, addrs[ref.broker], ref.queue_id, a, b,
                                        self.plan.fail_on_data_loss))
        return parts

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        freeze_worker_heap()
        if isinstance(partition, QueueRange):
            yield from _projected(read_from_broker(partition, self.plan.group, self.plan.expr_type,
                                                   self.plan.expression), self.projection)

    def commit(self, end: QueueOffsets) -> None:
        self._commit(end)

    def _commit(self, offsets: QueueOffsets) -> None:
        """UPDATE_CONSUMER_OFFSET of the group for every queue whose offset the broker does not have yet."""
        if not self.commit_offsets:
            return
        refs, addrs = self._refs()
        for ref in refs:
            off = offsets.get(ref.topic, {}).get(ref.broker, {}).get(str(ref.queue_id))
            key = (ref.topic, ref.broker, ref.queue_id)
            if off is not None and self._committed.get(key) != off:
                self._c().commit(addrs[ref.broker], self.plan.group, ref, off)
                self._committed[key] = off

    def stop(self) -> None:
        if self._group is not None:
            self._group.close()
            self._group = None
        if self._cluster is not None:
            self._cluster.clients.close()


class RocketMQDataSource(DataSource):
    """``spark.read/readStream/write/writeStream.format("rocketmq")``."""

    @classmethod
    def name(cls) -> str:
        return "rocketmq"

    def schema(self) -> str:
        return DDL

    def reader(self, schema: StructType) -> BatchReader:
        freeze_worker_heap()                 # the planning worker: Spark collects its garbage after each call
        o = Options(self.options)
        if o.get("path") and o.bool("filterPushdown", False):
            return PruningBatchReader(self.options, schema)
        return BatchReader(self.options, schema)

    def streamReader(self, schema: StructType) -> StreamReader:
        freeze_worker_heap()
        return StreamReader(self.options, schema)

    def writer(self, schema: StructType, overwrite: bool) -> BatchWriter:
        # Spark itself refuses its default save mode (ErrorIfExists) for a Python data source, naming Append
        # or Overwrite; a topic cannot be overwritten, so Overwrite is refused here, naming the one that works.
        if overwrite:
            raise ConnectorError('the rocketmq sink only appends messages to a topic (a topic cannot be '
                                 'overwritten): use .mode("append")')
        return BatchWriter(self.options)

    def streamWriter(self, schema: StructType, overwrite: bool) -> StreamWriter:
        return StreamWriter(self.options)

