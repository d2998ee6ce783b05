"""The two refusals of access control 2.0 (5.x ``AuthenticationException`` / ``AuthorizationException``).

Their text is the message 5.x sends as the remark of a NO_PERMISSION answer (remoting) or the message of an
UNAUTHORIZED status (gRPC). :func:`fmt` fills ``{}`` placeholders as SLF4J's ``MessageFormatter`` does.
"""
from __future__ import annotations

AUTHENTICATION_EXCEPTION = "org.apache.rocketmq.auth.authentication.exception.AuthenticationException"
AUTHORIZATION_EXCEPTION = "org.apache.rocketmq.auth.authorization.exception.AuthorizationException"


def fmt(pattern: str, *args: object) -> str:
    """``{}`` placeholders filled in order (``null`` for None, as Java prints it); extra ones are left as is."""
    out, rest = [], pattern
    for arg in args:
        head, sep, rest = rest.partition("{}")
        out.append(head)
        if not sep:
            rest = ""
            break
        out.append("null" if arg is None else str(arg))
    out.append(rest)
    return "".join(out)


class AuthError(Exception):
    """A refusal; ``message`` is what 5.x says."""

    java_class = ""

    def __init__(self, pattern: str, *args: object) -> None:
        self.message = fmt(pattern, *args) if args else pattern
        super().__init__(self.message)


class AuthenticationError(AuthError):
    """Who sent the request could not be established (unknown or disabled user, bad signature, ...)."""

    java_class = AUTHENTICATION_EXCEPTION


class AuthorizationError(AuthError):
    """The user may not do what the request does (or an admin request's ACL is invalid)."""

    java_class = AUTHORIZATION_EXCEPTION
