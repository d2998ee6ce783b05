"""SQL92 selector grammar, evaluation semantics and compile errors (RocketMQ filter module)."""
import pytest

from rmqd.filter.sql92 import (
    FilterEvaluationError,
    SQLParseError,
    clear_cache,
    compile_expression,
    to_double,
    to_int,
    to_long,
    tokenize,
)

ERR = "error"  # evaluation raises ⇒ never matched

P = {"a": "10", "b": "abc", "c": "true", "d": "3.5", "n": "-7", "big": "3000000000",
     "s": "hello world", "q": "it's", "e": "", "TAGS": "TagA", "KEYS": "k1 k2"}


def ev(expr, props=P):
    f = compile_expression(expr)
    try:
        return f.evaluate(props)
    except FilterEvaluationError:
        return ERR


CASES = [
    # --- the documented examples
    ("a > 5 AND b = 'abc'", {"a": "10", "b": "abc"}, True),
    ("a > 5 AND b = 'abc'", {"a": "1", "b": "abc"}, False),
    ("a between 0 and 3", {"a": "0"}, True),
    ("a between 0 and 3", {"a": "3"}, True),
    ("a between 0 and 3", {"a": "2"}, True),
    ("a between 0 and 3", {"a": "4"}, False),
    ("a between 0 and 3", {"a": "-1"}, False),
    ("a between 0 and 3", {}, None),
    ("a BETWEEN 1 AND 1", {"a": "1"}, True),
    # --- relational with numeric coercion
    ("a > 5", P, True),
    ("a >= 10", P, True),
    ("a > 10", P, False),
    ("a < 11", P, True),
    ("a <= 9", P, False),
    ("5 < a", P, True),  # constant on the left
    ("10 >= a", P, True),
    ("a > -5", P, True),
    ("n < -5", P, True),
    ("n > -5", P, False),
    ("a > +5", P, True),
    ("a > - -5", P, True),
    ("d > 3", P, ERR),  # Integer.valueOf("3.5") fails
    ("d > 3.0", P, True),
    ("d < 3.6", P, True),
    ("d = 3.5", P, True),
    ("d > 3.5e0", P, False),
    ("d >= 35E-1", P, True),
    ("d > .5", P, True),
    ("a > 9.", P, True),
    ("a = 10.0", P, True),  # "10" parses as a double
    ("b > 5", P, ERR),  # not a number
    ("b = 5", P, ERR),
    ("b <> 5", P, ERR),  # NOT(error) is still an error
    ("e > 1", P, ERR),  # empty string
    ("big > 5", P, ERR),  # out of int range for an Integer constant
    ("big > 5L", P, ERR),  # 5L is still an Integer (fits int)
    ("big > 2147483648", P, True),  # Long constant ⇒ Long.valueOf
    ("big > 2.5", P, True),
    ("big = 3000000000", P, True),
    ("a > 9223372036854775807", P, False),
    ("a > -2147483648", P, True),  # -(Long 2147483648)
    ("x > 5", {"x": "+6"}, True),  # Integer.valueOf accepts a sign
    ("x > 5", {"x": " 6"}, ERR),  # ...but not whitespace
    ("x > 5.0", {"x": " 6 "}, True),  # Double.valueOf trims
    ("x > 5.0", {"x": "6d"}, True),  # Java double suffix
    ("x > 5.0", {"x": "1e1"}, True),
    ("x > 5.0", {"x": "Infinity"}, True),
    ("x > 5.0", {"x": "inf"}, ERR),  # Python spelling is not Java
    ("x > 5.0", {"x": "1_000"}, ERR),
    ("x > 5.0", {"x": "NaN"}, True),  # Double.compareTo puts NaN above everything
    ("x = 5.0", {"x": "NaN"}, False),
    ("x > 5", {"x": "٦"}, True),  # Java Character.digit accepts Unicode digits
    ("x > 5", {"x": "5.0"}, ERR),
    ("x >= 10.5 AND x < 100", {"x": "14.50"}, ERR),  # 100 is an Integer: "14.50" fails
    ("x >= 10.5 AND x < 100.0", {"x": "14.50"}, True),
    ("x > 5.0", {"x": "5."}, False),
    ("x > 0.25", {"x": ".5"}, True),
    ("x > 5.0", {"x": "."}, ERR),
    ("x > 5.0", {"x": "1.2.3"}, ERR),
    # --- two properties
    ("x > y", {"x": "2.5", "y": "1"}, True),
    ("x < y", {"x": "2.5", "y": "10"}, True),  # numeric, not lexicographic
    ("x > y", {"x": "abc", "y": "1"}, ERR),
    ("x > y", {"x": "1"}, None),
    ("x = y", {"x": "1", "y": "1"}, True),
    ("x = y", {"x": "1", "y": "1.0"}, False),  # string equality
    ("x = y", {}, True),  # Java quirk: NULL == NULL is TRUE in doCreateEqual
    ("x = y", {"y": "1"}, None),
    ("x = y", {"x": "1"}, False),
    ("x <> y", {"x": "1", "y": "2"}, True),
    # --- strings and equality
    ("b = 'abc'", P, True),
    ("b = 'ABC'", P, False),
    ("b <> 'abc'", P, False),
    ("b <> 'x'", P, True),
    ("'abc' = b", P, True),
    ("q = 'it''s'", P, True),  # '' escape
    ("e = ''", P, True),
    ("s = 'hello world'", P, True),
    ("z = 'x'", P, None),  # missing ⇒ unknown
    ("z <> 'x'", P, None),
    ("'x' = z", P, False),  # Java quirk: NULL on the right ⇒ FALSE
    ("'x' <> z", P, True),
    ("a = '10'", P, True),
    ("a = 10", P, True),
    ("a = 10L", P, True),
    ("10 = a", P, True),
    ("a <> 10", P, False),
    ("'10' = 10", P, True),  # constant string converted too
    ("1 = 1.0", P, True),
    ("TAGS = 'TagA'", P, True),
    ("KEYS = 'k1 k2'", P, True),
    # --- booleans
    ("c = TRUE", P, True),
    ("c = true", P, True),
    ("c = FALSE", P, False),
    ("x = TRUE", {"x": "TRUE"}, True),
    ("x = FALSE", {"x": "no"}, True),  # Boolean.valueOf: anything but "true" is false
    ("TRUE = c", P, ERR),  # Java ClassCastException
    ("TRUE = z", P, False),
    ("TRUE", P, True),
    ("FALSE", P, False),
    ("NULL", P, None),
    ("TRUE = TRUE", P, True),
    ("TRUE <> FALSE", P, True),
    ("c", P, False),  # bare property: a string is never Boolean
    ("z", P, None),
    ("NOT c", P, True),
    ("(a > 5) = TRUE", P, True),
    ("(a > 5) = (b = 'abc')", P, True),
    ("1 = TRUE", P, False),  # incomparable ⇒ not equal
    ("a = -b", P, False),  # negating a string gives NULL on the right
    ("-b = a", P, None),
    # --- IS [NOT] NULL
    ("a IS NULL", P, False),
    ("a IS NOT NULL", P, True),
    ("z IS NULL", P, True),
    ("z IS NOT NULL", P, False),
    ("e IS NULL", P, False),  # empty string is not NULL
    ("z is null and a is not null", P, True),
    ("-b IS NULL", P, True),
    # --- IN / NOT IN
    ("b IN ('abc')", P, True),
    ("b IN ('x', 'abc', 'y')", P, True),
    ("b IN ('x', 'y')", P, False),
    ("b NOT IN ('x', 'y')", P, True),
    ("b NOT IN ('abc')", P, False),
    ("z IN ('x')", P, None),
    ("z NOT IN ('x')", P, None),
    ("a IN ('10')", P, True),
    ("a IN ('10.0')", P, False),  # exact string comparison
    ("q in ('it''s')", P, True),
    ("b IN ('a','b','c','d','e','abc')", P, True),
    ("(b) IN ('abc')", P, True),
    # --- CONTAINS / STARTSWITH / ENDSWITH (5.x)
    ("s CONTAINS 'lo w'", P, True),
    ("s CONTAINS 'xyz'", P, False),
    ("s NOT CONTAINS 'xyz'", P, True),
    ("s NOT CONTAINS 'hello'", P, False),
    ("s STARTSWITH 'hello'", P, True),
    ("s STARTSWITH 'world'", P, False),
    ("s NOT STARTSWITH 'world'", P, True),
    ("s ENDSWITH 'world'", P, True),
    ("s NOT ENDSWITH 'world'", P, False),
    ("s ENDSWITH 'hello'", P, False),
    ("z CONTAINS 'x'", P, False),  # missing ⇒ FALSE, not unknown
    ("z NOT CONTAINS 'x'", P, False),
    ("s CONTAINS ''", P, False),  # empty search ⇒ FALSE
    ("s NOT CONTAINS ''", P, False),
    ("NOT (z CONTAINS 'x')", P, True),
    ("'abc' CONTAINS 'b'", P, True),
    ("a contains '1' and s startswith 'he' and s endswith 'ld'", P, True),
    ("q CONTAINS ''''", P, True),
    # --- three-valued logic tables (z missing ⇒ unknown)
    ("a > 5 AND a < 20", P, True),
    ("a > 5 AND a > 20", P, False),
    ("a > 5 AND z > 1", P, None),
    ("z > 1 AND a > 5", P, None),
    ("a > 50 AND z > 1", P, False),
    ("z > 1 AND a > 50", P, False),
    ("z > 1 AND z > 2", P, None),
    ("a > 5 OR z > 1", P, True),
    ("z > 1 OR a > 5", P, True),
    ("a > 50 OR z > 1", P, None),
    ("z > 1 OR a > 50", P, None),
    ("z > 1 OR z > 2", P, None),
    ("a > 50 OR a > 60", P, False),
    ("NOT (z > 1)", P, None),
    ("NOT (a > 5)", P, False),
    ("NOT (a > 50)", P, True),
    ("NOT NOT (a > 5)", P, True),
    ("NULL AND TRUE", P, None),
    ("NULL OR TRUE", P, True),
    ("NULL AND FALSE", P, False),
    ("NOT NULL", P, None),
    # errors propagate through AND/OR unless short-circuited
    ("a > 5 OR b > 5", P, True),  # left TRUE short-circuits the bad right side
    ("b > 5 OR a > 5", P, ERR),
    ("a > 50 AND b > 5", P, False),
    ("NOT (b > 5)", P, ERR),
    # --- precedence
    ("a > 5 = TRUE", P, True),  # '=' is looser than '>'
    ("a > 50 = FALSE", P, True),
    ("b = 'abc' AND a > 5 OR a > 50", P, True),
    ("b = 'x' AND a > 5 OR a > 5", P, True),  # AND before OR
    ("a > 5 OR a > 50 AND b = 'x'", P, True),
    ("(a > 5 OR a > 50) AND b = 'x'", P, False),
    ("NOT a = 'x'", P, ERR),  # NOT binds tighter: (NOT a) = 'x' ⇒ Boolean vs String
    ("NOT b IS NULL", P, False),  # (NOT b) IS NULL
    ("a IS NOT NULL = TRUE", P, True),
    # --- comments, whitespace, case-insensitivity
    ("a > 5 -- trailing comment", P, True),
    ("a > 5 -- comment\nAND b = 'abc'", P, True),
    ("a /* inline */ > /* another\n multi-line */ 5", P, True),
    ("/* lead */ a > 5", P, True),
    ("a\t>\r\n5\f", P, True),
    ("a > 5 and B = 'abc'", P, None),  # property names are case-sensitive
    ("a BeTwEeN 0 AnD 30 oR fAlSe", P, True),
    ("b iN ('abc') AND z Is NuLl", P, True),
    ("$x = '1' AND _y = '2' AND x9 = '3'", {"$x": "1", "_y": "2", "x9": "3"}, True),
    ("a = '--not a comment'", {"a": "--not a comment"}, True),
    # --- numbers and literals
    ("a = 10l", P, True),
    ("a > 1.5E+0", P, True),
    ("a < 1e2", P, True),
    ("a > 4.9e-324", P, True),  # Double.MIN_VALUE is allowed
    ("3 > 2", P, True),
    ("2.5 > 2", P, True),
    ("2147483648 > 2147483647", P, True),
    ("-1 < 0", P, True),
    ("NOT (BETWEEN_x = '1')", {"BETWEEN_x": "1"}, False),  # keyword prefix is an identifier
    ("NOT BETWEEN_x = '1'", {"BETWEEN_x": "1"}, ERR),  # (NOT BETWEEN_x) = '1'
    ("NOT z = '1'", P, None),  # (NOT z) is unknown
    # --- NOT BETWEEN
    ("a NOT BETWEEN 0 AND 3", P, True),
    ("a NOT BETWEEN 0 AND 30", P, False),
    ("a NOT BETWEEN 10 AND 10", P, False),
    ("z NOT BETWEEN 0 AND 3", P, None),
    ("a NOT BETWEEN 30 AND 0", P, True),  # no bound-order check for NOT BETWEEN
    ("a BETWEEN -20 AND -10", P, False),
    ("a BETWEEN 1 AND 20 AND b = 'abc'", P, True),  # BETWEEN's AND is consumed first
    ("a BETWEEN 1 AND 20 AND b = 'x' OR n = -7", P, True),
    ("n = -7", P, True),
    ("n <> -7", P, False),
    ("a BETWEEN x AND y", {"a": "5", "x": "1", "y": "9"}, True),  # strings ⇒ doubles
    ("d BETWEEN 3.4 AND 3.6", P, True),
    ("d BETWEEN 3 AND 4", P, ERR),
]


@pytest.mark.parametrize("expr, props, expected", CASES)
def test_evaluate(expr, props, expected):
    assert ev(expr, props) == expected
    matched = compile_expression(expr).matches(props)
    assert matched is (expected is True)


COMPILE_ERRORS = [
    # relational with string/boolean/NULL constants or boolean expressions
    ("a > 'x'", "cannot be compared"),
    ("'x' < a", "cannot be compared"),
    ("a >= TRUE", "cannot be compared"),
    ("a <= NULL", "cannot be compared"),
    ("a > (b = 'x')", "cannot be compared"),
    ("a > 1 > 2", "cannot be compared"),
    ("NOT a > 1", "cannot be compared"),  # (NOT a) > 1
    ("a BETWEEN 'a' AND 'z'", "cannot be compared"),
    ("a NOT BETWEEN 'a' AND 'z'", "cannot be compared"),
    ("a BETWEEN FALSE AND TRUE", "cannot be compared"),
    # '=' with NULL / boolean constant vs other constant
    ("a = NULL", "NULL"),
    ("NULL = a", "NULL"),
    ("a <> NULL", "NULL"),
    ("TRUE = 'x'", "cannot be compared"),
    ("FALSE = 1", "cannot be compared"),
    # BETWEEN with constant bounds
    ("a BETWEEN 3 AND 0", "BETWEEN"),
    ("a BETWEEN 1.5 AND 1", "BETWEEN"),
    ("a BETWEEN NULL AND 5", "NULL"),
    # IN
    ("'x' IN ('a')", "property"),
    ("a IN ()", "string literal"),
    ("a IN (1, 2)", "string literal"),
    ("a IN ('x' 'y')", "expected ')'"),
    ("a IN 'x'", "expected '('"),
    ("a CONTAINS b", "string literal"),
    ("a STARTSWITH 1", "string literal"),
    # non-boolean results
    ("5", "boolean"),
    ("'abc'", "boolean"),
    ("-a", "boolean"),
    ("a > 5 AND 3", "boolean"),
    ("1 OR a", "boolean"),
    ("NOT 'x'", "boolean"),
    # literal ranges
    ("a > 9223372036854775808", "long"),
    ("a > 99999999999999999999L", "long"),
    ("a > -9223372036854775808", "long"),
    ("a > 0.0", "MIN_VALUE"),  # Java quirk: 0.0 < Double.MIN_VALUE
    ("a > 1e-400", "MIN_VALUE"),
    ("a > 1e400", "MAX_VALUE"),
    # lexical errors
    ("a ! 5", "unexpected character"),
    ("a != 5", "unexpected character"),
    ("a == 5", "unexpected"),
    ("a > 5 ; drop", "unexpected character"),
    ("b = 'abc", "unterminated string"),
    ("a > 5 /* open", "unterminated comment"),
    ("a.b = 'x'", "unexpected character"),
    ("é = 'x'", "unexpected character"),
    ("a = \"x\"", "unexpected character"),
    # syntax errors
    ("", "empty"),
    ("   ", "empty"),
    ("-- only a comment", "empty"),
    ("a >", "end of input"),
    ("a > 5 AND", "end of input"),
    ("(a > 5", "expected ')'"),
    ("a > 5)", "after a complete expression"),
    ("a > 5 b", "after a complete expression"),
    ("a > 5 'x'", "after a complete expression"),
    ("a 5", "after a complete expression"),
    ("a > 007", "after a complete expression"),  # only 0 may start with a zero
    ("a > 5x", "after a complete expression"),
    ("a > 1.5L", "after a complete expression"),
    ("a IS 5", "expected NULL"),
    ("a IS NOT 5", "expected NULL"),
    ("a BETWEEN 1 OR 2", "expected 'AND'"),
    ("a NOT LIKE 'x%'", "after a complete expression"),
    ("a LIKE 'x%'", "after a complete expression"),  # no LIKE in RocketMQ
    ("AND = 'x'", "unexpected 'AND'"),
    ("in = 'x'", "unexpected 'IN'"),
    ("contains = 'x'", "unexpected 'CONTAINS'"),
    ("a > > 5", "unexpected '>'"),
    ("()", "unexpected ')'"),
]


@pytest.mark.parametrize("expr, fragment", COMPILE_ERRORS)
def test_compile_errors(expr, fragment):
    with pytest.raises(SQLParseError) as info:
        compile_expression(expr)
    assert fragment.lower() in str(info.value).lower()
    assert info.value.expression == expr


def test_error_reports_position_line_and_column():
    with pytest.raises(SQLParseError) as info:
        compile_expression("a > 5\n AND b > 'x'")
    err = info.value
    assert err.position == 13
    assert "position 13 (line 2, column 8)" in str(err)
    assert "cannot be compared" in err.reason


def test_cache_returns_same_object_and_caches_errors():
    clear_cache()
    f1 = compile_expression("a > 5")
    assert compile_expression("a > 5") is f1
    with pytest.raises(SQLParseError) as e1:
        compile_expression("a >")
    with pytest.raises(SQLParseError) as e2:
        compile_expression("a >")
    assert e1.value is e2.value
    clear_cache()
    assert compile_expression("a > 5") is not f1


def test_cache_is_bounded_lru():
    from rmqd.filter import sql92

    clear_cache()
    first = compile_expression("a > 0")
    for i in range(1, sql92._CACHE_SIZE + 10):
        compile_expression(f"a > {i}")
        if i % 100 == 0:
            compile_expression("a > 0")  # keep it recently used
    assert len(sql92._cache) <= sql92._CACHE_SIZE
    assert compile_expression("a > 0") is first
    assert "a > 1" not in sql92._cache


def test_matches_handles_none_and_errors():
    f = compile_expression("a IS NULL")
    assert f.matches(None) is True
    assert compile_expression("a > 5").matches(None) is False
    assert compile_expression("a > 5").matches({"a": "x"}) is False
    assert compile_expression("a > 5")({"a": "6"}) is True


def test_evaluate_raises_on_conversion_failure():
    with pytest.raises(FilterEvaluationError):
        compile_expression("a > 5").evaluate({"a": "five"})


def test_deep_nesting_is_a_parse_error_not_a_crash():
    expr = "(" * 5000 + "a > 1" + ")" * 5000
    with pytest.raises(SQLParseError):
        compile_expression(expr)


def test_long_conjunction_evaluates():
    expr = " AND ".join(f"p{i} = '{i}'" for i in range(300))
    props = {f"p{i}": str(i) for i in range(300)}
    assert compile_expression(expr).matches(props)


def test_tokenizer_keywords_and_literals():
    toks = tokenize("a NoT bEtWeEn 1 AND 2.5e3 OR x IN ('it''s') -- c")
    kinds = [(t.type, t.text) for t in toks]
    assert kinds == [
        ("id", "a"), ("kw", "NOT"), ("kw", "BETWEEN"), ("int", "1"), ("kw", "AND"),
        ("float", "2.5e3"), ("kw", "OR"), ("id", "x"), ("kw", "IN"), ("op", "("),
        ("string", "'it''s'"), ("op", ")"), ("eof", ""),
    ]


@pytest.mark.parametrize(
    "fn, s, expected",
    [
        (to_int, "123", 123), (to_int, "-5", -5), (to_int, "+5", 5),
        (to_int, "2147483647", 2147483647), (to_int, "2147483648", ERR), (to_int, "", ERR),
        (to_int, "-", ERR), (to_int, "1.0", ERR),
        (to_long, "9223372036854775807", 9223372036854775807), (to_long, "9223372036854775808", ERR),
        (to_double, "1.5", 1.5), (to_double, "-1.5e3", -1500.0), (to_double, ".5", 0.5),
        (to_double, "5.", 5.0), (to_double, "1f", 1.0), (to_double, "-Infinity", float("-inf")),
        (to_double, "abc", ERR), (to_double, "1e", ERR), (to_double, "0x10", ERR),
    ],
)
def test_java_number_parsing(fn, s, expected):
    if expected == ERR:
        with pytest.raises(FilterEvaluationError):
            fn(s)
    else:
        assert fn(s) == expected
