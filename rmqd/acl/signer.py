"""The plain-ACL request signature (Java ``AclClientRPCHook`` / ``AclUtils.combineRequestContent``).

The signed content is the values of every header ext field except ``Signature``, concatenated in the
order of their names (Java TreeMap order), as UTF-8, followed by the body. The signature is the padded
Base64 of HmacSHA1(secret key, content). The broker also leaves ``_UNIQUE_KEY_QUERY`` out.
"""
from __future__ import annotations

import base64
import hashlib
import hmac
from operator import itemgetter
from typing import Any, Mapping, Optional

ACCESS_KEY = "AccessKey"
SIGNATURE = "Signature"
SECURITY_TOKEN = "SecurityToken"
UNIQUE_KEY_QUERY = "_UNIQUE_KEY_QUERY"


def header_content(ext_fields: Mapping[str, Optional[str]], skip: tuple[str, ...] = (SIGNATURE,)) -> bytes:
    """The signed header part: the values in name order, without the ``skip`` fields."""
    keys = sorted(ext_fields)
    for name in skip:
        if name in ext_fields:
            keys.remove(name)
    if not keys:
        return b""
    values = itemgetter(*keys)(ext_fields)
    if len(keys) == 1:
        values = (values,)
    try:
        return "".join(values).encode("utf-8")
    except TypeError:                       # a non-string value (JSON null or number): as Java prints it
        return "".join("null" if v is None else str(v) for v in values).encode("utf-8")


def request_content(ext_fields: Mapping[str, Optional[str]], body: Optional[bytes],
                    skip: tuple[str, ...] = (SIGNATURE,)) -> bytes:
    data = header_content(ext_fields, skip)
    return data + bytes(body) if body else data


class Verifier:
    """Checks signatures made with one secret key (the keyed HMAC state is computed once)."""

    __slots__ = ("_keyed",)

    def __init__(self, secret_key: str) -> None:
        self._keyed = hmac.new(secret_key.encode("utf-8"), None, hashlib.sha1)

    def matches(self, content: bytes, given: str, body: Any = None) -> bool:
        """Whether ``given`` signs ``content`` (followed by ``body``, when given apart)."""
        h = self._keyed.copy()
        h.update(content)
        if body:
            h.update(body)
        try:
            expected = base64.b64decode(given, validate=True)
        except (ValueError, TypeError):
            return False
        return hmac.compare_digest(h.digest(), expected)


def signature(content: bytes, secret_key: str) -> str:
    return base64.b64encode(hmac.new(secret_key.encode("utf-8"), content, hashlib.sha1).digest()).decode("ascii")


def sign_request(ext_fields: dict, body: Optional[bytes], access_key: str, secret_key: str,
                 security_token: Optional[str] = None) -> dict:
    """Client side: add AccessKey (SecurityToken) and Signature to ``ext_fields`` (in place) and return it."""
    ext_fields[ACCESS_KEY] = access_key
    if security_token is not None:
        ext_fields[SECURITY_TOKEN] = security_token
    ext_fields.pop(SIGNATURE, None)
    ext_fields[SIGNATURE] = signature(request_content(ext_fields, body), secret_key)
    return ext_fields
