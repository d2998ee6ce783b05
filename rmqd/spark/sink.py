"""``df.write`` / ``writeStream`` ``.format("rocketmq")``: rows become messages, sent in SEND_BATCH_MESSAGE
requests per queue.

Delivery is at-least-once, row by row in the task's order:

- a task sends its rows in batches of at most ``batchSize`` rows and ``maxMessageSize`` bytes per queue; the
  broker stores a batch whole or not at all;
- a bad row (null value, body over ``maxMessageSize``, no topic, a header with a control character) fails the
  task naming its partition and row: every row before it is sent first (the error says how many), the bad
  row and every row after it are not;
- a failed task sends nothing more; Spark's retry of it sends the task's rows again from the first, so
  messages acknowledged before the failure may arrive twice.
"""
from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterator, Mapping, Optional, Sequence, TypedDict, Union

import pyarrow as pa  # type: ignore[import-untyped, unused-ignore]  # pyarrow ships no type information
from pyspark.sql.datasource import DataSourceArrowWriter, DataSourceStreamWriter, WriterCommitMessage

from rmqd.filter.tags import java_string_hash
from rmqd.grpc.json_fields import array, integer, obj
from rmqd.remoting import fastjson
from rmqd.remoting.codes import RequestCode
from rmqd.spark.options import DEFAULT_PRODUCER_GROUP, Options
from rmqd.spark.remote import Cluster, ConnectorError, send_batch

if TYPE_CHECKING:
    from pyspark.sql.types import Row

log = logging.getLogger(__name__)

BATCH_OVERHEAD = 22                  # per message in a SEND_BATCH body: sizes, magic, CRC, flag

#: one queue's pending batch: (topic, broker name, broker address, queue id)
QueueKey = tuple[str, str, str, int]


class HeaderStruct(TypedDict):
    """A ``headers`` element as Arrow gives it (struct<key:string, value:binary>)."""
    key: str
    value: Union[str, bytes]


#: a ``headers`` element: the struct, or a (key, value) pair
Header = Union[HeaderStruct, tuple[str, Union[str, bytes]]]


class BadRow(ConnectorError):
    """A row that cannot become a message."""


@dataclass
class SentSummary(WriterCommitMessage):
    rows: int


def _partition_id() -> int:
    from pyspark import TaskContext
    ctx = TaskContext.get()
    return ctx.partitionId() if ctx is not None else -1


class _Sender:
    """Groups rows into per-queue batches and sends them (SEND_BATCH_MESSAGE), at least once."""

    def __init__(self, options: Mapping[str, str]) -> None:
        o = Options(options)
        self.cluster = Cluster(o.get("nameServer") or "")
        self.topic_option = o.get("topic")
        self.group = o.get("producerGroup", DEFAULT_PRODUCER_GROUP)
        self.max_size = o.int("maxMessageSize", 4 * 1024 * 1024)
        self.batch_rows = o.int("batchSize", 256)
        self.routes: dict[str, list[tuple[str, str, int]]] = {}
        self.pending: dict[QueueKey, list[tuple[bytes, str]]] = {}
        self.pending_bytes: dict[QueueKey, int] = {}
        self.rr = 0
        self.sent = 0                    # rows the brokers acknowledged

    def _queues(self, topic: str) -> list[tuple[str, str, int]]:
        queues = self.routes.get(topic)
        if queues is None:
            masters, _ = self.cluster.route(topic)
            resp = self.cluster._namesrv(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic})
            data = obj(fastjson.loads_lenient(resp.body_bytes()))
            queues = []
            for qd in array(data.get("queueDatas")):
                queue = obj(qd)
                name = str(queue["brokerName"])
                if name in masters and integer(queue.get("perm", 6)) & 2:
                    queues.extend((name, masters[name], q) for q in range(integer(queue["writeQueueNums"])))
            if not queues:
                raise ConnectorError(f"option 'topic': {topic!r} has no writable queue")
            self.routes[topic] = queues
        return queues

    def message(self, value: Optional[bytes], key: Optional[str], tags: Optional[str],
                topic: Optional[str], headers: Optional[Sequence[Header]]) -> tuple[str, bytes, str]:
        """(topic, body, properties) of one row; raises BadRow."""
        topic = self.topic_option or topic
        if not topic:
            raise BadRow("no topic (set the option 'topic' or a 'topic' column)")
        if value is None:
            raise BadRow("'value' is null (a message needs a body)")
        if len(value) > self.max_size:
            raise BadRow(f"'value' is {len(value)} bytes, over maxMessageSize {self.max_size}")
        props: list[str] = []
        if key:
            props.append(f"KEYS\x01{key}")
        if tags:
            props.append(f"TAGS\x01{tags}")
        props.append(f"UNIQ_KEY\x01{uuid.uuid4().hex.upper()}")
        props.append("WAIT\x01true")
        for h in headers or ():
            k, raw = (h["key"], h["value"]) if isinstance(h, dict) else (h[0], h[1])
            v = raw.decode("utf-8", "replace") if isinstance(raw, (bytes, bytearray)) else str(raw)
            if any(c in k + v for c in "\x01\x02"):
                raise BadRow(f"header {k!r} contains a control character")
            props.append(f"{k}\x01{v}")
        return topic, bytes(value), "\x02".join(props)

    def add(self, topic: str, body: bytes, props: str, key: Optional[str]) -> None:
        queues = self._queues(topic)
        if key:                                  # the same key always goes to the same queue
            target = queues[abs(java_string_hash(key)) % len(queues)]
        else:
            target = queues[self.rr % len(queues)]
            self.rr += 1
        k: QueueKey = (topic,) + target
        size = BATCH_OVERHEAD + len(body) + len(props.encode("utf-8"))
        if k in self.pending and self.pending_bytes[k] + size > self.max_size:
            self._flush_one(k)                   # a SEND_BATCH body stays within maxMessageSize
        self.pending.setdefault(k, []).append((body, props))
        self.pending_bytes[k] = self.pending_bytes.get(k, 0) + size
        if len(self.pending[k]) >= self.batch_rows:
            self._flush_one(k)

    def _flush_one(self, k: QueueKey) -> None:
        batch = self.pending.pop(k, None)
        self.pending_bytes.pop(k, None)
        if batch:
            topic, _broker, addr, qid = k
            send_batch(self.cluster.clients, addr, self.group, topic, qid, batch)
            self.sent += len(batch)

    def flush(self) -> None:
        for k in list(self.pending):
            self._flush_one(k)

    def close(self) -> None:
        self.cluster.clients.close()


def _write_batches(options: Mapping[str, str], batches: Iterator[pa.RecordBatch]) -> SentSummary:
    sender = _Sender(options)
    row_no = 0
    try:
        for rb in batches:
            cols = {name: rb.column(i).to_pylist() for i, name in enumerate(rb.schema.names)}
            if "value" not in cols:
                raise ConnectorError("the DataFrame needs a 'value' column (binary or string)")
            n = rb.num_rows
            none = [None] * n
            for i in range(n):
                v = cols["value"][i]
                if isinstance(v, str):
                    v = v.encode("utf-8")
                k = cols.get("key", none)[i]
                if isinstance(k, (bytes, bytearray)):
                    k = k.decode("utf-8")
                try:
                    topic, body, props = sender.message(v, k, cols.get("tags", none)[i],
                                                        cols.get("topic", none)[i], cols.get("headers", none)[i])
                except BadRow as exc:
                    sender.flush()               # every row before the bad one reaches the broker
                    raise BadRow(f"partition {_partition_id()}, row {row_no}: {exc}; the {sender.sent} rows of "
                                 "this task before it were sent, it and the rows after it were not") from None
                sender.add(topic, body, props, k)
                row_no += 1
        sender.flush()
        return SentSummary(sender.sent)
    finally:
        sender.close()


class BatchWriter(DataSourceArrowWriter):
    def __init__(self, options: Mapping[str, str]) -> None:
        self.options = options

    def write(self, iterator: Iterator[pa.RecordBatch]) -> SentSummary:
        return _write_batches(self.options, iterator)

    def commit(self, messages: list[Optional[WriterCommitMessage]]) -> None:
        log.info("rocketmq sink: %d rows sent", sum(m.rows for m in messages if isinstance(m, SentSummary)))

    def abort(self, messages: list[Optional[WriterCommitMessage]]) -> None:
        log.warning("rocketmq sink aborted; rows already sent stay (at-least-once)")


class StreamWriter(DataSourceStreamWriter):
    def __init__(self, options: Mapping[str, str]) -> None:
        self.options = options

    def write(self, iterator: Iterator[Row]) -> SentSummary:
        def batches() -> Iterator[pa.RecordBatch]:
            rows = [row.asDict(recursive=True) for row in iterator]
            if rows:
                yield pa.RecordBatch.from_pylist(rows)
        return _write_batches(self.options, batches())

    def commit(self, messages: list[Optional[WriterCommitMessage]], batchId: int) -> None:
        log.info("rocketmq stream sink: batch %d committed", batchId)

    def abort(self, messages: list[Optional[WriterCommitMessage]], batchId: int) -> None:
        log.warning("rocketmq stream sink: batch %d aborted; rows already sent stay (at-least-once)", batchId)
