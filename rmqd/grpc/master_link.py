"""A replica's gRPC endpoint's calls to its group's master: :class:`MasterLink`.

In a replica group every broker has its own gRPC endpoint, and a 5.x client given the group's endpoints may be on a
replica's. What must be written on the master (sends, transaction ends, and the POP checkpoints, acks, invisible
times and DLQ forwards of a receive) the replica's endpoint asks the master for over remoting, as a 5.x proxy does
for the brokers it fronts. The master is the one the replica follows now (its role manager's ``master_addr``); a
replica that knows none, or whose master cannot be reached, answers :class:`rmqd.proxy.brokers.BrokerUnavailable`
and the client retries.
"""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Callable, Optional

from rmqd.proxy.brokers import CONNECT_ERRORS, BrokerUnavailable
from rmqd.remoting.command import RemotingCommand

if TYPE_CHECKING:
    from rmqd.grpc.handles import Signer
    from rmqd.remoting.client import RemotingClient

log = logging.getLogger(__name__)


class MasterLink:
    """:class:`rmqd.proxy.remote_pop.BrokerCalls` to this broker's master (the group's name is the only name it
    serves); one remoting connection, made at the first call, signed as the broker signs its own requests."""

    def __init__(self, master_addr: Callable[[], Optional[str]], signer: Callable[[], Optional[Signer]]) -> None:
        self.master_addr = master_addr
        self._signer = signer
        self._client: Optional[RemotingClient] = None

    def _connection(self) -> RemotingClient:
        if self._client is None:
            from rmqd.remoting.client import RemotingClient
            self._client = RemotingClient(signer=self._signer())
        return self._client

    async def invoke(self, name: str, request: RemotingCommand, timeout: float) -> RemotingCommand:
        """``request`` to the master. Raises BrokerUnavailable (no master known, or unreachable),
        asyncio.TimeoutError."""
        addr = self.master_addr()
        if not addr:
            raise BrokerUnavailable(f"broker {name} has no master now")
        try:
            return await self._connection().invoke(addr, request, timeout)
        except CONNECT_ERRORS as exc:
            log.warning("broker %s: its master %s is unreachable: %r", name, addr, exc)
            raise BrokerUnavailable(f"broker {name}: master {addr} unreachable: {exc!r}") from None

    def close(self) -> None:
        if self._client is not None:
            self._client.close()


__all__ = ["MasterLink"]
