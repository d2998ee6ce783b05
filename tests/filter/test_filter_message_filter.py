"""Broker-side ExpressionMessageFilter and SubscriptionData building."""
import pytest

from rmqd.filter import (
    ExpressionMessageFilter,
    SQLParseError,
    build_subscription_data,
    java_string_hash,
    tags_to_code,
)

TAG_A, TAG_B = 2598919, 2598920


@pytest.mark.parametrize(
    "expr, code, expected",
    [
        ("*", TAG_A, True),
        ("*", 0, True),
        ("", 0, True),
        (None, 12345, True),
        ("TagA", TAG_A, True),
        ("TagA", TAG_B, False),
        ("TagA", 0, False),  # message without tags only matches '*'
        ("TagA || TagB", TAG_B, True),
        ("TagA || TagB", java_string_hash("TagC"), False),
        ("TagA", None, True),  # unreadable code (cq-ext corner case) passes, as in Java
    ],
)
def test_tag_filter_consume_queue(expr, code, expected):
    f = ExpressionMessageFilter("TAG", expr)
    assert f.is_matched_by_consume_queue(code) is expected
    # TAG subscriptions never filter on the commit log
    assert f.is_matched_by_commit_log(object(), lambda: pytest.fail("must not decode")) is True


@pytest.mark.parametrize("etype", [None, "", "TAG"])
def test_absent_expression_type_is_tag(etype):
    f = ExpressionMessageFilter(etype, "TagA")
    assert f.subscription_type == "TAG"
    assert f.is_matched_by_consume_queue(TAG_A) and not f.is_matched_by_consume_queue(0)


def test_unknown_expression_type_rejected():
    with pytest.raises(SQLParseError):
        ExpressionMessageFilter("XPATH", "a")


def test_sql92_filter_stages():
    f = ExpressionMessageFilter("SQL92", "a > 5 AND TAGS = 'TagA'")
    assert f.is_matched_by_consume_queue(0) and f.is_matched_by_consume_queue(TAG_B)
    calls = []

    def props(p):
        def get():
            calls.append(1)
            return p
        return get

    assert f.is_matched_by_commit_log(b"rec", props({"a": "6", "TAGS": "TagA"})) is True
    assert f.is_matched_by_commit_log(b"rec", props({"a": "6", "TAGS": "TagB"})) is False
    assert f.is_matched_by_commit_log(b"rec", props({"a": "x", "TAGS": "TagA"})) is False
    assert f.is_matched_by_commit_log(b"rec", props({"TAGS": "TagA"})) is False  # unknown
    assert f.is_matched_by_commit_log(b"rec", props(None)) is False
    assert len(calls) == 5


def test_sql92_commit_log_mapping_record_and_decode_failure():
    f = ExpressionMessageFilter("SQL92", "a IS NULL")
    assert f.is_matched_by_commit_log({"b": "1"}) is True
    assert f.is_matched_by_commit_log({"a": "1"}) is False
    assert f.is_matched_by_commit_log(b"opaque") is True  # no properties ⇒ all NULL

    def boom():
        raise ValueError("corrupt properties")

    assert f.is_matched_by_commit_log(b"rec", boom) is False


@pytest.mark.parametrize("expr", ["a > 'x'", "", "   ", None, "a >"])
def test_sql92_bad_expression_raises(expr):
    with pytest.raises(SQLParseError):
        ExpressionMessageFilter("SQL92", expr)


def test_class_filter_mode_matches_everything():
    f = ExpressionMessageFilter("TAG", "TagA", class_filter_mode=True)
    assert f.is_matched_by_consume_queue(0)
    g = ExpressionMessageFilter("SQL92", "a > 5", class_filter_mode=True)
    assert g.is_matched_by_commit_log({"a": "1"})


def test_from_subscription_data_uses_registered_codes():
    data = {"classFilterMode": False, "codeSet": [TAG_A, "2598920"], "expressionType": "TAG",
            "subString": "TagA || TagB", "subVersion": "1700000000000", "tagsSet": ["TagA", "TagB"],
            "topic": "T"}
    f = ExpressionMessageFilter.from_subscription_data(data)
    assert f.is_matched_by_consume_queue(TAG_B) and not f.is_matched_by_consume_queue(0)
    cpp = {"subString": "TagA", "topic": "T"}  # C++ omits expressionType and may omit codes
    g = ExpressionMessageFilter.from_subscription_data(cpp)
    assert g.is_matched_by_consume_queue(TAG_A)
    sql = {"expressionType": "SQL92", "subString": "a = '1'", "codeSet": [], "tagsSet": []}
    h = ExpressionMessageFilter.from_subscription_data(sql)
    assert h.is_matched_by_commit_log({"a": "1"})


def test_matches_tag_exact_recheck():
    f = ExpressionMessageFilter("TAG", "Aa")
    assert f.is_matched_by_consume_queue(tags_to_code("BB"))  # hash collision
    assert not f.matches_tag("BB") and f.matches_tag("Aa") and not f.matches_tag(None)
    assert ExpressionMessageFilter("TAG", "*").matches_tag(None)


def test_build_subscription_data_tag_shape():
    sd = build_subscription_data("T", "TagA || TagB", "TAG", sub_version=1700000000000)
    assert sd == {
        "classFilterMode": False,
        "codeSet": [2598919, 2598920],
        "expressionType": "TAG",
        "subString": "TagA || TagB",
        "subVersion": 1700000000000,
        "tagsSet": ["TagA", "TagB"],
        "topic": "T",
    }
    assert list(sd) == sorted(sd)  # fastjson key order


@pytest.mark.parametrize("expr", ["*", "", None, " * "])
def test_build_subscription_data_sub_all(expr):
    sd = build_subscription_data("T", expr)
    assert sd["subString"] == "*" and sd["tagsSet"] == [] and sd["codeSet"] == []
    assert sd["expressionType"] == "TAG" and isinstance(sd["subVersion"], int)


def test_build_subscription_data_sql92():
    sd = build_subscription_data("T", "a between 0 and 3", "SQL92", sub_version=5)
    assert sd["expressionType"] == "SQL92" and sd["subString"] == "a between 0 and 3"
    assert sd["tagsSet"] == [] and sd["codeSet"] == [] and sd["subVersion"] == 5
    with pytest.raises(SQLParseError):
        build_subscription_data("T", "a between 3 and 0", "SQL92")
    with pytest.raises(SQLParseError):
        build_subscription_data("T", "", "SQL92")
