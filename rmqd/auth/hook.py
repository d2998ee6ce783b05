"""The broker's request hook for access control 2.0: a refused request is answered NO_PERMISSION (16) with
5.x's message as the remark (``AbortProcessException`` from 5.x's pipelines), before any processor runs.

With ACL 1.0 on as well (``aclEnable``), :class:`HookChain` runs both: 2.0 first, then plain_acl.yml.
"""
from __future__ import annotations

import logging
from typing import Any, Optional

from rmqd.auth.errors import AuthError
from rmqd.auth.guard import AuthGuard
from rmqd.remoting.codes import ResponseCode
from rmqd.remoting.command import RemotingCommand, error_response

log = logging.getLogger(__name__)


class AuthRequestHook:
    """``hook(conn, request)`` -> None (go on) or the answer to send instead; ``signed_send`` for the send lane."""

    def __init__(self, guard: AuthGuard) -> None:
        self.guard = guard
        self.refused = 0

    def __call__(self, conn: Any, request: RemotingCommand) -> Optional[RemotingCommand]:
        try:
            self.guard.check_remoting(conn.peer_host, request.code, request.ext_fields, request.body,
                                      request.version)
        except AuthError as exc:
            return self._refuse(request.code, conn.remote_address, exc)
        return None

    def signed_send(self, peer_host: str, code: int, access_key: str, signature: str, content: bytes,
                    body: Any, topic: str, group: Optional[str]) -> Optional[RemotingCommand]:
        try:
            self.guard.check_send(peer_host, code, access_key, signature, content, body, topic, group)
        except AuthError as exc:
            return self._refuse(code, peer_host, exc)
        return None

    def _refuse(self, code: int, peer: str, exc: AuthError) -> RemotingCommand:
        self.refused += 1
        log.debug("auth: refused request code %d from %s: %s", code, peer, exc.message)
        return error_response(ResponseCode.NO_PERMISSION, exc.message)


class HookChain:
    """Two request hooks in order; the first refusal answers. The send lane's raw path is kept when both hooks
    check raw sends themselves."""

    def __init__(self, first: Any, second: Any) -> None:
        self.first, self.second = first, second
        if hasattr(first, "signed_send") and hasattr(second, "signed_send"):
            self.signed_send = self._signed_send

    def __call__(self, conn: Any, request: RemotingCommand) -> Optional[RemotingCommand]:
        return self.first(conn, request) or self.second(conn, request)

    def _signed_send(self, *args: Any) -> Optional[RemotingCommand]:
        return self.first.signed_send(*args) or self.second.signed_send(*args)
