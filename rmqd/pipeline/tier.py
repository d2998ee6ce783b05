"""The broker's tier as the pipeline's jobs see it: read-only, from the store directory.

The committed state is ``<store>/config/tieredStoreMetadata.json`` (queues, their flat CommitLog and
ConsumeQueue segments, topic ids, index files); the segment bytes are in the backend it names. The
jobs read only what that file commits, through the broker's own classes (:class:`TieredQueue` over a
:class:`~rmqd.store.tier.backend.TierBackend`), and never recover, truncate or delete anything.

Where the backend is: ``--tier-dir`` (a Posix tier), ``--broker-conf`` (the broker's ``broker.conf``:
``tieredBackendServiceProvider``, ``tieredStoreFilePath``, ``objectStore*``), else the Posix directory
the metadata names. A backend that is not the one the metadata was written with is refused.

:class:`TierCommitLog` is the archive's second segment source: the CommitLog files local retention
deleted, rebuilt from the tier.
"""
from __future__ import annotations

import mmap
import os
import tempfile
from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterator, Optional

from rmqd.pipeline.errors import PipelineError
from rmqd.pipeline.segments import check_store_dir
from rmqd.store.tier.backend import TierBackend
from rmqd.config import broker_config_from, parse_properties, tier_config_from
from rmqd.store.tier.config import TierConfig
from rmqd.store.tier.metadata import FILE_NAME, TierMetadata
from rmqd.store.tier.metadata import QueueDoc as QueueJson
from rmqd.store.tier.queue import TieredQueue

if TYPE_CHECKING:
    from rmqd.pipeline.segments import SegmentRef


@dataclass(frozen=True)
class BackendSpec:
    """How to open the tier's backend (picklable: executors open their own)."""
    provider: str
    file_path: str = ""
    endpoint: str = ""
    bucket: str = ""
    access_key: str = ""
    secret_key: str = ""
    region: str = ""

    def open(self) -> TierBackend:
        if self.provider == "posix":
            from rmqd.store.tier.backend import PosixBackend
            if not os.path.isdir(self.file_path):
                from rmqd.spark.executor import not_visible
                raise PipelineError(not_visible("the tier directory", self.file_path))
            return PosixBackend(self.file_path)
        if self.provider == "s3":
            from rmqd.store.tier.backend import s3_prefix
            from rmqd.store.tier.s3 import S3Backend
            return S3Backend(self.endpoint, self.bucket, self.access_key, self.secret_key, self.region or None,
                             s3_prefix(self.file_path), create_bucket=False)
        raise PipelineError(f"the tier's backend is {self.provider!r}: its data does not outlive the broker "
                            "(Java's MemoryFileSegment); only posix and s3 tiers can be read")


@dataclass(frozen=True)
class QueueDoc:
    """One tier queue as committed (picklable)."""
    topic: str
    queue_id: int
    topic_id: int
    doc: QueueJson


class TierView:
    """The committed tier of one store (see the module docstring)."""

    def __init__(self, store: str, broker_conf: Optional[str] = None, tier_dir: Optional[str] = None) -> None:
        self.root = check_store_dir(store)
        self.metadata = md = TierMetadata(os.path.join(self.root, "config"))
        if not md.load():
            raise PipelineError(f"--store {store}: no tier in it (no config/{FILE_NAME}: the broker writes it once "
                                "tiered storage is on, messageStorePlugIn=...TieredMessageStore)")
        props: dict[str, str] = {}
        if broker_conf:
            try:
                with open(broker_conf, encoding="utf-8") as f:
                    props = parse_properties(f.read())
            except OSError as exc:
                raise PipelineError(f"--broker-conf {broker_conf}: {exc.strerror or exc}") from None
        try:
            cfg = tier_config_from(broker_config_from(props))
        except ValueError as exc:
            raise PipelineError(f"--broker-conf {broker_conf}: {exc}") from None
        self.cluster = md.cluster or cfg.cluster
        self.broker = md.broker or cfg.broker
        index = md.index_config or {}
        self.slots = int(index.get("slots") or cfg.index_slots)
        self.max_items = int(index.get("maxItems") or cfg.index_max_items)
        self.index_enabled = bool(index.get("enabled", cfg.message_index_enable))
        self.config = TierConfig(enabled=True, cluster=self.cluster, broker=self.broker,
                                 message_index_enable=self.index_enabled)
        self.spec = self._spec(store, cfg, bool(broker_conf), tier_dir)

    def _spec(self, store: str, cfg: TierConfig, from_conf: bool, tier_dir: Optional[str]) -> BackendSpec:
        described = self.metadata.backend
        if tier_dir:
            spec = BackendSpec("posix", os.path.abspath(os.path.expanduser(tier_dir)))
        elif from_conf and cfg.provider != "memory":
            spec = BackendSpec(cfg.provider, cfg.file_path if cfg.provider == "s3" else
                               os.path.abspath(os.path.expanduser(cfg.file_path)), cfg.endpoint, cfg.bucket,
                               cfg.access_key, cfg.secret_key, cfg.region)
        elif described.startswith("posix:"):
            spec = BackendSpec("posix", described[len("posix:"):])
        elif described.startswith("s3:"):
            raise PipelineError(f"--store {store}: its tier is in S3 ({described}); give --broker-conf with the "
                                "broker's objectStore* and tieredStoreFilePath settings")
        else:
            spec = BackendSpec(described.split(":", 1)[0] or "memory")
        if spec.provider == "posix" and described and described != f"posix:{spec.file_path}":
            raise PipelineError(f"the tier of {store} is {described}, not posix:{spec.file_path}")
        return spec

    def open_backend(self) -> TierBackend:
        backend = self.spec.open()
        if self.metadata.backend and backend.describe() != self.metadata.backend:
            backend.close()
            raise PipelineError(f"the tier of {self.root} is {self.metadata.backend}, not {backend.describe()}")
        return backend

    def queues(self) -> list[QueueDoc]:
        """The tier's queues in the metadata's order (the order the copier first copied them)."""
        out: list[QueueDoc] = []
        for doc in self.metadata.queues.values():
            tid = self.metadata.topics.get(doc["topic"])
            if tid is not None:
                out.append(QueueDoc(doc["topic"], int(doc["queueId"]), tid, doc))
        return out

    def queue(self, q: QueueDoc, backend: TierBackend) -> TieredQueue:
        return open_queue(q, backend, self.config)


def open_queue(q: QueueDoc, backend: TierBackend, config: TierConfig) -> TieredQueue:
    """A committed tier queue for reading (no recovery: the bytes past the commit are not looked at)."""
    tq = TieredQueue(backend, config, q.topic, q.queue_id)
    tq.load_json(q.doc)
    return tq


# ------------------------------------------------------------------------------------------- archive source
@dataclass(frozen=True)
class TierSegment:
    """What an executor needs to rebuild one deleted CommitLog file from the tier (picklable)."""
    spec: BackendSpec
    config: TierConfig
    queues: tuple[QueueDoc, ...]       # QueueDocs whose tier records may come from the file


class TierCommitLog:
    """The store's CommitLog files that local retention deleted, rebuilt from the tier: file ``k`` (bytes
    ``[k*S, (k+1)*S)``, ``S`` the CommitLog file size) holds every tier record whose original CommitLog
    offset (PHYSICALOFFSET, kept as stored) falls in it. Only files below the first local file are listed:
    a file still on disk is the local source's, so each message is archived once. The records of topics the
    tier does not keep (system and compaction topics) went with the local file."""
    kind = "tier"

    def __init__(self, store: str, broker_conf: Optional[str] = None, tier_dir: Optional[str] = None) -> None:
        self.tier = TierView(store, broker_conf, tier_dir)
        self.broker_conf = broker_conf
        self.fingerprint = "tier:" + _fingerprint_of(self.tier.metadata.backend, self.tier.cluster, self.tier.broker)

    def _local_files(self) -> tuple[int, int]:
        """(first local file's base, CommitLog file size), from the files on disk."""
        d = os.path.join(self.tier.root, "commitlog")
        names = sorted(n for n in os.listdir(d) if n.isdigit() and len(n) == 20)
        size = 0
        for n in names:
            size = max(size, os.path.getsize(os.path.join(d, n)))
        if not names or not size:
            from rmqd.pipeline.errors import PipelineError as _PE
            raise _PE(f"--store {self.tier.root}: no CommitLog file to tell the file size by")
        return int(names[0]), size

    def sealed_segments(self) -> list[SegmentRef]:
        from rmqd.pipeline.segments import SegmentRef
        first, size = self._local_files()
        self.tier.open_backend().close()            # the backend is reachable and is the metadata's
        files: dict[int, list[QueueDoc]] = {}
        for q in self.tier.queues():
            for seg in q.doc.get("consumeQueue", []):
                lo, hi = int(seg.get("first_phys", -1)), int(seg.get("last_phys", -1))
                if lo < 0 or hi < lo or lo >= first:
                    continue
                for k in range(lo // size, min(hi, first - 1) // size + 1):
                    qs = files.setdefault(k, [])
                    if not qs or qs[-1] is not q:
                        qs.append(q)
        desc = self.tier.metadata.backend
        return [SegmentRef(self.kind, f"{k * size:020d}", k * size, size,
                           f"tier {desc} (CommitLog file {k * size:020d})", self.fingerprint,
                           TierSegment(self.tier.spec, self.tier.config, tuple(qs)))
                for k, qs in sorted(files.items())]

    @staticmethod
    def open(ref: SegmentRef) -> mmap.mmap:
        """The file's tier records, queue by queue, in a temporary file mapped read-only."""
        info = ref.extra
        if not isinstance(info, TierSegment):
            raise PipelineError(f"{ref.path}: not a tier segment (its source is {ref.source!r})")
        lo, hi = ref.base, ref.base + ref.size
        backend = info.spec.open()
        tmp = tempfile.TemporaryFile(prefix="rmqd-tier-segment-")
        try:
            written = 0
            for q in info.queues:
                tq = open_queue(q, backend, info.config)
                a, b = _lower_bound(tq, lo), _lower_bound(tq, hi)
                for body in _record_windows(tq, a, b):
                    tmp.write(body)
                    written += len(body)
            tmp.flush()
            if written == 0:
                tmp.write(b"\0" * 8)                      # an empty file: nothing but the end
                tmp.flush()
            return mmap.mmap(tmp.fileno(), 0, access=mmap.ACCESS_READ)
        finally:
            tmp.close()                                   # the mapping keeps the (unlinked) file
            backend.close()


def _fingerprint_of(*parts: str) -> str:
    import hashlib
    return hashlib.sha1("\0".join(parts).encode()).hexdigest()[:16]


def _lower_bound(tq: TieredQueue, phys: int) -> int:
    """The first queue offset whose record's original CommitLog offset is >= ``phys`` (blanks skipped)."""
    lo, hi = max(tq.min_offset, 0), max(tq.max_offset, 0)
    while lo < hi:
        mid = (lo + hi) // 2
        probe, p = mid, tq.original_phys(mid)
        while p < 0 and probe + 1 < hi:
            probe += 1
            p = tq.original_phys(probe)
        if p < 0 or p >= phys:
            hi = mid
        else:
            lo = probe + 1
    return lo


def _record_windows(tq: TieredQueue, a: int, b: int, window: int = 8 << 20) -> Iterator[bytes]:
    """The records of queue offsets [a, b), back to back, a few MB at a time."""
    from rmqd.store.tier.queue import BLANK_SIZE
    off = a
    while off < b:
        units = [u for u in tq.units(off, min(b - off, 1 << 16)) if u[1] != BLANK_SIZE]
        n = min(b - off, 1 << 16)
        off += n
        i = 0
        while i < len(units):
            start = end = units[i][0]
            while i < len(units) and units[i][0] == end and (end == start or end + units[i][1] - start <= window):
                end += units[i][1]
                i += 1
            data = tq.commitlog.read(start, end - start)
            if len(data) != end - start:
                from rmqd.pipeline.errors import PipelineError as _PE
                raise _PE(f"tier queue {tq.topic}-{tq.queue_id}: short read of its flat CommitLog at {start}")
            yield data


def _register() -> None:
    from rmqd.pipeline.segments import SOURCES
    SOURCES[TierCommitLog.kind] = TierCommitLog


_register()
