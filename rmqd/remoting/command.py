"""RemotingCommand and the helpers processors use to build requests and responses.

The command type and the frame codec live in Cython (``rmqd.cython_ext.remoting_codec``); this
module is the thin Python facade the rest of rmqd imports.
"""
from __future__ import annotations

from typing import Mapping, Optional, Sequence, Union

from rmqd.cython_ext.remoting_codec import (  # noqa: F401  (re-exported)
    DEFAULT_MAX_FRAME_LENGTH,
    JSON,
    LANGUAGE_NAMES,
    ROCKETMQ,
    SERVER_VERSION,
    FrameError,
    FrameReader,
    RemotingCommand,
    decode_header,
    encode_frame,
    encode_frame_bytes,
    encode_header,
)
from rmqd.remoting.codes import ResponseCode

__all__ = [
    "DEFAULT_MAX_FRAME_LENGTH", "JSON", "LANGUAGE_NAMES", "ROCKETMQ", "SERVER_VERSION", "FrameError",
    "FrameReader", "RemotingCommand", "decode_header", "encode_frame", "encode_frame_bytes", "encode_header",
    "RPC_TYPE_RESPONSE", "RPC_ONEWAY", "new_request", "new_response", "error_response", "prepare_reply",
    "MissingHeaderField", "require", "ext_int", "ext_bool", "BodyPart", "Body", "ExtValue",
]

RPC_TYPE_RESPONSE = 1
RPC_ONEWAY = 2

# One buffer of a frame: a decoded body is a memoryview of the receive buffer; a body to send may also be
# a sequence of parts written back to back (records straight from the CommitLog).
BodyPart = Union[bytes, bytearray, memoryview]
Body = Union[BodyPart, Sequence[BodyPart]]
# A header field value: decoding gives str; a command built to be sent may carry numbers and booleans,
# which the encoder writes as Java does ("true"/"false", decimal).
ExtValue = Union[str, int, bool]


def new_request(code: int, ext_fields: Mapping[str, Optional[ExtValue]] | None = None, body: Optional[Body] = None,
                oneway: bool = False) -> RemotingCommand:
    """A request originated by rmqd (to a client or to a name server)."""
    ext = {k: v for k, v in ext_fields.items() if v is not None} if ext_fields else None
    return RemotingCommand(int(code), ext, body, None, 0, RPC_ONEWAY if oneway else 0)


def new_response(code: int = ResponseCode.SUCCESS, remark: str | None = None,
                 ext_fields: Mapping[str, Optional[ExtValue]] | None = None,
                 body: Optional[Body] = None) -> RemotingCommand:
    """A response; opaque, flag and serialize type are filled in when it is sent."""
    ext = {k: v for k, v in ext_fields.items() if v is not None} if ext_fields else None
    return RemotingCommand(int(code), ext, body, remark, 0, RPC_TYPE_RESPONSE)


def error_response(code: int, remark: str) -> RemotingCommand:
    """A failure response with a remark, as the Java broker sends them."""
    return new_response(code, remark)


def prepare_reply(request: RemotingCommand, response: RemotingCommand) -> RemotingCommand:
    """Make ``response`` answer ``request``: echo opaque, mark response, same serialize type."""
    response.opaque = request.opaque
    response.flag |= RPC_TYPE_RESPONSE
    response.serialize_type = request.serialize_type
    response.version = SERVER_VERSION
    return response


class MissingHeaderField(Exception):
    """A mandatory (@CFNotNull) header field is absent."""


def require(request: RemotingCommand, *names: str) -> list[str]:
    """Return the values of mandatory ext fields, raising MissingHeaderField like Java does."""
    ext = request.ext_fields or {}
    values = []
    for name in names:
        value = ext.get(name)
        if value is None:
            raise MissingHeaderField(f"the custom field <{name}> is null")
        values.append(value)
    return values


def ext_int(request: RemotingCommand, name: str, default: int | None = None) -> int | None:
    """Parse an ext field as a Java Integer/Long (None/blank -> default)."""
    value = (request.ext_fields or {}).get(name)
    if value is None or value == "":
        return default
    return int(value)


def ext_bool(request: RemotingCommand, name: str, default: bool = False) -> bool:
    """Parse an ext field like Java's Boolean.parseBoolean."""
    value = (request.ext_fields or {}).get(name)
    if value is None:
        return default
    return value.strip().lower() == "true"
