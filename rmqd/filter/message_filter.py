"""Broker-side message filter used by the store's pull path (Java ExpressionMessageFilter).

Two stages: :meth:`ExpressionMessageFilter.is_matched_by_consume_queue` (tag hash code
from the consume queue) and :meth:`ExpressionMessageFilter.is_matched_by_commit_log`
(SQL92 against the message properties decoded from the commit log).
"""
from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Callable, Container, Iterable, Mapping, Optional, TypedDict

from rmqd.common.json_values import json_int
from rmqd.filter.errors import SQLParseError
from rmqd.filter.tags import SUB_ALL, TagSubscription, java_trim, parse_tag_expression

if TYPE_CHECKING:        # the SQL92 compiler loads with the first SQL92 expression (start-up time)
    from rmqd.filter.sql92 import CompiledFilter
    from rmqd.remoting.fastjson import JsonValue

__all__ = [
    "SQL92",
    "TAG",
    "ExpressionMessageFilter",
    "build_subscription_data",
    "is_tag_type",
    "normalize_expression_type",
    "tag_code_matches",
]

log = logging.getLogger(__name__)

TAG = "TAG"
SQL92 = "SQL92"


def is_tag_type(expression_type: Optional[str]) -> bool:
    """Java ``ExpressionType.isTagType``: absent/empty/``TAG`` (C++ omits the field)."""
    return not expression_type or expression_type == TAG


def normalize_expression_type(expression_type: Optional[str]) -> str:
    """``TAG`` or ``SQL92``; raises :class:`SQLParseError` for any other type."""
    if is_tag_type(expression_type):
        return TAG
    if expression_type == SQL92:
        return SQL92
    raise SQLParseError(f"unsupported expression type {expression_type!r}")


class SubscriptionDataJson(TypedDict):
    """Java ``SubscriptionData`` as JSON (what :func:`build_subscription_data` makes)."""

    classFilterMode: bool
    codeSet: list[int]
    expressionType: str
    subString: str
    subVersion: int
    tagsSet: list[str]
    topic: str


def build_subscription_data(topic: str, expr: Optional[str], expression_type: Optional[str] = TAG,
                            sub_version: Optional[int] = None) -> SubscriptionDataJson:
    """Java ``FilterAPI.build`` as a SubscriptionData JSON dict (protocol §3.0).

    TAG: ``*``/empty ⇒ ``subString "*"`` with empty sets; otherwise the trimmed
    tags and their Java hash codes. SQL92: the expression is compiled (raising
    :class:`SQLParseError`) and both sets stay empty.
    """
    etype = normalize_expression_type(expression_type)
    version = int(time.time() * 1000) if sub_version is None else int(sub_version)
    if etype == TAG:
        sub = parse_tag_expression(expr)
        sub_string, tags, codes = sub.sub_string, list(sub.tags), list(sub.codes)
    else:
        if expr is None or not java_trim(expr):
            raise SQLParseError("empty expression", expr or "")
        from rmqd.filter.sql92 import compile_expression
        compile_expression(expr)
        sub_string, tags, codes = expr, [], []
    return {
        "classFilterMode": False,
        "codeSet": codes,
        "expressionType": etype,
        "subString": sub_string,
        "subVersion": version,
        "tagsSet": tags,
        "topic": topic,
    }


class ExpressionMessageFilter:
    """Filter for one subscription (``TAG`` or ``SQL92``).

    SQL92 expressions are compiled at construction (LRU-cached), so a bad
    expression raises :class:`SQLParseError` here — map it to
    SUBSCRIPTION_PARSE_FAILED.
    """

    __slots__ = ("subscription_type", "expression", "class_filter_mode", "tag_subscription",
                 "compiled", "_match_all")

    def __init__(self, subscription_type: Optional[str], expression: Optional[str],
                 class_filter_mode: bool = False, code_set: Optional[Iterable[object]] = None):
        self.subscription_type = normalize_expression_type(subscription_type)
        self.expression = expression
        self.class_filter_mode = bool(class_filter_mode)
        self.tag_subscription: Optional[TagSubscription] = None
        self.compiled: Optional[CompiledFilter] = None
        if self.subscription_type == TAG:
            sub = parse_tag_expression(expression)
            if code_set is not None and not sub.sub_all:
                # Trust the hash codes the client registered (Java uses them as sent).
                codes = frozenset(_tag_code(c) for c in code_set)
                sub = TagSubscription(sub.sub_string, sub.tags, tuple(codes), sub.tags_set, codes)
            self.tag_subscription = sub
            self._match_all = self.class_filter_mode or sub.sub_all
        else:
            if expression is None or not java_trim(expression):
                raise SQLParseError("empty expression", expression or "")
            from rmqd.filter.sql92 import compile_expression
            self.compiled = compile_expression(expression)
            self._match_all = self.class_filter_mode

    @classmethod
    def from_subscription_data(cls, data: Mapping[str, JsonValue]) -> "ExpressionMessageFilter":
        """Build from a SubscriptionData dict (heartbeat / consumer table); SQLParseError for a field of the
        wrong JSON type."""
        code_set = data.get("codeSet")
        if code_set is not None and not isinstance(code_set, list):
            raise SQLParseError(f"SubscriptionData codeSet is not a list: {code_set!r}")
        return cls(_json_text(data, "expressionType"), _json_text(data, "subString"),
                   class_filter_mode=bool(data.get("classFilterMode", False)),
                   code_set=code_set)

    def is_matched_by_consume_queue(self, tags_code: Optional[int]) -> bool:
        """Stage 1, from the consume-queue entry.

        TAG: ``*`` matches everything, else ``tags_code`` must be in the code set
        (a message without tags has code 0 and only matches ``*``; ``None`` means
        "unreadable code" and lets the entry through as Java does). SQL92: True.
        """
        if self._match_all:
            return True
        sub = self.tag_subscription
        if sub is None:
            return True
        if tags_code is None:
            return True
        return tags_code in sub.code_set

    def is_matched_by_commit_log(self, record: object = None,
                                 get_properties: Optional[Callable[[], Optional[Mapping[str, str]]]] = None) -> bool:
        """Stage 2, on the stored message. TAG (and class-filter mode): True.

        SQL92: evaluates against ``get_properties()`` (called lazily, only here);
        if omitted, a mapping ``record`` is used as the properties. Any
        conversion or decoding error means "not matched".
        """
        compiled = self.compiled
        if compiled is None or self.class_filter_mode:
            return True
        try:
            if get_properties is not None:
                props = get_properties()
            elif isinstance(record, Mapping):
                props = record
            else:
                props = None
        except Exception:  # noqa: BLE001 - a corrupt record must not break the pull
            log.warning("failed to decode properties for SQL92 filter %r", self.expression, exc_info=True)
            return False
        return compiled.matches(props)

    def matches_tag(self, tag: Optional[str]) -> bool:
        """Exact tag re-check (what clients do after the hash-only broker match)."""
        if self.tag_subscription is None:
            return True
        return self.tag_subscription.matches_tag(tag)

    def __repr__(self) -> str:
        return f"ExpressionMessageFilter({self.subscription_type}, {self.expression!r})"


def _json_text(data: Mapping[str, JsonValue], key: str) -> Optional[str]:
    """A SubscriptionData string field (absent: None)."""
    value = data.get(key)
    if value is None or isinstance(value, str):
        return value
    raise SQLParseError(f"SubscriptionData {key} is not a string: {value!r}")


def _tag_code(code: object) -> int:
    """One hash code of a registered ``codeSet`` (JSON numbers; strings of digits are taken too)."""
    try:
        return json_int(code)
    except TypeError:
        raise SQLParseError(f"SubscriptionData codeSet holds {code!r}, not a number") from None


def tag_code_matches(sub_string: str, code_set: Container[int], tags_code: int) -> bool:
    """Stateless form of the TAG consume-queue check."""
    return sub_string == SUB_ALL or tags_code in code_set

