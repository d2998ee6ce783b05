"""Fields of the name servers' fastjson answers (:func:`rmqd.remoting.fastjson.loads_lenient`), read with their types
checked: an absent or null object or list reads as empty, a value of another JSON type is ``TypeError`` (the
caller's "unreadable answer").
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from rmqd.common.json_values import json_int as integer     # a number, or a string of one (object keys too)

if TYPE_CHECKING:
    from rmqd.remoting.fastjson import JsonKey, JsonValue


def obj(value: JsonValue) -> dict[JsonKey, JsonValue]:
    """A JSON object ({} for null or absent)."""
    if not value:
        return {}
    if isinstance(value, dict):
        return value
    raise TypeError(f"a JSON object expected, not {type(value).__name__}")


def array(value: JsonValue) -> list[JsonValue]:
    """A JSON array ([] for null or absent)."""
    if not value:
        return []
    if isinstance(value, list):
        return value
    raise TypeError(f"a JSON array expected, not {type(value).__name__}")


__all__ = ["array", "integer", "obj"]
