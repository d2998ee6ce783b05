"""Exported metric names as OpenTelemetry Java 1.27+ (RocketMQ 5.1.4 and later) writes them.

``PrometheusMetricNameMapper`` appends the unit unless the name already contains it, and ``_total``
to counters whose name lacks "total".  Units are written in Prometheus spelling (ms ->
milliseconds, us -> microseconds, By -> bytes, s -> seconds).  Histograms without a unit keep their bare name.
"""
from __future__ import annotations

UNIT_NAMES = {"ms": "milliseconds", "us": "microseconds", "s": "seconds", "By": "bytes", "bytes": "bytes", "1": "",
              "messages": "messages", "": ""}


def exported_name(name: str, unit: str, kind: str) -> str:
    """The name a 5.1.4+ broker exports for instrument ``name`` with ``unit`` and ``kind``."""
    suffix = UNIT_NAMES.get(unit, unit)
    if suffix and suffix not in name:
        name = f"{name}_{suffix}"
    if kind == "counter" and "total" not in name:
        name = f"{name}_total"
    return name
