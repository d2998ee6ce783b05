"""ACL for gRPC requests: the 5.x clients' ``authorization`` metadata checked against plain_acl.yml.

Header: ``MQv2-HMAC-SHA1 Credential=<ak>, SignedHeaders=x-mq-date-time, Signature=<hex>`` where the
signature is hex HMAC-SHA1(secret key, value of ``x-mq-date-time``).  The checks are the remoting
ones (global white list, account, account white list, signature, topic/group permissions); a
refusal is UNAUTHORIZED 40100 (who you are) or FORBIDDEN 40300 (what you may do), as the proxy answers.
"""
from __future__ import annotations

import hashlib
import hmac
from typing import TYPE_CHECKING, Mapping, Optional

from rmqd.acl.permission import AclError
from rmqd.acl.validator import AclValidator
from rmqd.grpc.pb import definition_pb2 as d

if TYPE_CHECKING:
    from rmqd.acl.plain_acl import PlainAclManager

UNAUTHORIZED, FORBIDDEN = d.Code.UNAUTHORIZED, d.Code.FORBIDDEN      # 40100, 40300


class GrpcAuthError(Exception):
    def __init__(self, code: d.Code.ValueType, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def parse_authorization(value: Optional[str]) -> tuple[Optional[str], Optional[str]]:
    """(access key, signature) of an ``authorization`` value; (None, None) when absent or blank."""
    if not value:
        return None, None
    _, _, rest = value.partition(" ")
    fields: dict[str, str] = {}
    for part in rest.split(","):
        k, _, v = part.strip().partition("=")
        fields[k] = v
    return fields.get("Credential") or None, fields.get("Signature") or None


def check(manager: PlainAclManager, peer_host: str, metadata: Mapping[str, str], need: dict[str, int],
          code: int = 0) -> None:
    """Raise GrpcAuthError when the request is refused (``need``: resource -> PUB/SUB bits)."""
    state = manager.state
    ak, given = parse_authorization(metadata.get("authorization"))
    try:
        account = AclValidator._signer_of(state, peer_host, ak)
    except AclError as exc:
        raise GrpcAuthError(UNAUTHORIZED, exc.message) from None
    if account is None:
        return
    date = metadata.get("x-mq-date-time", "")
    expected = hmac.new(account.secret_key.encode("utf-8"), date.encode("utf-8"), hashlib.sha1).hexdigest()
    if not given or not hmac.compare_digest(expected, given.lower()):
        raise GrpcAuthError(UNAUTHORIZED, f"Check signature failed for accessKey={ak}")
    try:
        AclValidator._check_perm(code, need, account)
    except AclError as exc:
        raise GrpcAuthError(FORBIDDEN, exc.message) from None
