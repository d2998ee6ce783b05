"""What a Go scenario program saw (gokit), reduced to what must be the same on rmqd and on the Java 5.5 reference:
ids, times, offsets and hosts masked, and the version differences that are explained (docs/compatibility.md) applied
explicitly, each with its reason, so that everything else is compared exactly."""
from __future__ import annotations

from typing import Any, Iterable

MASK = "<masked>"

# Property values that differ by nature between two brokers and two runs (ids, times, offsets).
VOLATILE_PROPERTIES = frozenset({
    "UNIQ_KEY", "CONSUME_START_TIME", "MIN_OFFSET", "MAX_OFFSET", "ORIGIN_MESSAGE_ID", "__transactionId__",
    "TIMER_ENQUEUE_MS", "TIMER_DEQUEUE_MS", "TIMER_OUT_MS", "TIMER_DELIVER_MS", "TRAN_PREPARED_QUEUE_OFFSET",
    "REAL_QID", "INNER_MULTI_QUEUE_OFFSET",
})

# Explained differences of what the brokers store (docs/compatibility.md, "Go clients"). rmqd stores what 4.9.8
# stores where 4.9.8 and 5.5 disagree:
# - 5.x's SendMessageProcessor writes MSG_REGION and TRACE_ON into the properties of every single (not batched)
#   message it stores; 4.9.8 and rmqd answer them in the send response only;
# - 4.9.8 and rmqd stamp CLUSTER on each message of a batch; 5.5 does not.
JAVA55_SINGLE_SEND_PROPERTIES = frozenset({"MSG_REGION", "TRACE_ON"})


def masked(props: dict | None) -> dict:
    return {k: (MASK if k in VOLATILE_PROPERTIES else v) for k, v in (props or {}).items()}


def as_rmqd_stores(java_props: dict | None, batch: bool = False) -> dict:
    """The properties rmqd is expected to store where the Java 5.5 reference stored ``java_props`` (masked)."""
    props = {k: v for k, v in masked(java_props).items()
             if k not in JAVA55_SINGLE_SEND_PROPERTIES}
    if batch:
        props["CLUSTER"] = "DefaultCluster"
    return props


def of(run, op: str) -> list[dict]:
    """The events ``op`` of a finished Go program, in the order printed."""
    return run.events_of(op)


def ok(run, what: str) -> None:
    """The program ran to its end ("done") without failing."""
    assert not run.timed_out, f"{what}: timed out; stderr {run.stderr[-3000:]}"
    assert run.returncode == 0 and of(run, "done"), \
        f"{what}: exit {run.returncode}; stderr {run.stderr[-3000:]}; events {run.events[-8:]}"


def without(event: dict, keys: Iterable[str]) -> dict:
    drop = set(keys) | {"t"}
    return {k: v for k, v in event.items() if k not in drop}


def distinct(events: list[dict], id_key: str) -> list[dict]:
    """The events of distinct messages (first of each ``id_key``): a producer that resends after a timeout (the
    clients do, with the same message id) makes a second copy, which a consumer then also receives."""
    seen: set = set()
    out = []
    for e in events:
        key = (e.get("consumer"), e[id_key], e.get("attempt", e.get("reconsume")))
        if key not in seen:
            seen.add(key)
            out.append(e)
    return out


def by_body(events: list[dict]) -> dict[str, dict]:
    """The first event of each body."""
    out: dict[str, dict] = {}
    for e in events:
        out.setdefault(e["body"], e)
    return out


def differences(java: Any, rmqd: Any, path: str = "") -> list[str]:
    """Where two normalised outcomes differ (empty: the same)."""
    if isinstance(java, dict) and isinstance(rmqd, dict):
        out = []
        for k in sorted(set(java) | set(rmqd), key=str):
            if k not in rmqd:
                out.append(f"{path}/{k}: java {java[k]!r}, rmqd has none")
            elif k not in java:
                out.append(f"{path}/{k}: rmqd {rmqd[k]!r}, java has none")
            else:
                out += differences(java[k], rmqd[k], f"{path}/{k}")
        return out
    if isinstance(java, list) and isinstance(rmqd, list) and len(java) == len(rmqd):
        return [d for i, (a, b) in enumerate(zip(java, rmqd)) for d in differences(a, b, f"{path}[{i}]")]
    return [] if java == rmqd else [f"{path}: java {java!r}, rmqd {rmqd!r}"]


def assert_same(java: Any, rmqd: Any, what: str) -> None:
    diff = differences(java, rmqd)
    assert not diff, f"{what}: rmqd differs from the Java 5.5 reference:\n  " + "\n  ".join(diff)
