"""Index files built outside the broker (``rmqd pipeline index``), and how the broker adopts them.

Output layout, under ``<storePathRootDir>/tiered_index_file/pipeline/``::

    <job>.tmp/            being written (never adopted; the next job removes it)
    <job>/<beginTs>       complete: compacted index files (the broker's own bytes, see layout.py)
    <job>/manifest.json   what they cover: per queue the offsets [lo, hi) and their first/last units
    <job>.stale/          refused at adoption (the tier changed meanwhile); kept for inspection

Adoption (:func:`adopt_all`: at the tier's start, after index recovery, and on ``rmqd admin
adoptTierIndex``), under the copier's lock:

1. check: every queue is still in the tier with the same topic id and units, its range is not
   indexed yet, no file's begin time is taken; else the output is set aside as ``.stale``;
2. hard-link each file into ``tiered_index_file/compacted/`` (the output keeps its names);
3. one metadata commit: the files as COMPACTED entries and the queues' ranges as indexed;
4. remove the output directory.

A kill before 3 leaves links the metadata never saw: index recovery deletes them and the next
adoption starts over. A kill after 3 leaves the output: the next adoption finds its files and ranges
already in the metadata and only removes it. The index service then uploads the files as its own.
"""
from __future__ import annotations

import logging
import os
import shutil
from typing import TYPE_CHECKING, Callable, Mapping, NotRequired, Optional, TypedDict, cast

import orjson

from rmqd.common.fileutil import atomic_write, fsync_path
from rmqd.store.tier.index import layout as L
from rmqd.store.tier.index.store_file import COMPACTED, IndexStoreFile

if TYPE_CHECKING:
    from rmqd.store.tier.metadata import IndexFileDoc, QueueDoc
    from rmqd.store.tier.queue import TieredQueue
    from rmqd.store.tier.store import TieredStore

log = logging.getLogger(__name__)

FORMAT, VERSION = "rmqd-tier-index", 1
PIPELINE_DIR = "pipeline"
MANIFEST = "manifest.json"
STAGING_SUFFIX = ".tmp"
STALE_SUFFIX = ".stale"


class ManifestFile(TypedDict):
    """One compacted index file of an output."""
    beginTs: int
    items: int
    endTs: int
    usedSlots: int
    minTs: int
    maxTs: int


class ManifestQueue(TypedDict):
    """One queue range an output indexed, with its first and last ConsumeQueue units."""
    topic: str
    queueId: int
    topicId: int
    lo: int
    hi: int
    first: list[int]
    last: list[int]


class Manifest(TypedDict):
    """``manifest.json`` of an output (written by ``rmqd pipeline index``)."""
    format: str
    version: int
    job: str
    slots: int
    maxItems: int
    files: list[ManifestFile]
    queues: list[ManifestQueue]


class AdoptResult(TypedDict):
    """What adopting one output did (``rmqd admin adoptTierIndex``)."""
    output: str
    adopted: bool
    job: NotRequired[Optional[str]]
    files: NotRequired[int]
    items: NotRequired[int]
    resumed: NotRequired[bool]
    reason: NotRequired[str]


def output_root(store_root: str) -> str:
    from rmqd.store.tier.index.service import DIR_NAME
    return os.path.join(store_root, DIR_NAME, PIPELINE_DIR)


def file_entry(f: ManifestFile, slots: int, max_items: int, job: str) -> "IndexFileDoc":
    """The metadata entry of an adopted file (state COMPACTED, sealed, not uploaded yet; ``origin``: the job)."""
    return {"beginTs": int(f["beginTs"]), "state": COMPACTED, "sealed": True, "items": int(f["items"]),
            "endTs": int(f["endTs"]), "usedSlots": int(f["usedSlots"]), "minTs": int(f["minTs"]),
            "maxTs": int(f["maxTs"]), "slots": slots, "maxItems": max_items, "segBase": -1, "segSize": 0,
            "uploadBase": -1, "origin": job}


def write_manifest(out_dir: str, manifest: Mapping[str, object]) -> None:
    """Write the manifest durably (the job's files are fsync'ed already)."""
    atomic_write(os.path.join(out_dir, MANIFEST),
                 orjson.dumps({"format": FORMAT, "version": VERSION, **manifest}, option=orjson.OPT_INDENT_2),
                 keep_backup=False)


def publish(tmp_dir: str) -> str:
    """The job's commit: ``<job>.tmp`` -> ``<job>``; returns the final directory."""
    final = tmp_dir[:-len(STAGING_SUFFIX)]
    os.rename(tmp_dir, final)
    fsync_path(os.path.dirname(final))
    return final


def read_manifest(out_dir: str) -> Manifest:
    with open(os.path.join(out_dir, MANIFEST), "rb") as f:
        m = cast(Manifest, orjson.loads(f.read()))      # the JSON file: its format and version are checked next
    if m.get("format") != FORMAT or m.get("version") != VERSION:
        raise ValueError(f"{out_dir}: not an index output of format {FORMAT} v{VERSION}")
    return m


def complete_outputs(root: str) -> list[str]:
    """Complete outputs under ``root``, oldest job first."""
    if not os.path.isdir(root):
        return []
    return [os.path.join(root, n) for n in sorted(os.listdir(root))
            if not n.endswith((STAGING_SUFFIX, STALE_SUFFIX)) and os.path.isfile(os.path.join(root, n, MANIFEST))]


def _check(tier: "TieredStore", m: Manifest, out_dir: str) -> Optional[str]:
    """Why the output cannot be adopted, or None."""
    md = tier.metadata
    for q in m["queues"]:
        tq = tier.queues.get((q["topic"], int(q["queueId"])))
        if tq is None:
            return f"queue {q['topic']}-{q['queueId']} is no longer in the tier"
        if md.topics.get(q["topic"]) != int(q["topicId"]):
            return f"topic {q['topic']} has another topic id now"
        lo, hi = int(q["lo"]), int(q["hi"])
        if tq.unindexed(lo, hi) != [(lo, hi)]:
            return f"queue {q['topic']}-{q['queueId']} offsets {lo}..{hi - 1} are indexed already"
        for off, want in ((lo, q["first"]), (hi - 1, q["last"])):
            if off < tq.min_offset:
                continue                      # expired since: nothing left to compare
            got = tq.units(off, 1)
            if not got or list(got[0]) != list(want):
                return f"queue {q['topic']}-{q['queueId']} offset {off} is not the message the job indexed"
    for f in m["files"]:
        ts = int(f["beginTs"])
        if ts in md.index_files:
            return f"an index file with begin time {ts} exists already"
        path = os.path.join(out_dir, str(ts))
        size = L.compacted_size(int(m["slots"]), int(f["items"]))
        try:
            with open(path, "rb") as fh:
                h = L.parse_header(fh.read(L.HEADER_SIZE))
                actual = os.fstat(fh.fileno()).st_size
        except OSError as exc:
            return f"{path}: {exc}"
        if actual != size or h.magic != L.END_MAGIC_CODE or h.begin_timestamp != ts or \
                h.index_item_count != int(f["items"]):
            return f"{path}: not the compacted file the manifest describes"
    return None


def _already_adopted(tier: "TieredStore", m: Manifest) -> bool:
    md = tier.metadata
    for f in m["files"]:
        e = md.index_files.get(int(f["beginTs"]))
        if e is None or e.get("origin") != m["job"] or int(e["items"]) != int(f["items"]):
            return False
    for q in m["queues"]:
        tq = tier.queues.get((q["topic"], int(q["queueId"])))
        if tq is None or tq.unindexed(int(q["lo"]), int(q["hi"])):
            return False
    return True


def adopt(tier: "TieredStore", out_dir: str, step: Callable[[str], None] = lambda _s: None) -> AdoptResult:
    """Adopt one complete output (see the module docstring); the caller holds the copier's lock."""
    m = read_manifest(out_dir)
    result: AdoptResult = {"output": out_dir, "job": m.get("job"), "files": len(m["files"]),
                              "items": sum(int(f["items"]) for f in m["files"]), "adopted": False}
    if _already_adopted(tier, m):
        shutil.rmtree(out_dir)
        log.info("tier index: %s was adopted before a restart; removed", out_dir)
        return {**result, "adopted": True, "resumed": True}
    why = _check(tier, m, out_dir)
    if why is not None:
        stale = out_dir + STALE_SUFFIX
        os.rename(out_dir, stale)
        log.warning("tier index: not adopting %s (%s); set aside as %s, run `rmqd pipeline index` again",
                    out_dir, why, stale)
        return {**result, "output": stale, "reason": why}
    index = tier.started_index()
    slots, max_items = int(m["slots"]), int(m["maxItems"])
    cdir = os.path.join(index.dir, "compacted")
    os.makedirs(cdir, exist_ok=True)
    for f in m["files"]:
        dst = os.path.join(cdir, str(f["beginTs"]))
        try:
            os.unlink(dst)                     # a link of an adoption killed before its commit
        except FileNotFoundError:
            pass
        os.link(os.path.join(out_dir, str(f["beginTs"])), dst)
        step("adopt.link")
    fsync_path(cdir)
    entries = {int(f["beginTs"]): file_entry(f, slots, max_items, m["job"]) for f in m["files"]}
    queues: dict[str, "QueueDoc"] = {}
    coverage: list[tuple["TieredQueue", int, int]] = []
    for q in m["queues"]:
        tq = tier.queues[(q["topic"], int(q["queueId"]))]
        doc = tq.to_json()
        doc["indexed"] = [list(r) for r in _merged(tq.indexed, int(q["lo"]), int(q["hi"]))]
        queues[tq.key] = doc
        coverage.append((tq, int(q["lo"]), int(q["hi"])))
    step("adopt.commit")
    tier.metadata.commit(queues, entries)
    for tq, lo, hi in coverage:
        tq.mark_indexed(lo, hi)
    index.add_files([IndexStoreFile.from_json(index.dir, e) for e in entries.values()])
    step("adopt.committed")
    shutil.rmtree(out_dir)
    log.info("tier index: adopted %s: %d file(s), %d items over %d queue range(s)", out_dir, len(entries),
             result["items"], len(coverage))
    return {**result, "adopted": True}


def _merged(indexed: list[list[int]], lo: int, hi: int) -> list[list[int]]:
    from rmqd.store.tier.queue import merge_ranges
    return merge_ranges(list(indexed) + [[lo, hi]])


def adopt_all(tier: "TieredStore", root: Optional[str] = None,
              step: Callable[[str], None] = lambda _s: None) -> list[AdoptResult]:
    """Adopt every complete output under ``root`` (default the store's), oldest first."""
    root = root or output_root(tier.config.store_root_dir)
    results: list[AdoptResult] = []
    for out_dir in complete_outputs(root):
        with tier.dispatcher.lock:
            try:
                results.append(adopt(tier, out_dir, step))
            except (OSError, ValueError, KeyError) as exc:
                log.exception("tier index: adopting %s failed", out_dir)
                results.append({"output": out_dir, "adopted": False, "reason": f"{type(exc).__name__}: {exc}"})
    return results
