"""Message filtering: tag subscriptions (hash codes) and SQL92 property selectors."""
from rmqd.filter.message_filter import (
    SQL92,
    TAG,
    ExpressionMessageFilter,
    build_subscription_data,
    is_tag_type,
)
from rmqd.filter.errors import SQLParseError
from rmqd.filter.tags import (
    SUB_ALL,
    TagSubscription,
    java_string_hash,
    parse_tag_expression,
    tags_to_code,
)

__all__ = [
    "SQL92",
    "TAG",
    "ExpressionMessageFilter",
    "build_subscription_data",
    "is_tag_type",
    "SUB_ALL",
    "CompiledFilter",
    "FilterEvaluationError",
    "SQLParseError",
    "TagSubscription",
    "clear_cache",
    "compile_expression",
    "java_string_hash",
    "parse_tag_expression",
    "tags_to_code",
]

#: the SQL92 compiler's names, loaded with the first use (start-up time: a broker without SQL92 subscriptions
#: never compiles one)
_SQL92_NAMES = frozenset(("CompiledFilter", "FilterEvaluationError", "clear_cache", "compile_expression"))


def __getattr__(name: str):
    if name in _SQL92_NAMES:
        from rmqd.filter import sql92
        return getattr(sql92, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
