"""GrpcEndpoint: the 5.x clients' gRPC server beside the broker, on the broker's event loop.

grpcio's asyncio server (``grpc.aio``) runs on the process's uvloop loop (spike: a grpc.aio server
and rmqd's remoting server share one uvloop loop; unary calls, server streams and client cancels
behave).  With ``optional`` (``rmqd serve``'s default port) a taken port is a warning, not a failure.

The server listens from start, but the generated protobuf modules and the MessagingService load when the first
call arrives (about 5 MB of RSS that an endpoint no client uses does not pay; grpcio's own native library, most of
the rest, is file-backed and shared).
"""
from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Callable, Iterable, Optional, cast

from rmqd.tls.contexts import grpc_key_and_chain

if TYPE_CHECKING:
    import grpc
    import grpc.aio

    from rmqd.grpc.advertise import GrpcPortAdvertiser
    from rmqd.grpc.backend import MessagingBackend
    from rmqd.grpc.front import GrpcFront
    from rmqd.grpc.handles import BrokerParts, GrpcServices
    from rmqd.grpc.service import MessagingService
    from rmqd.tls.settings import ServerTlsSettings

log = logging.getLogger(__name__)

MAX_MESSAGE_BYTES = 130 * 1024 * 1024


class GrpcEndpoint:
    """The broker's gRPC endpoint. ``tls``: its TLS settings (None: from the broker's configuration, the proxy's keys
    ``tlsTestModeEnable``, ``tlsCertPath``, ``tlsKeyPath``, ``tlsKeyPassword`` and ``tls.server.mode``).

    TLS ``disabled``: grpcio's plaintext port. ``enforcing``: grpcio's TLS port (the handshake in its C core).
    ``permissive`` (the default, as the proxy's): :class:`rmqd.grpc.front.GrpcFront` on the port, in front of a
    loopback plaintext port and a loopback TLS port of the same service, the TLS one started with the first TLS
    client (the test-mode certificate is not made until a client wants it)."""

    def __init__(self, host: str = "127.0.0.1", port: int = 8081, optional: bool = False,
                 tls: "ServerTlsSettings | None" = None, backend: Optional[Callable[[], MessagingBackend]] = None,
                 label: str = "rmqd gRPC (RocketMQ 5 clients) on {address}{tls}") -> None:
        """``backend``: makes the MessagingService's backend (:class:`rmqd.grpc.backend.MessagingBackend`) on first
        use; None: the broker of this process (:class:`rmqd.grpc.local_backend.LocalBackend`), whose gRPC port is
        then kept in its config and the name servers (:mod:`rmqd.grpc.advertise`)."""
        self.host = host
        self.port = port
        self.optional = optional
        self.failed = ""
        self.server: Optional[grpc.aio.Server] = None
        self.tls = tls
        self.front: Optional["GrpcFront"] = None
        self._backend_factory = backend
        self.label = label
        self._backend: Optional[Callable[[], MessagingBackend]] = None
        self._service: Optional[MessagingService] = None
        self._handlers: Optional[_LazyHandlers] = None
        self._plain_port = 0
        self._tls_server: Optional[grpc.aio.Server] = None
        self._tls_port = 0
        self._tls_starting: Optional[asyncio.Future[int]] = None
        self._advertiser: Optional[GrpcPortAdvertiser] = None

    def _options(self) -> list[tuple[str, int]]:
        assert self.tls is not None
        return [("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
                ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
                ("grpc.so_reuseport", 0),
                ("grpc.keepalive_time_ms", 60_000),
                ("grpc.http2.max_pings_without_data", 0),
                ("grpc.server_handshake_timeout_ms", int(self.tls.handshake_timeout_s * 1000))]

    async def start(self, services: "GrpcServices") -> None:
        import grpc

        from rmqd.tls.settings import TlsMode, grpc_server_settings, tls_properties

        broker = services.broker if self._backend_factory is None else None
        if self._backend_factory is not None:
            backend = self._backend_factory
        elif broker is not None:
            backend = self._local_backend(broker)
        else:
            raise ValueError("the gRPC endpoint needs a broker in this process")
        if self.tls is None:
            self.tls = grpc_server_settings(tls_properties(broker.config.extra if broker is not None else {}))
        self._handlers = _LazyHandlers(self)
        server = grpc.aio.server(options=self._options())
        mode = self.tls.mode
        err: Optional[Exception] = None
        port = 0
        try:
            if mode is TlsMode.PERMISSIVE:
                self._plain_port = server.add_insecure_port("127.0.0.1:0")
                port = await self._start_front()
            elif mode is TlsMode.ENFORCING:
                key, chain = await asyncio.get_running_loop().run_in_executor(None, grpc_key_and_chain, self.tls)
                port = server.add_secure_port(f"{self.host}:{self.port}", grpc.ssl_server_credentials([(key, chain)]))
            else:
                port = server.add_insecure_port(f"{self.host}:{self.port}")
        except (RuntimeError, OSError) as exc:
            port, err = 0, exc
        if not port:
            log.debug("binding the gRPC endpoint to %s:%s failed: %s", self.host, self.port, err)
            msg = f"gRPC endpoint not started: {self.host}:{self.port} is in use (use --grpc-port)"
            if not self.optional:
                raise OSError(msg)
            self.failed = msg
            log.warning("%s", msg)
            if broker is not None:
                broker.config.grpcServerPort = 0            # getBrokerConfig: this broker serves no gRPC
            return
        self.port = port
        self._backend = backend
        server.add_generic_rpc_handlers(self._handlers.as_grpc())
        await server.start()
        self.server = server
        if broker is None:
            log.debug("gRPC MessagingService on %s (TLS %s)", self.address, mode.value)
            return
        broker.config.grpcServerPort = port
        # other brokers' endpoints route clients here: the port in the name servers' KV table
        from rmqd.grpc.advertise import GrpcPortAdvertiser
        from rmqd.grpc.handles import namesrv_invoke
        self._advertiser = GrpcPortAdvertiser(namesrv_invoke(broker), lambda: broker.config.namesrv_addrs,
                                              lambda: broker.address, port)
        self._advertiser.start()
        log.debug("gRPC MessagingService on %s (TLS %s)", self.address, mode.value)

    def _local_backend(self, broker: BrokerParts) -> Callable[[], MessagingBackend]:
        def make() -> MessagingBackend:
            from rmqd.grpc.local_backend import LocalBackend, LocalParts
            return LocalBackend(LocalParts.of(broker), lambda: (self.host, self.port))
        return make

    async def _start_front(self) -> int:
        from rmqd.grpc.front import GrpcFront

        assert self.tls is not None
        front = GrpcFront(self.host, self.port, self._plain, self._tls_backend, self.tls.handshake_timeout_s)
        port = await front.start()
        self.front = front
        return port

    async def _plain(self) -> int:
        return self._plain_port

    async def _tls_backend(self) -> int:
        """The loopback TLS port, started (with its certificate) for the first TLS client."""
        if self._tls_port:
            return self._tls_port
        if self._tls_starting is None:
            self._tls_starting = asyncio.get_running_loop().create_task(self._start_tls_server())
        try:
            return await asyncio.shield(self._tls_starting)
        except Exception:
            self._tls_starting = None           # the next TLS client tries again
            raise

    async def _start_tls_server(self) -> int:
        import grpc

        assert self.tls is not None
        key, chain = await asyncio.get_running_loop().run_in_executor(None, grpc_key_and_chain, self.tls)
        server = grpc.aio.server(options=self._options())
        port = server.add_secure_port("127.0.0.1:0", grpc.ssl_server_credentials([(key, chain)]))
        assert self._handlers is not None          # made in start(), before any client
        server.add_generic_rpc_handlers(self._handlers.as_grpc())
        await server.start()
        self._tls_server, self._tls_port = server, port
        log.info("gRPC: TLS for %s ready (%s)", self.address,
                 "test mode, self-signed certificate" if self.tls.test_mode else self.tls.cert_path)
        return port

    def client_of(self, host: str, port: int) -> tuple[str, int]:
        """The client behind a gRPC peer (through the front, the front's loopback connection is the peer)."""
        return self.front.client_of(host, port) if self.front is not None else (host, port)

    @property
    def service(self) -> Optional[MessagingService]:
        """The MessagingService, made (and started) on first use: the first call, or a caller asking."""
        if self._service is None and self._backend is not None:
            from rmqd.grpc.service import MessagingService
            self._service = MessagingService(self._backend(), (self.host, self.port), peer_of=self.client_of)
            self._service.start()
        return self._service

    async def close(self) -> None:
        if self._advertiser is not None:
            await self._advertiser.close()
            self._advertiser = None
        if self.front is not None:
            await self.front.close()
            self.front = None
        if self.server is not None:
            if self._service is not None:
                self._service.close()             # ends Telemetry streams
                self._service = None
            servers = [self.server] + ([self._tls_server] if self._tls_server is not None else [])
            await asyncio.gather(*(s.stop(1.0) for s in servers))
            self.server = self._tls_server = None

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    def describe(self) -> list[str]:
        if self.failed:
            return [f"rmqd {self.failed}"]
        tls = f" (TLS {self.tls.mode.value})" if self.tls is not None else ""
        return [self.label.format(address=self.address, tls=tls)]

    def ready_parts(self) -> list[str]:
        if self.failed:
            return ["gRPC off (port taken)"]
        return [f"grpc {self.address}"]


class _LazyHandlers:
    """grpc's generic handler for the MessagingService: on the first call, loads the generated module and the
    service and hands each call to the handlers ``add_MessagingServiceServicer_to_server`` makes."""

    def __init__(self, endpoint: GrpcEndpoint) -> None:
        self.endpoint = endpoint
        self.handlers: Optional[tuple[grpc.GenericRpcHandler, ...]] = None
        # method path -> its handler behind rmqd.grpc.bad_input.guard
        self.guarded: dict[str, grpc.RpcMethodHandler[object, object]] = {}

    def as_grpc(self) -> tuple[grpc.GenericRpcHandler]:
        """These handlers as a server's generic handlers (grpc calls ``service`` of any object given; its stubs
        ask for the GenericRpcHandler class, which would load grpc when this module loads)."""
        return (cast("grpc.GenericRpcHandler", self),)

    def service(self, handler_call_details: grpc.HandlerCallDetails) -> Optional[grpc.RpcMethodHandler[object, object]]:
        path = handler_call_details.method
        found = self.guarded.get(path)
        if found is not None:
            return found
        service = self.endpoint.service
        if service is None:         # a call before the endpoint has its backend (start sets it before serving)
            return None
        if self.handlers is None:
            from rmqd.grpc.pb import service_pb2_grpc
            capture = _HandlerCapture()
            # the boundary with grpc: the generated function only calls the server's two registration methods
            service_pb2_grpc.add_MessagingServiceServicer_to_server(service, cast("grpc.aio.Server", capture))
            self.handlers = capture.generic
            log.debug("gRPC MessagingService loaded on its first call")
        from rmqd.grpc.bad_input import guard
        for handler in self.handlers:
            guarded = guard(handler.service(handler_call_details), path.rsplit("/", 1)[-1], service.causes)
            if guarded is not None:
                self.guarded[path] = guarded
                return guarded
        return None


class _HandlerCapture:
    """Stands in for the server in ``add_..._to_server``: keeps the generic handlers it is given."""

    def __init__(self) -> None:
        self.generic: tuple[grpc.GenericRpcHandler, ...] = ()

    def add_generic_rpc_handlers(self, handlers: Iterable[grpc.GenericRpcHandler]) -> None:
        self.generic += tuple(handlers)

    def add_registered_method_handlers(self, service_name: str,
                                       handlers: dict[str, grpc.RpcMethodHandler[object, object]]) -> None:
        pass            # the same handlers as the generic one; registration needs a server not started yet
