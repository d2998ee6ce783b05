"""Lite topic names (5.5 ``LiteUtil``).

A lite topic is a name inside a LITE parent topic, not a topic: its queue is the LMQ
``%LMQ%$<parent>$<lite>`` (always queue 0). A name is 1…``maxLiteTopicSize`` (64) UTF-8 bytes of
``[A-Za-z0-9_-]`` (the proxy's ``GrpcValidator.validateLiteTopic``, whose remarks these are).
"""
from __future__ import annotations

import re
from typing import Optional

LITE_TOPIC_PROPERTY = "__LITE_TOPIC"
LMQ_PREFIX = "%LMQ%"
LITE_PREFIX = LMQ_PREFIX + "$"
SEPARATOR = "$"
DEFAULT_MAX_SIZE = 64
_VALID = re.compile(r"[A-Za-z0-9_-]+\Z")


def lmq_name(parent: str, lite: str) -> str:
    return f"{LITE_PREFIX}{parent}{SEPARATOR}{lite}"


def is_lite_queue(name: str) -> bool:
    return name.startswith(LITE_PREFIX)


def parse_lmq(name: str) -> Optional[tuple[str, str]]:
    """(parent, lite) of a lite LMQ name; None for anything else (a plain LMQ, a name with a second ``$``)."""
    if not name.startswith(LITE_PREFIX):
        return None
    parent, sep, lite = name[len(LITE_PREFIX):].partition(SEPARATOR)
    if not sep or not parent or not lite or SEPARATOR in lite:
        return None
    return parent, lite


def check_name(lite: Optional[str], max_size: int = DEFAULT_MAX_SIZE) -> Optional[str]:
    """The reason ``lite`` is not a valid lite topic name, None when it is."""
    if lite is None or not lite.strip():
        return "lite topic cannot be the char sequence of whitespace"
    if len(lite.encode("utf-8")) > max_size:
        return f"lite topic exceed the max size {max_size}"
    if not _VALID.match(lite):
        return "lite topic can only contain alphanumeric characters, hyphens(-), and underscores(_)"
    return None
