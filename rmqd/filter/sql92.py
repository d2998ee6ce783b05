"""RocketMQ SQL92 message selectors: lexer, recursive-descent parser, closure compiler.

Semantics follow RocketMQ's ``filter`` module (JMS selector subset, see protocol §6.3):

* property values are strings (or absent ⇒ NULL); numbers only come from literals;
* a property compared with a number is parsed to that number's Java type
  (``Integer``/``Long``/``Double.valueOf``); two strings under ``> >= < <=`` are both
  parsed as doubles; a failed conversion raises :class:`FilterEvaluationError`
  (the message does not match, whatever the surrounding ``OR``/``NOT``);
* three-valued logic: a comparison with NULL is unknown (``None``), including the
  Java quirks of ``=`` (``'x' = a`` with ``a`` absent is FALSE, ``a = b`` with both
  absent is TRUE) and CONTAINS/STARTSWITH/ENDSWITH (absent ⇒ FALSE, never unknown);
* a message matches only if the expression evaluates to exactly TRUE.

Deliberate divergences from the Java parser: trailing tokens after a complete
expression are an error (Java silently ignores them), and a ``--`` comment may end
at end of input (Java requires a line break).
"""
from __future__ import annotations

import re
import threading
from collections import OrderedDict
from typing import Callable, Mapping, Optional, Union

from rmqd.filter.errors import SQLParseError

__all__ = [
    "CompiledFilter",
    "FilterEvaluationError",
    "SQLParseError",
    "clear_cache",
    "compile_expression",
]

INT_MIN, INT_MAX = -(1 << 31), (1 << 31) - 1
LONG_MIN, LONG_MAX = -(1 << 63), (1 << 63) - 1
DOUBLE_MAX = 1.7976931348623157e308
DOUBLE_MIN = 5e-324  # Java Double.MIN_VALUE (smallest positive subnormal)

Props = Mapping[str, str]
#: A node's runtime value: None or the Python type of its kind (``bool`` is an ``int``).
Value = Union[str, int, float, None]
EvalFn = Callable[[Props], Value]


class FilterEvaluationError(Exception):
    """Evaluation failed (e.g. a property is not a valid number); never matches."""


# --------------------------------------------------------------------------- values
# Static kinds of expression values. Every node's runtime value is None or of
# exactly the Python type its kind implies (properties are always strings).
STR, INT, LONG, DOUBLE, BOOL, NULL = "str", "int", "long", "double", "bool", "null"
_NUMERIC = (INT, LONG, DOUBLE)

_JAVA_TRIM = "".join(chr(i) for i in range(33))
_DOUBLE_PATTERN = r"[+-]?(?:NaN|Infinity|(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?[fFdD]?)\Z"
_DOUBLE_RE: "re.Pattern[str] | None" = None      # compiled on first use, not at import (start-up time)
_INF = float("inf")


def _conv_fail(s: str, kind: str) -> FilterEvaluationError:
    return FilterEvaluationError(f"cannot convert {s!r} to {kind}")


def _java_integer(s: str, low: int, high: int, kind: str) -> int:
    """Java ``Integer.valueOf`` / ``Long.valueOf``: decimal digits with an optional sign, within [low, high]."""
    if s.isdecimal() or (s[:1] in ("+", "-") and s[1:].isdecimal() and len(s) > 1):
        n = int(s)
        if low <= n <= high:
            return n
    raise _conv_fail(s, kind)


def to_int(s: str) -> int:
    """Java ``Integer.valueOf(String)``."""
    return _java_integer(s, INT_MIN, INT_MAX, "Integer")


def to_long(s: str) -> int:
    """Java ``Long.valueOf(String)``."""
    return _java_integer(s, LONG_MIN, LONG_MAX, "Long")


def to_double(s: str) -> float:
    """Java ``Double.valueOf(String)`` (no hex floats); NaN maps to +inf so that
    ordering matches ``Double.compareTo`` (NaN above everything) against finite values."""
    if s.isascii() and s.replace(".", "", 1).isdigit():  # plain "123" / "12.5" / ".5" / "5."
        return float(s)
    t = s.strip(_JAVA_TRIM)
    global _DOUBLE_RE
    if _DOUBLE_RE is None:
        _DOUBLE_RE = re.compile(_DOUBLE_PATTERN)
    if _DOUBLE_RE.match(t):
        if t[-1] in "fFdD":
            t = t[:-1]
        v = float(t)
        return _INF if v != v else v
    raise _conv_fail(s, "Double")


def to_bool(s: str) -> bool:
    """Java ``Boolean.valueOf(String)``."""
    return s.lower() == "true"


_CONVERTERS: dict[str, Callable[[str], float]] = {INT: to_int, LONG: to_long, DOUBLE: to_double, BOOL: to_bool}


def _cmp(a: Value, b: Value) -> int:
    """-1, 0 or 1 for two strings or two numbers (the kinds say which); TypeError otherwise, as Python's own."""
    if isinstance(a, str):
        if isinstance(b, str):
            return (a > b) - (a < b)
    elif a is not None and b is not None and not isinstance(b, str):
        return (a > b) - (a < b)
    raise TypeError(f"cannot order {a!r} and {b!r}")


def _text(v: Value) -> str:
    """A value of kind STR (a property or a string literal)."""
    if isinstance(v, str):
        return v
    raise TypeError(f"{v!r} is not a string")


def _double(v: Value) -> float:
    """A value of a numeric kind as a Java double."""
    if v is None or isinstance(v, str):
        raise TypeError(f"{v!r} is not a number")
    return float(v)


def java_compare(lv: Value, lk: str, rv: Value, rk: str) -> int:
    """``ComparisonExpression.__compare`` with string conversion on (both non-null).

    Incomparable kinds give -1 (Java's fallback); ``bool`` vs ``str`` raises like
    Java's ClassCastException.
    """
    if lk == rk:
        return _cmp(lv, rv)
    if lk == BOOL:
        if rk == STR:
            raise FilterEvaluationError("Boolean cannot be compared with a String")
        return -1
    if lk == STR:
        if rk in _CONVERTERS:
            return _cmp(_CONVERTERS[rk](_text(lv)), rv)
        return -1
    # lk numeric
    if rk == STR:
        return _cmp(lv, _CONVERTERS[lk](_text(rv)))
    if rk == BOOL:
        return -1
    if lk == DOUBLE or rk == DOUBLE:
        return _cmp(_double(lv), _double(rv))
    return _cmp(lv, rv)


_REL_TEST: dict[str, Callable[[int], bool]] = {
    ">": lambda c: c > 0,
    ">=": lambda c: c >= 0,
    "<": lambda c: c < 0,
    "<=": lambda c: c <= 0,
}
_MIRROR = {">": "<", ">=": "<=", "<": ">", "<=": ">="}


# --------------------------------------------------------------------------- nodes
class Node:
    """A compiled sub-expression: evaluation closure plus static facts for checks."""

    __slots__ = ("fn", "kind", "is_const", "value", "is_bool", "prop", "text")

    def __init__(self, fn: EvalFn, kind: str, text: str, *, is_const: bool = False,
                 value: Value = None, is_bool: bool = False, prop: Optional[str] = None):
        self.fn = fn
        self.kind = kind
        self.text = text
        self.is_const = is_const  # a literal (Java ConstantExpression)
        self.value = value  # literal value, or folded value of a negated literal
        self.is_bool = is_bool  # Java BooleanExpression
        self.prop = prop  # property name (Java PropertyExpression)


def _const(value: Value, kind: str, text: str, is_const: bool = True) -> Node:
    return Node(lambda p: value, kind, text, is_const=is_const, value=value,
                is_bool=kind in (BOOL, NULL) and is_const)


def _prop(name: str) -> Node:
    return Node(lambda p: p.get(name), STR, name, prop=name)


def _numeric_value(n: Node) -> bool:
    return n.kind in _NUMERIC and n.value is not None


def _bool_node(fn: EvalFn, text: str) -> Node:
    return Node(fn, BOOL, text, is_bool=True)


def _as_boolean(n: Node, expr: str, pos: int) -> Node:
    """Java ``asBooleanExpression``: boolean expressions pass, properties are cast."""
    if n.is_bool:
        return n
    if n.prop is not None:
        name = n.prop

        def cast(p: Props) -> Optional[bool]:
            return None if p.get(name) is None else False

        return _bool_node(cast, n.text)
    raise SQLParseError(f"expression will not result in a boolean value: {n.text}", expr, pos)


def _make_junction(a: Node, b: Node, decisive: bool, op: str) -> Node:
    """AND (``decisive`` False) or OR (True) in SQL's three-valued logic: either side's decisive value decides,
    else an unknown side (None) makes the whole unknown."""
    lf, rf = a.fn, b.fn

    def f(p: Props) -> Optional[bool]:
        lv = lf(p)
        if lv is decisive:
            return decisive
        rv = rf(p)
        if rv is decisive:
            return decisive
        if lv is None or rv is None:
            return None
        return not decisive

    return _bool_node(f, f"({a.text} {op} {b.text})")


def _make_and(a: Node, b: Node) -> Node:
    return _make_junction(a, b, False, "AND")


def _make_or(a: Node, b: Node) -> Node:
    return _make_junction(a, b, True, "OR")


def _make_not(a: Node, text: str | None = None) -> Node:
    inner = a.fn

    def f(p: Props) -> Optional[bool]:
        v = inner(p)
        return None if v is None else not v

    return _bool_node(f, text or f"(NOT {a.text})")


def _make_negate(a: Node) -> Node:
    text = f"-{a.text}"
    if a.kind in _NUMERIC and isinstance(a.value, (int, float)):      # _numeric_value(a)
        v = -a.value
        if a.kind == INT and v > INT_MAX:  # -Integer.MIN_VALUE wraps in Java
            v = INT_MIN
        return _const(v, a.kind, text, is_const=False)
    # Negating a string/boolean/null/property yields NULL at runtime in Java.
    return Node(lambda p: None, NULL, text)


# -- relational ---------------------------------------------------------------------
def _make_relational(op: str, a: Node, b: Node) -> Node:
    text = f"({a.text} {op} {b.text})"
    if b.prop is not None and _numeric_value(a):
        a, b, op = b, a, _MIRROR[op]
    if a.prop is not None and b.kind in _NUMERIC and isinstance(b.value, (int, float)):     # _numeric_value(b)
        return _bool_node(_rel_prop_const(op, a.prop, _CONVERTERS[b.kind], b.value), text)
    if a.prop is not None and b.prop is not None:
        return _bool_node(_rel_prop_prop(op, a.prop, b.prop), text)
    lf, rf, lk, rk, test = a.fn, b.fn, a.kind, b.kind, _REL_TEST[op]

    def f(p: Props) -> Optional[bool]:
        lv = lf(p)
        if lv is None:
            return None
        rv = rf(p)
        if rv is None:
            return None
        if lk == STR and rk == STR:
            return test(_cmp(to_double(_text(lv)), to_double(_text(rv))))
        return test(java_compare(lv, lk, rv, rk))

    return _bool_node(f, text)


def _rel_prop_prop(op: str, name: str, other: str) -> EvalFn:
    """Specialised ``prop <op> prop``: both parsed as doubles."""
    test = _REL_TEST[op]

    def f(p: Props) -> Optional[bool]:
        v = p.get(name)
        if v is None:
            return None
        w = p.get(other)
        if w is None:
            return None
        return test(_cmp(to_double(v), to_double(w)))
    return f


def _rel_prop_const(op: str, name: str, conv: Callable[[str], float], c: float) -> EvalFn:
    """Specialised ``prop <op> constant``."""
    if op == ">":
        def f(p: Props) -> Optional[bool]:
            v = p.get(name)
            return None if v is None else conv(v) > c
    elif op == ">=":
        def f(p: Props) -> Optional[bool]:
            v = p.get(name)
            return None if v is None else conv(v) >= c
    elif op == "<":
        def f(p: Props) -> Optional[bool]:
            v = p.get(name)
            return None if v is None else conv(v) < c
    else:
        def f(p: Props) -> Optional[bool]:
            v = p.get(name)
            return None if v is None else conv(v) <= c
    return f


# -- equality -----------------------------------------------------------------------
def _make_equal(a: Node, b: Node, text: str | None = None) -> Node:
    """Java ``doCreateEqual``: one side NULL ⇒ unknown if the left is NULL, else FALSE."""
    text = text or f"({a.text} = {b.text})"
    if a.prop is not None and b.value is not None and (b.is_const or _numeric_value(b)):
        return _bool_node(_eq_prop_const(a.prop, b.kind, b.value), text)
    lf, rf, lk, rk = a.fn, b.fn, a.kind, b.kind

    def f(p: Props) -> Optional[bool]:
        lv = lf(p)
        rv = rf(p)
        if lv is None:
            return True if rv is None else None
        if rv is None:
            return False
        if lk == rk:
            return lv == rv
        return java_compare(lv, lk, rv, rk) == 0

    return _bool_node(f, text)


def _eq_prop_const(name: str, kind: str, c: Value) -> EvalFn:
    if kind == STR:
        def f(p: Props) -> Optional[bool]:
            v = p.get(name)
            return None if v is None else v == c
        return f
    conv = _CONVERTERS[kind]

    def g(p: Props) -> Optional[bool]:
        v = p.get(name)
        return None if v is None else conv(v) == c
    return g


def _make_is_null(a: Node, negate: bool) -> Node:
    inner = a.fn
    if negate:
        return _bool_node(lambda p: inner(p) is not None, f"({a.text} IS NOT NULL)")
    return _bool_node(lambda p: inner(p) is None, f"({a.text} IS NULL)")


# -- IN / CONTAINS ------------------------------------------------------------------
def _make_in(a: Node, name: str, items: list[str], negate: bool) -> Node:
    """``name`` is ``a``'s property (the parser allows nothing else on the left of IN)."""
    values = frozenset(items)
    text = f"({a.text} {'NOT IN' if negate else 'IN'} ({', '.join(map(_quote, items))}))"
    if negate:
        def f(p: Props) -> Optional[bool]:
            v = p.get(name)
            return None if v is None else v not in values
    else:
        def f(p: Props) -> Optional[bool]:
            v = p.get(name)
            return None if v is None else v in values
    return _bool_node(f, text)


def _make_string_op(op: str, a: Node, search: str, negate: bool) -> Node:
    """CONTAINS/STARTSWITH/ENDSWITH (5.x): empty search, NULL or non-string ⇒ FALSE."""
    text = f"({a.text} {'NOT ' if negate else ''}{op} {_quote(search)})"
    if not search or a.kind != STR:
        return _bool_node(lambda p: False, text)
    inner = a.fn
    if op == "CONTAINS":
        test: Callable[[str], bool] = lambda v: search in v
    elif op == "STARTSWITH":
        test = lambda v: v.startswith(search)
    else:
        test = lambda v: v.endswith(search)

    def f(p: Props) -> bool:
        v = inner(p)
        if not isinstance(v, str):          # NULL (a STR node's value is a str or None)
            return False
        return not test(v) if negate else test(v)

    return _bool_node(f, text)


def _quote(s: str) -> str:
    return "'" + s.replace("'", "''") + "'"


# --------------------------------------------------------------------------- lexer
_KEYWORDS = frozenset(
    {"NOT", "AND", "OR", "BETWEEN", "IN", "TRUE", "FALSE", "NULL", "IS",
     "CONTAINS", "STARTSWITH", "ENDSWITH"}
)
_STRING_OPS = ("CONTAINS", "STARTSWITH", "ENDSWITH")

_TOKEN_PATTERN = (
    r"""
    (?P<ws>[ \t\n\r\f]+)
  | (?P<comment>--[^\r\n]*(?:\r\n|\r|\n|\Z)|/\*.*?\*/)
  | (?P<float>(?:[0-9]+\.[0-9]*(?:[eE][+-]?[0-9]+)?|\.[0-9]+(?:[eE][+-]?[0-9]+)?|[0-9]+[eE][+-]?[0-9]+))
  | (?P<int>(?:0|[1-9][0-9]*)[lL]?)
  | (?P<string>'(?:[^']|'')*')
  | (?P<id>[A-Za-z_$][A-Za-z0-9_$]*)
  | (?P<op><>|>=|<=|[=<>(),+-])
    """
)
_TOKEN_RE: "re.Pattern[str] | None" = None       # compiled on first use, not at import (start-up time)


class Token:
    __slots__ = ("type", "text", "pos")

    def __init__(self, type_: str, text: str, pos: int):
        self.type = type_  # 'float' 'int' 'string' 'id' 'op' 'kw' 'eof'
        self.text = text  # upper-cased for keywords
        self.pos = pos

    def __repr__(self) -> str:
        return "end of input" if self.type == "eof" else repr(self.text)


def tokenize(expr: str) -> list[Token]:
    """Split ``expr`` into tokens; raises :class:`SQLParseError` on a lexical error."""
    tokens: list[Token] = []
    pos, n = 0, len(expr)
    global _TOKEN_RE
    if _TOKEN_RE is None:
        _TOKEN_RE = re.compile(_TOKEN_PATTERN, re.VERBOSE | re.DOTALL)
    match = _TOKEN_RE.match
    while pos < n:
        m = match(expr, pos)
        if m is None:
            ch = expr[pos]
            if ch == "'":
                raise SQLParseError("unterminated string literal", expr, pos)
            if expr.startswith("/*", pos):
                raise SQLParseError("unterminated comment", expr, pos)
            raise SQLParseError(f"unexpected character {ch!r}", expr, pos)
        kind = m.lastgroup
        if kind is None:            # never: every alternative of _TOKEN_PATTERN is a named group
            raise SQLParseError(f"unexpected character {expr[pos]!r}", expr, pos)
        text = m.group()
        if kind == "id" and text.upper() in _KEYWORDS:
            tokens.append(Token("kw", text.upper(), pos))
        elif kind not in ("ws", "comment"):
            tokens.append(Token(kind, text, pos))
        pos = m.end()
    tokens.append(Token("eof", "", n))
    return tokens


# --------------------------------------------------------------------------- parser
class _Parser:
    """Recursive descent over RocketMQ's SelectorParser.jj grammar (plus 5.x ops)."""

    def __init__(self, expr: str):
        self.expr = expr
        self.toks = tokenize(expr)
        self.i = 0

    # helpers
    def peek(self, k: int = 0) -> Token:
        return self.toks[min(self.i + k, len(self.toks) - 1)]

    def at(self, text: str, k: int = 0) -> bool:
        t = self.peek(k)
        return t.type in ("kw", "op") and t.text == text

    def next(self) -> Token:
        t = self.toks[self.i]
        self.i += 1
        return t

    def error(self, msg: str, pos: int | None = None) -> SQLParseError:
        return SQLParseError(msg, self.expr, self.peek().pos if pos is None else pos)

    def expect(self, text: str) -> Token:
        if not self.at(text):
            raise self.error(f"expected {text!r} but found {self.peek()!r}")
        return self.next()

    # grammar
    def parse(self) -> Node:
        if self.peek().type == "eof":
            raise self.error("empty expression")
        start = self.peek().pos
        node = self.or_expr()
        if self.peek().type != "eof":
            raise self.error(f"unexpected {self.peek()!r} after a complete expression")
        return _as_boolean(node, self.expr, start)

    def or_expr(self) -> Node:
        return self._logical("OR", self.and_expr, _make_or)

    def and_expr(self) -> Node:
        return self._logical("AND", self.equality_expr, _make_and)

    def _logical(self, keyword: str, operand: Callable[[], Node], make: Callable[[Node, Node], Node]) -> Node:
        """``operand (keyword operand)*``, left-associative; each operand must be a boolean expression."""
        pos = self.peek().pos
        left = operand()
        while self.at(keyword):
            self.next()
            rpos = self.peek().pos
            right = operand()
            left = make(_as_boolean(left, self.expr, pos), _as_boolean(right, self.expr, rpos))
        return left

    def equality_expr(self) -> Node:
        left = self.comparison_expr()
        while True:
            t = self.peek()
            if self.at("=") or self.at("<>"):
                self.next()
                right = self.comparison_expr()
                self._check_equal_operands(left, right, t.pos)
                if t.text == "=":
                    left = _make_equal(left, right)
                else:
                    left = _make_not(_make_equal(left, right), f"({left.text} <> {right.text})")
            elif self.at("IS"):
                self.next()
                negate = self.at("NOT")
                if negate:
                    self.next()
                if not self.at("NULL"):
                    raise self.error(f"expected NULL after IS{' NOT' if negate else ''} but found {self.peek()!r}")
                self.next()
                left = _make_is_null(left, negate)
            else:
                return left

    def comparison_expr(self) -> Node:
        left = self.unary_expr()
        while True:
            t = self.peek()
            if t.type == "op" and t.text in _REL_TEST:
                self.next()
                right = self.unary_expr()
                self._check_relational_operand(left, t)
                self._check_relational_operand(right, t)
                left = _make_relational(t.text, left, right)
                continue
            negate = False
            if self.at("NOT") and self.peek(1).type == "kw" and self.peek(1).text in (
                    "BETWEEN", "IN") + _STRING_OPS:
                self.next()
                negate = True
                t = self.peek()
            if self.at("BETWEEN"):
                self.next()
                low = self.unary_expr()
                self.expect("AND")
                high = self.unary_expr()
                left = self._between(left, low, high, negate, t)
            elif self.at("IN"):
                self.next()
                if left.prop is None:
                    raise self.error(f"expected a property on the left of IN, got {left.text}", t.pos)
                self.expect("(")
                items = [self.string_literal()]
                while self.at(","):
                    self.next()
                    items.append(self.string_literal())
                self.expect(")")
                left = _make_in(left, left.prop, items, negate)
            elif t.type == "kw" and t.text in _STRING_OPS:
                self.next()
                left = _make_string_op(t.text, left, self.string_literal(), negate)
            else:
                return left

    def _between(self, value: Node, low: Node, high: Node, negate: bool, t: Token) -> Node:
        if not negate and low.is_const and high.is_const:
            if low.value is None or high.value is None:
                raise self.error("illegal values of BETWEEN: values can not be NULL", t.pos)
            try:
                order = java_compare(high.value, high.kind, low.value, low.kind)
            except FilterEvaluationError as e:
                raise self.error(f"illegal values of BETWEEN: {e}", t.pos) from None
            if order < 0:
                raise self.error(
                    f"illegal values of BETWEEN: left value ({low.text}) must be less than or "
                    f"equal to right value ({high.text})", t.pos)
        for n in (value, low, high):
            self._check_relational_operand(n, t)
        if negate:
            return _make_or(_make_relational("<", value, low), _make_relational(">", value, high))
        return _make_and(_make_relational(">=", value, low), _make_relational("<=", value, high))

    def _check_relational_operand(self, n: Node, t: Token) -> None:
        """Java ``checkLessThanOperand``: only numbers/properties can be ordered."""
        if (n.is_const and not _numeric_value(n)) or (not n.is_const and n.is_bool):
            raise self.error(f"value {n.text} cannot be compared with {t.text}", t.pos)

    def _check_equal_operands(self, a: Node, b: Node, pos: int) -> None:
        for n in (a, b):
            if n.is_const and n.value is None:
                raise self.error("NULL cannot be compared with '='/'<>' (use IS [NOT] NULL)", pos)
        if a.is_const and b.is_const and a.kind == BOOL and b.kind != BOOL:
            raise self.error(f"{a.text} cannot be compared with {b.text}", pos)

    def unary_expr(self) -> Node:
        if self.at("+"):
            self.next()
            return self.unary_expr()
        if self.at("-"):
            self.next()
            return _make_negate(self.unary_expr())
        if self.at("NOT"):
            self.next()
            pos = self.peek().pos
            return _make_not(_as_boolean(self.unary_expr(), self.expr, pos))
        return self.primary_expr()

    def primary_expr(self) -> Node:
        t = self.peek()
        if t.type == "id":
            self.next()
            return _prop(t.text)
        if self.at("("):
            self.next()
            node = self.or_expr()
            self.expect(")")
            return node
        if t.type == "string":
            return _const(self.string_literal(), STR, t.text)
        if t.type == "int":
            self.next()
            return self._decimal(t)
        if t.type == "float":
            self.next()
            v = float(t.text)
            if v > DOUBLE_MAX:
                raise self.error(f"{t.text} is greater than Double.MAX_VALUE", t.pos)
            if v < DOUBLE_MIN:
                raise self.error(f"{t.text} is less than Double.MIN_VALUE", t.pos)
            return _const(v, DOUBLE, t.text)
        if t.type == "kw" and t.text in ("TRUE", "FALSE", "NULL"):
            self.next()
            if t.text == "NULL":
                return _const(None, NULL, "NULL")
            return _const(t.text == "TRUE", BOOL, t.text)
        raise self.error(f"unexpected {t!r}, expected a property, literal or '('")

    def _decimal(self, t: Token) -> Node:
        digits = t.text.rstrip("lL")
        v = int(digits)
        if v > LONG_MAX:
            raise self.error(f"integer literal {t.text} is out of the long range", t.pos)
        return _const(v, INT if v <= INT_MAX else LONG, t.text)

    def string_literal(self) -> str:
        t = self.peek()
        if t.type != "string":
            raise self.error(f"expected a string literal but found {t!r}")
        self.next()
        return t.text[1:-1].replace("''", "'")


# --------------------------------------------------------------------------- API
class CompiledFilter:
    """A compiled SQL92 selector. Thread-safe and immutable."""

    __slots__ = ("expression", "_fn", "_text")

    def __init__(self, expression: str, fn: EvalFn, text: str):
        self.expression = expression
        self._fn = fn
        self._text = text

    def evaluate(self, props: Optional[Props]) -> Optional[bool]:
        """Three-valued result (True/False/None); raises :class:`FilterEvaluationError`
        when a value cannot be converted."""
        result = self._fn(props if props is not None else {})
        return None if result is None else result is True       # the root is boolean (``_as_boolean``)

    def matches(self, props: Optional[Props]) -> bool:
        """True only if the expression evaluates to exactly TRUE without error."""
        try:
            return self._fn(props if props is not None else {}) is True
        except (FilterEvaluationError, TypeError, ValueError, AttributeError, RecursionError):
            return False

    __call__ = matches

    def __repr__(self) -> str:
        return f"CompiledFilter({self.expression!r} -> {self._text})"


def _compile_uncached(expression: str) -> CompiledFilter:
    node = _Parser(expression).parse()
    return CompiledFilter(expression, node.fn, node.text)


_CACHE_SIZE = 1024
_cache: "OrderedDict[str, CompiledFilter | SQLParseError]" = OrderedDict()
_cache_lock = threading.Lock()


def compile_expression(expression: str) -> CompiledFilter:
    """Compile (or fetch from the LRU cache) a SQL92 expression.

    Parse failures are cached too and re-raised as :class:`SQLParseError`.
    """
    if not isinstance(expression, str):
        raise SQLParseError("expression must be a string", repr(expression))
    with _cache_lock:
        hit = _cache.get(expression)
        if hit is not None:
            _cache.move_to_end(expression)
    if hit is None:
        try:
            hit = _compile_uncached(expression)
        except SQLParseError as e:
            hit = e
        except RecursionError:
            hit = SQLParseError("expression is nested too deeply", expression)
        with _cache_lock:
            _cache[expression] = hit
            if len(_cache) > _CACHE_SIZE:
                _cache.popitem(last=False)
    if isinstance(hit, SQLParseError):
        raise hit.with_traceback(None)
    return hit


def clear_cache() -> None:
    """Drop every cached compilation."""
    with _cache_lock:
        _cache.clear()
