"""Scale: with 5,000 topics and 2,000 consumer groups the first page of each list answers in
< 300 ms (p95).  The metadata is created directly in the broker's managers."""
from __future__ import annotations

import math
import statistics
import time

import pytest

from rmqd.store.metadata import SubscriptionGroupConfig, TopicConfig

from tests.console.kit import ConsoleKit

pytestmark = pytest.mark.timeout(120)

N_TOPICS, N_GROUPS = 5000, 2000


def populate(kit: ConsoleKit) -> None:
    b = kit.server.broker
    tm, gm, om = b.topic_config_manager, b.subscription_group_manager, b.consumer_offset_manager
    for i in range(N_TOPICS):
        tm.table[f"scale-topic-{i:05d}"] = TopicConfig(f"scale-topic-{i:05d}", 4, 4)
    for g in range(N_GROUPS):
        name = f"scale-group-{g:05d}"
        gm.table[name] = SubscriptionGroupConfig(name)
        for k in range(2):
            om.table[f"scale-topic-{(g * 2 + k) % N_TOPICS:05d}@{name}"] = {q: 0 for q in range(4)}
    for i in range(0, 40, 2):                       # the first groups' topics hold a few messages (real lag)
        kit.send(f"scale-topic-{i:05d}", b"m", queue_id=0)


@pytest.fixture(scope="module")
def scale_kit(tmp_path_factory):
    k = ConsoleKit(str(tmp_path_factory.mktemp("scale-store")), {"mapedFileSizeConsumeQueue": 20 * 1000},
                   lag_interval_s=60).start()
    populate(k)
    try:
        yield k
    finally:
        k.stop()


def p95(samples: list[float]) -> float:
    """Nearest-rank 95th percentile (of 20 samples: the 19th smallest)."""
    return sorted(samples)[math.ceil(0.95 * len(samples)) - 1]


def expected_first_page(kit: ConsoleKit, path: str) -> tuple[list[str], int]:
    """The names (and total) the first page of ``path`` must show, from the broker's own tables."""
    if path.startswith("/api/topics"):
        names = sorted(kit.server.broker.topic_config_manager.table)
        if "q=" in path:
            names = [n for n in names if "scale-topic-04" in n]
        return names[:20], len(names)
    if "q=" in path:
        return [f"scale-group-{g:05d}" for g in range(1000, 1020)], 1000
    return [f"scale-group-{g:05d}" for g in range(20)], N_GROUPS


@pytest.mark.parametrize("path, key", [("/api/topics?page=1&size=20", "topic"),
                                       ("/api/topics?q=scale-topic-04&page=1&size=20", "topic"),
                                       ("/api/groups?page=1&size=20", "group"),
                                       ("/api/groups?q=scale-group-01&page=1&size=20", "group")])
def test_first_page_p95_under_300ms(scale_kit, path, key):
    web = scale_kit.http()
    web.get_json(path)                                     # warm
    times = []
    for _ in range(20):
        t0 = time.perf_counter()
        d = web.get_json(path)
        times.append(time.perf_counter() - t0)
    names, total = expected_first_page(scale_kit, path)
    assert [row[key] for row in d["items"]] == names and d["total"] == total
    if "q=" in path:
        assert total == 1000
    assert p95(times) < 0.3, f"{path}: p95 {p95(times) * 1000:.0f} ms (median {statistics.median(times) * 1000:.0f})"
    if key == "group" and "q=" not in path:
        assert d["items"][0]["lag"] == 1                   # scale-group-00000 on topics 0 and 1: one message
