"""The checker of the fault rounds, in the style of OpenChaos's QueueChecker and Jepsen's queue model: clients record
what they saw, and after the faults heal the group is read back and held against it.

* Producers (tests/failover/kit.py ``RoutedProducer``) record every key answered SEND_OK, the broker that answered,
  and the answer's queueId, queueOffset and msgId (whose last 8 bytes are the CommitLog offset);
* :class:`RoutedConsumer` pulls every queue from whatever master the name server routes to and records every key it
  received (queue, queue offset, broker);
* :func:`check` reads every queue of the final master from offset 0 and finds:

  - **lost**: acknowledged, not stored;
  - **duplicates**: stored more than once;
  - **offset reuse**: one (queue, queue offset) given to two acknowledged sends, or stored twice (apache/rocketmq#7689);
  - **moved**: an acknowledged key stored at another queue offset than its answer said;
  - **two masters in one epoch**: the acknowledged keys whose CommitLog offsets fall in one epoch of the final
    master's epoch file (GET_BROKER_EPOCH_CACHE) were answered by more than one broker;
  - **phantom reads**: a consumer received a key that is not in the group after healing (it read something a
    failover then cut off).

Nothing here knows which broker kind it talks to: rmqd and Java 5.x answer the same requests.
"""
from __future__ import annotations

import threading
import time
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, Optional

from rmqd.remoting.client import BlockingClient
from rmqd.remoting.codes import RequestCode, ResponseCode
from rmqd.remoting.command import new_request
from rmqd.store.message import decode_messages, decode_offset_msg_id

PULL_BATCH = 32


@dataclass
class Verdict:
    """What :func:`check` found (see the module docstring); :attr:`ok` is true when every list is empty."""

    acked: int
    stored: int
    received: int
    lost: list[str] = field(default_factory=list)
    duplicated: dict[str, int] = field(default_factory=dict)      # key -> copies beyond the first
    offset_reuse: list[tuple[int, int, list[str]]] = field(default_factory=list)   # (queue, offset, keys)
    moved: list[str] = field(default_factory=list)
    epoch_conflicts: list[str] = field(default_factory=list)
    phantom_reads: list[str] = field(default_factory=list)

    @property
    def duplicates(self) -> int:
        return sum(self.duplicated.values())

    @property
    def ok(self) -> bool:
        return not (self.lost or self.duplicates or self.offset_reuse or self.moved or self.epoch_conflicts
                    or self.phantom_reads)

    def summary(self) -> str:
        parts = [f"{self.acked} acknowledged, {self.stored} stored, {self.received} received",
                 f"{len(self.lost)} lost", f"{self.duplicates} duplicates"]
        for name in ("offset_reuse", "moved", "epoch_conflicts", "phantom_reads"):
            items = getattr(self, name)
            if items:
                parts.append(f"{name.replace('_', ' ')}: {len(items)}, e.g. {items[:3]}")
        if self.lost:
            parts.append(f"lost e.g. {self.lost[:5]}")
        return "; ".join(parts)


def pull(client: BlockingClient, topic: str, queue: int, offset: int, group: str, timeout: float = 10.0):
    ext = {"consumerGroup": group, "topic": topic, "queueId": str(queue), "queueOffset": str(offset),
           "maxMsgNums": str(PULL_BATCH), "sysFlag": "4", "commitOffset": "0", "suspendTimeoutMillis": "0",
           "subVersion": "0", "subscription": "*", "expressionType": "TAG"}
    return client.invoke(new_request(RequestCode.PULL_MESSAGE, ext), timeout)


def read_queues(addr: str, topic: str, queues: int = 4, group: str = "CheckerReadBackCG") \
        -> dict[str, list[tuple[int, int, int]]]:
    """Every stored copy of every key of ``topic`` on ``addr``: key -> [(queueId, queueOffset, CommitLog
    offset)], each queue pulled from offset 0 to its end."""
    out: dict[str, list[tuple[int, int, int]]] = defaultdict(list)
    with BlockingClient(addr, timeout=10) as client:
        for q in range(queues):
            offset = 0
            while True:
                r = pull(client, topic, q, offset, group)
                if r.code != ResponseCode.SUCCESS:
                    if r.code not in (ResponseCode.PULL_NOT_FOUND, ResponseCode.PULL_RETRY_IMMEDIATELY,
                                      ResponseCode.PULL_OFFSET_MOVED):
                        raise AssertionError(f"read-back of {topic}/{q} at {offset} on {addr}: {r.code} {r.remark}")
                    break
                msgs = decode_messages(r.body_bytes())
                for m in msgs:
                    out[m.properties.get("KEYS") or m.properties_str].append(
                        (m.queue_id, m.queue_offset, m.commit_log_offset))
                nxt = int(r.ext_fields["nextBeginOffset"])
                if nxt <= offset:
                    break
                offset = nxt
    return dict(out)


class RoutedConsumer:
    """A pull consumer of ``topic`` on whatever master the name server routes to (brokerId 0), from offset 0 of
    each queue; ``received`` maps each key to where it came from (queue, queue offset, broker)."""

    def __init__(self, namesrv: str, topic: str, queues: int = 4, group: str = "CheckerConsumerCG") -> None:
        from tests.failover.kit import master_in_route
        self._route = lambda: master_in_route(namesrv, topic)
        self.topic, self.queues, self.group = topic, queues, group
        self.received: dict[str, tuple[int, int, str]] = {}
        self.offsets = [0] * queues
        self.errors = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="routed-consumer", daemon=True)

    def start(self) -> "RoutedConsumer":
        self._thread.start()
        return self

    def _run(self) -> None:
        client: Optional[BlockingClient] = None
        addr = None
        while not self._stop.is_set():
            if client is None:
                addr = self._route()
                if addr is None:
                    self._stop.wait(0.1)
                    continue
                try:
                    client = BlockingClient(addr, timeout=3)
                except OSError:
                    client = None
                    self._stop.wait(0.1)
                    continue
            got = 0
            try:
                for q in range(self.queues):
                    r = pull(client, self.topic, q, self.offsets[q], self.group, timeout=3)
                    if r.code == ResponseCode.SUCCESS:
                        for m in decode_messages(r.body_bytes()):
                            key = m.properties.get("KEYS") or m.properties_str
                            self.received.setdefault(key, (m.queue_id, m.queue_offset, addr))
                            got += 1
                    if r.code in (ResponseCode.SUCCESS, ResponseCode.PULL_NOT_FOUND,
                                  ResponseCode.PULL_OFFSET_MOVED, ResponseCode.PULL_RETRY_IMMEDIATELY):
                        nxt = int((r.ext_fields or {}).get("nextBeginOffset", self.offsets[q]))
                        self.offsets[q] = max(self.offsets[q], nxt) if r.code == ResponseCode.SUCCESS else nxt
                    else:
                        raise ConnectionError(f"pull answered {r.code} {r.remark}")
            except (OSError, TimeoutError, ConnectionError):
                self.errors += 1
                client.close()
                client = None
                self._stop.wait(0.1)
                continue
            if self._route() != addr:           # the route moved: follow it
                client.close()
                client = None
            elif not got:
                self._stop.wait(0.05)
        if client is not None:
            client.close()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(15)


def check(master: str, topic: str, producer: Any, consumer: Optional[RoutedConsumer] = None,
          epochs: Optional[list[dict]] = None, queues: int = 4) -> Verdict:
    """Hold the final master's ``topic`` against what ``producer`` (``acked``, ``acked_by``, ``receipts``) and
    ``consumer`` saw; ``epochs`` is the final master's epochList (GET_BROKER_EPOCH_CACHE), for the one-master-per-
    epoch check."""
    stored = read_queues(master, topic, queues)
    acked = dict(producer.receipts)
    by = dict(producer.acked_by)
    received = dict(consumer.received) if consumer is not None else {}
    v = Verdict(acked=len(producer.acked), stored=len(stored), received=len(received))
    v.lost = sorted(set(producer.acked) - set(stored))
    v.duplicated = {key: len(copies) - 1 for key, copies in stored.items() if len(copies) > 1}
    slots: dict[tuple[int, int], list[str]] = defaultdict(list)
    for key, copies in stored.items():
        for q, qo, _ in copies:
            slots[(q, qo)].append(key)
    for key, (q, qo, _) in acked.items():
        if (q, qo) not in slots or key not in slots[(q, qo)]:
            slots[(q, qo)].append(key)
    v.offset_reuse = [(q, qo, keys) for (q, qo), keys in sorted(slots.items()) if len(keys) > 1]
    for key, (q, qo, _) in acked.items():
        copies = stored.get(key)
        if copies and (q, qo) not in {(c[0], c[1]) for c in copies}:
            v.moved.append(f"{key}: answered queue {q} offset {qo}, stored at {[(c[0], c[1]) for c in copies]}")
    if epochs:
        starts = sorted((int(e["startOffset"]), int(e["epoch"])) for e in epochs)
        ackers: dict[int, set[str]] = defaultdict(set)
        for key, (_, _, msg_id) in acked.items():
            if key not in stored or not msg_id:
                continue
            phys = decode_offset_msg_id(msg_id)[2]
            epoch = next((e for s, e in reversed(starts) if s <= phys), starts[0][1])
            ackers[epoch].add(by.get(key, "?"))
        v.epoch_conflicts = [f"epoch {e}: sends acknowledged by {sorted(a)}" for e, a in sorted(ackers.items())
                             if len(a) > 1]
    v.phantom_reads = sorted(k for k in received if k not in stored)
    return v


def wait_read_back(master: str, topic: str, producer: Any, timeout: float = 20.0, queues: int = 4,
                   settled: float = 5.0) -> None:
    """Until every acknowledged key is readable on ``master`` (a new master serves reads up to its confirmOffset,
    which reaches its max offset once its slaves have the tail), or the keys still missing have stayed the same
    for ``settled`` seconds (nothing more is coming: what is missing then is the checker's to judge, e.g. a Java
    master's split-brain acknowledgements), or ``timeout``; the checker then judges."""
    deadline = time.monotonic() + timeout
    missing: set | None = None
    since = time.monotonic()
    while time.monotonic() < deadline:
        try:
            now = set(producer.acked) - set(read_queues(master, topic, queues))
        except (OSError, TimeoutError, ConnectionError, AssertionError):
            now = None
        if now is not None and not now:
            return
        if now is None or now != missing:
            missing, since = now, time.monotonic()
        elif time.monotonic() - since >= settled:
            return
        time.sleep(0.5)
