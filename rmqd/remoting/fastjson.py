"""JSON in fastjson's dialect, for bodies the Java tools parse (README §0 rules 4/5, §3.0).

Encoding (:func:`dumps`) is compact and deterministic:

* dict keys are sorted (fastjson sorts bean fields; for hash maps any order is valid, sorted is
  stable and matches ``MapSortField``);
* ``int`` keys are written **unquoted** (``{0:"127.0.0.1:10911"}``) unless ``standard=True``;
* :class:`MessageQueue` keys (and any other bean used as a key) are written as a **JSON object**
  (``{{"brokerName":"b","queueId":0,"topic":"t"}:{...}}``); with ``standard=True`` the object is
  written as a quoted JSON string instead (fastjson's ``WriteNonStringKeyAsString``);
* ``standard=True`` is fastjson's ``BrowserCompatible`` flavour the name server uses for new
  clients: numeric keys quoted, non-ASCII as ``\\uXXXX``, longs beyond ±2^53 as strings;
* beans: any object with a ``to_fastjson()`` method (returning a dict, list or scalar), or a
  dataclass (its fields, ``None`` omitted).  Sets become sorted arrays; bytes become base64 (as
  fastjson writes ``byte[]``); floats follow Java's ``Double.toString``; NaN/Infinity are null.

Decoding (:func:`loads_lenient`) accepts standard JSON plus fastjson's liberties: unquoted
integer keys (→ ``int``), unquoted identifier keys (→ ``str``), object keys (→ :class:`MessageQueue`
when the object has exactly topic/brokerName/queueId, else a :class:`FrozenObject`), single-quoted
strings, and surrounding whitespace (the C++ client appends ``\\n``).
"""
from __future__ import annotations

import base64
import dataclasses
import json
import math
import re
from typing import TYPE_CHECKING, AbstractSet, Callable, Iterable, Mapping, Optional, Protocol, Sequence, Union

import orjson

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

__all__ = ["MessageQueue", "FrozenObject", "dumps", "dumps_str", "loads_lenient", "JSONDecodeError",
           "JsonKey", "JsonValue", "Encodable", "Bean"]

JSONDecodeError = ValueError

_MAX_SAFE_LONG = 9007199254740991


@dataclasses.dataclass(frozen=True, order=True, slots=True)
class MessageQueue:
    """RocketMQ's MessageQueue; equality/hash = (topic, brokerName, queueId)."""

    topic: str
    brokerName: str
    queueId: int

    def to_fastjson(self) -> dict[str, Union[str, int]]:
        return {"brokerName": self.brokerName, "queueId": self.queueId, "topic": self.topic}


class FrozenObject(tuple["tuple[JsonKey, JsonValue]", ...]):
    """A JSON object used as a map key (other than a MessageQueue): sorted (key, value) pairs."""

    __slots__ = ()

    def to_fastjson(self) -> "dict[JsonKey, JsonValue]":
        return dict(self)


# What loads_lenient returns: standard JSON values, with fastjson's object keys.
JsonKey = Union[str, int, MessageQueue, FrozenObject]
JsonValue = Union[None, bool, int, float, str, list["JsonValue"], dict[JsonKey, "JsonValue"]]


class Bean(Protocol):
    """An object fastjson writes through its JSON-able form."""

    def to_fastjson(self) -> "Encodable": ...


# What dumps takes: JSON values, beans (to_fastjson or a dataclass), sets, bytes (base64), and maps keyed by
# strings, numbers or beans.
Encodable = Union[None, bool, int, float, str, bytes, bytearray, memoryview, Bean, "DataclassInstance",
                  Mapping[str, "Encodable"], Mapping[int, "Encodable"], Mapping[MessageQueue, "Encodable"],
                  Mapping[JsonKey, "Encodable"], Sequence["Encodable"], AbstractSet["Encodable"]]


# ------------------------------------------------------------------------------------ encoding
_ESCAPE_SHORT = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t"}
#: (needs escape, needs escape in ASCII-only output): compiled on first use, not at import (start-up time)
_ESCAPE_RES: "tuple[re.Pattern[str], re.Pattern[str]] | None" = None


def _escape_res() -> "tuple[re.Pattern[str], re.Pattern[str]]":
    global _ESCAPE_RES
    _ESCAPE_RES = (re.compile('["\\\\\x00-\x1f\x7f\u2028\u2029]'), re.compile('["\\\\\x00-\x1f\x7f-\uffff]'))
    return _ESCAPE_RES


def _escape_char(m: "re.Match[str]") -> str:
    c = m.group(0)
    short = _ESCAPE_SHORT.get(c)
    if short is not None:
        return short
    return "\\u%04X" % ord(c)


def _escape_char_ascii(m: "re.Match[str]") -> str:
    c = m.group(0)
    short = _ESCAPE_SHORT.get(c)
    if short is not None:
        return short
    code = ord(c)
    if code > 0xFFFF:  # astral: UTF-16 surrogate pair, as Java strings hold it
        code -= 0x10000
        return "\\u%04X\\u%04X" % (0xD800 + (code >> 10), 0xDC00 + (code & 0x3FF))
    return "\\u%04X" % code


def _quote(s: str, standard: bool) -> str:
    needs_escape, needs_escape_ascii = _ESCAPE_RES or _escape_res()
    if standard:
        if needs_escape_ascii.search(s) is None and s.isascii():
            return '"' + s + '"'
        return '"' + re.sub('["\\\\\x00-\x1f\x7f-\U0010ffff]', _escape_char_ascii, s) + '"'
    if needs_escape.search(s) is None:
        return '"' + s + '"'
    return '"' + needs_escape.sub(_escape_char, s) + '"'


def java_double(x: float) -> str:
    """Java's ``Double.toString`` shape: ``1.0``, ``0.001``, ``1.0E7``, ``1.5E-5``."""
    if math.isnan(x) or math.isinf(x):
        return "null"
    if x == 0.0:
        return "-0.0" if math.copysign(1.0, x) < 0 else "0.0"
    sign = "-" if x < 0 else ""
    from decimal import Decimal      # rare (float fields); kept out of the idle broker's memory
    _, digit_tuple, exp = Decimal(repr(abs(x))).normalize().as_tuple()
    digits = "".join(map(str, digit_tuple))
    point = len(digits) + int(exp)  # position of the decimal point within digits
    if 1e-3 <= abs(x) < 1e7:
        if point <= 0:
            return f"{sign}0.{'0' * -point}{digits}"
        if point >= len(digits):
            return f"{sign}{digits}{'0' * (point - len(digits))}.0"
        return f"{sign}{digits[:point]}.{digits[point:]}"
    return f"{sign}{digits[0]}.{digits[1:] or '0'}E{point - 1}"


def _key_sort(key: "Encodable") -> tuple[int, str, int]:
    if isinstance(key, str):
        return (1, key, 0)
    if isinstance(key, bool):
        return (2, "", int(key))
    if isinstance(key, int):
        return (0, "", key)
    return (3, dumps_str(key), 0)


def _bean(obj: "Encodable") -> "Encodable":
    """The JSON-able form of a bean (to_fastjson or dataclass), else None."""
    to: Optional[Callable[[], Encodable]] = getattr(obj, "to_fastjson", None)
    if to is not None:
        return to()
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj)
                if getattr(obj, f.name) is not None}
    return None


class _Encoder:
    __slots__ = ("standard", "parts")

    def __init__(self, standard: bool) -> None:
        self.standard = standard
        self.parts: list[str] = []

    def value(self, obj: "Encodable") -> None:
        parts = self.parts
        if isinstance(obj, str):
            parts.append(_quote(obj, self.standard))
        elif obj is None:
            parts.append("null")
        elif obj is True:
            parts.append("true")
        elif obj is False:
            parts.append("false")
        elif isinstance(obj, int):
            if self.standard and not -_MAX_SAFE_LONG <= obj <= _MAX_SAFE_LONG:
                parts.append('"%d"' % obj)
            else:
                parts.append("%d" % obj)
        elif isinstance(obj, float):
            parts.append(java_double(obj))
        elif isinstance(obj, dict):
            self.mapping(obj)
        elif isinstance(obj, (list, tuple)) and not isinstance(obj, FrozenObject):
            self.array(obj)
        elif isinstance(obj, (set, frozenset)):
            self.array(sorted(obj, key=_key_sort))
        elif isinstance(obj, (bytes, bytearray, memoryview)):
            parts.append('"' + base64.b64encode(bytes(obj)).decode("ascii") + '"')
        else:
            bean = _bean(obj)
            if bean is None:
                raise TypeError(f"fastjson: cannot encode {type(obj).__name__}")
            self.value(bean)

    def array(self, items: "Iterable[Encodable]") -> None:
        parts = self.parts
        parts.append("[")
        for item in items:
            self.value(item)
            parts.append(",")
        self.close("]")

    def mapping(self, obj: "Mapping[JsonKey, Encodable]") -> None:
        parts = self.parts
        parts.append("{")
        try:
            keys = sorted(obj)
        except TypeError:
            keys = sorted(obj, key=_key_sort)
        for key in keys:
            self.key(key)
            parts.append(":")
            self.value(obj[key])
            parts.append(",")
        self.close("}")

    def close(self, bracket: str) -> None:
        """End an array or object whose every element was followed by a ``,`` part: the last one becomes the
        bracket (no value's own last part is a lone ``,``: strings end in a quote)."""
        parts = self.parts
        if parts[-1] == ",":
            parts[-1] = bracket
        else:
            parts.append(bracket)

    def key(self, key: "Encodable") -> None:
        parts = self.parts
        if isinstance(key, str):
            parts.append(_quote(key, self.standard))
        elif isinstance(key, bool):
            parts.append('"true"' if key and self.standard else '"false"' if self.standard
                         else "true" if key else "false")
        elif isinstance(key, int):
            parts.append('"%d"' % key if self.standard else "%d" % key)
        elif self.standard:
            parts.append(_quote(dumps_str(key, standard=True), True))
        else:
            self.value(key)  # a bean key: written as a JSON object


def dumps_str(obj: "Encodable", standard: bool = False) -> str:
    """Encode ``obj`` as compact fastjson text (see module doc)."""
    enc = _Encoder(standard)
    enc.value(obj)
    return "".join(enc.parts)


def dumps(obj: "Encodable", standard: bool = False) -> bytes:
    """Encode ``obj`` as compact fastjson UTF-8 bytes (see module doc)."""
    return dumps_str(obj, standard).encode("utf-8")


# ------------------------------------------------------------------------------------ decoding
_WS = " \t\n\r\f\v\ufeff"
#: (number, bare object key): compiled on first use, not at import (start-up time)
_DECODE_RES: "tuple[re.Pattern[str], re.Pattern[str]] | None" = None


def _decode_res() -> "tuple[re.Pattern[str], re.Pattern[str]]":
    global _DECODE_RES
    _DECODE_RES = (re.compile(r"-?(?:0|[1-9]\d*)(\.\d+)?([eE][-+]?\d+)?"), re.compile(r"[A-Za-z0-9_$.\-]+"))
    return _DECODE_RES


_scanstring: Callable[[str, int, bool], tuple[str, int]] = json.decoder.scanstring  # type: ignore[attr-defined]
_MQ_KEYS = frozenset(("topic", "brokerName", "queueId"))


class _Parser:
    __slots__ = ("s", "i")

    def __init__(self, s: str) -> None:
        self.s = s
        self.i = 0

    def error(self, what: str) -> ValueError:
        return ValueError(f"fastjson: {what} at offset {self.i}: {self.s[self.i:self.i + 30]!r}")

    def ws(self) -> None:
        s, i, n = self.s, self.i, len(self.s)
        while i < n and s[i] in _WS:
            i += 1
        self.i = i

    def value(self) -> JsonValue:
        self.ws()
        s, i = self.s, self.i
        if i >= len(s):
            raise self.error("unexpected end")
        c = s[i]
        if c == "{":
            return self.obj()
        if c == "[":
            return self.arr()
        if c == '"':
            text, self.i = _scanstring(s, i + 1, True)
            return text
        if c == "'":
            return self.single_quoted()
        if s.startswith("true", i):
            self.i = i + 4
            return True
        if s.startswith("false", i):
            self.i = i + 5
            return False
        if s.startswith("null", i):
            self.i = i + 4
            return None
        m = (_DECODE_RES or _decode_res())[0].match(s, i)
        if m is None or m.end() == i:
            raise self.error("unexpected character")
        self.i = m.end()
        if m.group(1) or m.group(2):
            return float(m.group(0))
        return int(m.group(0))

    def single_quoted(self) -> str:
        s = self.s
        j = self.i + 1
        out = []
        while True:
            k = s.find("'", j)
            if k < 0:
                raise self.error("unterminated string")
            if s[k - 1] == "\\":
                out.append(s[j:k - 1] + "'")
                j = k + 1
                continue
            out.append(s[j:k])
            self.i = k + 1
            return "".join(out)

    def key(self) -> JsonKey:
        s, i = self.s, self.i
        c = s[i]
        if c == '"':
            text, self.i = _scanstring(s, i + 1, True)
            return text
        if c == "'":
            return self.single_quoted()
        if c == "{":
            d = self.obj()
            if d.keys() == _MQ_KEYS:
                topic, broker, queue_id = d["topic"], d["brokerName"], d["queueId"]
                if isinstance(topic, str) and isinstance(broker, str) and isinstance(queue_id, (int, float, str)):
                    return MessageQueue(topic, broker, int(queue_id))
            return FrozenObject(sorted(d.items(), key=lambda kv: kv[0]))
        m = (_DECODE_RES or _decode_res())[1].match(s, i)
        if m is None:
            raise self.error("bad object key")
        self.i = m.end()
        text = m.group(0)
        try:
            return int(text)
        except ValueError:
            return text

    def obj(self) -> dict[JsonKey, JsonValue]:
        self.i += 1
        out: dict[JsonKey, JsonValue] = {}
        self.ws()
        if self.s[self.i:self.i + 1] == "}":
            self.i += 1
            return out
        while True:
            self.ws()
            if self.i >= len(self.s):
                raise self.error("unexpected end in object")
            k = self.key()
            self.ws()
            if self.s[self.i:self.i + 1] != ":":
                raise self.error("expected ':'")
            self.i += 1
            out[k] = self.value()
            self.ws()
            c = self.s[self.i:self.i + 1]
            self.i += 1
            if c == ",":
                self.ws()
                if self.s[self.i:self.i + 1] == "}":  # trailing comma, tolerated by fastjson
                    self.i += 1
                    return out
                continue
            if c == "}":
                return out
            self.i -= 1
            raise self.error("expected ',' or '}'")

    def arr(self) -> list[JsonValue]:
        self.i += 1
        out: list[JsonValue] = []
        self.ws()
        if self.s[self.i:self.i + 1] == "]":
            self.i += 1
            return out
        while True:
            out.append(self.value())
            self.ws()
            c = self.s[self.i:self.i + 1]
            self.i += 1
            if c == ",":
                continue
            if c == "]":
                return out
            self.i -= 1
            raise self.error("expected ',' or ']'")


def loads_lenient(data: bytes | bytearray | memoryview | str) -> JsonValue:
    """Parse JSON the way fastjson does (see module doc); raises ValueError on bad input."""
    if not isinstance(data, str):
        try:
            value: JsonValue = orjson.loads(data)  # fast path: standard JSON
            return value
        except orjson.JSONDecodeError:
            pass
        data = bytes(data).decode("utf-8")
    else:
        try:
            value = orjson.loads(data)
            return value
        except orjson.JSONDecodeError:
            pass
    parser = _Parser(data)
    result = parser.value()
    parser.ws()
    if parser.i != len(data):
        raise parser.error("extra data")
    return result
