"""The 5.x AutoSwitch HA wire format (``AutoSwitchHAClient`` / ``AutoSwitchHAConnection``), big-endian, raw TCP.

Every message starts with the sender's connection state (``HAConnectionState`` ordinal, int32):

- slave -> master **handshake** (16 B): ``state=HANDSHAKE, isSyncFromLastFile:int16, isAsyncLearner:int16,
  slaveBrokerId:int64``;
- master -> slave **handshake reply** (20 B header + 12 B per epoch entry): ``state=HANDSHAKE, bodySize:int32,
  masterMaxPhyOffset:int64, masterLastEpoch:int32``, then ``epoch:int32, startOffset:int64`` per entry (the
  master sends at most :data:`MAX_HANDSHAKE_ENTRIES`);
- slave -> master **ack / heartbeat** (12 B): ``state=TRANSFER, slaveMaxPhyOffset:int64``; the first one after the
  handshake says where the transfer starts;
- master -> slave **transfer** (36 B header + body): ``state=TRANSFER, bodySize:int32, offset:int64, epoch:int32,
  epochStartOffset:int64, confirmOffset:int64``, then ``bodySize`` raw CommitLog bytes (0: a heartbeat). A frame
  never crosses an epoch boundary (nor, here, a CommitLog file).

The 4.x DefaultHA format (no state field, 8-byte reports, 12-byte headers) is :mod:`rmqd.store.ha.protocol`.
"""
from __future__ import annotations

import enum
import struct
from dataclasses import dataclass

from rmqd.store.ha.protocol import HAProtocolError


class HAConnectionState(enum.IntEnum):
    """Java's ``HAConnectionState``; the ordinal is what goes on the wire."""

    READY = 0
    HANDSHAKE = 1
    TRANSFER = 2
    SUSPEND = 3
    SHUTDOWN = 4


SLAVE_HANDSHAKE = struct.Struct(">ihhq")          # 16
MASTER_HANDSHAKE = struct.Struct(">iiqi")         # 20
EPOCH_ENTRY = struct.Struct(">iq")                # 12
SLAVE_ACK = struct.Struct(">iq")                  # 12
TRANSFER_HEADER = struct.Struct(">iiqiqq")        # 36
MAX_HANDSHAKE_ENTRIES = 1000                      # the master's handshake buffer holds 1000 entries

_HANDSHAKE = int(HAConnectionState.HANDSHAKE)
_TRANSFER = int(HAConnectionState.TRANSFER)


@dataclass(frozen=True)
class SlaveHandshake:
    sync_from_last_file: bool
    async_learner: bool
    broker_id: int


@dataclass(frozen=True)
class MasterHandshake:
    body_size: int
    max_offset: int
    last_epoch: int


@dataclass(frozen=True)
class TransferHeader:
    body_size: int
    offset: int
    epoch: int
    epoch_start: int
    confirm_offset: int


def _state(got: int, want: int, what: str) -> None:
    if got != want:
        name = HAConnectionState(got).name if 0 <= got <= 4 else str(got)
        raise HAProtocolError(f"{what} with state {name}, expected {HAConnectionState(want).name}")


def pack_slave_handshake(sync_from_last_file: bool, async_learner: bool, broker_id: int) -> bytes:
    return SLAVE_HANDSHAKE.pack(_HANDSHAKE, 1 if sync_from_last_file else 0, 1 if async_learner else 0, broker_id)


def unpack_slave_handshake(buf: bytes | memoryview, pos: int = 0) -> SlaveHandshake:
    state, from_last, learner, broker_id = SLAVE_HANDSHAKE.unpack_from(buf, pos)
    _state(state, _HANDSHAKE, "slave handshake")
    return SlaveHandshake(from_last == 1, learner == 1, broker_id)


def pack_master_handshake(max_offset: int, last_epoch: int, entries: list[tuple[int, int]]) -> bytes:
    """The reply; ``entries`` are ``(epoch, startOffset)``, oldest first (only the newest 1000 are sent)."""
    entries = entries[-MAX_HANDSHAKE_ENTRIES:]
    out = [MASTER_HANDSHAKE.pack(_HANDSHAKE, EPOCH_ENTRY.size * len(entries), max_offset, last_epoch)]
    out.extend(EPOCH_ENTRY.pack(e, s) for e, s in entries)
    return b"".join(out)


def unpack_master_handshake(buf: bytes | memoryview, pos: int = 0) -> MasterHandshake:
    state, size, max_offset, last_epoch = MASTER_HANDSHAKE.unpack_from(buf, pos)
    _state(state, _HANDSHAKE, "master handshake reply")
    if size < 0 or size % EPOCH_ENTRY.size or size > EPOCH_ENTRY.size * MAX_HANDSHAKE_ENTRIES:
        raise HAProtocolError(f"master handshake reply announces {size} bytes of epoch entries")
    return MasterHandshake(size, max_offset, last_epoch)


def unpack_epoch_entries(buf: bytes | memoryview, pos: int, size: int) -> list[tuple[int, int]]:
    return [EPOCH_ENTRY.unpack_from(buf, pos + i) for i in range(0, size, EPOCH_ENTRY.size)]


def pack_ack(offset: int) -> bytes:
    return SLAVE_ACK.pack(_TRANSFER, offset)


def unpack_ack(buf: bytes | bytearray | memoryview, pos: int = 0) -> int:
    state: int
    offset: int
    state, offset = SLAVE_ACK.unpack_from(buf, pos)
    _state(state, _TRANSFER, "slave ack")
    return offset


def pack_transfer_header(body_size: int, offset: int, epoch: int, epoch_start: int, confirm_offset: int) -> bytes:
    return TRANSFER_HEADER.pack(_TRANSFER, body_size, offset, epoch, epoch_start, confirm_offset)


def unpack_transfer_header(buf: bytes | memoryview, pos: int = 0) -> TransferHeader:
    state, size, offset, epoch, start, confirm = TRANSFER_HEADER.unpack_from(buf, pos)
    _state(state, _TRANSFER, "master transfer")
    return TransferHeader(size, offset, epoch, start, confirm)
