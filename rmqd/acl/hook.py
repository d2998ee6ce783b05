"""The broker's request hook: every request on the broker ports is checked before it is processed."""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Optional

from rmqd.acl.permission import AclError
from rmqd.acl.validator import AclValidator, remark
from rmqd.remoting.codes import ResponseCode
from rmqd.remoting.command import RemotingCommand, error_response

if TYPE_CHECKING:
    from rmqd.acl.handles import RequestPeer
    from rmqd.remoting.command import BodyPart

log = logging.getLogger(__name__)


class AclRequestHook:
    """``hook(conn, request)`` -> None (go on) or the refusal to send instead (Java 4.9.8: SYSTEM_ERROR
    with the AclException as remark)."""

    def __init__(self, validator: AclValidator) -> None:
        self.validator = validator
        self.refused = 0

    def __call__(self, conn: RequestPeer, request: RemotingCommand) -> Optional[RemotingCommand]:
        try:
            self.validator.check(conn.peer_host, request.code, request.ext_fields, request.body)
        except AclError as exc:
            return self._refuse(request.code, conn.remote_address, exc)
        return None

    def signed_send(self, peer_host: str, code: int, access_key: str, signature: str, content: bytes,
                    body: Optional[BodyPart], topic: str, group: Optional[str]) -> Optional[RemotingCommand]:
        """The send lane's entry (it read the header from the raw bytes and built the signed content)."""
        try:
            self.validator.check_signed_send(peer_host, code, access_key, signature, content, body, topic, group)
        except AclError as exc:
            return self._refuse(code, peer_host, exc)
        return None

    def _refuse(self, code: int, peer: str, exc: AclError) -> RemotingCommand:
        self.refused += 1
        log.info("ACL: refused request code %d from %s: %s", code, peer, exc.message)
        return error_response(ResponseCode.SYSTEM_ERROR, remark(exc))
