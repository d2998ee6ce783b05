"""The tier's index service (Java ``IndexStoreService``, seed 003): many index files by time.

* **Writes** come from the copier, one batch per group commit (:meth:`IndexStoreService.put`),
  into the current writing file; a full file is sealed and a new one started (named by
  ``max(now, last + 1)`` ms, so names are unique and ordered). The copier commits the item counts
  with the queues (:meth:`checkpoint`), which is what makes a crash lose or double nothing.
* **Background** (:meth:`run_once`, off the event loop): compact the oldest sealed, committed
  file, upload the oldest compacted one, expire uploaded files older than
  ``tieredStoreFileReservedTime``. Each step persists its state change before the next starts.
* **Queries** (:meth:`query`) walk the files newest first, skip files whose item time range does
  not overlap [begin, end] (a file that began before ``begin`` but reaches into it is searched),
  and stop as soon as the caller has ``maxNum`` hits (Java queries every file whose *begin* time is
  in range and truncates).
* **Recovery** (:meth:`recover`): the scratch directory is wiped, writing files are rolled back to
  their committed item counts, local files the metadata never saw are deleted, interrupted uploads
  are redone, and local copies of uploaded files are removed.
* **Lifecycle**: background steps run one at a time (:attr:`IndexStoreService._work_lock`: the index
  thread and ``commitTier``'s caller never compact or upload the same file at once), and
  :meth:`close` waits for the step under way (which stops at its next piece once ``closing`` is
  set) before it closes the files, so no step ever works on an unmapped file.
"""
from __future__ import annotations

import logging
import os
import shutil
import threading
import time
from typing import TYPE_CHECKING, Callable, Iterator, Optional, TypedDict

from rmqd.store.tier.backend import INDEX, INDEX_TOPIC, TierBackend, segment_path
from rmqd.store.tier.index import layout as L
from rmqd.store.tier.index.store_file import COMPACTED, UPLOADED, WRITING, IndexClosedError, IndexStoreFile
from rmqd.store.tier.metadata import TierMetadata

if TYPE_CHECKING:
    from rmqd.store.tier.index.store_file import IndexItem, IndexMessage
    from rmqd.store.tier.metadata import IndexFileDoc

log = logging.getLogger(__name__)

DIR_NAME = "tiered_index_file"


class IndexFileStatus(TypedDict):
    """One index file in ``TieredStore.status()`` (GET_TIER_STATUS, the console's tier page)."""
    beginTs: int
    state: str
    sealed: bool
    items: int
    beginTime: int
    endTime: int
    endTs: int
    usedSlots: int
    bytes: int


class IndexStoreService:
    def __init__(self, store_root: str, backend: TierBackend, metadata: TierMetadata, cluster: str, broker: str,
                 slots: int, max_items: int, reserved_hours: float, rolling_interval_hours: float,
                 clock: Callable[[], int] = lambda: int(time.time() * 1000)) -> None:
        self.dir = os.path.join(store_root, DIR_NAME)
        self.backend = backend
        self.metadata = metadata
        self.cluster, self.broker = cluster, broker
        self.slots, self.max_items = slots, max_items
        self.reserved_hours = reserved_hours
        self.rolling_interval_hours = rolling_interval_hours
        self.clock = clock
        self.files: list[IndexStoreFile] = []     # by begin time; replaced, never mutated in place
        self.current: Optional[IndexStoreFile] = None
        self.seal_requested = False
        self.step_hook: Optional[Callable[[str], None]] = None
        self.query_reads = 0
        self._files_lock = threading.Lock()     # file-list changes off the copier's thread (expire, adopt)
        self._work_lock = threading.RLock()     # one background step at a time; close() waits for it
        self.closing = False

    def segment_path(self, base: int) -> str:
        return segment_path(self.cluster, self.broker, INDEX_TOPIC, 0, INDEX, base)

    def _step(self, name: str) -> None:
        if self.step_hook is not None:
            self.step_hook(name)

    # ---- recovery ---------------------------------------------------------------------------------
    def recover(self) -> None:
        os.makedirs(self.dir, exist_ok=True)
        shutil.rmtree(os.path.join(self.dir, "compacting"), ignore_errors=True)
        os.makedirs(os.path.join(self.dir, "compacted"), exist_ok=True)
        changed: dict[int, Optional["IndexFileDoc"]] = {}
        files: list[IndexStoreFile] = []
        for ts, entry in sorted(self.metadata.index_files.items()):
            f = IndexStoreFile.from_json(self.dir, entry)
            if f.state == WRITING:
                if not os.path.exists(f.writable_path):
                    log.error("tier index: writing file %s is missing; its %d items are lost", f.writable_path,
                              f.items)
                    changed[ts] = None
                    continue
                f.open_writable(create=False)
                dropped = f.undo_to(f.items, f.end_ts, f.used_slots)
                if dropped:
                    log.warning("tier index %d: dropped %d uncommitted items (they are copied again)", ts, dropped)
                if f.sealed and os.path.exists(f.compacted_path) and self._compacted_items(f) == f.items:
                    f.became_compacted()             # the compaction finished; its commit did not
                    changed[ts] = f.to_json()
                else:
                    _unlink(f.compacted_path)
            elif f.state == COMPACTED:
                if not os.path.exists(f.compacted_path):
                    if os.path.exists(f.writable_path):
                        log.warning("tier index %d: compacted file missing; compacting again", ts)
                        f.state = WRITING
                        f.open_writable(create=False)
                    else:
                        log.error("tier index %d: both local files are missing; %d items lost", ts, f.items)
                        changed[ts] = None
                        continue
                else:
                    _unlink(f.writable_path)
                if f.upload_base >= 0:
                    log.warning("tier index %d: resuming its interrupted upload", ts)
                    self.backend.delete(self.segment_path(f.upload_base))
                    f.upload_base = -1
                changed[ts] = f.to_json()
            else:
                _unlink(f.writable_path)
                _unlink(f.compacted_path)
            files.append(f)
        known = {str(f.begin_ts) for f in files}
        for name in os.listdir(self.dir):
            if name.isdigit() and name not in known:
                log.warning("tier index: deleting %s, created after the last commit", name)
                _unlink(os.path.join(self.dir, name))
        for name in os.listdir(os.path.join(self.dir, "compacted")):
            if name not in {str(f.begin_ts) for f in files if f.state == COMPACTED}:
                _unlink(os.path.join(self.dir, "compacted", name))
        keep = {self.segment_path(f.seg_base) for f in files if f.state == UPLOADED}
        prefix = self.segment_path(0).rsplit("/", 1)[0] + "/"
        for path in self.backend.list(prefix):
            if path not in keep:
                log.warning("tier index: deleting orphan segment %s", path)
                self.backend.delete(path)
        self.files = files
        writing = [f for f in files if f.state == WRITING and not f.sealed]
        self.current = writing[-1] if writing else None
        for f in files:
            if f.state == WRITING and f.sealed is False and f is not self.current:
                f.sealed = True                      # only the newest file takes puts
                changed[f.begin_ts] = f.to_json()
        if changed:
            self.metadata.commit({}, changed)
            for f in files:
                f.committed_items, f.committed_sealed = f.items, f.sealed

    def _compacted_items(self, f: IndexStoreFile) -> int:
        try:
            with open(f.compacted_path, "rb") as fh:
                h = L.parse_header(fh.read(L.HEADER_SIZE))
            return h.index_item_count if h.magic == L.END_MAGIC_CODE else -1
        except (OSError, Exception):
            return -1

    # ---- writes (the copier's thread) ------------------------------------------------------------
    def _new_file(self) -> IndexStoreFile:
        last = self.files[-1].begin_ts if self.files else 0
        ts = max(self.clock(), last + 1)
        f = IndexStoreFile(self.dir, ts, self.slots, self.max_items)
        f.open_writable(create=True)
        with self._files_lock:
            self.files = self.files + [f]
        self.current = f
        log.info("tier index: new file %d", ts)
        return f

    def maybe_roll(self) -> None:
        """Seal the current file when asked to, or when it is older than commitLogRollingInterval."""
        f = self.current
        if f is None or f.items == 0:
            self.seal_requested = False
            return
        age_h = (self.clock() - f.begin_ts) / 3_600_000
        if self.seal_requested or age_h >= self.rolling_interval_hours:
            f.sealed = True
            self.current = None
            self.seal_requested = False

    def put(self, messages: list["IndexMessage"]) -> None:
        """Index a batch of ``(hashes, topicId, queueId, offset, size, storeTime)`` messages."""
        if self.closing:
            raise IndexClosedError("the tier index is closed")
        i = 0
        while i < len(messages):
            f = self.current
            if f is None or f.sealed:
                f = self._new_file()
            n = f.put(messages[i:])
            i += n
            if i < len(messages):
                if n == 0 and f.items == 0:
                    f.sealed = False                     # keep the empty file for the next messages
                    log.error("tier index: a message with %d keys does not fit an empty file (maxIndexNum %d); "
                              "not indexed", len(messages[i][0]), self.max_items)
                    i += 1
                    continue
                self.current = None                      # full: sealed by put

    def flush(self) -> None:
        for f in self.files:
            if f.state == WRITING and f.items != f.committed_items:
                f.flush()

    def checkpoint(self) -> dict[int, "IndexFileDoc"]:
        """Entries of the files whose state the next commit must record."""
        return {f.begin_ts: f.to_json() for f in self.files
                if f.state == WRITING and (f.items != f.committed_items or f.sealed != f.committed_sealed)}

    def rollback(self) -> None:
        """Writing files back to their committed item counts; files never committed go."""
        if self.closing:
            return                  # the files are closed; the next start's recovery rolls back
        keep = []
        for f in self.files:
            e = self.metadata.index_files.get(f.begin_ts)
            if f.state != WRITING:
                keep.append(f)
                continue
            if e is None:
                f.delete_local()
                continue
            f.undo_to(int(e["items"]), int(e["endTs"]), int(e["usedSlots"]))
            f.sealed = bool(e["sealed"])
            f.min_ts, f.max_ts = int(e["minTs"]), int(e["maxTs"])
            keep.append(f)
        self.files = keep
        writing = [f for f in keep if f.state == WRITING and not f.sealed]
        self.current = writing[-1] if writing else None

    def committed(self, entries: dict[int, "IndexFileDoc"]) -> None:
        for f in self.files:
            e = entries.get(f.begin_ts)
            if e is not None:
                f.committed_items, f.committed_sealed = e["items"], e["sealed"]

    # ---- background (the index service's thread) ----------------------------------------------------
    def run_once(self) -> bool:
        """One step of work: expire, compact or upload; True when something was done. Steps are
        serialized (the index thread and ``commit_now``); none starts once :meth:`close` began,
        and one under way stops at its next piece (False: the index is closing)."""
        with self._work_lock:
            if self.closing:
                return False
            try:
                return self._run_once()
            except IndexClosedError:
                if not self.closing:
                    raise
                log.warning("tier index: a background step stopped: the index is closing (redone after restart)")
                return False

    def _check_open(self) -> None:
        if self.closing:
            raise IndexClosedError("the tier index is closing")

    def _run_once(self) -> bool:
        did = self.expire()
        for f in self.files:
            if f.state == UPLOADED and os.path.exists(f.compacted_path):
                f.delete_local()                 # a failure between the upload's commit and this
        for f in list(self.files):
            if f.state == WRITING and f.sealed and f.committed_sealed and f.committed_items == f.items:
                self._compact(f)
                return True
        for f in list(self.files):
            if f.state == COMPACTED:
                self._upload(f)
                return True
        return did

    def add_files(self, files: list[IndexStoreFile]) -> None:
        """Take in index files made elsewhere (adopted from ``rmqd pipeline index``), in begin-time order."""
        with self._files_lock:
            self.files = sorted(self.files + files, key=lambda f: f.begin_ts)

    def _compact(self, f: IndexStoreFile) -> None:
        if f.items == 0:
            with self._files_lock:
                self.files = [x for x in self.files if x is not f]
            f.delete_local()
            self.metadata.commit({}, {f.begin_ts: None})
            return
        t0 = time.perf_counter()
        self._step("index.compacting")

        def progress() -> None:
            self._check_open()
            self._step("index.compacting.partial")
        f.compact(progress=progress)
        self._step("index.compacted")
        entry = f.to_json()
        entry["state"] = COMPACTED
        self.metadata.commit({}, {f.begin_ts: entry})
        f.became_compacted()
        log.info("tier index %d: compacted %d items in %.1f ms", f.begin_ts, f.items, (time.perf_counter() - t0) * 1e3)

    def _upload(self, f: IndexStoreFile) -> None:
        t0 = time.perf_counter()
        base = self.metadata.index_segment_end
        f.upload_base = base
        self.metadata.commit({}, {f.begin_ts: f.to_json()})
        self._step("index.uploading")
        path = self.segment_path(base)

        def progress() -> None:
            self._check_open()
            self._step("index.uploading.partial")
        self.backend.upload(path, f.compacted_path, progress=progress)     # replaces a partial upload at this base
        size = os.path.getsize(f.compacted_path)
        self._step("index.uploaded")
        entry = f.to_json()
        entry["state"], entry["segBase"], entry["segSize"], entry["uploadBase"] = UPLOADED, base, size, -1
        self.metadata.commit({}, {f.begin_ts: entry}, index_segment_end=base + size)
        f.became_uploaded(base, size)
        self._step("index.deleting_local")
        f.delete_local()
        log.info("tier index %d: uploaded %d bytes in %.1f ms", f.begin_ts, size, (time.perf_counter() - t0) * 1e3)

    def expire(self) -> bool:
        limit = self.clock() - self.reserved_hours * 3_600_000
        gone = [f for f in self.files if f.state == UPLOADED and 0 <= f.max_ts < limit]
        if not gone:
            return False
        with self._files_lock:
            self.files = [f for f in self.files if f not in gone]
        self.metadata.commit({}, {f.begin_ts: None for f in gone})
        for f in gone:
            self.backend.delete(self.segment_path(f.seg_base))
            log.info("tier index %d: expired (newest item %d)", f.begin_ts, f.max_ts)
        return True

    # ---- queries ---------------------------------------------------------------------------------
    def query(self, topic: str, key: str, begin: int, end: int, want: int) -> Iterator[tuple[int, list["IndexItem"]]]:
        """Yield ``(file beginTs, items)`` newest file first for ``topic#key`` in [begin, end];
        the caller stops iterating once it has what it wants (``want`` caps each file's items)."""
        h = L.key_hash(topic, key)
        t_lo, t_hi = begin - 999, end + 999     # item times have second precision
        for f in reversed(self.files):
            if not f.overlaps(begin - 999, end + 999):
                continue
            try:
                items, reads = f.query(h, t_lo, t_hi, want, self.backend,
                                       self.segment_path(f.seg_base) if f.state == UPLOADED else None)
            except Exception:
                log.exception("tier index %d: query failed", f.begin_ts)
                continue
            self.query_reads += reads
            if items:
                yield f.begin_ts, items

    # ---- status / lifecycle -----------------------------------------------------------------------
    def status(self) -> list[IndexFileStatus]:
        return [{"beginTs": f.begin_ts, "state": f.state, "sealed": f.sealed, "items": f.items,
                 "beginTime": f.min_ts, "endTime": f.max_ts, "endTs": f.end_ts, "usedSlots": f.used_slots,
                 "bytes": f.seg_size if f.state == UPLOADED else (
                     L.compacted_size(f.slots, f.items) if f.state == COMPACTED else
                     L.writable_size(f.slots, f.max_items))}
                for f in self.files]

    def close(self) -> None:
        """Close every file once the background step under way (if any) has stopped; after this
        :meth:`run_once` does nothing and :meth:`put` raises."""
        self.closing = True
        with self._work_lock:
            for f in self.files:
                f.close()


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
