"""``rmqd admin`` sub-commands of rmqd's storage layers: compaction (compact, status, adopt, dump a log) and the
tier (status, adopt an index, commit).

Each ``fn(client, args)`` talks to the servers and prints like mqadmin; ``SPEC`` is their part of the
command table (:mod:`rmqd.admin.main`)."""
from __future__ import annotations

import argparse
from typing import Callable, Mapping, Optional, TypeVar

from rmqd.admin.bodies import (CommitTierBody, CompactionAdoptions, CompactionStatus, CompactRuns, IndexAdoptions,
                              TierStatusBody)
from rmqd.admin.client import AdminClient, AdminError, ExtFields
from rmqd.admin.options import BROKER, SpecTable, TOPIC, human_time
from rmqd.remoting.codes import ResponseCode

_Body = TypeVar("_Body")
_Result = TypeVar("_Result", bound=Mapping[str, object])


def _compaction_addrs(c: AdminClient, a: argparse.Namespace) -> list[str]:
    if getattr(a, "brokerAddr", None):
        return [a.brokerAddr]
    addrs = list(c.route_masters(a.topic).values()) if getattr(a, "topic", None) else c.all_master_addrs()
    if not addrs:
        raise AdminError(ResponseCode.TOPIC_NOT_EXIST, "No topic route data!")
    return addrs


def compact_topic(c: AdminClient, a: argparse.Namespace) -> None:
    """Copy and compact a COMPACTION topic now (rmqd admin code 9001)."""
    ext: dict[str, object] = {"topic": a.topic}
    if a.queueId is not None:
        ext["queueId"] = str(a.queueId)
    saved, c.timeout = c.timeout, max(c.timeout, 600.0)     # a big queue takes a while
    try:
        bodies = [(addr, c.answer(CompactRuns, addr, 9001, ext)) for addr in _compaction_addrs(c, a)]
    finally:
        c.timeout = saved
    for addr, body in bodies:
        for r in body.get("runs", []):
            print(f"{addr} {a.topic} queue {r['queueId']}: {r['records_in']} -> {r['records_out']} records, "
                  f"{r['bytes_in']} -> {r['bytes_out']} bytes, {r['segments_rewritten']} file(s) rewritten, "
                  f"{r['rounds']} round(s), checkpoint {r['checkpoint']}, {r['duration_s'] * 1000:.1f} ms")


def compaction_status(c: AdminClient, a: argparse.Namespace) -> None:
    """Per queue: last compacted offset, files, records, live keys, bytes before/after, last run (code 9002)."""
    print("%-32s  %-4s  %-14s  %-14s  %-6s  %-10s  %-10s  %-12s  %-12s  %-12s  %-5s  %s" % (
        "#Topic", "#QID", "#MinOffset", "#Compacted", "#Files", "#Records", "#LiveKeys", "#Bytes", "#Before",
        "#After", "#Runs", "#LastRun (ms)"))
    ext = {"topic": a.topic} if a.topic else {}
    for addr in _compaction_addrs(c, a):
        for q in c.answer(CompactionStatus, addr, 9002, ext).get("queues", []):
            print("%-32s  %-4d  %-14d  %-14d  %-6d  %-10d  %-10d  %-12d  %-12d  %-12d  %-5d  %s (%s)" % (
                q["topic"], q["queueId"], q["minOffset"], q["last_compacted_offset"], q["files"], q["records"],
                q["liveKeys"], q["bytes"], q["last_bytes_before"], q["last_bytes_after"], q["runs"],
                human_time(q["last_run_ms"]), q["last_duration_ms"]))


def _long_calls(c: AdminClient, shape: type[_Body], code: int, ext: ExtFields,
                addrs: list[str]) -> list[tuple[str, _Body]]:
    """(addr, JSON body) of ``code`` on each broker, allowing up to 10 minutes each (an adoption swaps files)."""
    saved, c.timeout = c.timeout, max(c.timeout, 600.0)
    try:
        return [(addr, c.answer(shape, addr, code, ext)) for addr in addrs]
    finally:
        c.timeout = saved


def adopt_compaction(c: AdminClient, a: argparse.Namespace) -> None:
    """Adopt the output of `rmqd pipeline compact` now (rmqd admin code 9005)."""
    ext = {k: v for k, v in (("topic", a.topic), ("dir", a.dir)) if v}
    bodies = _long_calls(c, CompactionAdoptions, 9005, ext, _compaction_addrs(c, a))
    _print_adoptions([(addr, b.get("results", [])) for addr, b in bodies], "compaction output", "error", "output(s)",
                     lambda r: f"(job {r['job']}{', rolled forward' if r.get('resumed') else ''}): "
                               f"{r['segmentsReplaced']} segment(s) replaced, {r['segmentsDropped']} dropped, "
                               f"{r['recordsBefore']} -> {r['recordsAfter']} records")


def _print_adoptions(bodies: list[tuple[str, list[_Result]]], what: str, reason_key: str, counted: str,
                     detail: Callable[[_Result], str]) -> None:
    """Each broker's adoption results, one line each (``detail``: what an adopted one did); AdminError when
    any output was not adopted."""
    failed: list[object] = []
    for addr, results in bodies:
        if not results:
            print(f"{addr}: no {what} to adopt")
        for r in results:
            if r.get("adopted"):
                print(f"{addr} adopted {r['output']} {detail(r)}")
            else:
                print(f"{addr} did not adopt {r['output']}: {r.get(reason_key)}")
                failed.append(r["output"])
    if failed:
        raise AdminError(1, f"{len(failed)} {counted} not adopted")


def dump_compaction_log(c: Optional[AdminClient], a: argparse.Namespace) -> None:
    """Decode one compaction log file (mqadmin dumpCompactionLog -f FILE)."""
    from rmqd.store.compaction.queue_log import decode_log_file
    for rec in decode_log_file(a.file):
        m = rec["message"]
        print(f"position={rec['position']} size={rec['size']} queueOffset={m.queue_offset} "
              f"physicalOffset={m.commit_log_offset} storeTimestamp={m.store_timestamp} "
              f"keys={m.properties.get('KEYS')} tags={m.properties.get('TAGS')} bodyLength={len(m.body)}")


def _tier_addrs(c: AdminClient, a: argparse.Namespace) -> list[str]:
    """-b, else every master of the cluster (the topic filters the answer, not the brokers)."""
    return [a.brokerAddr] if getattr(a, "brokerAddr", None) else c.all_master_addrs()


def tier_status(c: AdminClient, a: argparse.Namespace) -> None:
    """Per queue the tier's min/max offset and size; per index file its state, items and time
    range (rmqd admin code 9003)."""
    ext = {"topic": a.topic} if a.topic else {}
    for addr in _tier_addrs(c, a):
        st = c.answer(TierStatusBody, addr, 9003, ext)
        print(f"# {addr} backend {st.get('backend')} level {st.get('level')} copied {st.get('copied')}"
              + (f" lastError {st['lastError']}" if st.get("lastError") else ""))
        print("%-32s  %-4s  %-12s  %-12s  %-12s  %-14s  %s" % ("#Topic", "#QID", "#MinOffset", "#MaxOffset",
                                                             "#Committed", "#Bytes", "#Segments"))
        for q in st.get("queues", []):
            print("%-32s  %-4d  %-12d  %-12d  %-12d  %-14d  %d" % (q["topic"], q["queueId"], q["minOffset"],
                                                                  q["maxOffset"], q["committedOffset"], q["bytes"],
                                                                  q["segments"]))
        print("%-16s  %-10s  %-10s  %-25s  %-25s  %s" % ("#IndexFile", "#State", "#Items", "#BeginTime", "#EndTime",
                                                          "#Bytes"))
        for f in st.get("indexFiles", []):
            print("%-16d  %-10s  %-10d  %-25s  %-25s  %d" % (f["beginTs"], f["state"], f["items"],
                                                            human_time(f["beginTime"]) if f["beginTime"] > 0 else "-",
                                                            human_time(f["endTime"]) if f["endTime"] > 0 else "-",
                                                            f["bytes"]))


def adopt_tier_index(c: AdminClient, a: argparse.Namespace) -> None:
    """Adopt the index files of `rmqd pipeline index` now (rmqd admin code 9006)."""
    ext = {"dir": a.dir} if a.dir else {}
    bodies = _long_calls(c, IndexAdoptions, 9006, ext, _tier_addrs(c, a))
    _print_adoptions([(addr, b.get("results", [])) for addr, b in bodies], "index output", "reason", "index output(s)",
                     lambda r: f"(job {r['job']}{', finished after a restart' if r.get('resumed') else ''}): "
                               f"{r['files']} index file(s), {r['items']} item(s)")


def commit_tier(c: AdminClient, a: argparse.Namespace) -> None:
    """Copy everything pending into the tier, seal the writable index file and upload the sealed
    ones now (rmqd admin code 9004)."""
    ext = {"upload": "false" if str(a.upload).lower() == "false" else "true"}
    saved, c.timeout = c.timeout, max(c.timeout, 600.0)
    try:
        for addr in _tier_addrs(c, a):
            body = c.answer(CommitTierBody, addr, 9004, ext)
            print(f"{addr}: copied {body.get('copied')} message(s), {body.get('indexSteps')} index step(s)")
    finally:
        c.timeout = saved


SPEC: SpecTable = {
    "compactTopic": (compact_topic, "Compact a COMPACTION topic now (rmqd)", [
        (TOPIC, {"required": True}), (("-q", "--queueId"), {"type": int}), (BROKER, {})]),
    "adoptCompaction": (adopt_compaction, "Adopt the output of `rmqd pipeline compact` (rmqd)", [
        (TOPIC, {}), (("-d", "--dir"), {"help": "where the output is, on the broker's host (default "
                                              "<store>/compaction/pipeline)"}), (BROKER, {})]),
    "compactionStatus": (compaction_status, "Compaction state per queue (rmqd)", [(TOPIC, {}), (BROKER, {})]),
    "tierStatus": (tier_status, "Tiered storage: queues and index files (rmqd)", [(TOPIC, {}), (BROKER, {})]),
    "adoptTierIndex": (adopt_tier_index, "Adopt the index files of `rmqd pipeline index` (rmqd)", [
        (("-d", "--dir"), {"help": "where the outputs are, on the broker's host (default "
                                   "<store>/tiered_index_file/pipeline)"}), (BROKER, {})]),
    "commitTier": (commit_tier, "Copy pending messages to the tier, seal and upload the index (rmqd)", [
        (BROKER, {}), (("-u", "--upload"), {"default": "true"})]),
    "dumpCompactionLog": (dump_compaction_log, "Decode a compaction log file", [
        (("-f", "--file"), {"required": True})]),
}
