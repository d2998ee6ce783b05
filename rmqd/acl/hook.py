"""The broker's request hook: every request on the broker ports is checked before it is processed."""
from __future__ import annotations

import logging

from rmqd.acl.permission import AclError
from rmqd.acl.refusing_hook import RefusingHook
from rmqd.acl.validator import AclValidator, remark
from rmqd.remoting.codes import ResponseCode
from rmqd.remoting.command import RemotingCommand, error_response

log = logging.getLogger(__name__)


#: The ACL 1.0 request hook (``rmqd.acl.refusing_hook.RefusingHook`` refusing with an AclError).
AclRequestHook = RefusingHook[AclError]


def acl_request_hook(validator: AclValidator) -> AclRequestHook:
    """Java 4.9.8's ACL check of every request: a refusal is SYSTEM_ERROR with the AclException as remark."""
    def check(peer_host: str, request: RemotingCommand) -> None:
        validator.check(peer_host, request.code, request.ext_fields, request.body)
    return RefusingHook(AclError, check, validator.check_signed_send, _refusal)


def _refusal(code: int, peer: str, exc: AclError) -> RemotingCommand:
    log.info("ACL: refused request code %d from %s: %s", code, peer, exc.message)
    return error_response(ResponseCode.SYSTEM_ERROR, remark(exc))
