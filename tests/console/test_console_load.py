"""The console under load does not stall the broker: concurrent searches over a topic of a few
thousand messages plus page loads, while a producer measures its send latency.  Searches run in a
pool of their own (at most ``SEARCH_WORKERS`` at once), so pages still answer while they scan."""
from __future__ import annotations

import os
import statistics
import threading
import time

import pytest

from rmqd.console.jobs import SEARCH_WORKERS
from rmqd.remoting.client import BlockingClient
from rmqd.remoting.codes import RequestCode
from rmqd.remoting.command import new_request
from rmqd.store.message import MessageToStore, encode_properties

from rmqd.console.app import STATE

from tests.console.kit import ConsoleKit
from tests.kit.waits import wait_until

pytestmark = pytest.mark.timeout(60)

TOPIC, N_MESSAGES, QUEUES = "LoadTopic", 3000, 4
SEARCHES = 6
PAGES = ["/api/overview", "/api/topics?page=1&size=20", "/api/groups?page=1&size=20", f"/api/topics/{TOPIC}",
         f"/api/messages?topic={TOPIC}&begin=0&limit=100"]


def p95(xs: list[float]) -> float:
    return sorted(xs)[max(0, int(len(xs) * 0.95) - 1)]


def send_latencies(broker: str, n: int, stop: threading.Event | None = None) -> list[float]:
    """Synchronous sends, one at a time: each one's round trip in seconds."""
    out = []
    with BlockingClient(broker) as c:
        for i in range(n):
            if stop is not None and stop.is_set():
                break
            req = new_request(RequestCode.SEND_MESSAGE, {
                "producerGroup": "PG_LOAD", "topic": "LoadSendTopic", "defaultTopic": "TBW102",
                "defaultTopicQueueNums": "4", "queueId": str(i % 4), "sysFlag": "0",
                "bornTimestamp": str(int(time.time() * 1000)), "flag": "0",
                "properties": encode_properties({"UNIQ_KEY": os.urandom(16).hex().upper(), "WAIT": "true"}),
                "reconsumeTimes": "0", "unitMode": "false", "batch": "false"}, b"s" * 200)
            t0 = time.perf_counter()
            resp = c.invoke(req, 10)
            out.append(time.perf_counter() - t0)
            assert resp.code == 0, resp.remark
            time.sleep(0.005)
    return out


@pytest.fixture(scope="module")
def kit(tmp_path_factory):
    k = ConsoleKit(str(tmp_path_factory.mktemp("load-store")), lag_interval_s=60).start()
    k.create_topic(TOPIC, QUEUES)
    k.create_topic("LoadSendTopic", 4)
    store = k.server.broker.store
    for i in range(N_MESSAGES):
        body = (b'{"order": %d, "note": "%s"}' % (i, b"needle" if i % 500 == 7 else b"hay" * 60))
        assert store.put_message(MessageToStore.create(TOPIC, i % QUEUES, body, {"KEYS": f"o-{i}"})).ok
    try:
        yield k
    finally:
        k.stop()


@pytest.mark.slow
def test_searches_and_pages_do_not_stall_sends(kit):
    broker = kit.broker_addr
    send_latencies(broker, 20)                                       # warm the connection and the topic
    baseline = send_latencies(broker, 100)

    web = kit.http()
    jobs = [web.get_json(f"/api/search?topic={TOPIC}&q=needle&field=body&begin=0&max={N_MESSAGES}")["id"]
            for _ in range(SEARCHES)]
    stop = threading.Event()
    pages: list[tuple[str, int, float]] = []
    errors: list[BaseException] = []

    def load_pages() -> None:
        h = kit.http()
        try:
            while not stop.is_set():
                for path in PAGES:
                    t0 = time.perf_counter()
                    code, _, _ = h.get(path, timeout=10)
                    pages.append((path, code, time.perf_counter() - t0))
        except BaseException as exc:            # surfaced by the assertions below
            errors.append(exc)

    threads = [threading.Thread(target=load_pages) for _ in range(3)]
    for t in threads:
        t.start()
    try:
        loaded = send_latencies(broker, 150)
        wait_until(lambda: all(web.get_json(f"/api/search/{j}")["done"] for j in jobs), 30, interval=0.1, what="the searches")
    finally:
        stop.set()
        for t in threads:
            t.join(15)
    assert not errors, errors

    # every search scanned the whole topic and found the six needles; never more running than the pool
    for j in jobs:
        done = web.get_json(f"/api/search/{j}")
        assert (done["scanned"], done["total"], done["error"]) == (N_MESSAGES, N_MESSAGES, None)
        assert len(done["matches"]) == 6
    searches = kit.eps["rw"]._runner.app[STATE].searches
    spans = [(searches.get(j).run_started, searches.get(j).finished) for j in jobs]
    events = sorted([(t0, 1) for t0, _ in spans] + [(t1, -1) for _, t1 in spans], key=lambda e: (e[0], e[1]))
    running = [sum(d for _, d in events[:i + 1]) for i in range(len(events))]
    assert all(t0 > 0 for t0, _ in spans) and max(running) == SEARCH_WORKERS     # the pool, full and no more

    # pages kept answering while the searches ran
    assert len(pages) >= 3 * len(PAGES) and {code for _, code, _ in pages} == {200}
    page_times = [t for _, _, t in pages]
    print(f"pages: {len(pages)} loads, median {statistics.median(page_times) * 1000:.0f} ms, "
          f"max {max(page_times) * 1000:.0f} ms")
    assert max(page_times) < 3.0

    # sends were not stalled: bounded, generous limits (a 2-core machine shared with other work)
    print(f"send ms: idle p50 {statistics.median(baseline) * 1000:.1f} p95 {p95(baseline) * 1000:.1f}; "
          f"under console load p50 {statistics.median(loaded) * 1000:.1f} p95 {p95(loaded) * 1000:.1f} "
          f"max {max(loaded) * 1000:.1f}")
    assert len(loaded) == 150
    assert p95(loaded) < max(0.25, 10 * p95(baseline))
    assert max(loaded) < 1.5


def test_search_progress_is_visible_while_it_runs(kit, monkeypatch):
    """Polls over HTTP see the search advance: some poll lands strictly between 0 and the total, the
    scanned count never goes back, and the last one has scanned everything.  The view's scan is paced
    (5 ms per batch of 32) so the middle of the search is observable on any machine."""
    web = kit.http()
    web.get_json("/api/session")                                   # the console's view exists from here on
    view = kit.eps["rw"].view
    scan = view.scan

    def paced(*args, **kwargs):
        for step in scan(*args, **kwargs):
            time.sleep(0.005)
            yield step
    monkeypatch.setattr(view, "scan", paced)
    job = web.get_json(f"/api/search?topic={TOPIC}&q=needle&field=body&begin=0&max={N_MESSAGES}")
    polls = []
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        p = web.get_json(f"/api/search/{job['id']}")
        polls.append((p["scanned"], p["total"], p["state"], len(p["matches"])))
        if p["done"]:
            break
        time.sleep(0.01)
    assert polls[-1][:3] == (N_MESSAGES, N_MESSAGES, "done") and polls[-1][3] == 6
    middle = [(s, t) for s, t, state, _ in polls if state == "running" and 0 < s < t]
    assert middle, f"no poll saw the search in progress: {polls[:5]} ... {polls[-3:]}"
    assert all(t == N_MESSAGES for _, t in middle)
    scanned = [s for s, *_ in polls]
    assert scanned == sorted(scanned)
    found = [n for *_, n in polls]
    assert found == sorted(found)
