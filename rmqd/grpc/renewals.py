"""Auto-renew for push consumers: the messages a client holds are kept invisible while it works (as the proxy's
``ReceiptHandleProcessor``), and let go once the client goes quiet; a receipt handle the client sends back is
checked against what this endpoint renews.

One loop a second: clients not heard from for ``grpcClientIdleTimeMills`` are let go (``on_idle``), then every
held message whose invisible time is about to end is renewed."""
from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING, Callable, Hashable, Optional

from rmqd.grpc import validate
from rmqd.pop.frontend import Busy

if TYPE_CHECKING:
    from rmqd.grpc.backend import Consuming
    from rmqd.grpc.clients import GrpcClientManager
    from rmqd.pop.extra_info import ReceiptHandle

log = logging.getLogger(__name__)

MAX_RENEW_MS = 3 * 3600 * 1000        # auto-renew keeps a push consumer's message at most this long


class Renewals:
    """The held messages of push consumers (see the module docstring)."""

    def __init__(self, clients: GrpcClientManager, consuming: Consuming, client_idle_s: float,
                 on_idle: Callable[[str], None]) -> None:
        self.clients = clients
        self.consuming = consuming
        self.client_idle_s = client_idle_s      # then no more renewals, registrations
        self.on_idle = on_idle
        # client id -> {held message's key: (renew key, invisible ms, renew until ms)}
        self._renewals: dict[str, dict[Hashable, tuple[Hashable, int, int]]] = {}
        self._task: Optional[asyncio.Future[None]] = None
        self.interval_s = 1.0

    def start(self) -> None:
        self._task = asyncio.ensure_future(self._loop())

    def close(self) -> None:
        if self._task is not None:
            self._task.cancel()

    def hold(self, client_id: str, holds: list[tuple[Hashable, Hashable]], invisible_ms: int) -> None:
        """Keep the messages a receive handed ``client_id`` invisible while the client works, as the proxy does."""
        until = int(time.time() * 1000) + MAX_RENEW_MS
        mine = self._renewals.setdefault(client_id, {})
        for match, renew_key in holds:
            mine[match] = (renew_key, invisible_ms, until)

    def checked_handle(self, client_id: str, group: str, text: str) -> ReceiptHandle:
        """A receipt handle the client sends back, checked as the proxy does: decodable, and not past its
        invisible time unless this endpoint keeps renewing it (a push consumer's message under auto-renew)."""
        h = validate.parse_receipt_handle(text)
        if not self._renewed(client_id, group, h):
            validate.check_not_expired(h, int(time.time() * 1000))
        return h

    def _renewed(self, client_id: str, group: str, h: ReceiptHandle) -> bool:
        mine = self._renewals.get(client_id)
        if not mine:
            return False
        return self.consuming.handle_key(group, h) in mine

    async def _loop(self) -> None:
        while True:
            await asyncio.sleep(self.interval_s)
            try:
                for cid in self.clients.expire_idle(self.client_idle_s):
                    self.on_idle(cid)
                await self.renew_once()
            except asyncio.CancelledError:
                raise
            except Busy:
                pass                       # the next round renews what this one could not
            except Exception:
                log.exception("renewing the invisible time of push consumers' messages failed")

    async def renew_once(self) -> None:
        """Extend what live push consumers hold and have not acked; a client gone quiet for
        ``grpcClientIdleTimeMills`` (or a message held past MAX_RENEW_MS) is let go, so its messages come back."""
        now = int(time.time() * 1000)
        interval_ms = int(self.interval_s * 1000)
        for cid in list(self._renewals):
            ch = self.clients.channels.get(cid)
            entries = self._renewals[cid]
            if ch is None or ch.closed or time.monotonic() - ch.last_seen > self.client_idle_s:
                del self._renewals[cid]
                continue
            by_invisible: dict[int, dict[Hashable, Hashable]] = {}
            for match, (renew_key, invisible, until) in list(entries.items()):
                if until < now:
                    del entries[match]
                else:
                    by_invisible.setdefault(invisible, {})[renew_key] = match
            for invisible, keys in by_invisible.items():
                still = set(await self.consuming.renew(list(keys), invisible, max(2 * interval_ms, invisible // 2)))
                for renew_key, match in keys.items():
                    if renew_key not in still:
                        entries.pop(match, None)
            if not entries:
                self._renewals.pop(cid, None)
