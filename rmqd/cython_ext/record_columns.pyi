"""Typed interface of record_columns.pyx (message records -> Arrow-ready column buffers, the Spark connector's
decoder); see the .pyx for the behaviour and the buffers' layout."""
from typing import TypedDict

from _typeshed import ReadableBuffer

# a binary/string column: (rows, nulls, validity bitmap, int32 offsets, data)
_VarColumn = tuple[int, int, memoryview, memoryview, memoryview]


class _ColumnBuffers(TypedDict):
    """``Columns.result()``: the variable-width columns as _VarColumn, the numbers as little-endian buffers."""
    rows: int
    key: _VarColumn
    value: _VarColumn
    topic: _VarColumn
    tags: _VarColumn
    msgId: _VarColumn
    header_key: _VarColumn
    header_value: _VarColumn
    header_offsets: memoryview
    partition: memoryview
    offset: memoryview
    timestamp: memoryview
    bornTimestamp: memoryview
    commitLogOffset: memoryview
    reconsumeTimes: memoryview
    flag: memoryview
    sysFlag: memoryview


SYSTEM_PROPERTIES: frozenset[str]


class Columns:
    @property
    def rows(self) -> int: ...
    @property
    def record_bytes(self) -> int: ...
    def __init__(self, lo: int = -1, hi: int = -1, data_cap: int = ..., rows_cap: int = 1024) -> None: ...
    def result(self) -> _ColumnBuffers: ...


def decode(buf: ReadableBuffer, lo: int = -1, hi: int = -1, max_rows: int = -1) -> tuple[_ColumnBuffers, int]:
    """``(columns, bytes consumed)``."""
def decode_units(cq: ReadableBuffer, pos: int, stop: int, cl_base: int, cl: ReadableBuffer, cols: Columns,
                 max_bytes: int) -> tuple[int, int, int]:
    """``(pos, why, damaged)``."""
