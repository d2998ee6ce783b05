"""Store checkpoint file (section 5.4): 4 KiB, Java fields at 0/8/16.

rmqd extension (ignored by Java): at 24/32/40 the commit-log offsets up to which the commit log,
the consume queues and the index files are known flushed; recovery uses these. At 48 the confirmOffset of a
controller-mode replica plus one (0: none recorded), so a restarted replica serves reads no further than it
did before its first transfer header (5.x keeps confirmPhyOffset in its checkpoint too).
"""
from __future__ import annotations

import os
import struct

_FMT = struct.Struct(">qqqqqq")
_CONFIRM = struct.Struct(">q")
_CONFIRM_AT = _FMT.size
SIZE = 4096


class StoreCheckpoint:
    def __init__(self, path: str):
        self.path = path
        self.physic_msg_timestamp = 0
        self.logics_msg_timestamp = 0
        self.index_msg_timestamp = 0
        self.physic_offset = 0
        self.logics_offset = 0
        self.index_offset = 0
        self.confirm_offset = -1                # -1: none recorded
        self.fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        data = os.pread(self.fd, _FMT.size, 0)
        if len(data) == _FMT.size:
            (self.physic_msg_timestamp, self.logics_msg_timestamp, self.index_msg_timestamp,
             self.physic_offset, self.logics_offset, self.index_offset) = _FMT.unpack(data)
        data = os.pread(self.fd, _CONFIRM.size, _CONFIRM_AT)
        if len(data) == _CONFIRM.size:
            self.confirm_offset = _CONFIRM.unpack(data)[0] - 1
        if os.fstat(self.fd).st_size != SIZE:
            os.ftruncate(self.fd, SIZE)

    def flush(self) -> None:
        os.pwrite(self.fd, _FMT.pack(self.physic_msg_timestamp, self.logics_msg_timestamp,
                                     self.index_msg_timestamp, self.physic_offset,
                                     self.logics_offset, self.index_offset)
                  + _CONFIRM.pack(self.confirm_offset + 1), 0)
        os.fsync(self.fd)

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
