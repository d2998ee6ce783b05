"""Typed reads of values from a decoded JSON request body: :func:`rmqd.common.json_values.json_int`, under the name
the processors and lite/ import it by."""
from __future__ import annotations

from rmqd.common.json_values import json_int

__all__ = ["json_int"]
