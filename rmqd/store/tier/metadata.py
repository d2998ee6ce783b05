"""``<storePathRootDir>/config/tieredStoreMetadata.json``: the tier's committed state.

It holds the topic ids, every queue's flat CommitLog and ConsumeQueue segments (base, size, time
range) and every index file (state, item count, time range, its uploaded segment). Only committed
values are written: the copier commits a whole round at once (queues and the writable index
file's item count together), the index service commits its state changes, and each write is
atomic (tmp + fsync + rename, previous version kept as ``.bak``). After a crash this file is the
truth: bytes and items beyond it are dropped and copied again, so nothing is lost or doubled.
"""
from __future__ import annotations

import os
import threading
from typing import Mapping, NotRequired, Optional, TypedDict, cast

import orjson

from rmqd.common.fileutil import atomic_write
from rmqd.store.metadata import load_json_file

FILE_NAME = "tieredStoreMetadata.json"
VERSION = 1


class SegmentDoc(TypedDict):
    """One segment of a flat file (:class:`rmqd.store.tier.flatfile.Segment`'s fields)."""
    base: int
    size: int
    min_ts: int
    max_ts: int
    created_ms: int
    sealed: bool
    first_phys: int
    last_phys: int


class QueueDoc(TypedDict):
    """One queue of the tier (:meth:`rmqd.store.tier.queue.TieredQueue.to_json`)."""
    topic: str
    queueId: int
    commitLog: list[SegmentDoc]
    consumeQueue: list[SegmentDoc]
    indexed: NotRequired[list[list[int]]]     # absent in metadata written before coverage was recorded


class IndexFileDoc(TypedDict):
    """One index file (:meth:`rmqd.store.tier.index.store_file.IndexStoreFile.to_json`)."""
    beginTs: int
    state: str
    sealed: bool
    items: int
    endTs: int
    usedSlots: int
    minTs: int
    maxTs: int
    slots: int
    maxItems: int
    segBase: int
    segSize: int
    uploadBase: int
    origin: NotRequired[str]                  # the `rmqd pipeline index` job that built it


class IndexConfigDoc(TypedDict, total=False):
    """The broker's index settings, for offline tools."""
    slots: int
    maxItems: int
    enabled: bool


class TierMetadataFileDoc(TypedDict, total=False):
    """The file (tieredStoreMetadata.json)."""
    version: int
    backend: str
    topics: dict[str, int]
    nextTopicId: int
    queues: dict[str, QueueDoc]
    indexFiles: dict[str, IndexFileDoc]
    indexSegmentEnd: int
    cluster: str
    broker: str
    index: IndexConfigDoc


class TierMetadata:
    def __init__(self, config_dir: str) -> None:
        self.path = os.path.join(config_dir, FILE_NAME)
        self.topics: dict[str, int] = {}
        self.next_topic_id = 1
        self.queues: dict[str, QueueDoc] = {}      # "topic/qid" -> {"commitLog": [...], "consumeQueue": [...]}
        self.index_files: dict[int, IndexFileDoc] = {}     # beginTs -> file entry
        self.index_segment_end = 0                 # next base offset of the uploaded index flat file
        self.backend = ""
        self.cluster = ""                          # the broker's names and index settings, for offline tools
        self.broker = ""                           # (rmqd pipeline index) that read the tier without broker.conf
        self.index_config: IndexConfigDoc = {}     # {"slots", "maxItems", "enabled"}
        self._lock = threading.RLock()

    # ---- load / persist -----------------------------------------------------------------------
    def load(self) -> bool:
        """Read the file (or its backup); False when there is none."""
        found = load_json_file(self.path)
        if found is None:
            return False
        doc = cast(TierMetadataFileDoc, found)
        self.topics = {k: int(v) for k, v in doc.get("topics", {}).items()}
        self.next_topic_id = int(doc.get("nextTopicId", max(self.topics.values(), default=0) + 1))
        self.queues = doc.get("queues", {})
        self.index_files = {int(k): v for k, v in doc.get("indexFiles", {}).items()}
        self.index_segment_end = int(doc.get("indexSegmentEnd", 0))
        self.backend = doc.get("backend", "")
        self.cluster, self.broker = doc.get("cluster", ""), doc.get("broker", "")
        self.index_config = doc.get("index", {})
        return True

    def persist(self) -> None:
        with self._lock:
            doc: TierMetadataFileDoc = {
                "version": VERSION, "backend": self.backend, "topics": self.topics,
                "nextTopicId": self.next_topic_id, "queues": self.queues,
                "indexFiles": {str(k): v for k, v in sorted(self.index_files.items())},
                "indexSegmentEnd": self.index_segment_end, "cluster": self.cluster, "broker": self.broker,
                "index": self.index_config}
            atomic_write(self.path, orjson.dumps(doc))

    def reset(self) -> None:
        with self._lock:
            self.topics, self.next_topic_id, self.queues = {}, 1, {}
            self.index_files, self.index_segment_end = {}, 0

    # ---- topics ---------------------------------------------------------------------------------
    def topic_id(self, topic: str) -> int:
        with self._lock:
            tid = self.topics.get(topic)
            if tid is None:
                tid = self.topics[topic] = self.next_topic_id
                self.next_topic_id += 1
            return tid

    def topic_of(self, topic_id: int) -> Optional[str]:
        for t, i in list(self.topics.items()):
            if i == topic_id:
                return t
        return None

    def drop_topic(self, topic: str) -> None:
        with self._lock:
            self.topics.pop(topic, None)
            self.queues = {k: v for k, v in self.queues.items() if v.get("topic") != topic}

    # ---- committed state --------------------------------------------------------------------------
    def commit(self, queues: Mapping[str, QueueDoc], index_entries: Mapping[int, Optional[IndexFileDoc]],
               index_segment_end: Optional[int] = None) -> None:
        """Record a consistent state and persist it (``None`` entries remove index files)."""
        with self._lock:
            if queues:
                self.queues = {**self.queues, **queues}
            for ts, entry in index_entries.items():
                if entry is None:
                    self.index_files.pop(ts, None)
                else:
                    self.index_files[ts] = entry
            if index_segment_end is not None:
                self.index_segment_end = index_segment_end
            self.persist()
