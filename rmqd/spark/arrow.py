"""The connector's row layout (Kafka's columns first) and Arrow record batches from decoded buffers."""
from __future__ import annotations

import zlib
from typing import TYPE_CHECKING, Optional

import pyarrow as pa  # type: ignore[import-untyped, unused-ignore]  # pyarrow ships no type information

from rmqd.cython_ext import record_columns as _rc
from rmqd.spark.errors import ConnectorError

if TYPE_CHECKING:
    from _typeshed import ReadableBuffer
    from pyspark.sql.types import StructType

    from rmqd.cython_ext.record_columns import _ColumnBuffers, _VarColumn

COMPRESSED_FLAG = 0x1              # sysFlag bit: the body is zlib-compressed
TIMESTAMP_TYPE_LOG_APPEND = 1     # Kafka's LogAppendTime: ``timestamp`` is the broker's store time

HEADER = pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())])
HEADERS = pa.list_(pa.field("element", HEADER))
TS = pa.timestamp("us", tz="UTC")          # Spark's TimestampType in Arrow

SCHEMA = pa.schema([
    pa.field("key", pa.binary()),
    pa.field("value", pa.binary()),
    pa.field("topic", pa.string()),
    pa.field("partition", pa.int32()),
    pa.field("offset", pa.int64()),
    pa.field("timestamp", TS),
    pa.field("timestampType", pa.int32()),
    pa.field("headers", HEADERS),
    pa.field("brokerName", pa.string()),
    pa.field("tags", pa.string()),
    pa.field("msgId", pa.string()),
    pa.field("bornTimestamp", TS),
    pa.field("commitLogOffset", pa.int64()),
    pa.field("reconsumeTimes", pa.int32()),
])

DDL = ("key binary, value binary, topic string, partition int, offset bigint, timestamp timestamp, "
       "timestampType int, headers array<struct<key:string,value:binary>>, brokerName string, tags string, "
       "msgId string, bornTimestamp timestamp, commitLogOffset bigint, reconsumeTimes int")


def _var(t: pa.DataType, col: _VarColumn) -> pa.Array:
    n, nulls, valid, offsets, data = col
    return pa.Array.from_buffers(t, n, [pa.py_buffer(valid) if nulls else None, pa.py_buffer(offsets),
                                        pa.py_buffer(data)], null_count=nulls)


def _fixed(t: pa.DataType, n: int, data: memoryview) -> pa.Array:
    return pa.Array.from_buffers(t, n, [None, pa.py_buffer(data)])


def decode_batch(buf: ReadableBuffer, broker_name: str, lo: int = -1, hi: int = -1,
                 max_rows: int = -1) -> tuple[pa.RecordBatch, int, int, memoryview]:
    """Records in ``buf`` with queue offset in [lo, hi) -> (RecordBatch, rows, bytes consumed, the rows'
    sysFlag int32 buffer)."""
    cols, used = _rc.decode(buf, lo, hi, max_rows)
    batch, sys_flags = columns_batch(cols, broker_name)
    return batch, cols["rows"], used, sys_flags


def columns_batch(cols: _ColumnBuffers, broker_name: str) -> tuple[pa.RecordBatch, memoryview]:
    """``record_columns.Columns.result()`` -> (RecordBatch, the rows' sysFlag int32 buffer), no copying."""
    n = cols["rows"]
    hk, hv = _var(pa.string(), cols["header_key"]), _var(pa.binary(), cols["header_value"])
    headers = pa.ListArray.from_arrays(_fixed(pa.int32(), n + 1, cols["header_offsets"]),
                                       pa.StructArray.from_arrays([hk, hv], fields=list(HEADER)), type=HEADERS)
    arrays = [
        _var(pa.binary(), cols["key"]),
        _var(pa.binary(), cols["value"]),
        _var(pa.string(), cols["topic"]),
        _fixed(pa.int32(), n, cols["partition"]),
        _fixed(pa.int64(), n, cols["offset"]),
        _fixed(pa.int64(), n, cols["timestamp"]).view(TS),
        pa.repeat(pa.scalar(TIMESTAMP_TYPE_LOG_APPEND, pa.int32()), n),
        headers,
        pa.repeat(pa.scalar(broker_name, pa.string()), n),
        _var(pa.string(), cols["tags"]),
        _var(pa.string(), cols["msgId"]),
        _fixed(pa.int64(), n, cols["bornTimestamp"]).view(TS),
        _fixed(pa.int64(), n, cols["commitLogOffset"]),
        _fixed(pa.int32(), n, cols["reconsumeTimes"]),
    ]
    return pa.RecordBatch.from_arrays(arrays, schema=SCHEMA), cols["sysFlag"]


def decompress_values(batch: pa.RecordBatch, sys_flags: memoryview) -> pa.RecordBatch:
    """Rows whose sysFlag says COMPRESSED carry a zlib body (producers compress big bodies): inflate."""
    import numpy as np
    if not (np.frombuffer(sys_flags, dtype=np.int32, count=batch.num_rows) & COMPRESSED_FLAG).any():
        return batch
    flags = memoryview(sys_flags).cast("i")
    values = batch.column("value").to_pylist()
    for i, f in enumerate(flags):
        if f & COMPRESSED_FLAG and values[i] is not None:
            values[i] = zlib.decompress(values[i])
    idx = batch.schema.get_field_index("value")
    return batch.set_column(idx, batch.schema.field(idx), pa.array(values, pa.binary()))


class Projection:
    """The columns a user-specified schema asks for: ``.schema("value binary, offset bigint")`` on the read.
    The Python data source API has no column pruning, so a narrower schema is how a job reads fewer columns:
    only those cross from the Python worker to the JVM (zero-copy selection of the decoded batch)."""

    def __init__(self, spark_schema: StructType) -> None:
        from pyspark.sql.pandas.types import to_arrow_schema
        self.schema = to_arrow_schema(spark_schema, timezone="UTC")
        for f in self.schema:
            if f.name not in SCHEMA.names:
                raise ConnectorError(f"schema: {f.name!r} is not a column of format(\"rocketmq\") (columns: "
                                 f"{', '.join(SCHEMA.names)})")
            if SCHEMA.field(f.name).type != f.type:
                raise ConnectorError(f"schema: column {f.name!r} is {SCHEMA.field(f.name).type}, not {f.type}")
        self.names = self.schema.names
        self.everything = self.schema.equals(SCHEMA)

    def apply(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        if self.everything:
            return batch
        return pa.RecordBatch.from_arrays([batch.column(n) for n in self.names], schema=self.schema)


def projection(spark_schema: Optional[StructType]) -> Optional[Projection]:
    """A Projection, or None when the schema is the connector's own (every column)."""
    if spark_schema is None:
        return None
    p = Projection(spark_schema)
    return None if p.everything else p
