"""PyYAML behind typed functions: a loaded document is an ``object`` for its reader to check, shape by shape.

The one module that imports PyYAML, which ships no type information (the test extra has no types-PyYAML).
"""
from __future__ import annotations

from typing import IO, Union

import yaml  # type: ignore[import-untyped]  # untyped library: typed here, once (see the module docstring)

#: What PyYAML raises for a malformed document.
YAMLError: type[Exception] = yaml.YAMLError


def load_yaml(stream: Union[str, IO[str]]) -> object:
    """One YAML document (``yaml.safe_load``): None for an empty one."""
    document: object = yaml.safe_load(stream)
    return document


def dump_yaml(data: object) -> str:
    """``data`` as block-style YAML text, keys in their order, non-ASCII kept as is."""
    text: str = yaml.safe_dump(data, default_flow_style=False, sort_keys=False, allow_unicode=True)
    return text
