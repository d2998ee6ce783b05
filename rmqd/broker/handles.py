"""The narrow interfaces broker services take from their callers (what they use, not who provides it).

* :class:`ClientConnection`: a client's channel as the client managers, long polling and the broker's
  calls to clients see it: a remoting :class:`~rmqd.remoting.connection.Connection` (4.x clients), or a
  5.x gRPC client's ``GrpcChannel`` (which answers only the one-way calls).
* :class:`SendHookContext`: what a ``before_store`` send hook (delay levels, timers) reads of the send.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from rmqd.remoting.command import RemotingCommand


class ClientConnection(Protocol):
    """One client's connection: where it is, whether it is gone, and the calls the broker makes to it.

    Used as a dict key (the managers' tables), so by identity."""

    @property
    def remote_address(self) -> str:
        """``"host:port"`` of the client."""

    @property
    def closed(self) -> bool: ...

    async def invoke(self, request: "RemotingCommand", timeout: float = 3.0) -> "RemotingCommand":
        """A request to the client and its answer (``timeout`` in seconds)."""

    def invoke_oneway(self, request: "RemotingCommand") -> None:
        """A request to the client that is not answered (NOTIFY_CONSUMER_IDS_CHANGED, CHECK_TRANSACTION_STATE)."""

    def close(self) -> None:
        """Drop the connection (the broker's scan of channels idle past their timeout)."""


class SendHookContext(Protocol):
    """The send a ``before_store`` hook looks at (``rmqd.processors.send.SendContext``)."""

    @property
    def batch(self) -> bool:
        """A batch send (hooks leave batches alone)."""
