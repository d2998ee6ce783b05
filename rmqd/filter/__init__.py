"""Message filtering: tag subscriptions (hash codes) and SQL92 property selectors."""
from rmqd.filter import message_filter
from rmqd.filter.errors import SQLParseError
from rmqd.filter.message_filter import *  # noqa: F403 (its __all__ is part of the package's)
from rmqd.filter.tags import SUB_ALL, TagSubscription, java_string_hash, parse_tag_expression, tags_to_code

#: the SQL92 compiler's names, loaded with the first use (start-up time: a broker without SQL92 subscriptions
#: never compiles one)
_SQL92_NAMES = frozenset(("CompiledFilter", "FilterEvaluationError", "clear_cache", "compile_expression"))

__all__ = ["SQLParseError", "SUB_ALL", "TagSubscription", "java_string_hash", "parse_tag_expression", "tags_to_code",
           *sorted(_SQL92_NAMES)]
__all__ += message_filter.__all__


def __getattr__(name: str) -> object:
    if name in _SQL92_NAMES:
        from rmqd.filter import sql92
        return getattr(sql92, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
