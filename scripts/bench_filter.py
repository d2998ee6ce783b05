#!/usr/bin/env python
"""Benchmark message filtering: SQL92 and TAG evaluation rate, SQL92 compile time.

Each case runs for about ``--seconds`` per repetition (default 0.4 s), 3 repetitions,
and reports the median. Usage: ``.venv/bin/python scripts/bench_filter.py [--seconds S]``.
"""
from __future__ import annotations

import argparse
import statistics
import time
from typing import Callable

from benchenv import machine_line
from rmqd.filter import ExpressionMessageFilter, clear_cache, compile_expression, tags_to_code
from rmqd.filter.sql92 import _compile_uncached

SQL_CASES = [
    "a > 5 AND b = 'abc'",
    "a between 0 and 3",
    "TAGS IN ('TagA', 'TagB', 'TagC') AND region = 'eu-west'",
    "(price >= 10.5 AND price < 100.0) OR vip = 'true'",
    "color IS NOT NULL AND color <> 'red' AND NOT (qty > 100)",
    "KEYS CONTAINS 'order' AND orderId STARTSWITH 'ORD-'",
]
TAG_CASES = ["*", "TagA", "TagA || TagB || TagC"]


def make_messages(n: int = 64) -> list[dict[str, str]]:
    """~10 realistic properties per message; values vary so results vary."""
    tags = ["TagA", "TagB", "TagC", "TagD"]
    msgs = []
    for i in range(n):
        msgs.append({
            "UNIQ_KEY": f"7F0000010B5C18B4AAC2{i:012X}",
            "KEYS": f"order-{i} user-{i % 7}",
            "TAGS": tags[i % 4],
            "WAIT": "true",
            "a": str(i % 10),
            "b": "abc" if i % 3 else "xyz",
            "price": f"{(i * 7.25) % 150:.2f}",
            "qty": str(i * 3),
            "region": "eu-west" if i % 2 else "us-east",
            "orderId": f"ORD-{i:06d}",
            **({"color": ["red", "blue"][i % 2]} if i % 5 else {}),
            **({"vip": "true"} if i % 11 == 0 else {}),
        })
    return msgs


def rate(run_batch: Callable[[], int], seconds: float) -> float:
    """Items per second for one repetition lasting about ``seconds``."""
    done, start = 0, time.perf_counter()
    deadline = start + seconds
    while True:
        done += run_batch()
        now = time.perf_counter()
        if now >= deadline:
            return done / (now - start)


def median_rate(run_batch: Callable[[], int], seconds: float, reps: int = 3) -> float:
    return statistics.median(rate(run_batch, seconds) for _ in range(reps))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--seconds", type=float, default=0.4, help="seconds per repetition")
    args = ap.parse_args()
    secs = args.seconds

    print(machine_line())
    msgs = make_messages()
    nprops = statistics.mean(len(m) for m in msgs)
    print(f"{len(msgs)} messages, {nprops:.1f} properties each; median of 3 x {secs:.1f}s\n")

    print(f"{'SQL92 expression':60} {'evals/s':>12} {'matched':>8} {'compile µs':>11}")
    for expr in SQL_CASES:
        f = compile_expression(expr)
        match = f.matches

        def batch(match=match) -> int:
            for m in msgs:
                match(m)
            return len(msgs)

        r = median_rate(batch, secs)
        hits = sum(f.matches(m) for m in msgs)

        def comp(expr=expr) -> int:
            for _ in range(20):
                _compile_uncached(expr)
            return 20

        c = median_rate(comp, min(secs, 0.2))
        print(f"{expr:60} {r:12,.0f} {hits:>5}/{len(msgs)} {1e6 / c:11.1f}")

    # Full broker path: ExpressionMessageFilter with lazily supplied properties.
    flt = ExpressionMessageFilter("SQL92", SQL_CASES[0])
    getters = [(lambda m=m: m) for m in msgs]

    def filter_batch() -> int:
        for g in getters:
            flt.is_matched_by_commit_log(None, g)
        return len(getters)

    print(f"{'ExpressionMessageFilter.is_matched_by_commit_log (case 1)':60} "
          f"{median_rate(filter_batch, secs):12,.0f}")

    clear_cache()

    def cached_batch() -> int:
        for _ in range(100):
            compile_expression(SQL_CASES[0])
        return 100

    print(f"{'compile_expression cache hit':60} {median_rate(cached_batch, min(secs, 0.2)):12,.0f} /s")

    print(f"\n{'TAG expression':60} {'checks/s':>12} {'matched':>8}")
    codes = [tags_to_code(m["TAGS"]) for m in msgs]
    for expr in TAG_CASES:
        tf = ExpressionMessageFilter("TAG", expr)
        check = tf.is_matched_by_consume_queue

        def tbatch(check=check) -> int:
            for c in codes:
                check(c)
            return len(codes)

        r = median_rate(tbatch, secs)
        hits = sum(check(c) for c in codes)
        print(f"{expr:60} {r:12,.0f} {hits:>5}/{len(codes)}")

    tag_strings = [m["TAGS"] + str(i) for i, m in enumerate(msgs)]

    def hbatch() -> int:
        from rmqd.filter.tags import java_string_hash
        fn = java_string_hash.__wrapped__  # uncached
        for t in tag_strings:
            fn(t)
        return len(tag_strings)

    print(f"{'java_string_hash (uncached, ~5 chars)':60} {median_rate(hbatch, secs):12,.0f}")


if __name__ == "__main__":
    main()
