"""Typed interface of remoting_codec.pyx (RemotingCommand and the frame codec); see the .pyx for the behaviour."""
from collections.abc import Mapping
from typing import Optional, TypeVar, Union, overload

from rmqd.remoting.command import Body, BodyPart, ExtValue

JSON: int
ROCKETMQ: int
DEFAULT_MAX_FRAME_LENGTH: int
SERVER_VERSION: int
LANGUAGE_NAMES: tuple[str, ...]

_D = TypeVar("_D")


class FrameError(ValueError):
    """A frame that cannot be decoded; the connection that sent it must be closed."""


class RemotingCommand:
    """One remoting request or response."""

    code: int
    language: str
    version: int
    opaque: int
    flag: int
    remark: Optional[str]
    serialize_type: int

    def __init__(self, code: int = 0, ext_fields: Optional[Mapping[str, ExtValue]] = None,
                 body: Optional[Body] = None, remark: Optional[str] = None, opaque: int = 0, flag: int = 0,
                 language: str = "JAVA", version: int = ..., serialize_type: int = ...) -> None: ...
    @property
    def ext_fields(self) -> Optional[dict[str, str]]:
        """The header fields (str values on every decoded command)."""
    @ext_fields.setter
    def ext_fields(self, value: Optional[Mapping[str, ExtValue]]) -> None: ...
    @property
    def body(self) -> Optional[BodyPart]:
        """The body: a memoryview of the receive buffer on a decoded command."""
    @body.setter
    def body(self, value: Optional[Body]) -> None: ...
    @property
    def is_response(self) -> bool: ...
    @property
    def is_oneway(self) -> bool: ...
    @overload
    def ext(self, name: str) -> Optional[str]: ...
    @overload
    def ext(self, name: str, default: _D) -> Union[str, _D]: ...
    def body_bytes(self) -> bytes: ...


def decode_header(serialize_type: int, header: bytes) -> RemotingCommand: ...


class FrameReader:
    """Sans-IO incremental frame reader: ``feed(bytes)`` returns the complete commands."""

    def __init__(self, max_frame_length: int = ...) -> None: ...
    @property
    def buffered(self) -> int: ...
    def feed(self, data: bytes) -> list[RemotingCommand]: ...


def encode_header(cmd: RemotingCommand) -> bytes: ...
def encode_frame(cmd: RemotingCommand) -> list[BodyPart]: ...
def encode_frame_bytes(cmd: RemotingCommand) -> bytes: ...
