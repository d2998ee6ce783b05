"""NOTIFY_BROKER_ROLE_CHANGED (1008): the leader tells a group's brokers about a new master at once,
instead of letting them find out at their next 5 s GET_REPLICA_INFO poll (Java's ``NotifyService``).

Oneway, one task per broker address; a newer master epoch cancels an older notification still pending
for the same address.  A broker that cannot be reached is logged and left to its poll.
"""
from __future__ import annotations

import asyncio
import functools
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Optional

from rmqd.controller.codes import ControllerRequestCode
from rmqd.controller.replicas_info import sync_state_set_body
from rmqd.remoting.client import RemotingClient
from rmqd.remoting.command import new_request

if TYPE_CHECKING:
    from rmqd.tls.contexts import ClientTls

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RoleChange:
    """What the brokers of one group are told (Java's ``RoleChangeNotifyEntry``)."""

    masterAddress: Optional[str]
    masterBrokerId: int
    masterEpoch: int
    syncStateSetEpoch: int
    syncStateSet: tuple[int, ...]


class RoleChangeNotifier:
    def __init__(self, timeout_s: float = 3.0, tls: "ClientTls | None" = None) -> None:
        self.timeout_s = timeout_s
        self.tls = tls                  # tls.enable: the brokers are told over TLS
        self._client: Optional[RemotingClient] = None
        self._tasks: dict[str, tuple[int, asyncio.Task[None]]] = {}
        self.sent = 0
        self.failed = 0

    def notify(self, broker_addrs: list[str], change: RoleChange) -> None:
        """Send ``change`` to each address (call on the loop)."""
        for addr in broker_addrs:
            pending = self._tasks.get(addr)
            if pending is not None and not pending[1].done() and pending[0] < change.masterEpoch:
                pending[1].cancel()
            task = asyncio.ensure_future(self._send(addr, change))
            self._tasks[addr] = (change.masterEpoch, task)
            task.add_done_callback(functools.partial(self._forget, addr))

    def _forget(self, addr: str, task: asyncio.Task[None]) -> None:
        current = self._tasks.get(addr)
        if current is not None and current[1] is task:
            del self._tasks[addr]

    async def _send(self, addr: str, change: RoleChange) -> None:
        request = new_request(ControllerRequestCode.NOTIFY_BROKER_ROLE_CHANGED, {
            "masterAddress": change.masterAddress, "masterEpoch": change.masterEpoch,
            "syncStateSetEpoch": change.syncStateSetEpoch, "masterBrokerId": change.masterBrokerId,
        }, sync_state_set_body(change.syncStateSet, change.syncStateSetEpoch))
        if self._client is None:
            self._client = RemotingClient(connect_timeout=self.timeout_s, tls=self.tls)
        try:
            await asyncio.wait_for(self._client.invoke_oneway(addr, request), self.timeout_s)
            self.sent += 1
            log.info("told %s: master %s (id %s) epoch %d, SyncStateSet %s", addr, change.masterAddress,
                     change.masterBrokerId, change.masterEpoch, list(change.syncStateSet))
        except (OSError, asyncio.TimeoutError, ConnectionError) as exc:
            self.failed += 1
            log.warning("failed to notify broker %s that the role changed (master epoch %d): %r", addr,
                        change.masterEpoch, exc)

    async def close(self) -> None:
        for _, task in list(self._tasks.values()):
            task.cancel()
        if self._tasks:
            await asyncio.gather(*(t for _, t in self._tasks.values()), return_exceptions=True)
        self._tasks.clear()
        if self._client is not None:
            self._client.close()
            self._client = None
