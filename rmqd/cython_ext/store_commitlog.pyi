"""Typed interface of store_commitlog.pyx (CommitLog record walks); see the .pyx for the behaviour."""
from typing import Literal, Optional, overload

from _typeshed import ReadableBuffer, WriteableBuffer

SCAN_END: int
SCAN_BLANK: int
SCAN_CORRUPT: int
SCAN_LIMIT: int


def write_blank(dest: WriteableBuffer, pos: int, remaining: int) -> None: ...
def msync_range(buf: WriteableBuffer, start: int, end: int) -> None: ...
@overload
def scan_records(buf: ReadableBuffer, start: int, limit: int, check_crc: bool, max_record_size: int,
                 collect: Literal[False] = False) -> tuple[int, int, None]: ...
@overload
def scan_records(buf: ReadableBuffer, start: int, limit: int, check_crc: bool, max_record_size: int,
                 collect: Literal[True]) -> tuple[int, int, list[tuple[int, int]]]: ...
@overload
def scan_records(buf: ReadableBuffer, start: int, limit: int, check_crc: bool, max_record_size: int,
                 collect: bool) -> tuple[int, int, Optional[list[tuple[int, int]]]]: ...
def zero_tail(buf: WriteableBuffer, start: int, stop_after_zero_run: int) -> int: ...
def read_header(buf: ReadableBuffer, pos: int) -> tuple[int, int]:
    """``(total_size, magic)``, ``(0, 0)`` if out of range."""
def record_dispatch_fields(buf: ReadableBuffer, pos: int) -> tuple[int, int, int, int, int, int, bytes, bytes]:
    """``(total, queue_id, queue_offset, phys_offset, sys_flag, store_ts, topic_bytes, props_bytes)``."""
def copy_in(dest: WriteableBuffer, pos: int, data: ReadableBuffer) -> None: ...
def record_boundary(buf: ReadableBuffer, target: int, limit: int, max_record_size: int) -> int: ...
