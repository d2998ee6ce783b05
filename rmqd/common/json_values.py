"""Typed reads of values from decoded JSON (whose type is open until checked)."""
from __future__ import annotations


def json_int(value: object) -> int:
    """``int(value)`` of a JSON value: a number or numeric text (fastjson and the C++ client write longs either way);
    null, an object or a list raise the TypeError ``int()`` raises for them, non-numeric text its ValueError."""
    if isinstance(value, (int, float, str)):
        return int(value)
    raise TypeError(f"int() argument must be a string, a bytes-like object or a real number, "
                    f"not '{type(value).__name__}'")
