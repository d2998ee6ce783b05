"""Extension point for feature pages: compaction status, tiered storage, ACL accounts (built in,
``rmqd.console.feature_pages``) and whatever else registers.

A feature registers ``register(name, fn)`` with ``fn(broker) -> dict | None`` (None = the broker
does not have the feature).  The console lists every registered feature that answers on the
``/features`` page and at ``GET /api/features``; its status dict is shown as a table.
"""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Callable, Optional

if TYPE_CHECKING:
    from rmqd.console.handles import ConsoleBroker
    from rmqd.console.view_base import JsonObject

    #: A feature's status provider: its page for the in-process broker, None when the broker does not run it.
    FeaturePage = Callable[[ConsoleBroker], Optional[JsonObject]]

log = logging.getLogger(__name__)

_FEATURES: dict[str, "FeaturePage"] = {}
# The built-in pages: always listed, so the UI can say when a broker does not run the feature.
BUILTIN = ("compaction", "tier", "acl")


def register(name: str, fn: "FeaturePage") -> None:
    """Add (or replace) the status provider of feature ``name``."""
    _FEATURES[name] = fn


def local_extensions(broker: "ConsoleBroker") -> dict[str, "JsonObject"]:
    out: dict[str, JsonObject] = {}
    for name, fn in sorted(_FEATURES.items()):
        try:
            status = fn(broker)
        except Exception:
            log.exception("console feature %s failed", name)
            status = {"error": "status unavailable (see the broker log)"}
        if status is not None:
            out[name] = status
    return out
