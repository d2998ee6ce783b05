"""The broker's request hook for access control 2.0: a refused request is answered NO_PERMISSION (16) with
5.x's message as the remark (``AbortProcessException`` from 5.x's pipelines), before any processor runs.

With ACL 1.0 on as well (``aclEnable``), :class:`HookChain` runs both: 2.0 first, then plain_acl.yml.
"""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Callable, Optional

from rmqd.acl.refusing_hook import RefusingHook
from rmqd.auth.errors import AuthError
from rmqd.auth.guard import AuthGuard
from rmqd.remoting.codes import ResponseCode
from rmqd.remoting.command import RemotingCommand, error_response

if TYPE_CHECKING:
    from rmqd.remoting.command import BodyPart
    from rmqd.remoting.connection import Connection
    from rmqd.remoting.dispatch import RequestHook

log = logging.getLogger(__name__)


#: A hook's check of the send lane's raw sends: (peer host, code, access key, signature, signed content, body,
#: topic, group) -> None (go on) or the answer.
SignedSend = Callable[[str, int, str, str, bytes, Optional["BodyPart"], str, Optional[str]], Optional[RemotingCommand]]

#: The access control 2.0 request hook (``rmqd.acl.refusing_hook.RefusingHook`` refusing with an AuthError).
AuthRequestHook = RefusingHook[AuthError]


def auth_request_hook(guard: AuthGuard) -> AuthRequestHook:
    """Access control 2.0's check of every request: a refusal is NO_PERMISSION with 5.x's message as the remark."""
    def check(peer_host: str, request: RemotingCommand) -> None:
        guard.check_remoting(peer_host, request.code, request.ext_fields, request.body, request.version)
    return RefusingHook(AuthError, check, guard.check_send, _refusal)


def _refusal(code: int, peer: str, exc: AuthError) -> RemotingCommand:
    log.debug("auth: refused request code %d from %s: %s", code, peer, exc.message)
    return error_response(ResponseCode.NO_PERMISSION, exc.message)


class HookChain:
    """Two request hooks in order; the first refusal answers. The send lane's raw path is kept when both hooks
    check raw sends themselves."""

    def __init__(self, first: RequestHook, second: RequestHook) -> None:
        self.first, self.second = first, second
        first_send: Optional[SignedSend] = getattr(first, "signed_send", None)
        second_send: Optional[SignedSend] = getattr(second, "signed_send", None)
        if first_send is not None and second_send is not None:
            def signed_send(peer_host: str, code: int, access_key: str, signature: str, content: bytes,
                            body: Optional[BodyPart], topic: str, group: Optional[str]) -> Optional[RemotingCommand]:
                return (first_send(peer_host, code, access_key, signature, content, body, topic, group)
                        or second_send(peer_host, code, access_key, signature, content, body, topic, group))

            self.signed_send: SignedSend = signed_send

    def __call__(self, conn: Connection, request: RemotingCommand) -> Optional[RemotingCommand]:
        return self.first(conn, request) or self.second(conn, request)

