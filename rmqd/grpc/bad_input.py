"""Bad input on the gRPC endpoint: answered as the 5.5 proxy answers it, logged at most once per cause and interval.

- A request body that is not the method's protobuf (garbage, truncated, wrong wire types) ends the call with gRPC
  status UNKNOWN and no details, as grpc-java does for the proxy when it cannot parse a request. grpcio would log a
  traceback per such call and name the parse error to the client; :func:`guard` puts a deserializer in front
  that never raises (it hands the servicer a :class:`Malformed` instead) and ends those calls itself.
- :class:`CauseLog`: one log line per cause (a method's malformed bodies, an unexpected exception type of a
  method) per ``interval_s``, saying how many more were seen since the last line; the first line of an
  unexpected exception carries its traceback. A flood of bad requests costs a few lines a minute, not one
  traceback each.
"""
from __future__ import annotations

import logging
import threading
import time
from typing import TYPE_CHECKING, AsyncIterator, Awaitable, Callable, Optional, Protocol, cast

import grpc

if TYPE_CHECKING:
    from rmqd.grpc.backend import RpcContext

log = logging.getLogger("rmqd.grpc.bad_input")

DEFAULT_INTERVAL_S = 60.0


class Malformed:
    """What the servicer gets instead of a request whose bytes did not parse."""

    __slots__ = ("method", "error", "size")

    def __init__(self, method: str, error: Exception, size: int) -> None:
        self.method, self.error, self.size = method, error, size


class MalformedRequest(Exception):
    """Raised by a guarded request stream when a message of it did not parse (Telemetry)."""

    def __init__(self, malformed: Malformed) -> None:
        super().__init__(f"{malformed.method}: malformed request ({malformed.size} bytes)")
        self.malformed = malformed


class CauseLog:
    """Rate-limited logging per cause (see the module docstring)."""

    def __init__(self, logger: logging.Logger = log, interval_s: float = DEFAULT_INTERVAL_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.logger = logger
        self.interval_s = interval_s
        self.clock = clock
        self._lock = threading.Lock()
        self._last: dict[str, float] = {}
        self._suppressed: dict[str, int] = {}
        self.seen: dict[str, int] = {}            # cause -> occurrences (for tests and metrics)

    def _due(self, cause: str) -> Optional[int]:
        """The count suppressed since the cause's last line if a line is due now, else None (counted)."""
        now = self.clock()
        with self._lock:
            self.seen[cause] = self.seen.get(cause, 0) + 1
            last = self._last.get(cause)
            if last is not None and now - last < self.interval_s:
                self._suppressed[cause] = self._suppressed.get(cause, 0) + 1
                return None
            self._last[cause] = now
            return self._suppressed.pop(cause, 0)

    def warning(self, cause: str, detail: str) -> None:
        suppressed = self._due(cause)
        if suppressed is not None:
            self.logger.warning("%s: %s%s", cause, detail, self._more(suppressed))

    def exception(self, cause: str, detail: str, exc: BaseException) -> None:
        """An unexpected failure: the first of a cause in an interval with its traceback, the rest counted."""
        suppressed = self._due(cause)
        if suppressed is not None:
            self.logger.error("%s: %s%s", cause, detail, self._more(suppressed), exc_info=exc)

    def _more(self, suppressed: int) -> str:
        return f" ({suppressed} more like it in the last {self.interval_s:.0f} s, not logged)" if suppressed else ""


UnaryBehaviour = Callable[[object, "RpcContext"], Awaitable[object]]
StreamBehaviour = Callable[[object, "RpcContext"], AsyncIterator[object]]
BidiBehaviour = Callable[[AsyncIterator[object], "RpcContext"], AsyncIterator[object]]


class AioMethodHandler(Protocol):
    """A method handler as grpc.aio's server runs it (``grpc._utilities.RpcMethodHandler``, a namedtuple): its
    behaviours are coroutine functions (grpc's stubs type the sync server's)."""

    @property
    def request_deserializer(self) -> Optional[Callable[[bytes], object]]: ...

    @property
    def unary_unary(self) -> Optional[UnaryBehaviour]: ...

    @property
    def unary_stream(self) -> Optional[StreamBehaviour]: ...

    @property
    def stream_stream(self) -> Optional[BidiBehaviour]: ...

    def _replace(self, **fields: object) -> "grpc.RpcMethodHandler[object, object]": ...


def _safe_deserializer(method: str, deserialize: Callable[[bytes], object]) -> Callable[[bytes], object]:
    def parse(raw: bytes) -> object:
        try:
            return deserialize(raw)
        except Exception as exc:          # DecodeError, or anything protobuf raises on bytes it cannot read
            return Malformed(method, exc, len(raw))
    return parse


def guard(found: "grpc.RpcMethodHandler[object, object] | None", method: str,
          causes: CauseLog) -> "grpc.RpcMethodHandler[object, object] | None":
    """``found`` (a grpc RpcMethodHandler) with a deserializer that never raises and behaviours that end a
    malformed request's call with UNKNOWN (no details), noting it in ``causes``."""
    deserializer = found.request_deserializer if found is not None else None
    if found is None or deserializer is None:
        return found
    # the boundary with grpc: an aio server's handler is grpc's namedtuple with coroutine behaviours
    handler = cast(AioMethodHandler, found)
    cause = f"gRPC {method}: malformed request body"

    async def reject(m: Malformed, context: RpcContext) -> None:
        causes.warning(cause, f"{m.size} bytes that are not a request ({type(m.error).__name__}: {m.error})")
        await context.abort(grpc.StatusCode.UNKNOWN, "")

    replaced: dict[str, object] = {"request_deserializer": _safe_deserializer(method, deserializer)}
    if handler.unary_unary is not None:
        behaviour = handler.unary_unary

        async def unary_unary(request: object, context: RpcContext) -> object:
            if isinstance(request, Malformed):
                await reject(request, context)
            return await behaviour(request, context)
        replaced["unary_unary"] = unary_unary
    elif handler.unary_stream is not None:
        stream_behaviour = handler.unary_stream

        async def unary_stream(request: object, context: RpcContext) -> AsyncIterator[object]:
            if isinstance(request, Malformed):
                await reject(request, context)
            async for answer in stream_behaviour(request, context):
                yield answer
        replaced["unary_stream"] = unary_stream
    elif handler.stream_stream is not None:
        bidi_behaviour = handler.stream_stream

        async def stream_stream(request_iterator: AsyncIterator[object], context: RpcContext) -> AsyncIterator[object]:
            async def checked() -> AsyncIterator[object]:
                async for request in request_iterator:
                    if isinstance(request, Malformed):
                        causes.warning(cause, f"{request.size} bytes that are not a request "
                                              f"({type(request.error).__name__}: {request.error})")
                        raise MalformedRequest(request)
                    yield request
            async for answer in bidi_behaviour(checked(), context):
                yield answer
        replaced["stream_stream"] = stream_stream
    return handler._replace(**replaced)
