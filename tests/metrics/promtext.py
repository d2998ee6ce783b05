"""A small Prometheus text-format parser for the tests (families, types, samples)."""
from __future__ import annotations

import re

SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$')
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def parse(text: str) -> tuple[dict[str, str], list[tuple[str, dict, float]]]:
    types: dict[str, str] = {}
    samples = []
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split(" ", 3)
            types[name] = kind
        elif line and not line.startswith("#"):
            m = SAMPLE.match(line)
            assert m, f"bad sample line: {line!r}"
            labels = dict(LABEL.findall(m.group(2) or ""))
            samples.append((m.group(1), labels, float(m.group(3))))
    return types, samples


def family_of(name: str, types: dict[str, str]) -> str:
    for suffix in ("_bucket", "_count", "_sum"):
        if name.endswith(suffix) and types.get(name[: -len(suffix)]) == "histogram":
            return name[: -len(suffix)]
    return name


def value(samples, name: str, **labels: str) -> float:
    """Sum of the samples of ``name`` whose labels include ``labels``."""
    return sum(v for n, lb, v in samples if n == name and all(lb.get(k) == x for k, x in labels.items()))


def series(samples, name: str, **labels: str) -> list[dict]:
    return [lb for n, lb, v in samples if n == name and all(lb.get(k) == x for k, x in labels.items())]
