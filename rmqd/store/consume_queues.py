"""The consume-queue table (Java ``DefaultMessageStore.consumeQueueTable``): every (topic, queueId) ->
:class:`~rmqd.store.consume_queue.ConsumeQueue`, loaded at start, created on a queue's first message,
flushed, trimmed by retention, dropped with its topic.

Reads are lock-free on a snapshot of the table (it is replaced, never changed in place); creating and
removing queues takes the table's lock. Removing also needs the store's put lock held by the caller, so
no put writes into a queue being destroyed.
"""
from __future__ import annotations

import logging
import os
import threading
from typing import Callable, Iterator, Mapping, Optional, Protocol, TypeVar

from rmqd.common import progress
from rmqd.common.constants import SCHEDULE_TOPIC
from rmqd.store.consume_queue import BLANK_ENTRY, ConsumeQueue

log = logging.getLogger(__name__)


class Destroyable(Protocol):
    def destroy(self) -> None: ...


_Q = TypeVar("_Q", bound=Destroyable)
QueueKey = tuple[str, int]          # (topic, queueId)


def without_topic(queues: Mapping[QueueKey, _Q], topic: str) -> tuple[dict[QueueKey, _Q], list[QueueKey]]:
    """A copy of the (topic, queueId) table ``queues`` without ``topic``'s queues, which are destroyed, and the
    keys removed (the caller replaces its snapshot with the copy under its lock)."""
    gone = [k for k in queues if k[0] == topic]
    kept = dict(queues)
    for k in gone:
        kept.pop(k).destroy()
    return kept, gone


class ConsumeQueueTable:
    def __init__(self, root: str, file_size: int) -> None:
        self.root = root
        self.file_size = file_size
        self._cqs: dict[tuple[str, int], ConsumeQueue] = {}
        self._lock = threading.Lock()

    # ---- lookup
    def get(self, topic: str, queue_id: int) -> Optional[ConsumeQueue]:
        return self._cqs.get((topic, queue_id))

    def find_or_create(self, topic: str, queue_id: int) -> ConsumeQueue:
        """The queue, created (empty, no file yet) on first use; the put engine's callback."""
        cq = self._cqs.get((topic, queue_id))
        if cq is None:
            with self._lock:
                cq = self._cqs.get((topic, queue_id))
                if cq is None:
                    cq = ConsumeQueue(self.root, topic, queue_id, self.file_size)
                    self._cqs = {**self._cqs, (topic, queue_id): cq}
        return cq

    def keys(self) -> list[tuple[str, int]]:
        return list(self._cqs)

    def queues(self) -> list[ConsumeQueue]:
        return list(self._cqs.values())

    def items(self) -> Iterator[tuple[tuple[str, int], ConsumeQueue]]:
        return iter(list(self._cqs.items()))

    def topics(self) -> set[str]:
        return {k[0] for k in self._cqs}

    def __len__(self) -> int:
        return len(self._cqs)

    # ---- lifecycle
    def load(self) -> None:
        """Map every queue found under the root (recovery)."""
        root = self.root
        topics = [t for t in os.listdir(root) if os.path.isdir(os.path.join(root, t))]
        loaded = dict(self._cqs)
        with progress.phase("loading consume queues", len(topics), "topics") as p:
            for topic in topics:
                tdir = os.path.join(root, topic)
                for q in os.listdir(tdir):
                    if not q.lstrip("-").isdigit():
                        continue
                    cq = ConsumeQueue(root, topic, int(q), self.file_size)
                    cq.load()
                    loaded[(topic, int(q))] = cq
                p.advance()
        self._cqs = loaded

    def flush(self) -> None:
        for cq in self.queues():
            cq.flush()

    def close(self) -> None:
        with self._lock:
            for cq in self._cqs.values():
                cq.close()

    # ---- retention
    def delete_expired_files(self, commitlog_min: int) -> None:
        """Every queue drops the files whose messages all lie below ``commitlog_min``."""
        for cq in self.queues():
            cq.delete_expired_files(commitlog_min)

    def correct_min_offsets(self, commitlog_min: int) -> None:
        for cq in self.queues():
            cq.correct_min_offset(commitlog_min)

    # ---- removal (caller holds the store's put lock)
    def remove_topic(self, topic: str) -> list[tuple[str, int]]:
        """Destroy every queue of ``topic`` and its directory; returns the keys removed."""
        with self._lock:
            self._cqs, gone = without_topic(self._cqs, topic)
        tdir = os.path.join(self.root, topic)
        if os.path.isdir(tdir):
            import shutil          # imports bz2/lzma: only when needed
            shutil.rmtree(tdir)
        return gone

    def remove_expired(self, commitlog_min: int, keep: Callable[[str, int, int], bool]) -> list[tuple[str, int]]:
        """Java's ``cleanExpiredConsumerQueue``: destroy every queue whose last message ends below
        ``commitlog_min`` (retention removed all of its messages), except SCHEDULE_TOPIC_XXXX's (as in
        Java), a queue created just now (empty or ending in a blank), and those ``keep(topic, queueId,
        max_offset)`` names (records another layer still serves). Returns what went."""
        dropped: list[tuple[str, int]] = []
        with self._lock:
            new = dict(self._cqs)
            for key, cq in self._cqs.items():
                topic, qid = key
                if topic == SCHEDULE_TOPIC:
                    continue
                n = cq.max_offset
                last = cq.get_entry(n - 1) if n > 0 else None
                if last is None or last[1] == BLANK_ENTRY[1]:
                    continue                 # Java: "maybe ConsumeQueue was created just now"
                if last[0] + last[1] >= commitlog_min or keep(topic, qid, n):
                    continue
                log.info("cleanExpiredConsumerQueue: %s %d consume queue destroyed, minCommitLogOffset: %d "
                         "maxCLOffsetInConsumeQueue: %d", topic, qid, commitlog_min, last[0] + last[1])
                new.pop(key).destroy()
                dropped.append(key)
            self._cqs = new
        for topic in {t for t, _q in dropped}:
            tdir = os.path.join(self.root, topic)
            if os.path.isdir(tdir) and not os.listdir(tdir):
                os.rmdir(tdir)
                log.info("cleanExpiredConsumerQueue: %s, topic destroyed", topic)
        return dropped
