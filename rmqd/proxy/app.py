"""The ``rmqd proxy`` process: a gRPC endpoint (:class:`rmqd.grpc.endpoint.GrpcEndpoint`, TLS as the broker's)
whose MessagingService runs over :class:`rmqd.proxy.backend.RemoteBackend`.

Settings: the name servers (``-n``), the gRPC port, and a configuration file (``-c``): Java's ``rmq-proxy.json``
(a JSON object) or a properties file, with the proxy's keys rmqd reads (``minInvisibleTimeMillsForRecv``,
``grpcClientConsumerMaxLongPollingTimeoutMillis``, ``maxMessageSize``, ``enableTopicMessageTypeCheck``, ...) and the
TLS keys (``tlsTestModeEnable``, ``tlsCertPath``, ``tlsKeyPath``, ``tls.server.mode``; ``tls.enable`` and the
``tls.client.*`` keys for the connections to brokers and name servers).
"""
from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING, Optional

from rmqd.config import BrokerConfig

if TYPE_CHECKING:
    from rmqd.grpc.endpoint import GrpcEndpoint


def proxy_config(config_file: Optional[str], namesrv: Optional[str]) -> BrokerConfig:
    """The proxy's settings: Java's defaults, the file's keys, then ``-n``."""
    config = BrokerConfig()
    if config_file:
        path = os.path.abspath(os.path.expanduser(config_file))
        if path.endswith(".json"):
            with open(path, encoding="utf-8") as f:
                raw = json.load(f)
            if not isinstance(raw, dict):
                raise ValueError(f"{path}: not a JSON object")
            config.update({k: v if isinstance(v, str) else json.dumps(v) for k, v in raw.items()}, source=path)
        else:
            config.load_file(path)
    if namesrv:
        config.namesrvAddr = namesrv
    if not config.namesrv_addrs:
        raise ValueError("rmqd proxy needs the name servers (-n host:port;host:port, or namesrvAddr in -c)")
    return config


def proxy_endpoint(config: BrokerConfig, host: str, port: int, tls_mode: Optional[str] = None) -> GrpcEndpoint:
    """The gRPC endpoint of a proxy (its MessagingService made on the first call)."""
    from rmqd.grpc.endpoint import GrpcEndpoint
    from rmqd.proxy.backend import RemoteBackend
    from rmqd.tls.contexts import remoting_client_tls
    from rmqd.tls.settings import grpc_server_settings, tls_properties

    props = dict(config.extra)
    if tls_mode:
        props["tls.server.mode"] = tls_mode
    tls = grpc_server_settings(tls_properties(props))
    client_tls = remoting_client_tls(config.extra)
    endpoint: GrpcEndpoint

    def backend() -> RemoteBackend:
        return RemoteBackend(config, lambda: config.namesrv_addrs, lambda: (endpoint.host, endpoint.port), client_tls)
    endpoint = GrpcEndpoint(host, port, tls=tls, backend=backend,
                            label="rmqd proxy (RocketMQ 5 clients, cluster mode) listening on {address}{tls}, name "
                                  f"servers {config.namesrvAddr}")
    return endpoint
