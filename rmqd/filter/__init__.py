"""Message filtering: tag subscriptions (hash codes) and SQL92 property selectors."""
from rmqd.filter.message_filter import (
    SQL92,
    TAG,
    ExpressionMessageFilter,
    build_subscription_data,
    is_tag_type,
)
from rmqd.filter.sql92 import (
    CompiledFilter,
    FilterEvaluationError,
    SQLParseError,
    clear_cache,
    compile_expression,
)
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
