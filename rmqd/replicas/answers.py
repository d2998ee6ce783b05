"""Send answers that only a replica outcome decides: the SEND response frame the lane built, with another code.

The send lane builds a stored message's SUCCESS frame (and its FLUSH_DISK_TIMEOUT twin) before the SYNC_MASTER
wait; when the slave does not take it, the answer is the same frame with SLAVE_NOT_AVAILABLE (11) or
FLUSH_SLAVE_TIMEOUT (12): the message is stored and the client gets its msgId, as from the Java broker.
"""
from __future__ import annotations

from rmqd.remoting.command import encode_frame_bytes, decode_header
from rmqd.remoting.codes import ResponseCode
from rmqd.store.message_store import PutMessageStatus

_CODES = {PutMessageStatus.FLUSH_SLAVE_TIMEOUT: int(ResponseCode.FLUSH_SLAVE_TIMEOUT),
          PutMessageStatus.SLAVE_NOT_AVAILABLE: int(ResponseCode.SLAVE_NOT_AVAILABLE)}


def with_code(frame: bytes, code: int) -> bytes:
    """``frame`` (a whole response frame without body) re-encoded with response ``code``."""
    word = int.from_bytes(frame[4:8], "big")
    serialize_type, hlen = word >> 24, word & 0xFFFFFF
    cmd = decode_header(serialize_type, frame[8:8 + hlen])
    cmd.code = code
    cmd.serialize_type = serialize_type
    return encode_frame_bytes(cmd)


def answer_for(status: PutMessageStatus, ok_frame: bytes, flush_timeout_frame: bytes) -> bytes:
    """The frame a stored send is answered with once its flush and replica outcome is known."""
    if status is PutMessageStatus.PUT_OK:
        return ok_frame
    if status is PutMessageStatus.FLUSH_DISK_TIMEOUT:
        return flush_timeout_frame
    return with_code(ok_frame, _CODES[status])
