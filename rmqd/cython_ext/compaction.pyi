"""Typed interface of compaction.pyx (the OffsetMap and the segment scans); see the .pyx for the behaviour."""
from typing import Optional

from _typeshed import ReadableBuffer

CQ_UNIT_SIZE: int
OFFSET_MAP_ENTRY_SIZE: int
BLANK_MAGIC: int


def record_info(rec: ReadableBuffer) -> tuple[Optional[bytes], int, int]:
    """``(key bytes or None, body length, store timestamp)``."""


class OffsetMap:
    """MD5(key) -> newest queue offset in one C buffer."""

    @property
    def slots(self) -> int: ...
    @property
    def capacity(self) -> int: ...
    @property
    def size(self) -> int: ...
    last_offset: int

    def __init__(self, memory_bytes: int) -> None: ...
    def put(self, digest: bytes, offset: int) -> bool: ...
    def get(self, digest: bytes) -> int: ...


def build_map(m: OffsetMap, log: ReadableBuffer, log_base: int, cq: ReadableBuffer,
              after_offset: int) -> tuple[int, bool]:
    """``(units_done, full)``."""
def rewrite(m: OffsetMap, log: ReadableBuffer, log_base: int, cq: ReadableBuffer, upto_offset: int,
            out_log: bytearray, out_cq: bytearray, out_base: int) -> int: ...
def copy_units(log: ReadableBuffer, log_base: int, cq: ReadableBuffer, keep: ReadableBuffer, out_log: bytearray,
               out_cq: bytearray, out_base: int) -> int: ...
def key_digests(log: ReadableBuffer, log_base: int,
                cq: ReadableBuffer) -> tuple[bytearray, bytearray, bytearray, bytearray]:
    """``(offsets, digests, body_lens, keyed)``."""
def put_all(m: OffsetMap, digests: ReadableBuffer, offsets: ReadableBuffer, keyed: ReadableBuffer) -> bool: ...
def survivors(m: OffsetMap, digests: ReadableBuffer, offsets: ReadableBuffer, body_lens: ReadableBuffer,
              keyed: ReadableBuffer) -> bytearray: ...
def pack_unit(phys: int, size: int, tags_code: int, store_ts: int, queue_offset: int) -> bytes: ...
def set_phys_offset(rec: bytearray, phys: int) -> None: ...
def scan_cq(cq: ReadableBuffer, base: int, log_len: int) -> tuple[int, int, int, bytes]:
    """``(good units, log bytes they cover, first store time or -1, their queue offsets as int64 bytes)``."""
def window_bounds(cq: ReadableBuffer, window: int) -> list[tuple[int, int, int, int]]:
    """``[(first unit, end unit, first phys, end phys), ...]``."""
