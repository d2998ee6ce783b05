"""How an RPC of the gRPC endpoint fails: :class:`RpcError` ends it with a ``Status`` in its response.

The 5.x proxy's refusals come in two kinds, and clients see the difference in the text: a check of the gRPC layer
(``GrpcProxyException``) gives its message as it is; a refusal from the proxy's processors (``ProxyException``:
the topic message-type check, an expired receipt handle, a broker's error) reaches the client wrapped, as
``org.apache.rocketmq.proxy.common.ProxyException: <message>`` (:func:`proxy_error`).
"""
from __future__ import annotations

from rmqd.grpc.pb import definition_pb2 as d

PROXY_EXCEPTION = "org.apache.rocketmq.proxy.common.ProxyException"


def status(code: d.Code.ValueType, message: str = "") -> d.Status:
    """A ``Status``; an empty message is the code's name (``ResponseBuilder.buildStatus``)."""
    return d.Status(code=code, message=message or d.Code.Name(code))


class RpcError(Exception):
    """Ends an RPC with ``status(code, message)`` in its response."""

    def __init__(self, code: d.Code.ValueType, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def proxy_error(code: d.Code.ValueType, message: str) -> RpcError:
    """A refusal the proxy's processors raise (see the module docstring)."""
    return RpcError(code, f"{PROXY_EXCEPTION}: {message}")
