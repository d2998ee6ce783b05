"""GrpcEndpoint: the 5.x clients' gRPC server beside the broker, on the broker's event loop.

grpcio's asyncio server (``grpc.aio``) runs on the process's uvloop loop (spike: a grpc.aio server
and rmqd's remoting server share one uvloop loop; unary calls, server streams and client cancels
behave).  With ``optional`` (``rmqd serve``'s default port) a taken port is a warning, not a failure.

The server listens from start, but the generated protobuf modules and the MessagingService load when the first
call arrives (about 5 MB of RSS that an endpoint no client uses does not pay; grpcio's own native library, most of
the rest, is file-backed and shared).
"""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Optional

if TYPE_CHECKING:
    from rmqd.app import Services

log = logging.getLogger(__name__)

MAX_MESSAGE_BYTES = 130 * 1024 * 1024


class GrpcEndpoint:
    def __init__(self, host: str = "127.0.0.1", port: int = 8081, optional: bool = False) -> None:
        self.host = host
        self.port = port
        self.optional = optional
        self.failed = ""
        self.server: Any = None
        self._broker: Any = None
        self._service: Any = None

    async def start(self, services: "Services") -> None:
        import grpc

        broker = services.broker
        if broker is None:
            raise ValueError("the gRPC endpoint needs a broker in this process")
        server = grpc.aio.server(options=[("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
                                          ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
                                          ("grpc.so_reuseport", 0),
                                          ("grpc.keepalive_time_ms", 60_000),
                                          ("grpc.http2.max_pings_without_data", 0)])
        try:
            port = server.add_insecure_port(f"{self.host}:{self.port}")
        except RuntimeError as exc:
            port = 0
            err: Optional[Exception] = exc
        else:
            err = None
        if not port:
            log.debug("binding the gRPC endpoint to %s:%s failed: %s", self.host, self.port, err)
            msg = f"gRPC endpoint not started: {self.host}:{self.port} is in use (use --grpc-port)"
            if not self.optional:
                raise OSError(msg)
            self.failed = msg
            log.warning("%s", msg)
            return
        self.port = port
        self._broker = broker
        server.add_generic_rpc_handlers((_LazyHandlers(self),))
        await server.start()
        self.server = server
        log.debug("gRPC MessagingService on %s", self.address)

    @property
    def service(self) -> Any:
        """The MessagingService, made (and started) on first use: the first call, or a caller asking."""
        if self._service is None and self._broker is not None:
            from rmqd.grpc.service import MessagingService
            self._service = MessagingService(self._broker, (self.host, self.port))
            self._service.start()
        return self._service

    async def close(self) -> None:
        if self.server is not None:
            if self._service is not None:
                self._service.close()             # ends Telemetry streams
                self._service = None
            await self.server.stop(1.0)
            self.server = None

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    def describe(self) -> list[str]:
        if self.failed:
            return [f"rmqd {self.failed}"]
        return [f"rmqd gRPC (RocketMQ 5 clients) on {self.address}"]

    def ready_parts(self) -> list[str]:
        if self.failed:
            return ["gRPC off (port taken)"]
        return [f"grpc {self.address}"]


class _LazyHandlers:
    """grpc's generic handler for the MessagingService: on the first call, loads the generated module and the
    service and hands each call to the handlers ``add_MessagingServiceServicer_to_server`` makes."""

    def __init__(self, endpoint: GrpcEndpoint) -> None:
        self.endpoint = endpoint
        self.handlers: Optional[tuple] = None
        self.guarded: dict[str, Any] = {}        # method path -> its handler behind rmqd.grpc.bad_input.guard

    def service(self, handler_call_details: Any) -> Any:
        path = handler_call_details.method
        found = self.guarded.get(path)
        if found is not None:
            return found
        if self.handlers is None:
            from rmqd.grpc.pb import service_pb2_grpc
            capture = _HandlerCapture()
            service_pb2_grpc.add_MessagingServiceServicer_to_server(self.endpoint.service, capture)
            self.handlers = capture.generic
            log.debug("gRPC MessagingService loaded on its first call")
        from rmqd.grpc.bad_input import guard
        for handler in self.handlers:
            found = handler.service(handler_call_details)
            if found is not None:
                found = guard(found, path.rsplit("/", 1)[-1], self.endpoint.service.causes)
                self.guarded[path] = found
                return found
        return None


class _HandlerCapture:
    """Stands in for the server in ``add_..._to_server``: keeps the generic handlers it is given."""

    def __init__(self) -> None:
        self.generic: tuple = ()

    def add_generic_rpc_handlers(self, handlers: tuple) -> None:
        self.generic += tuple(handlers)

    def add_registered_method_handlers(self, service_name: str, handlers: dict) -> None:
        pass            # the same handlers as the generic one; registration needs a server not started yet
