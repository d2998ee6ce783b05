"""The narrow interfaces the request processors are typed against (instead of ``Any``).

A processor reads the connection a request came on only for the peer's address; the gRPC endpoint
calls some processors with its own stand-in (``rmqd.grpc.local_backend.GrpcConn``), so they take a
:class:`RequestPeer`, which both satisfy. A processor that calls the client back (``invoke``) takes
the remoting ``Connection`` itself; one that calls a client registered with the broker takes its
:class:`ClientChannel`.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from rmqd.acl.handles import RequestPeer as HookPeer
from rmqd.store.api import MessageStoreAPI

if TYPE_CHECKING:
    from rmqd.remoting.command import RemotingCommand
    from rmqd.store.commitlog import CommitLog


class RequestPeer(HookPeer, Protocol):
    """The connection a request came on, as far as a processor reads it: who sent it, and whether it is gone."""

    @property
    def peer_port(self) -> int: ...

    @property
    def closed(self) -> bool: ...


class ClientChannel(Protocol):
    """A client's channel as the processors call it back (a remoting ``Connection``, or a 5.x client's gRPC
    channel): where it is, whether it is gone, a request and its answer, a one-way request."""

    @property
    def remote_address(self) -> str: ...

    @property
    def closed(self) -> bool: ...

    async def invoke(self, request: RemotingCommand, timeout: float = 3.0) -> RemotingCommand:
        """``request`` to the client and its answer (``timeout`` in seconds)."""

    def invoke_oneway(self, request: RemotingCommand) -> None:
        """``request`` to the client, not answered."""


class StoreWithCommitLog(MessageStoreAPI, Protocol):
    """The store as the store admin codes use it: the API, and the CommitLog for its read-ahead mode."""

    @property
    def commitlog(self) -> CommitLog: ...
