"""Tag hash codes (Java String.hashCode) and tag expression parsing."""
import pytest

from rmqd.filter.tags import (
    SUB_ALL,
    java_string_hash,
    java_trim,
    parse_tag_expression,
    tags_to_code,
)


def _reference_hash(s: str) -> int:
    """Independent reference: iterate UTF-16 code units explicitly."""
    h = 0
    for ch in s:
        cp = ord(ch)
        units = [cp] if cp < 0x10000 else [0xD800 + ((cp - 0x10000) >> 10), 0xDC00 + ((cp - 0x10000) & 0x3FF)]
        for u in units:
            h = (31 * h + u) % (1 << 32)
    return h - (1 << 32) if h >= (1 << 31) else h


@pytest.mark.parametrize(
    "s, expected",
    [
        ("", 0),
        ("a", 97),
        ("TagA", 2598919),
        ("TagB", 2598920),
        ("hello", 99162322),
        ("Hello", 69609650),
        ("*", 42),
        ("hello world", 1794106052),
        ("abcdefghij", -634317659),  # overflow wraps to a negative int
        ("polygenelubricants", -2147483648),  # Integer.MIN_VALUE
        ("日本", 835047),  # BMP, non-ASCII
        ("é", 233),
        ("\U0001F600", 1772899),  # surrogate pair D83D DE00
        ("a\U0001F600b", 57849694),  # 97 -> 58364 -> 1866116 -> 57849694
        ("\ud800", 55296),  # lone surrogate (surrogatepass)
    ],
)
def test_java_string_hash_known_values(s, expected):
    assert java_string_hash(s) == expected
    assert java_string_hash(s) == _reference_hash(s) or "\ud800" in s


@pytest.mark.parametrize("s", ["TagA", "x" * 200, "混合Mixed😀文本", "\t tab", "z" * 7])
def test_java_string_hash_matches_reference(s):
    h = java_string_hash(s)
    assert h == _reference_hash(s)
    assert -(1 << 31) <= h < (1 << 31)


def test_tags_to_code():
    assert tags_to_code(None) == 0
    assert tags_to_code("") == 0
    assert tags_to_code("TagA") == 2598919


def test_java_trim_only_strips_control_and_space():
    assert java_trim("\t\x00 a b \n") == "a b"
    assert java_trim("\u00a0a\u00a0") == "\u00a0a\u00a0"  # NBSP is not trimmed by Java


@pytest.mark.parametrize("expr", [None, "", "*", "  *  ", "   "])
def test_parse_tag_expression_all(expr):
    sub = parse_tag_expression(expr)
    assert sub.sub_all and sub.sub_string == SUB_ALL
    assert sub.tags == () and sub.codes == ()
    assert sub.matches_code(0) and sub.matches_code(12345)
    assert sub.matches_tag(None) and sub.matches_tag("anything")


@pytest.mark.parametrize(
    "expr, tags",
    [
        ("TagA", ("TagA",)),
        ("TagA||TagB", ("TagA", "TagB")),
        (" TagA || TagB ", ("TagA", "TagB")),
        ("TagA ||  || TagB ||", ("TagA", "TagB")),
        ("||TagA", ("TagA",)),
        ("TagA || TagA", ("TagA",)),
        ("Tag A || B", ("Tag A", "B")),  # inner spaces are kept
        ("TagA | TagB", ("TagA | TagB",)),  # single bar is not a separator
        ("TagA || *", ("TagA", "*")),  # '*' inside a list is an ordinary tag
    ],
)
def test_parse_tag_expression_lists(expr, tags):
    sub = parse_tag_expression(expr)
    assert not sub.sub_all
    assert sub.tags == tags
    assert sub.tags_set == frozenset(tags)
    assert sub.codes == tuple(dict.fromkeys(java_string_hash(t) for t in tags))
    assert sub.code_set == frozenset(sub.codes)


def test_tag_subscription_matching():
    sub = parse_tag_expression("TagA || TagB")
    assert sub.matches_code(2598919) and sub.matches_code(2598920)
    assert not sub.matches_code(0)  # message without tags
    assert not sub.matches_code(java_string_hash("TagC"))
    assert sub.matches_tag("TagA") and not sub.matches_tag("TagC")
    assert not sub.matches_tag(None)
    assert not sub.matches_tag("taga")  # exact, case-sensitive


def test_hash_collision_passes_broker_but_not_exact_check():
    # "Aa" and "BB" share a Java hash code.
    assert java_string_hash("Aa") == java_string_hash("BB") == 2112
    sub = parse_tag_expression("Aa")
    assert sub.matches_code(tags_to_code("BB"))
    assert not sub.matches_tag("BB")
