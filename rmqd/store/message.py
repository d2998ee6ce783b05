"""Stored-message model, codec facade and message-id helpers (protocol README section 4).

The hot encode/decode/CRC/hash paths live in :mod:`rmqd.cython_ext.message_codec`.
"""
from __future__ import annotations

import socket
import struct
from dataclasses import dataclass, field
from typing import Mapping, Optional, Union

from rmqd.common.constants import (BLANK_MAGIC_CODE, BORNHOST_V6_FLAG, NAME_VALUE_SEPARATOR,  # noqa: F401 (re-exported)
                            PROPERTY_SEPARATOR, TRANSACTION_PREPARED_TYPE, TRANSACTION_ROLLBACK_TYPE)
from rmqd.common.constants import MESSAGE_MAGIC_CODE as MAGIC_CODE  # noqa: F401
from rmqd.common.constants import STOREHOST_V6_FLAG as STOREHOSTADDRESS_V6_FLAG  # noqa: F401
from rmqd.cython_ext import message_codec as _codec
from rmqd.cython_ext import store_put as _store_put

# sysFlag bits (section 4.2) not in rmqd.common.constants
COMPRESSED_FLAG = 0x1
MULTI_TAGS_FLAG = 0x2
TRANSACTION_NOT_TYPE = 0x0
TRANSACTION_COMMIT_TYPE = 0x8

PROPERTY_KEYS = "KEYS"
PROPERTY_TAGS = "TAGS"
PROPERTY_UNIQ_KEY = "UNIQ_KEY"

java_string_hash = _codec.java_string_hash
decode_properties = _codec.decode_properties
find_property = _codec.find_property
body_crc = _codec.body_crc
record_size = _codec.record_size

Host = tuple[str, int]  # (ip, port)


def transaction_type(sys_flag: int) -> int:
    """Transaction type bits (0x0/0x4/0x8/0xC) of a sysFlag."""
    return sys_flag & 0xC


def encode_properties(props: Mapping[str, Optional[str]]) -> str:
    """Encode a properties dict as ``k\\x01v\\x02k\\x01v`` (None values skipped, no trailing 0x02)."""
    return PROPERTY_SEPARATOR.join(
        f"{k}{NAME_VALUE_SEPARATOR}{v}" for k, v in props.items() if v is not None
    )


def tags_code_of(properties: str) -> int:
    """ConsumeQueue tagsCode for an encoded properties string: hash of TAGS, 0 if absent."""
    tags = find_property(properties, PROPERTY_TAGS) if properties else None
    return java_string_hash(tags) if tags else 0


def pack_host(host: Host) -> bytes:
    """Pack ``(ip, port)`` as 4+4 (IPv4) or 16+4 (IPv6) big-endian bytes."""
    ip, port = host
    if ":" in ip:
        return socket.inet_pton(socket.AF_INET6, ip) + struct.pack(">i", port)
    return socket.inet_aton(ip) + struct.pack(">i", port)


def unpack_host(raw: bytes) -> Host:
    """Inverse of :func:`pack_host`."""
    if len(raw) == 20:
        return socket.inet_ntop(socket.AF_INET6, raw[:16]), struct.unpack(">i", raw[16:])[0]
    return socket.inet_ntoa(raw[:4]), struct.unpack(">i", raw[4:8])[0]


def is_ipv6(host: Host) -> bool:
    return ":" in host[0]


def offset_msg_id(store_ip: str, store_port: int, phys_offset: int) -> str:
    """Broker-side msgId: uppercase hex of storeIP + port(int32) + physical offset(int64) (section 4.6)."""
    return (pack_host((store_ip, store_port)) + struct.pack(">q", phys_offset)).hex().upper()


def decode_offset_msg_id(msg_id: str) -> tuple[str, int, int]:
    """``(ip, port, phys_offset)`` from an offset msgId (32 hex chars = IPv4, 56 = IPv6)."""
    raw = bytes.fromhex(msg_id)
    if len(raw) == 16:
        ip, port = unpack_host(raw[:8])
    elif len(raw) == 28:
        ip, port = unpack_host(raw[:20])
    else:
        raise ValueError(f"bad offset msgId length {len(msg_id)}: {msg_id!r}")
    return ip, port, struct.unpack(">q", raw[-8:])[0]


# A message handed to MessageStore.put_message(s): a C class so the put engine reads its fields
# without attribute lookups.  Fields (positional order): topic, queue_id, body, properties="",
# flag=0, sys_flag=0, born_timestamp=0, born_host, store_host, reconsume_times=0,
# prepared_transaction_offset=0, tags_code=0, keys=None, uniq_key=None; ``MessageToStore.create``.
MessageToStore = _store_put.MessageToStore


@dataclass(slots=True)
class StoredMessage:
    """A decoded commit-log record (every field of section 4.1)."""

    store_size: int
    magic_code: int
    body_crc: int
    queue_id: int
    flag: int
    queue_offset: int
    commit_log_offset: int
    sys_flag: int
    born_timestamp: int
    born_host: Host
    store_timestamp: int
    store_host: Host
    reconsume_times: int
    prepared_transaction_offset: int
    body: bytes
    topic: str
    properties_str: str
    properties: dict[str, str] = field(default_factory=dict)

    @property
    def msg_id(self) -> str:
        """Offset msgId of this record."""
        return offset_msg_id(self.store_host[0], self.store_host[1], self.commit_log_offset)

    @property
    def tags(self) -> Optional[str]:
        return self.properties.get(PROPERTY_TAGS)

    @property
    def keys(self) -> Optional[str]:
        return self.properties.get(PROPERTY_KEYS)

    @property
    def uniq_key(self) -> Optional[str]:
        return self.properties.get(PROPERTY_UNIQ_KEY)


def decode_message(buf: Union[bytes, bytearray, memoryview], pos: int = 0) -> StoredMessage:
    """Decode one stored record starting at ``buf[pos]``; raises ValueError if malformed."""
    f = _codec.decode_record(buf, pos)
    mv = memoryview(buf)
    body = bytes(mv[f[14]:f[14] + f[15]])
    props_str = f[17].decode("utf-8", errors="replace")
    return StoredMessage(
        store_size=f[0], magic_code=f[1], body_crc=f[2], queue_id=f[3], flag=f[4],
        queue_offset=f[5], commit_log_offset=f[6], sys_flag=f[7], born_timestamp=f[8],
        born_host=unpack_host(f[9]), store_timestamp=f[10], store_host=unpack_host(f[11]),
        reconsume_times=f[12], prepared_transaction_offset=f[13], body=body,
        topic=f[16].decode("utf-8", errors="replace"), properties_str=props_str,
        properties=decode_properties(props_str),
    )


def decode_messages(buf: Union[bytes, bytearray, memoryview]) -> list[StoredMessage]:
    """Decode back-to-back records (a PULL/QUERY body) until the buffer is exhausted."""
    out = []
    pos = 0
    n = len(buf)
    while pos < n:
        m = decode_message(buf, pos)
        out.append(m)
        pos += m.store_size
    return out


def record_properties(record: Union[bytes, memoryview]) -> str:
    """Properties string of a whole stored record (reads only the tail of the record)."""
    mv = memoryview(record)
    f = _codec.decode_record(mv, 0)
    return f[17].decode("utf-8", errors="replace")


def record_carries_key(record: Union[bytes, memoryview], topic: str, key: str) -> bool:
    """True when the stored ``record`` belongs to ``topic`` and carries ``key`` (a KEYS token or
    the UNIQ_KEY): the check behind every index hit (an index only knows hashes). Raises
    ValueError for a malformed record."""
    f = _codec.decode_record(record, 0)
    if f[16].decode("utf-8", errors="replace") != topic:
        return False
    props = f[17].decode("utf-8", errors="replace")
    if find_property(props, PROPERTY_UNIQ_KEY) == key:
        return True
    keys = find_property(props, PROPERTY_KEYS)
    return key in keys.split(" ") if keys else False
