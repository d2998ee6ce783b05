"""The 4.x DefaultHA wire format (Java ``HAService.HAClient`` / ``HAConnection``), big-endian.

- slave → master: a **report**, exactly 8 bytes, the slave's CommitLog max offset (its first report is where the
  transfer starts, the later ones acknowledge); the master keeps the last whole unit of what it read;
- master → slave: a **transfer**: 12-byte header (8-byte physical offset, 4-byte size) and ``size`` raw CommitLog
  bytes; size 0 is a heartbeat. A transfer never crosses a CommitLog file.

Nothing else is on the wire: no handshake, no version, no epoch. Brokers in controller mode speak the 5.x
AutoSwitch protocol instead (:mod:`rmqd.store.ha.autoswitch_protocol`).
"""
from __future__ import annotations

import struct

REPORT = struct.Struct(">q")
TRANSFER_HEADER = struct.Struct(">qi")
REPORT_SIZE = REPORT.size                  # 8
HEADER_SIZE = TRANSFER_HEADER.size         # 12

#: Java's HAClient reads into a 4 MiB buffer, so a Java slave cannot take a transfer body larger than this.
JAVA_CLIENT_BUFFER = 4 * 1024 * 1024


class HAProtocolError(Exception):
    """The peer broke the protocol; the message names the cause (logged, then the connection is closed)."""


def pack_report(offset: int) -> bytes:
    return REPORT.pack(offset)


def pack_header(offset: int, size: int) -> bytes:
    return TRANSFER_HEADER.pack(offset, size)


def last_report(buf: bytes | bytearray | memoryview, length: int) -> int:
    """The offset of the last whole 8-byte report in ``buf[:length]`` (Java keeps only the newest)."""
    end = length - length % REPORT_SIZE
    offset: int = REPORT.unpack_from(buf, end - REPORT_SIZE)[0]
    return offset
