"""Who sent a request: 5.x's ``DefaultAuthenticationHandler`` for remoting and gRPC.

Remoting: the ``AccessKey`` ext field names the user; the ``Signature`` is ACL 1.0's (:mod:`rmqd.acl.signer`:
HmacSHA1 over the other ext fields' values in name order, then the body), keyed with the user's password. 5.x
leaves ``_UNIQUE_KEY_QUERY`` out of the content only for requests of version 4.9.3 or older.
gRPC: ``authorization: MQv2-HMAC-SHA1 Credential=<user>, SignedHeaders=x-mq-date-time, Signature=<hex>``, the
hex HmacSHA1 of ``x-mq-date-time``. 5.x does not look at the date (an old one is accepted), nor does rmqd.

The checks, in 5.x's order and words: the code is in ``authenticationWhitelist``: accepted; no user named:
"username cannot be null."; unknown: "User:<u> is not found."; disabled: "User:<u> is disabled."; the signature
does not match (or is missing): "check signature failed.".
"""
from __future__ import annotations

import binascii
from typing import TYPE_CHECKING, Mapping, Optional

from rmqd.acl.signer import SIGNATURE, UNIQUE_KEY_QUERY, Verifier, header_content
from rmqd.auth.errors import AuthenticationError
from rmqd.auth.model import User, UserStatus
from rmqd.auth.store import AuthStore

if TYPE_CHECKING:
    from rmqd.remoting.command import BodyPart

ACCESS_KEY = "AccessKey"
V4_9_3 = 399                     # MQVersion.Version.V4_9_3.ordinal(): older requests sign without _UNIQUE_KEY_QUERY


class Authenticator:
    """Checks signatures against the users of an :class:`AuthStore` (one verifier per user and password, made
    once)."""

    def __init__(self, store: AuthStore, whitelist: frozenset[str] = frozenset()) -> None:
        self.store = store
        self.whitelist = whitelist
        self._verifiers: dict[tuple[Optional[str], str], Verifier] = {}

    def verifier(self, user: User) -> Verifier:
        key = (user.username, user.password or "")
        v = self._verifiers.get(key)
        if v is None:
            if len(self._verifiers) > 10000:
                self._verifiers.clear()
            v = self._verifiers[key] = Verifier(user.password or "")
        return v

    def user_of(self, username: Optional[str]) -> User:
        """The enabled user a request names (AuthenticationError otherwise)."""
        if not username:
            raise AuthenticationError("username cannot be null.")
        user = self.store.state.users.get(username)
        if user is None:
            raise AuthenticationError("User:{} is not found.", username)
        if user.user_status is UserStatus.DISABLE:
            raise AuthenticationError("User:{} is disabled.", username)
        return user

    # ------------------------------------------------------------------ remoting
    def check_remoting(self, code: int, ext: Optional[Mapping[str, str]], body: Optional[BodyPart],
                       version: int = 0) -> Optional[str]:
        """The authenticated user name (None for a whitelisted code); raises AuthenticationError."""
        if self.whitelist and str(code) in self.whitelist:
            return None
        fields: Mapping[str, str] = ext or {}
        username = fields.get(ACCESS_KEY)
        user = self.user_of(username)
        given = fields.get(SIGNATURE)
        skip = (SIGNATURE, UNIQUE_KEY_QUERY) if version <= V4_9_3 else (SIGNATURE,)
        if not isinstance(given, str) or not self.verifier(user).matches(header_content(fields, skip), given, body):
            raise AuthenticationError("check signature failed.")
        return username

    def check_signed(self, username: str, signature: str, content: bytes, body: Optional[BodyPart]) -> None:
        """A send whose signed header content the send lane built from the raw bytes."""
        user = self.user_of(username)
        if not self.verifier(user).matches(content, signature, body):
            raise AuthenticationError("check signature failed.")

    # ------------------------------------------------------------------ gRPC
    def check_grpc(self, rpc_name: str, metadata: Mapping[str, str]) -> Optional[str]:
        """The user a gRPC call names (checked unless the call is whitelisted); raises AuthenticationError."""
        username, signature, content = parse_grpc_authorization(metadata)
        if self.whitelist and rpc_name in self.whitelist:
            return username
        user = self.user_of(username)
        if signature is None or not self.verifier(user).matches(content, signature):
            raise AuthenticationError("check signature failed.")
        return username


def parse_grpc_authorization(metadata: Mapping[str, str]) -> tuple[Optional[str], Optional[str], bytes]:
    """5.x ``DefaultAuthenticationContextBuilder.build(Metadata, ...)``: (user, Base64 signature, signed content);
    (None, None, b"") without an ``authorization`` header. Raises AuthenticationError for a malformed one."""
    authorization = metadata.get("authorization")
    if not authorization:
        return None, None, b""
    datetime = metadata.get("x-mq-date-time")
    if not datetime:
        raise AuthenticationError("datetime is null.")
    parts = authorization.split(" ", 1)
    if len(parts) != 2:
        raise AuthenticationError("authentication header is incorrect.")
    username = signature = None
    for key_value in parts[1].split(","):
        kv = key_value.strip().split("=", 1)
        if len(kv) != 2:
            raise AuthenticationError("authentication keyValues length is incorrect, actual length={}.", len(kv))
        if kv[0] == "Credential":
            credential = _java_split(kv[1], "/")
            if not credential:
                raise AuthenticationError("authentication credential length is incorrect, actual length={}.", 0)
            username = credential[0]
        elif kv[0] == "Signature":
            try:
                signature = binascii.b2a_base64(binascii.unhexlify(kv[1]), newline=False).decode("ascii")
            except (ValueError, binascii.Error):
                raise AuthenticationError("create authentication context error.") from None
    return username, signature, datetime.encode("utf-8")


def _java_split(text: str, sep: str) -> list[str]:
    """``String.split(sep)``: trailing empty parts are dropped (a text without ``sep`` is one part)."""
    if sep not in text:
        return [text]
    parts = text.split(sep)
    while parts and parts[-1] == "":
        parts.pop()
    return parts
