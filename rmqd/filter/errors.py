"""The error of a SQL92 expression the broker refuses, apart from the compiler (:mod:`rmqd.filter.sql92`, loaded
with the first SQL92 subscription) so that the processors that map it to a response code do not load it."""
from __future__ import annotations


class SQLParseError(ValueError):
    """An expression the Java broker would reject (SUBSCRIPTION_PARSE_FAILED)."""

    def __init__(self, message: str, expression: str = "", position: int | None = None):
        self.reason = message
        self.expression = expression
        self.position = position
        if position is not None:
            line = expression.count("\n", 0, position) + 1
            col = position - (expression.rfind("\n", 0, position) + 1) + 1
            message = f"{message} at position {position} (line {line}, column {col})"
        super().__init__(f"Invalid SQL92 expression {expression!r}: {message}")
