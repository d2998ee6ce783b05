"""``rmqd pipeline query``: history questions to an archive by key, msgId or store time.

A key or msgId goes to the key index first (one topic's directory, Bloom filters and sorted row groups
make the lookup cheap), which gives (queueId, offset, storeTimestamp); the messages are then read from
just those ``queueId`` / ``day`` partitions. A time range prunes ``day`` partitions and filters on
``timestamp``. An offset msgId (the broker's: store host + commit-log offset) also matches on
``commitLogOffset``.
"""
from __future__ import annotations

import base64
import datetime as dt
import logging
import time
from typing import TYPE_CHECKING, Optional, TypedDict

from rmqd.pipeline.archive import (INTENT, KEYINDEX, KEYINDEX_DDL, MESSAGES, MESSAGES_DDL, META, STAGING,
                                   archive_meta, read_intent)
from rmqd.pipeline.errors import PipelineError
from rmqd.pipeline.fs import OutputFS
from rmqd.pipeline.parquet_out import escape_value, unescape_value
from rmqd.pipeline.runner import JobSummary, SparkProgress, spark_errors

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, Row, SparkSession

log = logging.getLogger(__name__)

MAX_LIMIT = 100_000


def parse_time(text: str, name: str) -> int:
    """Epoch milliseconds, or an ISO 8601 date / date-time (UTC unless it says otherwise) -> ms."""
    t = text.strip()
    if t.lstrip("-").isdigit():
        ms = int(t)
        if not 0 <= ms < 253_402_300_800_000:          # datetime's range: 0001..9999 (UTC days from 1970)
            raise PipelineError(f"{name} {text!r}: epoch milliseconds between 0 and 253402300799999 (year 9999)")
        return ms
    try:
        when = dt.datetime.fromisoformat(t.replace("Z", "+00:00"))
    except ValueError:
        raise PipelineError(f"{name} {text!r}: expected epoch milliseconds or an ISO 8601 time "
                            "(2024-05-01, 2024-05-01T10:00:00Z)") from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.timezone.utc)
    return int(when.timestamp() * 1000)


def offset_msg_id_offset(msg_id: str) -> Optional[int]:
    """The commit-log offset inside an offset msgId (32 or 56 hex digits), else None."""
    from rmqd.store.message import decode_offset_msg_id
    try:
        return decode_offset_msg_id(msg_id)[2]
    except ValueError:
        return None


def _day(ms: int) -> dt.date:
    return dt.datetime.fromtimestamp(ms / 1000, dt.timezone.utc).date()


def _iso(when: Optional[dt.datetime]) -> Optional[str]:
    """PySpark hands timestamps back as naive local times: as UTC ISO 8601 (milliseconds)."""
    return when.astimezone(dt.timezone.utc).isoformat(timespec="milliseconds") if when else None


class MessageJson(TypedDict):
    """One message found, as ``--json`` prints it."""
    topic: str
    queueId: int
    offset: int
    commitLogOffset: int
    msgId: str
    storeTimestamp: Optional[str]
    bornTimestamp: Optional[str]
    keys: Optional[str]
    tags: Optional[str]
    reconsumeTimes: int
    brokerName: str
    properties: dict[str, str]
    body: str
    bodyEncoding: str


def message_json(row: Row) -> MessageJson:
    body = bytes(row["value"]) if row["value"] is not None else b""
    try:
        text, enc = body.decode("utf-8"), "utf-8"
    except UnicodeDecodeError:
        text, enc = base64.b64encode(body).decode(), "base64"
    return {"topic": row["topic"], "queueId": row["queueId"], "offset": row["offset"],
            "commitLogOffset": row["commitLogOffset"], "msgId": row["msgId"],
            "storeTimestamp": _iso(row["timestamp"]), "bornTimestamp": _iso(row["bornTimestamp"]),
            "keys": bytes(row["key"]).decode("utf-8", "replace") if row["key"] is not None else None,
            "tags": row["tags"], "reconsumeTimes": row["reconsumeTimes"], "brokerName": row["brokerName"],
            "properties": {h["key"]: bytes(h["value"]).decode("utf-8", "replace") for h in (row["headers"] or [])},
            "body": text, "bodyEncoding": enc}


class Query:
    """One lookup in an archive; see the module docstring."""

    def __init__(self, archive: str, topic: str, key: Optional[str] = None, msg_id: Optional[str] = None,
                 time_from: Optional[str] = None, time_to: Optional[str] = None, limit: int = 100) -> None:
        chosen = [n for n, v in (("--key", key), ("--msg-id", msg_id)) if v is not None]
        if time_from is not None or time_to is not None:
            chosen.append("--from/--to")
        if len(chosen) != 1:
            raise PipelineError("give exactly one of --key, --msg-id, or --from/--to "
                                f"(got {', '.join(chosen) or 'none'})")
        if not 1 <= limit <= MAX_LIMIT:
            raise PipelineError(f"--limit {limit}: between 1 and {MAX_LIMIT}")
        self.fs = OutputFS(archive)
        if not self.fs.exists(META):
            raise PipelineError(f"--archive {archive}: not an rmqd archive (no {META}; make one with "
                                "`rmqd pipeline archive`)")
        meta = self.fs.read_json(META)
        if not isinstance(meta, dict) or meta.get("schemas") != archive_meta()["schemas"]:
            raise PipelineError(f"--archive {archive}: written by another archive format version")
        self.topic, self.key, self.msg_id, self.limit = topic, key, msg_id, limit
        self.t_from = parse_time(time_from, "--from") if time_from is not None else None
        self.t_to = parse_time(time_to, "--to") if time_to is not None else None
        if self.t_from is not None and self.t_to is not None and self.t_to < self.t_from:
            raise PipelineError("--to is before --from")
        self.topic_dir = f"topic={escape_value(topic)}"
        if not self.fs.is_dir(f"{MESSAGES}/{self.topic_dir}"):
            topics = [unescape_value(n.split("=", 1)[1]) for n in self.fs.listdir(MESSAGES) if n.startswith("topic=")]
            raise PipelineError(f"--topic {topic}: not in the archive (it has {len(topics)} topic(s)"
                                f"{': ' + ', '.join(topics[:10]) if topics else ''})")
        pending = [r for r in self.fs.listdir(STAGING) if self.fs.exists(f"{STAGING}/{r}/{INTENT}")]
        self.hidden: set[str] = set()       # files of runs interrupted while moving them into place
        for r in pending:
            self.hidden |= {f["file"] for f in read_intent(self.fs, f"{STAGING}/{r}/{INTENT}")["files"]}
        if pending:
            log.warning("archive %s: run(s) %s were interrupted while committing; their rows are left out "
                        "until `rmqd pipeline archive` runs again and completes them", archive, ", ".join(pending))

    def _read(self, spark: SparkSession, table: str, ddl: str) -> DataFrame:
        """One topic's files of ``table``: its directory, or while a run is half moved into place the
        directory's files minus that run's (a query sees each run whole or not at all)."""
        reader = spark.read.schema(ddl).option("basePath", self.fs.url(table))
        if not self.hidden:
            return reader.parquet(self.fs.url(table, self.topic_dir))
        base = f"{table}/{self.topic_dir}"
        files = [self.fs.url(base, f) for f in self.fs.walk_files(base)
                 if f.endswith(".parquet") and not f.rsplit("/", 1)[-1].startswith((".", "_"))
                 and f"{base}/{f}" not in self.hidden]
        return reader.parquet(*files) if files else spark.createDataFrame([], ddl)

    def _messages(self, spark: SparkSession) -> DataFrame:
        return self._read(spark, MESSAGES, MESSAGES_DDL)

    def _keyindex(self, spark: SparkSession) -> DataFrame:
        return self._read(spark, KEYINDEX, KEYINDEX_DDL)

    @spark_errors("query")
    def run(self, spark: SparkSession) -> tuple[JobSummary, list[MessageJson]]:
        from pyspark.sql import functions as F
        t0 = time.perf_counter()
        sc = spark.sparkContext
        msgs = self._messages(spark)
        if self.key is not None or self.msg_id is not None:
            ki = self._keyindex(spark) if self.fs.is_dir(f"{KEYINDEX}/{self.topic_dir}") else None
            cond = (F.col("key") == F.lit(self.key)) if self.key is not None else \
                (F.col("uniqueKey") == F.lit(self.msg_id))
            hits: list[Row] = []
            if ki is not None:
                hits = SparkProgress(sc, "query: key index", 0).run(
                    "rmqd pipeline query: key index",
                    ki.where(cond).select("queueId", "offset", "storeTimestamp").distinct()
                    .orderBy("storeTimestamp").limit(self.limit).collect)
            pairs = {(h["queueId"], h["offset"]) for h in hits}
            days = {h["storeTimestamp"].astimezone(dt.timezone.utc).date() for h in hits}
            where = F.lit(False)
            if pairs:
                where = (F.col("day").isin(sorted(days)) & F.col("queueId").isin(sorted({q for q, _ in pairs}))
                         & F.col("offset").isin(sorted({o for _, o in pairs})))
            phys = offset_msg_id_offset(self.msg_id) if self.msg_id is not None else None
            if phys is not None:
                where = where | (F.col("commitLogOffset") == phys)
            rows = [r for r in SparkProgress(sc, "query: messages", 0).run(
                "rmqd pipeline query: messages", msgs.where(where).collect)
                if (r["queueId"], r["offset"]) in pairs or r["commitLogOffset"] == phys]
        else:
            where = F.lit(True)
            if self.t_from is not None:
                where = where & (F.col("day") >= F.lit(_day(self.t_from))) & \
                    (F.col("timestamp") >= F.lit(dt.datetime.fromtimestamp(self.t_from / 1000, dt.timezone.utc)))
            if self.t_to is not None:
                where = where & (F.col("day") <= F.lit(_day(self.t_to))) & \
                    (F.col("timestamp") < F.lit(dt.datetime.fromtimestamp(self.t_to / 1000, dt.timezone.utc)))
            rows = SparkProgress(sc, "query: messages", 0).run(
                "rmqd pipeline query: messages",
                msgs.where(where).orderBy("timestamp", "queueId", "offset").limit(self.limit).collect)
        rows = sorted(rows, key=lambda r: (r["timestamp"], r["queueId"], r["offset"]))[:self.limit]
        out = [message_json(r) for r in rows]
        summary = JobSummary("query", rows=len(out), bytes=sum(len(bytes(r["value"] or b"")) for r in rows),
                             seconds=time.perf_counter() - t0, outputs=[self.fs.url(MESSAGES, self.topic_dir)],
                             details={"topic": self.topic})
        return summary, out
