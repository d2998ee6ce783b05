"""Typed interface of ha_verify.pyx (checks of replicated CommitLog bytes); see the .pyx for the behaviour."""
from _typeshed import ReadableBuffer

VERIFY_LIMIT: int
VERIFY_BLANK: int
VERIFY_PARTIAL: int
VERIFY_BAD: int
AT_BOUNDARY: int
IN_PADDING: int
IN_RECORD: int
UNREADABLE: int


def verify_range(buf: ReadableBuffer, start: int, limit: int, check_crc: bool,
                 max_record_size: int) -> tuple[int, int, int, int]:
    """``(end, code, records, record_bytes)``."""
def locate(buf: ReadableBuffer, pos: int, limit: int, max_record_size: int) -> int:
    """AT_BOUNDARY, IN_PADDING, IN_RECORD or UNREADABLE."""
