"""GrpcEndpoint: the 5.x clients' gRPC server beside the broker, on the broker's event loop.

grpcio's asyncio server (``grpc.aio``) runs on the process's uvloop loop (spike: a grpc.aio server
and rmqd's remoting server share one uvloop loop; unary calls, server streams and client cancels
behave).  With ``optional`` (``rmqd serve``'s default port) a taken port is a warning, not a failure.
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
        self.service: Any = None

    async def start(self, services: "Services") -> None:
        import grpc

        from rmqd.grpc.pb import service_pb2_grpc
        from rmqd.grpc.service import MessagingService

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
        self.service = MessagingService(broker, (self.host, port))
        service_pb2_grpc.add_MessagingServiceServicer_to_server(self.service, server)
        await server.start()
        self.service.start()
        self.server = server
        log.debug("gRPC MessagingService on %s", self.address)

    async def close(self) -> None:
        if self.server is not None:
            if self.service is not None:
                self.service.close()              # ends Telemetry streams
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
