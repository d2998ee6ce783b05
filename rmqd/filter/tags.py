"""Tag subscriptions: Java ``String.hashCode`` and ``"A || B"`` tag expressions.

The broker stores ``TAGS.hashCode()`` as the consume-queue ``tagsCode`` and filters
by hash only; clients re-check the exact tag string (see protocol §6.2).
"""
from __future__ import annotations

import sys
from dataclasses import dataclass, field
from functools import lru_cache

__all__ = [
    "SUB_ALL",
    "TagSubscription",
    "java_string_hash",
    "java_trim",
    "parse_tag_expression",
    "tags_to_code",
]

SUB_ALL = "*"

_UTF16 = "utf-16-le" if sys.byteorder == "little" else "utf-16-be"
# Java String.trim() strips every char <= U+0020 (not Unicode whitespace).
_JAVA_TRIM_CHARS = "".join(chr(i) for i in range(33))


def java_trim(s: str) -> str:
    """Return ``s`` trimmed like Java's ``String.trim()``."""
    return s.strip(_JAVA_TRIM_CHARS)


@lru_cache(maxsize=8192)
def java_string_hash(s: str) -> int:
    """Java ``String.hashCode()``: over UTF-16 code units, signed 32-bit result.

    Lone surrogates (e.g. from ``surrogatepass`` decoding) are hashed as-is.
    """
    h = 0
    if s.isascii():
        for ch in s.encode("ascii"):
            h = (31 * h + ch) & 0xFFFFFFFF
    else:
        units = memoryview(s.encode(_UTF16, "surrogatepass")).cast("H")
        for c in units:
            h = (31 * h + c) & 0xFFFFFFFF
    return h - 0x100000000 if h & 0x80000000 else h


def tags_to_code(tags: str | None) -> int:
    """Consume-queue tags code of a message: 0 without TAGS, else the Java hash."""
    if not tags:
        return 0
    return java_string_hash(tags)


@dataclass(frozen=True)
class TagSubscription:
    """A parsed tag expression.

    ``sub_all`` is true for ``*``/empty. ``tags`` keeps the first-seen order of
    the distinct trimmed tags and ``codes`` their Java hashes (also deduplicated).
    """

    sub_string: str
    tags: tuple[str, ...] = ()
    codes: tuple[int, ...] = ()
    tags_set: frozenset[str] = field(default_factory=frozenset)
    code_set: frozenset[int] = field(default_factory=frozenset)

    @property
    def sub_all(self) -> bool:
        return self.sub_string == SUB_ALL

    def matches_code(self, tags_code: int) -> bool:
        """Broker-side (consume queue) match by tag hash code."""
        return self.sub_string == SUB_ALL or tags_code in self.code_set

    def matches_tag(self, tag: str | None) -> bool:
        """Exact re-check as the Java client does it (``tagsSet.contains(tags)``).

        ``*`` accepts everything; otherwise a message without TAGS never matches.
        """
        if self.sub_string == SUB_ALL:
            return True
        return tag is not None and tag in self.tags_set


_ALL = TagSubscription(SUB_ALL)


@lru_cache(maxsize=1024)
def parse_tag_expression(expr: str | None) -> TagSubscription:
    """Parse ``"TagA || TagB"``: ``*``/empty/blank means all; split on ``||``,
    Java-trim each part and drop empty parts (a tag ``*`` inside a list is an
    ordinary tag, as in Java)."""
    if expr is None:
        return _ALL
    s = java_trim(expr)
    if not s or s == SUB_ALL:
        return _ALL
    tags: list[str] = []
    codes: list[int] = []
    for part in s.split("||"):
        tag = java_trim(part)
        if tag and tag not in tags:
            tags.append(tag)
            code = java_string_hash(tag)
            if code not in codes:
                codes.append(code)
    return TagSubscription(s, tuple(tags), tuple(codes), frozenset(tags), frozenset(codes))
