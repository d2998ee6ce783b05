"""Typed interface of message_codec.pyx (the stored-record codec); see the .pyx for the behaviour."""
from typing import Optional

from _typeshed import ReadableBuffer, WriteableBuffer

MESSAGE_MAGIC_CODE: int
BLANK_MAGIC_CODE: int

# (total, magic, body_crc, queue_id, flag, queue_offset, phys_offset, sys_flag, born_ts, born_host_bytes,
#  store_ts, store_host_bytes, reconsume_times, prepared_tx_offset, body_start, body_len, topic_bytes,
#  props_bytes)
_DecodedRecord = tuple[int, int, int, int, int, int, int, int, int, bytes, int, bytes, int, int, int, int,
                      bytes, bytes]


def body_crc(body: ReadableBuffer) -> int: ...
def record_size(body_len: int, topic_len: int, props_len: int, born_host_len: int, store_host_len: int) -> int: ...
def encode_record_into(dest: WriteableBuffer, pos: int, total: int, topic: ReadableBuffer, queue_id: int, flag: int,
                       queue_offset: int, phys_offset: int, sys_flag: int, born_ts: int,
                       born_host: ReadableBuffer, store_ts: int, store_host: ReadableBuffer,
                       reconsume_times: int, prepared_tx_offset: int, body: ReadableBuffer,
                       props: ReadableBuffer) -> int: ...
def decode_record(buf: ReadableBuffer, pos: int = 0) -> _DecodedRecord: ...
def java_string_hash(s: str) -> int: ...
def decode_properties(s: Optional[str]) -> dict[str, str]: ...
def find_property(s: str, name: str) -> Optional[str]: ...
