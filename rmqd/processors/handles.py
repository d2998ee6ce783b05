"""The narrow interfaces the request processors are typed against (instead of ``Any``).

A processor reads the connection a request came on only for the peer's address; the gRPC endpoint
calls some processors with its own stand-in (``rmqd.grpc.local_backend.GrpcConn``), so they take a
:class:`RequestPeer`, which both satisfy. A processor that calls the client back (``invoke``) takes
the remoting ``Connection`` itself.
"""
from __future__ import annotations

from typing import Protocol


class RequestPeer(Protocol):
    """The connection a request came on, as far as a processor reads it: who sent it, and whether it is gone."""

    @property
    def remote_address(self) -> str:
        """``host:port`` of the peer."""

    @property
    def peer_host(self) -> str: ...

    @property
    def peer_port(self) -> int: ...

    @property
    def closed(self) -> bool: ...
