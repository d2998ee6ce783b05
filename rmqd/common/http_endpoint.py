"""LazyHttpEndpoint: what the console and the metrics endpoint share as ``Services`` endpoints: an HTTP port bound
at start (:class:`rmqd.common.lazy_http.LazyHttpSite`: the server loads on the first connection), a taken port that
is a note instead of a failure when the endpoint is ``optional`` (``rmqd serve``'s default ports), its URL."""
from __future__ import annotations

import logging
import socket
from typing import TYPE_CHECKING, Awaitable, Callable, Optional

from rmqd.common.lazy_http import LazyHttpSite

if TYPE_CHECKING:
    from aiohttp import web

log = logging.getLogger(__name__)


class LazyHttpEndpoint:
    """``failed``: the note of an optional endpoint whose port was taken (None while it serves)."""

    starts_early = True

    def __init__(self, host: str, port: int, optional: bool) -> None:
        self.host = host
        self.port = port
        self.optional = optional
        self.failed: Optional[str] = None
        self._site: Optional[LazyHttpSite] = None

    def _bind(self, name: str, serve: Callable[[socket.socket], Awaitable[web.AppRunner]],
              note: Callable[[OSError], str]) -> None:
        """Bind the port now (the port picked for 0 is in ``port``); ``serve`` runs on the first connection. A taken
        port raises its OSError, or, when optional, is ``failed = note(error)``, logged."""
        site = LazyHttpSite(self.host, self.port, serve, name)
        try:
            site.bind()
        except OSError as exc:
            if not self.optional:
                raise
            self.failed = note(exc)
            log.warning("%s", self.failed)
            return
        self._site = site
        self.port = site.port

    async def _close_site(self) -> None:
        if self._site is not None:
            await self._site.close()
            self._site = None

    def _url(self, path: str) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}{path}"
