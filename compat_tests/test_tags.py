"""Tag subscriptions through the C++ clients: each expression receives exactly its subset."""
from __future__ import annotations

import collections

from scenarios import PUSH_CONSUMER, Background, produce


def test_tag_expressions_receive_exactly_their_subset(client, rmqd_server):
    name, python = client
    ns = rmqd_server.namesrv_addr
    topic = f"CompatTags_{name}"
    for tag in ("TagA", "TagB", "TagC"):
        produce(python, ns, topic, 3, "sync", prefix=tag, tag=tag)
    cases = {"TagA || TagB": 6, "*": 9, "TagC": 3}
    runs = {expr: Background(python, PUSH_CONSUMER, ns,
                             dict(topic=topic, group=f"CG_tags_{i}_{name}", expr=expr, expect=n,
                                  timeout=25, linger=2.0), timeout=40)
            for i, (expr, n) in enumerate(cases.items())}
    for expr, bg in runs.items():
        res = bg.result(45)
        assert not res.timed_out, res.client_log[-2000:]
        got = collections.Counter((e["tags"], e["body"]) for e in res.events_of("recv"))
        want_tags = {"TagA", "TagB", "TagC"} if expr == "*" else set(expr.replace(" ", "").split("||"))
        want = {(t, f"{t}-{i}") for t in want_tags for i in range(3)}
        assert set(got) == want, (expr, sorted(got))
        assert all(n == 1 for n in got.values()), (expr, got)
