"""PyYAML behind typed functions: a loaded document is an ``object`` for its reader to check, shape by shape
(PyYAML's own ``safe_load`` returns ``Any``).

PyYAML ships no type information; the types-PyYAML stubs may or may not be installed (they are not in the test
extra), so the import below is checked either way.
"""
from __future__ import annotations

from typing import IO, Union

import yaml  # type: ignore[import-untyped, unused-ignore]  # with or without types-PyYAML (module docstring)

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
