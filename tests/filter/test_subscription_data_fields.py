"""A registered SubscriptionData whose fields have the wrong JSON type is refused as a bad subscription
(SQLParseError, which the consumer table keeps as the subscription's error), not a crash."""
import pytest

from rmqd.filter import ExpressionMessageFilter, SQLParseError

TAG_A = 2598919


def test_codes_sent_as_numbers_or_digit_strings_are_used():
    f = ExpressionMessageFilter.from_subscription_data(
        {"expressionType": "TAG", "subString": "TagA", "codeSet": [TAG_A, str(TAG_A + 1)]})
    assert f.is_matched_by_consume_queue(TAG_A)
    assert f.is_matched_by_consume_queue(TAG_A + 1)
    assert not f.is_matched_by_consume_queue(TAG_A + 2)


@pytest.mark.parametrize("data", [
    {"expressionType": 5, "subString": "TagA"},
    {"expressionType": "TAG", "subString": ["TagA"]},
    {"expressionType": "TAG", "subString": "TagA", "codeSet": {"a": 1}},
    {"expressionType": "TAG", "subString": "TagA", "codeSet": [None]},
])
def test_wrong_json_types_are_a_parse_error(data):
    with pytest.raises(SQLParseError, match="SubscriptionData"):
        ExpressionMessageFilter.from_subscription_data(data)
