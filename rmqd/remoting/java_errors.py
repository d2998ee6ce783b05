"""Remarks the Java 4.9.8 broker (on Java 17) sends when a request's input makes it throw.

Java answers an exception thrown by a processor with SYSTEM_ERROR and
``RemotingHelper.exceptionSimpleDesc(e)``: the exception's ``toString()``, ", ", its top stack frame.
rmqd raises the exceptions below where Java's processors throw deterministically on bad input, and the
dispatcher (``rmqd.remoting.dispatch.run_handler``) answers them with Java's text.
"""
from __future__ import annotations

import ast
import re

# RemotingSerializable.decode(null body): new String(null, UTF_8)
NULL_BODY_REMARK = ('java.lang.NullPointerException: Cannot read the array length because "bytes" is null, '
                    'java.base/java.lang.String.<init>(String.java:1387)')
_NUMBER_FORMAT = ('java.lang.NumberFormatException: For input string: "{}", '
                  'java.base/java.lang.NumberFormatException.forInputString(NumberFormatException.java:67)')
_PY_INT_ERROR = re.compile(r"invalid literal for int\(\) with base 10: (.*)\Z", re.S)

INT_MIN, INT_MAX = -(1 << 31), (1 << 31) - 1


class NullBodyError(ValueError):
    """A request that needs a body came without one."""

    def __str__(self) -> str:
        return NULL_BODY_REMARK


class BadBodyError(ValueError):
    """A request body that is not the JSON its code expects (Java answers its JSON parser's exception text;
    rmqd the text of its own parser, with the same code)."""


class NumberFormatError(ValueError):
    """A header value that Integer.parseInt / Long.parseLong refuses."""

    def __init__(self, value: str) -> None:
        super().__init__(value)
        self.value = value

    def __str__(self) -> str:
        return _NUMBER_FORMAT.format(self.value)


def java_int(value: str, bits: int = 32) -> int:
    """Integer.parseInt (``bits=32``) or Long.parseLong (64): NumberFormatError where Java throws."""
    text = str(value)
    if not re.fullmatch(r"[+-]?\d+", text):
        raise NumberFormatError(text)
    n = int(text)
    if not -(1 << (bits - 1)) <= n < (1 << (bits - 1)):
        raise NumberFormatError(text)
    return n


def number_format_remark(exc: ValueError) -> str | None:
    """Java's remark for a failed number parse (a NumberFormatError, or Python's own int() message)."""
    if isinstance(exc, NumberFormatError):
        return str(exc)
    m = _PY_INT_ERROR.match(str(exc))
    if m is None:
        return None
    try:
        literal = ast.literal_eval(m.group(1))
    except (ValueError, SyntaxError):
        literal = m.group(1)
    return _NUMBER_FORMAT.format(literal)
